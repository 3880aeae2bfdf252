//! The report's views: the terminal table (80 columns, no colour), Markdown and HTML, on
//! fixtures (the real binary) and on measured reports (built from facts). Insta snapshots
//! pin the layout (`tests/snapshots/views/`); the assertions beside them pin the structure
//! whatever a check's wording: the verdict first, problems before the rest, one finding for
//! one cause on many GPUs, what did not run said, every line within 80 columns, text from
//! the machine never markup.

mod common;
use common::*;
use gpuaudit_core::render::{self, Format, TableOptions};
use gpuaudit_core::Report;

fn snap(name: &str, body: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("snapshots/views");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, body));
}

fn table_of(r: &Report, opts: TableOptions) -> String {
    render::render(r, Format::Table, &opts)
}

/// Display columns of a line (the table's text is mostly ASCII; `×`, `→`, `–` count one).
fn cols(line: &str) -> usize {
    line.chars().count()
}

fn assert_fits(name: &str, text: &str, width: usize) {
    for l in text.lines() {
        // A single word longer than the width (a path) may stand alone; nothing else.
        let long_word = !l.trim().contains(' ');
        assert!(
            cols(l) <= width || long_word,
            "{name}: line of {} columns: {l:?}",
            cols(l)
        );
    }
}

/// The HTML without its style sheet and with each chart's SVG reduced to its size, for a
/// snapshot of the page's structure.
fn html_outline(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(i) = rest.find("<svg") {
        out.push_str(&rest[..i]);
        let end = rest[i..]
            .find("</svg>")
            .map(|e| i + e + "</svg>".len())
            .unwrap_or(rest.len());
        let svg = &rest[i..end];
        out.push_str(&format!(
            "<svg …{} rects, {} lines, {} texts…/>",
            svg.matches("<rect").count(),
            svg.matches("<polyline").count(),
            svg.matches("<text").count()
        ));
        rest = &rest[end..];
    }
    out.push_str(rest);
    match (out.find("<style>"), out.find("</style>")) {
        (Some(a), Some(b)) if a < b => format!("{}<style>…</style>{}", &out[..a], &out[b + 8..]),
        _ => out,
    }
}

#[test]
fn table_of_an_x8_link() {
    let (code, t) = render("h200-x2-x8-link", "table", &[]);
    assert_eq!(code, 1);
    assert_fits("x8-link", &t, 80);
    let lines: Vec<&str> = t.lines().collect();
    // The verdict first: what you got and how many problems, what could not run.
    assert!(
        lines[0].starts_with("2× NVIDIA H200, driver 580.159.04: 1 problem"),
        "{t}"
    );
    assert!(
        t.contains("checks\n    not run") || t.contains("checks not run"),
        "{t}"
    );
    assert!(!t.contains("all good"), "{t}");
    // The one FAIL comes before everything that passed, with its evidence and fix.
    let fail = t.find("FAIL pcie.link").expect("the problem");
    let areas = t.find("\nBy area").expect("the areas");
    assert!(fail < areas);
    let block = &t[fail..areas];
    assert!(
        block.contains("evidence: width_current=8, width_max=16"),
        "{block}"
    );
    assert!(block.contains("fix: "), "{block}");
    // Passing checks are one line per area, not one per finding.
    assert!(!t.contains("PASS "), "{t}");
    assert!(
        t.contains("  PCIe              1 with a problem, 3 not run"),
        "{t}"
    );
    // Short enough to read: a third of the 81 lines it had (and the verdict again at the
    // end, 2 lines).
    assert!(lines.len() < 64, "{} lines", lines.len());
    snap("table-h200-x2-x8-link", &t);
}

#[test]
fn table_of_one_cause_on_eight_gpus() {
    let (_, t) = render("h200-x8-nvswitch-fabric-down", "table", &[]);
    assert_fits("fabric-down", &t, 80);
    // Eight identical per-GPU findings are one, naming the GPUs, with one fix.
    assert_eq!(t.matches("FAIL nvlink.status: GPUs 0–7:").count(), 1, "{t}");
    assert!(!t.contains("GPU 3 (00:09.0)"), "{t}");
    assert_eq!(
        t.matches("sudo\n").count() + t.matches("sudo systemctl").count(),
        1,
        "{t}"
    );
    // The summary counts causes: 1 (the fabric; the pairs it leaves without NVLink are
    // what it causes, under it), on 8 GPUs.
    assert!(
        t.lines()
            .next()
            .unwrap_or("")
            .contains("1 problem (1 failed) on 8 GPUs"),
        "{t}"
    );
    assert!(t.contains("what it causes:"), "{t}");
    snap("table-h200-x8-nvswitch-fabric-down", &t);
    // JSON keeps one finding per GPU.
    let (_, report) = audit("h200-x8-nvswitch-fabric-down", &[]);
    let per_gpu = findings(&report, "nvlink.status")
        .into_iter()
        .filter(|f| f["status"] == "fail" && f["gpu"].is_u64())
        .count();
    assert_eq!(per_gpu, 8);
}

#[test]
fn table_of_a_snapshot_says_what_was_not_checked() {
    let (code, t) = render("h200-x2-vm", "table", &[]);
    assert_eq!(code, 0);
    assert_fits("vm", &t, 80);
    let mut lines = t.lines();
    let first = lines.next().unwrap_or("");
    assert!(
        first.ends_with(": no problem found in what was checked"),
        "{t}"
    );
    // The second line says how many checks could not run, and why.
    let second = lines.next().unwrap_or("");
    assert!(
        second.contains(" checks not run: snapshot audit: nothing is measured"),
        "{t}"
    );
    assert!(t.contains("snapshot audit: nothing is measured"), "{t}");
    assert!(t.contains("\nNot run\n"), "{t}");
    assert!(
        !t.contains("all good") && !t.contains("\nProblems\n"),
        "{t}"
    );
    snap("table-h200-x2-vm", &t);
}

#[test]
fn quiet_is_the_verdict_and_the_problems_verbose_every_finding() {
    let (_, q) = render("h200-x2-x8-link", "table", &["-q"]);
    assert!(q.starts_with("2× NVIDIA H200"), "{q}");
    assert!(q.contains("FAIL pcie.link") && q.contains("fix: "), "{q}");
    assert!(!q.contains("By area") && !q.contains("Worth knowing") && !q.contains("INFO"));
    snap("table-h200-x2-x8-link-quiet", &q);
    let (_, v) = render("h200-x2-x8-link", "table", &["-v"]);
    assert_fits("x8-link -v", &v, 80);
    // Every check appears, passing ones included.
    for c in gpuaudit_core::checks::all() {
        assert!(
            v.contains(&format!(" {}: ", c.id)),
            "-v lacks {}:\n{v}",
            c.id
        );
    }
    assert!(v.contains("PASS pcie.link: GPU 0 (00:06.0)"), "{v}");
    // -q and -v together are refused.
    let out = gpuaudit()
        .args(["--root"])
        .arg(fixture("h200-x2-x8-link"))
        .args(["-q", "-v"])
        .output()
        .expect("gpuaudit runs");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn piped_output_is_the_table_json_only_when_asked() {
    // The tests' stdout is a pipe: the default is the table, as on a terminal.
    let out = gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-x8-link"))
        .output()
        .expect("gpuaudit runs");
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("2× NVIDIA H200"), "{s}");
    assert!(!s.contains('\u{1b}'), "no colour in a pipe: {s:?}");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("r.json");
    let out = gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-x8-link"))
        .arg("--output")
        .arg(&file)
        .output()
        .expect("gpuaudit runs");
    assert_eq!(out.status.code(), Some(1));
    let text = std::fs::read_to_string(&file).expect("the report is written");
    let v: serde_json::Value = serde_json::from_str(&text).expect("--output x.json is JSON");
    assert_eq!(v["schema"], "gpuaudit.report/1");
}

#[test]
fn width_follows_columns_when_not_a_terminal() {
    let out = gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-x8-link"))
        .env("COLUMNS", "120")
        .output()
        .expect("gpuaudit runs");
    let s = String::from_utf8_lossy(&out.stdout);
    assert_fits("120", &s, 120);
    assert!(s.lines().any(|l| cols(l) > 80), "{s}");
    let out = gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-x8-link"))
        .env_remove("COLUMNS")
        .output()
        .expect("gpuaudit runs");
    assert_fits("default", &String::from_utf8_lossy(&out.stdout), 80);
}

#[test]
fn table_of_a_measured_report() {
    let r = measured_report(2, |_| {});
    let t = table_of(&r, TableOptions::default());
    assert_fits("measured", &t, 80);
    let measured = t.find("\nMeasured\n").expect("the measured figures");
    let block = &t[measured..];
    assert!(
        block.contains("GEMM bf16") && block.contains("990"),
        "{block}"
    );
    // One row per figure, not per GPU: two GPUs' bf16 GEMMs are one row.
    assert_eq!(block.matches("GEMM bf16").count(), 1, "{block}");
    snap("table-measured-h200-x2", &t);
    let v = table_of(
        &r,
        TableOptions {
            verbose: true,
            ..TableOptions::default()
        },
    );
    // -v: every measurement, P2P rows with their peer.
    assert!(v.contains("GPU→GPU copy (P2P) (GPU 0→1)"), "{v}");
    assert!(v.contains("GPU→GPU copy (P2P) (GPU 1→0)"), "{v}");
}

#[test]
fn markdown_for_a_github_issue() {
    for name in [
        "h200-x2-x8-link",
        "h200-x8-nvswitch-fabric-down",
        "h200-x2-vm",
    ] {
        let (_, md) = render(name, "md", &[]);
        // The verdict heading first, with the status at a glance.
        let first = md.lines().next().unwrap_or("");
        assert!(first.starts_with("### "), "{name}: {first}");
        assert!(
            first.contains('❌') || first.contains('✅') || first.contains("⚠️"),
            "{name}: {first}"
        );
        // Every table row has as many cells as its header (no cell broke on a pipe).
        let mut header_cells = None;
        for l in md.lines() {
            if l.starts_with('|') {
                let n = l.replace("\\|", "").matches('|').count();
                match header_cells {
                    None => header_cells = Some(n),
                    Some(h) => assert_eq!(n, h, "{name}: {l}"),
                }
            } else {
                header_cells = None;
            }
        }
        // The folds open and close, each with a blank line before its table.
        assert_eq!(
            md.matches("<details>").count(),
            md.matches("</details>").count(),
            "{name}"
        );
        for d in md.match_indices("</summary>") {
            assert!(
                md[d.0..].starts_with("</summary>\n\n"),
                "{name}: no blank line"
            );
        }
        snap(&format!("md-{name}"), &md);
    }
    let (_, md) = render("h200-x2-x8-link", "md", &[]);
    let problems = md.find("#### Problems").expect("problems");
    let fold = md.find("<details>").expect("the passing checks, folded");
    assert!(problems < fold);
    assert!(
        md[problems..fold].contains("**❌ FAIL** `pcie.link`"),
        "{md}"
    );
    assert!(md[problems..fold].contains("- fix: "), "{md}");
    let r = measured_report(2, |_| {});
    let md = render::render(&r, Format::Markdown, &TableOptions::default());
    assert!(
        md.contains("#### Measured") && md.contains("| GEMM bf16 |"),
        "{md}"
    );
    assert!(md.contains("<details><summary>Every measurement ("), "{md}");
    snap("md-measured-h200-x2", &md);
}

#[test]
fn html_structure() {
    for name in [
        "h200-x2-x8-link",
        "h200-x8-nvswitch-fabric-down",
        "h200-x2-vm",
    ] {
        let (_, html) = render(name, "html", &[]);
        assert!(html.starts_with("<!doctype html>"), "{name}");
        // Self-contained: nothing to fetch, nothing to run.
        for bad in ["<script", "src=", "href=", "@import", "url("] {
            assert!(!html.contains(bad), "{name}: {bad}");
        }
        assert!(html.contains("id=headline"), "{name}");
        assert!(html.contains("No charts: nothing was measured"), "{name}");
        snap(&format!("html-{name}"), &html_outline(&html));
    }
    let r = measured_report(2, |_| {});
    let html = render::render(&r, Format::Html, &TableOptions::default());
    // The headline holds the machine against what a healthy H200 reaches (memory and bf16
    // have attainable figures; the host link has none), the datasheet beside it.
    let attained = gpuaudit_core::render::overview::KeyRatios::attained(&r);
    let sheet = gpuaudit_core::render::overview::KeyRatios::of(&r);
    assert!(attained.host_link.is_none() && attained.memory.is_some() && attained.bf16.is_some());
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    assert!(
        html.contains(&format!(
            "You are getting <b>{}</b> of what a healthy NVIDIA H200 SXM 141GB reaches: memory \
             bandwidth {}, bf16 {}.",
            pct(attained.overall().unwrap()),
            pct(attained.memory.unwrap()),
            pct(attained.bf16.unwrap())
        )),
        "{html}"
    );
    assert!(
        html.contains(&format!(
            "Against the datasheet's peak: {} (",
            pct(sheet.overall().unwrap())
        )),
        "{html}"
    );
    assert!(
        html.contains("is the geometric mean of these 2 figures"),
        "{html}"
    );
    assert!(
        html.contains("the geometric mean of these 2 figures, each the lowest over the GPUs"),
        "{html}"
    );
    // One figure with an attainable value (the quick audit's 4096 GEMM has none): said of one.
    let mut one = r.clone();
    for m in &mut one.measurements {
        if m.name == "gemm_tflops" {
            m.attainable = None;
        }
    }
    let html_one = render::render(&one, Format::Html, &TableOptions::default());
    assert!(
        html_one.contains("the geometric mean of this one figure, the lowest over the GPUs"),
        "{html_one}"
    );
    // A model without attainable figures: the datasheet alone, and it says so.
    let mut bare = r.clone();
    for m in &mut bare.measurements {
        m.attainable = None;
    }
    let html_bare = render::render(&bare, Format::Html, &TableOptions::default());
    assert!(
        html_bare.contains(&format!(
            "You are getting <b>{}</b> of a datasheet NVIDIA H200 SXM 141GB",
            pct(sheet.overall().unwrap())
        )),
        "{html_bare}"
    );
    assert!(
        html_bare.contains("is the geometric mean of these 3 figures")
            && html_bare.contains("no figure of this model has a measured attainable value"),
        "{html_bare}"
    );
    for id in [
        "chart-ratios",
        "chart-host-copy-h2d",
        "chart-host-copy-d2h",
        "chart-p2p",
        "chart-burn",
    ] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id}");
    }
    // P2P rows name their peer: GPU 0 to 1 and 1 to 0, in the GPU and peer columns.
    assert!(html.contains("<th>peer</th>"), "{html}");
    for (a, b) in [(0, 1), (1, 0)] {
        let row = format!("<tr><td>GPU→GPU copy (P2P)</td><td>{a}</td><td>{b}</td>");
        assert!(html.contains(&row), "{row}");
    }
    snap("html-measured-h200-x2", &html_outline(&html));
}

#[test]
fn a_quick_audit_page_says_why_each_missing_chart_is_missing() {
    let r = measured_report(1, |m| {
        m.p2p = gpuaudit_core::Reading::unavailable("needs two GPUs");
        m.burn = gpuaudit_core::Reading::unavailable("quick audit: run with --full");
    });
    let html = render::render(&r, Format::Html, &TableOptions::default());
    assert!(html.contains("id=\"chart-ratios\""));
    assert!(html.contains("data-chart=\"chart-p2p\""), "{html}");
    assert!(
        html.contains("the machine has fewer than two GPUs"),
        "{html}"
    );
    assert!(html.contains("data-chart=\"chart-burn\""), "{html}");
}

/// The README's example is what the binary prints (at 80 columns).
#[test]
fn readme_example_is_the_real_output() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md");
    let start = readme.find("## Example").expect("an Example section");
    let block = &readme[start..];
    let open = block.find("```\n").expect("the example block") + 4;
    let close = open + block[open..].find("```").expect("its end");
    let (_, t) = render("h200-x2-x8-link", "table", &[]);
    assert_eq!(
        &block[open..close],
        t,
        "README.md's example differs from `gpuaudit --root fixtures/snapshots/h200-x2-x8-link` \
         at 80 columns: paste the output above in"
    );
}

/// The checks a section of the table names at the head of its lines ("INFO x.y: ", the
/// "Not run" lists of ids).
fn section_checks(table: &str, title: &str) -> std::collections::BTreeSet<String> {
    let id = regex::Regex::new(r"\b([a-z0-9]+\.[a-z0-9-]+)\b").unwrap();
    let mut out = std::collections::BTreeSet::new();
    let mut inside = false;
    for l in table.lines() {
        if l == title {
            inside = true;
            continue;
        }
        if inside && !l.is_empty() && !l.starts_with(' ') && !l.starts_with("INFO") {
            break;
        }
        if inside {
            let l = if title == "Not run" {
                // After the reason: the ids.
                l.rsplit_once(": ").map(|(_, ids)| ids).unwrap_or(l)
            } else {
                l.strip_prefix("INFO ")
                    .and_then(|l| l.split(": ").next())
                    .unwrap_or("")
            };
            for c in id.captures_iter(l) {
                out.insert(c[1].to_string());
            }
        }
    }
    out
}

/// Issue 23: a check stands in one place: where its worst finding puts it (as the areas
/// count it). security.versions (a note about the toolkit, a skip for the container stack)
/// stood both under "Worth knowing" and under "Not run" in every fixture. And no line of any
/// fixture's table is wider than 80 columns but a URL's own.
#[test]
fn a_check_stands_under_worth_knowing_or_not_run_never_both() {
    for name in all_fixtures() {
        let (_, t) = render(&name, "table", &[]);
        let worth = section_checks(&t, "Worth knowing");
        let not_run = section_checks(&t, "Not run");
        let both: Vec<_> = worth.intersection(&not_run).collect();
        assert!(both.is_empty(), "{name}: {both:?} in both:\n{t}");
        for l in t.lines() {
            assert!(
                cols(l) <= 80
                    || l.trim().starts_with("https://")
                    || l.trim().starts_with("(https://"),
                "{name}: {} columns: {l:?}",
                cols(l)
            );
        }
    }
    let (_, t) = render("h200-x2-x8-link", "table", &[]);
    assert!(section_checks(&t, "Worth knowing").contains("security.versions"));
    assert!(
        !section_checks(&t, "Not run").contains("security.versions"),
        "{t}"
    );
    // The count of the verdict's second line is of the checks listed.
    assert!(t.contains("\n23 checks not run:"), "{t}");
}

/// Issue 23: on a 24-row terminal the verdict of a longer report has scrolled away by its
/// end: the last line says it again; a report that fits one screen says it once.
#[test]
fn the_verdict_is_said_again_at_the_end_of_a_report_longer_than_a_screen() {
    let (_, t) = render("h200-x2-x8-link", "table", &[]);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines.len() > 24);
    assert_eq!(
        lines.last().copied(),
        Some("2× NVIDIA H200, driver 580.159.04: 1 problem (1 failed) on GPU 1")
    );
    assert_eq!(lines.first(), lines.last());
    assert_eq!(lines[lines.len() - 2], "", "a blank line before it");
    let (_, q) = render("h200-x2-x8-link", "table", &["-q"]);
    let lines: Vec<&str> = q.lines().collect();
    assert!(lines.len() <= 24, "{q}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("1 problem (1 failed)"))
            .count(),
        1,
        "{q}"
    );
}
