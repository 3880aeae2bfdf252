//! `--redact`: every fixture audited with it, in every format, keeps none of the hostnames,
//! UUIDs, serials, IP addresses and user names its plain report names, and the same verdict;
//! the redacted H200 report in fixtures/reports reads, renders and stays as it is.

mod common;
use common::*;
use gpuaudit_core::render::REDACTED_NOTE;
use regex::Regex;
use serde_json::Value;
use std::path::{Path, PathBuf};

const FORMATS: [&str; 4] = ["json", "md", "html", "table"];

fn validator() -> jsonschema::Validator {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("docs/report.schema.json is a valid JSON Schema")
}

fn schema_errors(v: &jsonschema::Validator, report: &Value) -> Vec<String> {
    v.iter_errors(report)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// The output of gpuaudit with these arguments, wide enough that the table wraps nothing.
fn run(args: &[&str]) -> (i32, String) {
    let o = gpuaudit()
        .env("COLUMNS", "10000")
        .args(args)
        .output()
        .unwrap();
    let code = o.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "{args:?}: exit {code}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    (code, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(k.clone());
            strings(x, out)
        }),
        _ => {}
    }
}

/// What a plain report names that must not be shared: its hostname, GPU UUIDs and serials,
/// snapshot path, the IPv4 addresses of its mounts (`addr=`, `clientaddr=`, `server:/export`)
/// and the users of its home directories and `USER=`, each with what it is.
fn sensitive(plain: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(h) = plain["machine"]["hostname"].as_str() {
        out.push(("hostname", h.to_string()));
    }
    for g in plain["gpus"].as_array().into_iter().flatten() {
        for (what, key) in [("uuid", "uuid"), ("serial", "serial")] {
            if let Some(v) = g[key].as_str() {
                out.push((what, v.to_string()));
            }
        }
    }
    if let Some(s) = plain["audit"]["snapshot"].as_str() {
        out.push(("snapshot path", s.to_string()));
    }
    let ip = Regex::new(r"(?:\baddr=|\bclientaddr=)(\d+\.\d+\.\d+\.\d+)|(\d+\.\d+\.\d+\.\d+):/")
        .unwrap();
    let user = Regex::new(r"(?:/home/|/Users/|\bUSER=)([A-Za-z_][A-Za-z0-9_-]*)").unwrap();
    let mut texts = Vec::new();
    strings(plain, &mut texts);
    for t in &texts {
        for c in ip.captures_iter(t) {
            let m = c.get(1).or_else(|| c.get(2)).unwrap();
            out.push(("ip", m.as_str().to_string()));
        }
        for c in user.captures_iter(t) {
            let u = &c[1];
            // Accounts every cloud image has name nobody; they stay (report/redact.rs).
            if !["root", "ubuntu", "ec2-user", "admin", "nobody"].contains(&u) {
                out.push(("user", u.to_string()));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `value` occurs in `text` as a token of its own (not inside a longer word).
fn occurs(text: &str, value: &str) -> bool {
    text.match_indices(value).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + value.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// Whether the plain report's hostname also is a word the report uses of its own (the
/// H200 VM is called `vm`, and `machine.virtualization` is "vm" too): such a word stays
/// where the report means the word.
fn is_report_word(plain: &Value, host: &str) -> bool {
    plain["machine"]["virtualization"].as_str() == Some(host)
}

fn verdict(report: &Value) -> (Vec<(String, String, Value)>, Value) {
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["check"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
                f["gpu"].clone(),
            )
        })
        .collect();
    (findings, report["summary"].clone())
}

#[test]
fn every_fixture_redacted_keeps_no_identity_and_the_same_verdict_in_every_format() {
    let v = validator();
    let mut checked = 0;
    for name in all_fixtures() {
        let root = fixture(&name);
        let root = root.to_str().unwrap();
        let (plain_code, plain) = audit(&name, &[]);
        let secrets = sensitive(&plain);
        for format in FORMATS {
            let (code, out) = run(&["audit", "--root", root, "--redact", "--format", format]);
            assert_eq!(code, plain_code, "{name} {format}: the exit status changed");
            for (what, value) in &secrets {
                if *what == "hostname" && is_report_word(&plain, value) {
                    for shown in [format!("· {value} ·"), format!(">{value} ·")] {
                        assert!(!out.contains(&shown), "{name} {format}: host {value} shown");
                    }
                    continue;
                }
                assert!(
                    !occurs(&out, value),
                    "{name} {format}: the {what} '{value}' survived --redact"
                );
                checked += 1;
            }
            if format == "json" {
                let red: Value = serde_json::from_str(&out).unwrap();
                assert_eq!(red["audit"]["redacted"], true, "{name}");
                assert_eq!(verdict(&red), verdict(&plain), "{name}: findings changed");
                let errors = schema_errors(&v, &red);
                assert!(errors.is_empty(), "{name}: {errors:#?}");
                // What settles an argument with a provider stays.
                for key in ["driver_version", "cuda_driver_version", "os"] {
                    assert_eq!(red["machine"][key], plain["machine"][key], "{name} {key}");
                }
                // The kernel's release stays; its builder (`user@host`) does not.
                let release = |v: &Value| {
                    let k = v["machine"]["kernel"].as_str().unwrap_or("").to_string();
                    k.split(" (").next().unwrap_or("").to_string()
                };
                assert_eq!(release(&red), release(&plain), "{name} kernel");
                for (r, p) in red["gpus"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .zip(plain["gpus"].as_array().unwrap())
                {
                    for key in ["name", "pci_bus_id", "vbios", "memory_total_mib", "pcie"] {
                        assert_eq!(r[key], p[key], "{name} gpu {key}");
                    }
                }
            } else {
                assert!(
                    out.contains(REDACTED_NOTE),
                    "{name} {format}: no redacted line"
                );
            }
        }
    }
    // The fixtures do name UUIDs, serials, addresses and a hostname: the test checked some.
    assert!(checked > 100, "{checked}");
}

#[test]
fn the_fixtures_name_what_the_test_above_looks_for() {
    // host-bad-storage mounts its data over NFS from 10.0.0.2; h200-x2-live is a real VM's
    // snapshot with its own UUIDs and serials: without them the test above would check little.
    let (_, storage) = audit("host-bad-storage", &[]);
    let s = sensitive(&storage);
    assert!(s.contains(&("ip", "10.0.0.2".into())), "{s:?}");
    assert!(s.contains(&("ip", "10.0.0.5".into())), "{s:?}");
    let (_, live) = audit("h200-x2-live", &[]);
    let s = sensitive(&live);
    assert!(s.contains(&("uuid", "GPU-af03aa1e-6321-baa2-b263-f86bf40e0757".into())));
    assert!(s.contains(&("hostname", "vm".into())));
}

#[test]
fn the_bare_command_and_output_files_are_redacted_too() {
    let d = tempfile::tempdir().unwrap();
    let root = fixture("h200-x2-live");
    for ext in ["json", "md", "html", "txt"] {
        let file = d.path().join(format!("r.{ext}"));
        let o = gpuaudit()
            .arg("--root")
            .arg(&root)
            .arg("--redact")
            .arg("--output")
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{ext}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("GPU-af03aa1e"), "{ext}");
        assert!(!text.contains("1653824017950"), "{ext}");
        assert!(text.contains("GPU-00000000-0000-0000-ffff-000000000001") || ext == "txt");
        let said = if ext == "json" {
            "\"redacted\": true"
        } else {
            REDACTED_NOTE
        };
        assert!(text.contains(said), "{ext}");
    }
}

fn save(dir: &Path, report: &Value) -> PathBuf {
    let p = dir.join("report.json");
    std::fs::write(&p, serde_json::to_string_pretty(report).unwrap()).unwrap();
    p
}

#[test]
fn report_redact_of_a_saved_report_is_the_audit_redact() {
    let d = tempfile::tempdir().unwrap();
    for name in [
        "h200-x2-live",
        "host-bad-storage",
        "real/a100-sxm4-80gb-mig-r535",
    ] {
        let (audited, plain) = audit(name, &[]);
        let saved = save(d.path(), &plain);
        let (code, out) = run(&[
            "report",
            saved.to_str().unwrap(),
            "--redact",
            "--format",
            "json",
        ]);
        // The audit's exit status (issue 23).
        assert_eq!(code, audited);
        let from_file: Value = serde_json::from_str(&out).unwrap();
        let root = fixture(name);
        let (_, out) = run(&[
            "audit",
            "--root",
            root.to_str().unwrap(),
            "--redact",
            "--format",
            "json",
        ]);
        let mut audited: Value = serde_json::from_str(&out).unwrap();
        audited["audit"]["audited_at"] = from_file["audit"]["audited_at"].clone();
        assert_eq!(from_file, audited, "{name}");
        // Unredacted, gpuaudit report says nothing of redaction.
        let (_, out) = run(&["report", saved.to_str().unwrap(), "--format", "md"]);
        assert!(!out.contains(REDACTED_NOTE));
    }
}

fn h200_report() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/reports/h200-x1-vm-full.json")
}

#[test]
fn the_redacted_h200_report_reads_renders_and_stays_as_it_is() {
    let file = h200_report();
    let file = file.to_str().unwrap();
    let text = std::fs::read_to_string(file).unwrap();
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(saved["audit"]["redacted"], true);
    let errors = schema_errors(&validator(), &saved);
    assert!(errors.is_empty(), "{errors:#?}");
    // Every UUID in it is a placeholder, the serial too.
    let uuid = Regex::new(r"(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}").unwrap();
    for m in uuid.find_iter(&text) {
        assert!(
            m.as_str().contains("-0000-0000-ffff-"),
            "a UUID that is no placeholder: {}",
            m.as_str()
        );
    }
    assert_eq!(saved["gpus"][0]["serial"], "serial-1");
    assert_eq!(saved["machine"]["hostname"], "host-1");
    // What a provider needs stays: the driver, the VBIOS, the bus id, the figures.
    assert_eq!(saved["machine"]["driver_version"], "580.159.04");
    assert_eq!(saved["gpus"][0]["vbios"], "96.00.A5.00.1A");
    assert_eq!(saved["gpus"][0]["pci_bus_id"], "0000:00:06.0");
    assert!(saved["measurements"].as_array().unwrap().len() > 10);
    assert!(text.contains("libcudnn 9.19.0.56") || text.contains("9.19.0.56"));

    for format in FORMATS {
        let (code, once) = run(&["report", file, "--format", format]);
        assert_eq!(code, 0, "{format}");
        assert!(
            once.contains(REDACTED_NOTE) || format == "json",
            "{format}: no redacted line"
        );
        assert!(once.contains("H200"), "{format}");
        // Redacted again: nothing changes.
        let (_, twice) = run(&["report", file, "--redact", "--format", format]);
        assert_eq!(
            once, twice,
            "{format}: redacting a redacted report changed it"
        );
    }
    let (_, json) = run(&["report", file, "--format", "json"]);
    let again: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(verdict(&again), verdict(&saved));
}
