//! The report as a document: what it carries (date, version, serials, the machine), its
//! published JSON Schema, and `gpuaudit report` rendering a saved one again.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn published_schema() -> Value {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn validator() -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(&published_schema())
        .expect("docs/report.schema.json is a valid JSON Schema")
}

fn save(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let p = dir.join(format!("{}.json", name.replace('/', "_")));
    std::fs::write(&p, serde_json::to_string_pretty(report).unwrap() + "\n").unwrap();
    p
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn schema_command_prints_the_published_schema() {
    let o = gpuaudit().arg("schema").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let printed: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(printed, published_schema());
    assert_eq!(printed["title"], "gpuaudit.report/1");
}

#[test]
fn every_fixture_report_validates_and_renders_again_from_its_file() {
    let v = validator();
    let d = tempfile::tempdir().unwrap();
    for name in all_fixtures() {
        let (code, report) = audit(&name, &[]);
        let errors: Vec<String> = v
            .iter_errors(&report)
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        // The binary always dates its audits.
        assert!(report["audit"]["audited_at"].is_string(), "{name}");

        // The saved report, rendered again as JSON, is the same report.
        let saved = save(d.path(), &name, &report);
        let o = gpuaudit()
            .args(["report", "--format", "json"])
            .arg(&saved)
            .output()
            .unwrap();
        // Exit as the audit did (issue 23).
        assert_eq!(o.status.code(), Some(code), "{name}: {}", stderr(&o));
        let again: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(again, report, "{name}");
    }
}

#[test]
fn a_saved_report_renders_in_every_format() {
    let d = tempfile::tempdir().unwrap();
    let (code, report) = audit("h200-x2-x8-link", &[]);
    assert_eq!(code, 1);
    let saved = save(d.path(), "x8", &report);
    for (fmt, needles) in [
        (
            "table",
            &["2× NVIDIA H200", "pcie.link", "Reseat the card"][..],
        ),
        (
            "md",
            &["### ❌ 2× NVIDIA H200", "`pcie.link`", "Reseat the card"],
        ),
        ("html", &["<!doctype html>", "pcie.link", "Reseat the card"]),
    ] {
        let o = gpuaudit()
            .args(["report", "--format", fmt])
            .arg(&saved)
            .output()
            .unwrap();
        // The audit's exit status, from the report (issue 23): it has a failed check.
        assert_eq!(o.status.code(), Some(1), "{fmt}: {}", stderr(&o));
        let text = stdout(&o);
        for n in needles {
            assert!(text.contains(n), "{fmt}: no {n:?} in\n{text}");
        }
    }
    // --output picks the format from the extension, as for the audit.
    let html = d.path().join("r.html");
    let o = gpuaudit()
        .arg("report")
        .arg(&saved)
        .arg("--output")
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .starts_with("<!doctype html>"));
}

#[test]
fn a_file_that_is_not_a_report_of_this_schema_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let (_, report) = audit("h200-x2-vm", &[]);
    let mut v2 = report.clone();
    v2["schema"] = "gpuaudit.report/2".into();
    let bench = r#"{"schema": "gpuaudit.bench/1", "measured": {}}"#;
    let cases = [
        (
            file("v2.json", &v2.to_string()),
            "schema 'gpuaudit.report/2' is not one this gpuaudit reads (gpuaudit.report/1)",
        ),
        (
            file("x.json", r#"{"schema": "x"}"#),
            "schema 'x' is not one this gpuaudit reads (gpuaudit.report/1)",
        ),
        (
            file("bench.json", bench),
            "schema 'gpuaudit.bench/1' is not one this gpuaudit reads",
        ),
        (file("text.json", "hello\n"), "not JSON (expected value"),
        (
            file("other.json", r#"{"name": "x"}"#),
            "not a gpuaudit report (it has no \"schema\")",
        ),
        (
            file(
                "broken.json",
                r#"{"schema": "gpuaudit.report/1", "tool": {}}"#,
            ),
            "not a valid gpuaudit.report/1 report (missing field",
        ),
        (file("bin.json", "\u{0}\u{1}\u{ff}"), "not JSON"),
    ];
    for (path, want) in cases {
        let o = gpuaudit().arg("report").arg(&path).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", path.display());
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{e}");
        let named = format!("gpuaudit: {}: {want}", path.display());
        assert!(e.starts_with(&named), "{e}\nwanted: {named}");
        assert!(o.stdout.is_empty());
    }
    let o = gpuaudit()
        .arg("report")
        .arg(d.path().join("none.json"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with("gpuaudit: cannot read ")
            && e.trim_end().ends_with("none.json: no such file"),
        "{e}"
    );
    // A file without end is not read: it is no regular file (tests/hostile_reports.rs has
    // the large one and the FIFO).
    let o = gpuaudit().args(["report", "/dev/zero"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/dev/zero: not a report file (a device"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_report_carries_what_a_provider_ticket_needs() {
    let d = tempfile::tempdir().unwrap();
    let snap = d.path().join("snap");
    copy_dir(&fixture("h200-x2-vm"), &snap);
    let dmi = snap.join("sys/class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    for (f, v) in [
        ("sys_vendor", "Amazon EC2"),
        ("product_name", "p5en.48xlarge"),
        ("board_vendor", "Amazon EC2"),
        ("product_version", "To be filled by O.E.M."),
    ] {
        std::fs::write(dmi.join(f), format!("{v}\n")).unwrap();
    }
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(snap.join("meta.json")).unwrap()).unwrap();
    let mut meta = meta;
    meta["collected_at"] = "2026-11-30T23:59:59+01:00".into();
    std::fs::write(snap.join("meta.json"), meta.to_string()).unwrap();

    let out = gpuaudit()
        .args(["--format", "json", "--root"])
        .arg(&snap)
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let m = &r["machine"];
    assert_eq!(m["system_vendor"], "Amazon EC2");
    assert_eq!(m["system_product"], "p5en.48xlarge");
    assert_eq!(m["instance_type"], "p5en.48xlarge");
    assert_eq!(m["board_vendor"], "Amazon EC2");
    // A firmware placeholder is no value; a file that is not there neither.
    assert!(m["system_version"].is_null(), "{m}");
    assert!(m["board_name"].is_null(), "{m}");
    for k in [
        "os",
        "kernel",
        "cpu",
        "sockets",
        "memory_gib",
        "driver_version",
    ] {
        assert!(!m[k].is_null(), "{k}: {m}");
    }
    assert_eq!(m["cuda_driver_version"], "13.0");
    assert_eq!(m["virtualization"], "vm");
    // In UTC.
    assert_eq!(r["audit"]["snapshot_collected_at"], "2026-11-30T22:59:59Z");
    let at = r["audit"]["audited_at"].as_str().unwrap();
    assert!(at.ends_with('Z') && at.len() == 20, "{at}");
    assert_eq!(r["tool"]["version"], env!("CARGO_PKG_VERSION"));
    // Each GPU's UUID and serial, as nvidia-smi gave them.
    let xml = std::fs::read_to_string(snap.join("cmd/nvidia-smi-q.xml")).unwrap();
    for g in r["gpus"].as_array().unwrap() {
        for k in ["uuid", "serial", "board_part_number"] {
            let v = g[k].as_str().unwrap_or_else(|| panic!("{k}: {g}"));
            assert!(xml.contains(&format!(">{v}<")), "{k} {v}");
        }
    }
}

#[test]
fn collect_dates_the_snapshot_and_the_audit_of_it_says_when() {
    let d = tempfile::tempdir().unwrap();
    let snap = d.path().join("snap");
    let o = gpuaudit()
        .args(["collect", "--out"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(snap.join("meta.json")).unwrap()).unwrap();
    let at = meta["collected_at"].as_str().unwrap().to_string();
    assert!(at.ends_with('Z') && at.len() == 20, "{at}");
    let o = gpuaudit()
        .args(["--format", "json", "--root"])
        .arg(&snap)
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["audit"]["snapshot_collected_at"], at.as_str());
    // The audit comes after the collection (RFC 3339 UTC sorts as text).
    assert!(r["audit"]["audited_at"].as_str().unwrap() >= at.as_str());
    // DMI, where this machine has it, is in the snapshot under its own path.
    for f in ["sys_vendor", "product_name"] {
        let live = Path::new("/sys/class/dmi/id").join(f);
        if let Ok(v) = std::fs::read_to_string(&live) {
            let copied = std::fs::read_to_string(snap.join("sys/class/dmi/id").join(f)).unwrap();
            assert_eq!(copied, v, "{f}");
        }
    }
}

/// The letters and digits of a text, entities decoded: a fix found in a rendering whatever
/// the format escaped, wrapped or indented.
fn fingerprint(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// An HTML page without its tags (a `<` of the text is `&lt;` there, so every `<` opens one).
fn without_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Every fix of the JSON report, of any status, in the format's rendering of it; but a
/// consequence's (a finding another's cause explains, `caused_by`): the views show it under
/// its cause, whose fix is the one to follow.
fn fixes_missing(format: &str) -> Vec<String> {
    let mut missing = Vec::new();
    for name in all_fixtures() {
        let (_, report) = audit(&name, &[]);
        let o = gpuaudit()
            .args(["--format", format, "--root"])
            .arg(fixture(&name))
            .output()
            .unwrap();
        let page = stdout(&o);
        // The HTML's own tags (a fix's `code` is <code>) are markup, not text.
        let text = fingerprint(&if format == "html" {
            without_tags(&page)
        } else {
            page
        });
        let parsed = gpuaudit_core::report::from_json(&report.to_string()).expect("a report");
        let causes = gpuaudit_core::report::Causes::of(&parsed.findings);
        for (i, f) in report["findings"].as_array().unwrap().iter().enumerate() {
            if causes.is_consequence(i) {
                continue;
            }
            if let Some(fix) = f["fix"].as_str() {
                if !text.contains(&fingerprint(fix)) {
                    missing.push(format!(
                        "{name}: {} {} GPU {}",
                        f["status"], f["check"], f["gpu"]
                    ));
                }
            }
        }
    }
    missing
}

#[test]
fn markdown_carries_every_fix() {
    assert_eq!(fixes_missing("md"), Vec::<String>::new());
}

// The table and the HTML once dropped the fixes of INFO findings (net.fabric, kernel.modules,
// storage.mounts, env.jupyter, net.somaxconn on the host-* fixtures, pcie.link GPU 1 on
// h200-x2-live): every format carries every fix.
#[test]
fn the_table_carries_every_fix() {
    assert_eq!(fixes_missing("table"), Vec::<String>::new());
}

#[test]
fn html_carries_every_fix() {
    assert_eq!(fixes_missing("html"), Vec::<String>::new());
}

#[test]
fn gpuaudit_now_dates_a_reproducible_report() {
    let run = |now: &str| {
        gpuaudit()
            .env("GPUAUDIT_NOW", now)
            .args(["--format", "json", "--root"])
            .arg(fixture("h200-x2-vm"))
            .output()
            .unwrap()
    };
    let a = run("2026-12-01T11:24:13+01:00");
    let b = run("2026-12-01T10:24:13Z");
    assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout, "the same report, byte for byte");
    let r: Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(r["audit"]["audited_at"], "2026-12-01T10:24:13Z");
    let bad = run("tuesday");
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        stderr(&bad),
        "gpuaudit: GPUAUDIT_NOW='tuesday': not an RFC 3339 time such as 2026-12-01T10:24:13Z\n"
    );
    assert!(bad.stdout.is_empty());
}
