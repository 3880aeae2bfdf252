//! The commands gpuaudit tells people to run parse, and those that change the machine say
//! `sudo` (issue 11: a snippet that lost its indentation failed when pasted; fixes that need
//! root lacked it).
//!
//! - An `explain` text's "How to verify by hand" is a shell script: `bash -n` parses it whole;
//!   placeholders are UPPERCASE words (N, DIR, BUS_ID), notes are `# comments`.
//! - Every `code span` of a fix (the check's documented fix, and the fix of every finding of
//!   every fixture's report) parses with `bash -n`.
//! - Python in either (`python3 -c '...'`, `python3 - <<'EOF'` heredocs) compiles.
//! - A command in a fix that needs root starts with `sudo`.
//!
//! `explain` prints the verify text as written (flush left, indentation kept), and a test below
//! parses the printed text, so what a person copies is what was parsed.

mod common;

use common::{all_fixtures, audit, gpuaudit, measured_report};
use gpuaudit_core::checks;
use std::io::Write;
use std::process::{Command, Stdio};

/// `bash -n` on `script`: the syntax error, if any.
fn bash_syntax_error(script: &str) -> Option<String> {
    let mut child = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).trim().to_string())
}

/// Finds the Python in shell text (a `python3 -c` argument, as the shell would split it, or a
/// `python3 - <<'TAG'` heredoc) and compiles it: prints a JSON list of the failures.
const PYTHON_CHECKER: &str = r#"
import json, re, shlex, sys
bad = []
def check(where, src):
    try:
        compile(src, where, "exec")
    except SyntaxError as e:
        bad.append("%s: python does not compile: %s: %r" % (where, e.msg, src))
found = 0
for where, text in json.load(sys.stdin):
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.search(r"\bpython3? - <<'?(\w+)'?", lines[i])
        if m:
            body = []
            i += 1
            while i < len(lines) and lines[i] != m.group(1):
                body.append(lines[i])
                i += 1
            check(where, "\n".join(body) + "\n")
            found += 1
        else:
            try:
                words = shlex.split(lines[i], comments=True)
            except ValueError:
                words = []  # bash -n says why
            for j, w in enumerate(words[:-2]):
                if w in ("python", "python3") and words[j + 1] == "-c":
                    check(where, words[j + 2])
                    found += 1
        i += 1
print(json.dumps({"bad": bad, "found": found}))
"#;

/// The Python snippets of `texts` (where, shell text) that do not compile, and how many
/// snippets there were.
fn python_failures(texts: &[(String, String)]) -> (Vec<String>, u64) {
    let mut child = Command::new("python3")
        .args(["-c", PYTHON_CHECKER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let input = serde_json::to_vec(texts).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the python checker ran");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bad = v["bad"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    (bad, v["found"].as_u64().unwrap())
}

/// The `code spans` of a text.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Commands (first words, then the word that makes them change the machine, "" for any)
/// that need root. A fix gives them with `sudo` in front.
const NEEDS_ROOT: &[(&str, &[&str])] = &[
    ("modprobe", &[""]),
    ("update-initramfs", &[""]),
    ("dracut", &[""]),
    ("mount", &[""]),
    ("sysctl", &["-w"]),
    (
        "systemctl",
        &["enable", "disable", "start", "stop", "restart", "reload"],
    ),
    ("nvidia-ctk", &["configure", "generate"]),
    ("sshd", &[""]),
    (
        "nvidia-smi",
        &[
            "-pm", "-pl", "-e", "-r", "-rac", "-ac", "-mig", "-lgc", "-rgc", "-lmc", "-rmc", "-c",
        ],
    ),
    ("tee", &["/etc/"]),
];

/// Commands as they start; written outside a code span in a fix, they are not shown as
/// commands (HTML's <code>, Markdown's code) and this test would not parse them.
const COMMAND_STARTS: &[&str] = &[
    "nvidia-smi -",
    "nvidia-ctk ",
    "modprobe ",
    "sysctl -",
    "mount -o",
    "systemctl ",
    "update-initramfs",
    "dracut ",
    "docker run ",
    "python3 -m ",
    "sshd -t",
];

/// The commands a fix writes outside its code spans.
fn commands_outside_spans(fix: &str) -> Vec<String> {
    let mut out = Vec::new();
    for prose in fix.split('`').step_by(2) {
        for start in COMMAND_STARTS {
            if let Some(at) = prose.find(start) {
                out.push(prose[at..].chars().take(60).collect());
            }
        }
    }
    out
}

/// The commands of a span that need root and lack `sudo` (or write a file under /etc with
/// a redirection, which `sudo` does not cover: `| sudo tee` does).
fn without_sudo(span: &str) -> Vec<String> {
    let mut out = Vec::new();
    if span.contains("> /etc/") {
        out.push(span.to_string());
    }
    for command in span.split(['|', ';', '&']) {
        let words: Vec<&str> = command
            .split_whitespace()
            // Variable assignments before the command (`CUDA_VISIBLE_DEVICES=0 python ...`).
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .collect();
        let Some(first) = words.first() else { continue };
        if *first == "sudo" {
            continue;
        }
        let root = NEEDS_ROOT.iter().any(|(cmd, marks)| {
            first == cmd
                && marks
                    .iter()
                    .any(|m| m.is_empty() || words[1..].iter().any(|w| w.starts_with(m)))
        });
        if root {
            out.push(command.trim().to_string());
        }
    }
    out
}

#[test]
fn the_root_rule_knows_a_command_that_needs_root() {
    assert_eq!(
        without_sudo("sysctl net.core.somaxconn"),
        Vec::<String>::new()
    );
    assert_eq!(
        without_sudo("sysctl -w net.core.somaxconn=4096"),
        vec!["sysctl -w net.core.somaxconn=4096"]
    );
    assert_eq!(
        without_sudo("sudo sshd -t && systemctl reload ssh"),
        vec!["systemctl reload ssh"]
    );
    assert_eq!(
        without_sudo("echo blacklist nouveau | tee /etc/modprobe.d/x.conf"),
        vec!["tee /etc/modprobe.d/x.conf"]
    );
    assert_eq!(without_sudo("nvidia-smi -q -d CLOCK"), Vec::<String>::new());
    assert_eq!(without_sudo("nvidia-smi -i 0 -pl 700").len(), 1);
    assert_eq!(
        without_sudo("CUDA_VISIBLE_DEVICES=0 python train.py").len(),
        0
    );
    assert_eq!(without_sudo("X=1 modprobe nvidia").len(), 1);
    assert_eq!(
        without_sudo("sudo echo x > /etc/sysctl.d/90-x.conf").len(),
        1,
        "a redirection is the shell's, not sudo's"
    );
    assert_eq!(
        commands_outside_spans("run `sudo modprobe nvidia`, then modprobe nvidia_uvm"),
        vec!["modprobe nvidia_uvm"]
    );
    assert!(commands_outside_spans("mount NFS with `-o hard`").is_empty());
}

#[test]
fn every_verify_text_is_a_shell_script_that_parses() {
    let mut bad = Vec::new();
    for c in checks::all() {
        if let Some(e) = bash_syntax_error(c.doc.verify) {
            bad.push(format!("{}: {e}\n{}", c.id, c.doc.verify));
        }
        // A placeholder in angle brackets is a redirection to the shell.
        if c.doc.verify.contains("<bus") || c.doc.verify.contains("<number") {
            bad.push(format!("{}: an <angle> placeholder", c.id));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n\n"));
}

#[test]
fn every_code_span_of_a_documented_fix_parses_and_says_sudo_where_it_needs_root() {
    let mut bad = Vec::new();
    for c in checks::all() {
        for span in code_spans(c.doc.fix) {
            if let Some(e) = bash_syntax_error(span) {
                bad.push(format!("{}: `{span}`: {e}", c.id));
            }
            for cmd in without_sudo(span) {
                bad.push(format!("{}: `{cmd}` needs root: sudo", c.id));
            }
        }
        for cmd in commands_outside_spans(c.doc.fix) {
            bad.push(format!("{}: a command outside a code span: {cmd}", c.id));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The fixes of every finding of every fixture's report, and of measured reports (the
/// measured checks' fixes).
fn every_finding_fix() -> &'static [(String, String)] {
    // Auditing every fixture takes seconds: once for the tests that read them.
    static FIXES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    FIXES.get_or_init(collect_finding_fixes)
}

fn collect_finding_fixes() -> Vec<(String, String)> {
    let mut fixes = Vec::new();
    let mut add = |name: &str, report: &serde_json::Value| {
        for f in report["findings"].as_array().unwrap() {
            if let Some(fix) = f["fix"].as_str() {
                fixes.push((format!("{name}: {}", f["check"]), fix.to_string()));
            }
        }
    };
    for name in all_fixtures() {
        let (_, report) = audit(&name, &[]);
        add(&name, &report);
    }
    // A measured report failing the measured checks: slow memory, GEMM, host copies, P2P,
    // all-reduce, context creation without persistence.
    use gpuaudit_core::facts::OnGpu;
    use gpuaudit_core::testing::measured::{allreduce, ctx, gemm_point, membw, pcie_gpu};
    use gpuaudit_core::Reading;
    let r = measured_report(2, |m| {
        m.context = Reading::Value(ctx(2500.0, false));
        m.memory = Reading::Value(
            (0..2)
                .map(|g| OnGpu::new(g, Reading::Value(membw(1500.0))))
                .collect(),
        );
        if let Reading::Value(p) = &mut m.pcie {
            for g in &mut p.per_gpu {
                g.result = Reading::Value(pcie_gpu(12.0, 12.0));
            }
        }
        if let Reading::Value(per_gpu) = &mut m.gemm {
            for g in per_gpu.iter_mut() {
                if let Reading::Value(results) = &mut g.result {
                    for r in results.iter_mut() {
                        r.result = Reading::Value(gemm_point(100.0, true));
                    }
                }
            }
        }
        if let Reading::Value(p2p) = &mut m.p2p {
            for pair in &mut p2p.pairs {
                pair.gbps = Reading::Value(20.0);
            }
        }
        let mut ar = allreduce(20.0, true);
        ar.gpus = vec![0, 1];
        m.nccl = Reading::Value(ar);
    });
    add("measured", &serde_json::to_value(&r).unwrap());
    fixes.sort();
    fixes.dedup_by(|a, b| a.1 == b.1);
    fixes
}

#[test]
fn every_code_span_of_a_finding_fix_parses_and_says_sudo_where_it_needs_root() {
    let fixes = every_finding_fix();
    assert!(fixes.len() > 30, "{} fixes", fixes.len());
    let mut bad = Vec::new();
    for (where_, fix) in fixes {
        for span in code_spans(fix) {
            if let Some(e) = bash_syntax_error(span) {
                bad.push(format!("{where_}: `{span}`: {e}"));
            }
            for cmd in without_sudo(span) {
                bad.push(format!("{where_}: `{cmd}` needs root: sudo"));
            }
        }
        for cmd in commands_outside_spans(fix) {
            bad.push(format!("{where_}: a command outside a code span: {cmd}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_python_snippet_compiles() {
    let mut texts: Vec<(String, String)> = Vec::new();
    for c in checks::all() {
        texts.push((format!("{} verify", c.id), c.doc.verify.to_string()));
        for span in code_spans(c.doc.fix) {
            texts.push((format!("{} fix", c.id), span.to_string()));
        }
    }
    for (where_, fix) in every_finding_fix() {
        for span in code_spans(fix) {
            texts.push((where_.clone(), span.to_string()));
        }
    }
    let (bad, found) = python_failures(&texts);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    // The checker finds the snippets (loopback's heredoc, the PyTorch one-liners).
    assert!(found >= 8, "{found} python snippets found");
}

#[test]
fn the_checker_fails_python_that_does_not_compile() {
    let (bad, found) = python_failures(&[
        ("a".into(), "python3 -c 'import torch; print(('".into()),
        (
            "b".into(),
            "python3 - <<'EOF'\ndef f():\nreturn 1\nEOF".into(),
        ),
        ("c".into(), "python3 -c 'print(1)'".into()),
    ]);
    assert_eq!(found, 3);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bash_syntax_error("lspci -vv -s <bus-id> | grep LnkSta").is_some());
    assert!(bash_syntax_error("cmd   (the GPU)").is_some());
    assert!(bash_syntax_error("lspci -vv -s BUS_ID | grep LnkSta  # the GPU").is_none());
}

/// What `gpuaudit explain` prints under "How to verify by hand" is the text as written, flush
/// left with its own indentation: pasted into a shell, it parses and its heredocs end (the
/// net.loopback snippet once lost its Python indentation; an indented `EOF` ends nothing).
#[test]
fn explain_prints_the_verify_text_as_written_to_paste() {
    let verify = |id: &str, columns: &str| {
        let o = gpuaudit()
            .args(["explain", id])
            .env("COLUMNS", columns)
            .output()
            .unwrap();
        let text = String::from_utf8(o.stdout).unwrap();
        text.split("How to verify by hand\n")
            .nth(1)
            .and_then(|t| t.split("\n\nHow to fix").next())
            .unwrap()
            .to_string()
    };
    for c in checks::all() {
        // Wide enough that nothing wraps: as written.
        let printed = verify(c.id, "500");
        let written: Vec<&str> = c.doc.verify.lines().map(str::trim_end).collect();
        assert_eq!(printed, written.join("\n"), "{}", c.id);
        assert_eq!(bash_syntax_error(&printed), None, "{}", c.id);
        // At 80 columns (issue 23) comments wrap, each piece a comment, and a comment after
        // a command too wide goes above it: every command is still there as written, and
        // the whole still pastes.
        let narrow = verify(c.id, "80");
        assert_eq!(bash_syntax_error(&narrow), None, "{}", c.id);
        for l in &written {
            if l.starts_with('#') {
                continue;
            }
            let command = match l.split_once("  # ") {
                Some((cmd, _)) if l.chars().count() > 80 => cmd.trim_end(),
                _ => l,
            };
            assert!(
                narrow.lines().any(|n| n == command),
                "{}: {command:?}",
                c.id
            );
        }
    }
    let o = gpuaudit()
        .args(["explain", "net.loopback"])
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("\ndef echo():\n    c, _ = s.accept()\n"),
        "{text}"
    );
    assert!(text.contains("\nEOF\n"), "{text}");
}
