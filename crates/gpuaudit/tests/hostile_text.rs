//! Reports other people made, read back (`gpuaudit report`, `compare`, `fleet`): whatever
//! text a report or a file name holds, no control character reaches the terminal raw (the
//! table, `-q`, `-v`, compare's and the fleet's tables), and no link or image of Markdown
//! forms from it (report, compare and fleet Markdown, parsed as GitHub parses them).

mod common;
use common::gpuaudit;
use comrak::nodes::{AstNode, NodeValue};
use gpuaudit_core::finding::Finding;
use gpuaudit_core::testing::Machine;
use gpuaudit_core::{Policy, Report};
use std::path::Path;

/// Terminal escapes (set the title, clear the screen, CSI as C1), a carriage return, and
/// Markdown that would be a link, an image, a reference link, an autolink and raw HTML.
const HOSTILE: &str = "x\u{1b}]0;pwned\u{7}\r\u{9b}2J \\[l](javascript:alert(1)) \
                       ![i](https://t.example/pixel.png) [r][ref] <https://t.example/a> \
                       <img src=x onerror=alert(2)>\n[ref]: javascript:alert(3)";

/// A report whose every text a reader shows holds [`HOSTILE`]: the reason the measurements
/// did not run (the table's "N checks not run: REASON" line) and the skips that give it, the
/// hostname, a failed check's id, message and fix, a note's.
fn hostile_report(hostname: Option<&str>) -> Report {
    let facts = Machine::healthy("h200-sxm-141gb", 2).build();
    let mut r = Report::build(&facts, &Policy::default());
    r.machine.hostname = hostname.map(str::to_string);
    let reason = format!("no GPU {HOSTILE}");
    r.audit.measurements_not_run = Some(reason.clone());
    for check in ["pcie.bandwidth", "memory.bandwidth"] {
        r.findings.retain(|f| f.check != check);
        r.findings
            .push(Finding::skip(check, format!("not measured: {reason}")));
    }
    r.findings.push(
        Finding::fail(&format!("gpu.evil{HOSTILE}"), format!("failed {HOSTILE}"))
            .fix(format!("run {HOSTILE}")),
    );
    r.findings
        .push(Finding::info("env.note", format!("note {HOSTILE}")).fix(format!("do {HOSTILE}")));
    r
}

fn write(dir: &Path, file: &str, r: &Report) -> std::path::PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, serde_json::to_string(r).unwrap()).unwrap();
    p
}

/// File names that are Markdown links and images themselves (a file name cannot hold `/`).
const NAMES: [&str; 2] = [
    "[f](javascript:alert(5)).json",
    "![n](t.example-p.png).json",
];

/// Two hostile reports, each in a file of a hostile name; the first names no host, so that
/// its file's stem names its column and node.
fn hostile_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), NAMES[0], &hostile_report(None));
    write(
        dir.path(),
        NAMES[1],
        &hostile_report(Some(&format!("node{HOSTILE}"))),
    );
    dir
}

fn stdout_of(args: &[&std::ffi::OsStr]) -> String {
    let out = gpuaudit().env("COLUMNS", "80").args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{args:?}: exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect()
}

#[test]
fn no_report_text_reaches_the_terminal_raw() {
    let dir = hostile_dir();
    let a = dir.path().join(NAMES[0]);
    let b = dir.path().join(NAMES[1]);
    let runs: Vec<(&str, Vec<&std::ffi::OsStr>)> = vec![
        ("report", vec!["report".as_ref(), a.as_os_str()]),
        (
            "report -q",
            vec!["report".as_ref(), "-q".as_ref(), a.as_os_str()],
        ),
        (
            "report -v",
            vec!["report".as_ref(), "-v".as_ref(), b.as_os_str()],
        ),
        (
            "compare",
            vec!["compare".as_ref(), a.as_os_str(), b.as_os_str()],
        ),
        ("fleet", vec!["fleet".as_ref(), dir.path().as_os_str()]),
    ];
    for (what, args) in runs {
        let out = stdout_of(&args);
        assert_eq!(raw_controls(&out), Vec::<char>::new(), "{what}:\n{out}");
        // The text is still there, written out.
        assert!(
            out.contains("\\x1b]0;pwned\\x07\\r\\u{9b}2J"),
            "{what}:\n{out}"
        );
    }
    // The line the issue found: "N checks not run: REASON", with -q too.
    for flag in ["-q", "-v"] {
        let out = stdout_of(&["report".as_ref(), flag.as_ref(), a.as_os_str()]);
        let line = out
            .lines()
            .find(|l| l.contains("checks not run: no GPU"))
            .unwrap_or_else(|| panic!("{flag}: no not-run line:\n{out}"));
        assert!(line.contains("x\\x1b]0;pwned"), "{flag}: {line}");
    }
}

/// Every link and image of the document as GitHub's Markdown (GFM) parses it, and its raw
/// HTML.
fn links_and_html(md: &str) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
    let mut o = comrak::Options::default();
    o.extension.table = true;
    o.extension.autolink = true;
    o.extension.strikethrough = true;
    o.extension.footnotes = true;
    o.extension.tasklist = true;
    let arena = comrak::Arena::new();
    let root = comrak::parse_document(&arena, md, &o);
    fn text_of<'a>(n: &'a AstNode<'a>) -> String {
        n.descendants()
            .filter_map(|d| match &d.data.borrow().value {
                NodeValue::Text(t) => Some(t.to_string()),
                _ => None,
            })
            .collect()
    }
    let (mut links, mut images, mut html) = (Vec::new(), Vec::new(), Vec::new());
    for n in root.descendants() {
        match &n.data.borrow().value {
            NodeValue::Link(l) => links.push((l.url.to_string(), text_of(n))),
            NodeValue::Image(l) => images.push(l.url.to_string()),
            NodeValue::HtmlInline(h) => html.push(h.to_string()),
            NodeValue::HtmlBlock(h) => html.push(h.literal.to_string()),
            _ => {}
        }
    }
    (links, images, html)
}

#[test]
fn no_link_or_image_forms_from_a_reports_text_in_markdown() {
    let dir = hostile_dir();
    let a = dir.path().join(NAMES[0]);
    let b = dir.path().join(NAMES[1]);
    let md = "--format=md".as_ref();
    let runs: Vec<(&str, Vec<&std::ffi::OsStr>)> = vec![
        ("report", vec!["report".as_ref(), md, a.as_os_str()]),
        ("report (host)", vec!["report".as_ref(), md, b.as_os_str()]),
        (
            "compare",
            vec!["compare".as_ref(), md, a.as_os_str(), b.as_os_str()],
        ),
        ("fleet", vec!["fleet".as_ref(), md, dir.path().as_os_str()]),
    ];
    for (what, args) in runs {
        let out = stdout_of(&args);
        let (links, images, html) = links_and_html(&out);
        assert_eq!(images, Vec::<String>::new(), "{what}:\n{out}");
        // GitHub links a bare URL (its text is its target: it hides nothing); nothing else.
        for (url, text) in &links {
            assert!(
                url == text || url.strip_prefix("mailto:") == Some(text.as_str()),
                "{what}: a link {text:?} to {url:?}:\n{out}"
            );
            assert!(
                !url.to_ascii_lowercase().contains("javascript"),
                "{what}: {url}"
            );
        }
        // Raw HTML only as gpuaudit writes it (folded sections).
        for h in &html {
            for bad in ["img", "script", "onerror", "t.example", "javascript"] {
                assert!(!h.contains(bad), "{what}: raw HTML {h:?}:\n{out}");
            }
        }
        // The report's text is there, as text.
        assert!(out.contains("javascript:alert(1)"), "{what}:\n{out}");
    }
}
