//! The command line as a user meets it: exit codes, errors, the catalog.

mod common;
use common::*;
use predicates::prelude::*;

#[test]
fn missing_snapshot_is_exit_2_with_one_line() {
    let out = gpuaudit()
        .args(["--root", "/nonexistent/snapshot"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("/nonexistent/snapshot does not exist"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn a_directory_that_is_no_snapshot_is_exit_2() {
    let d = tempfile::tempdir().unwrap();
    gpuaudit()
        .arg("--root")
        .arg(d.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a gpuaudit snapshot"));
    std::fs::write(
        d.path().join("meta.json"),
        r#"{"format": "gpuaudit-snapshot/9"}"#,
    )
    .unwrap();
    gpuaudit()
        .arg("--root")
        .arg(d.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unsupported snapshot format"));
}

#[test]
fn bad_arguments_are_exit_2() {
    for args in [
        vec!["--profile", "gaming"],
        vec!["--expect", "h1000:8"],
        vec!["--expect", "h100:x"],
        vec!["--gpus", "a-b"],
        vec!["--format", "yaml"],
        vec!["--no-such-flag"],
    ] {
        let mut a = vec![
            "--root".to_string(),
            fixture("h200-x2-vm").display().to_string(),
        ];
        a.extend(args.iter().map(|s| s.to_string()));
        let out = gpuaudit().args(&a).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    gpuaudit()
        .args(["--root"])
        .arg(fixture("h200-x2-vm"))
        .args(["--gpus", "7"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("there is no GPU 7"));
}

#[test]
fn exit_1_when_a_check_fails() {
    gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-x8-link"))
        .args(["--format", "json"])
        .assert()
        .code(1);
}

/// A snapshot whose nvidia-smi XML is there but cannot be read (cut short, as a copy that ran
/// out of space leaves it), without the kernel module's files to fall back on: every view
/// says the driver's report could not be read and why, none says no GPU was found.
#[test]
fn a_driver_report_that_cannot_be_read_is_never_no_gpu_found() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("snap");
    copy_dir(&fixture("h200-x2-vm"), &root);
    let xml = root.join("cmd/nvidia-smi-q.xml");
    let text = std::fs::read_to_string(&xml).unwrap();
    std::fs::write(&xml, &text[..text.len() / 3]).unwrap();
    std::fs::remove_dir_all(root.join("proc/driver/nvidia/gpus")).unwrap();
    let run = |format: &str| {
        let out = gpuaudit()
            .args(["--format", format, "--root"])
            .arg(&root)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let table = run("table");
    let verdict = table.lines().next().unwrap_or("");
    assert!(
        verdict.starts_with(
            "2× NVIDIA GPU on the PCI bus (the driver's report could not be read), driver 580.159.04:"
        ),
        "{verdict}"
    );
    let json = run("json");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    let present = &findings(&r, "gpu.present")[0];
    assert_eq!(present["status"], "fail");
    assert!(
        present["message"].as_str().unwrap_or("").starts_with(
            "2 NVIDIA GPUs on the PCI bus, but the driver's report could not be read: \
             nvidia-smi -q -x: malformed: nvidia-smi XML: "
        ),
        "{present}"
    );
    // The other GPU checks skip with that reason.
    for check in [
        "power.limit",
        "clocks.throttle",
        "memory.errors",
        "gpu.uniform",
    ] {
        let f = &findings(&r, check)[0];
        assert_eq!(f["status"], "skip", "{check}");
        assert_eq!(
            f["message"],
            "the GPUs are not known: the driver's report could not be read (see gpu.present)",
            "{check}"
        );
    }
    for (what, out) in [("table", &table), ("json", &json), ("md", &run("md"))] {
        assert!(!out.contains("No NVIDIA GPU found"), "{what}");
        assert!(!out.contains("no GPU found"), "{what}");
        assert!(!out.contains("no NVIDIA GPU found"), "{what}");
    }
}

#[test]
fn table_output_reads_at_a_glance() {
    let out = gpuaudit()
        .args(["audit", "--format", "table", "--root"])
        .arg(fixture("h200-x2-x8-link"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2× NVIDIA H200"), "{text}");
    assert!(text.contains("FAIL pcie.link"), "{text}");
    assert!(text.contains("fix: Reseat the card"), "{text}");
    assert!(text.contains("1 problem (1 failed) on GPU 1"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes with NO_COLOR / not a terminal"
    );
}

#[test]
fn every_format_renders() {
    for (fmt, needle) in [
        ("json", "\"schema\": \"gpuaudit.report/1\""),
        ("md", "| area | status | check | finding |"),
        ("html", "<!doctype html>"),
        ("table", "no problem found in what was checked"),
    ] {
        gpuaudit()
            .args(["--format", fmt, "--root"])
            .arg(fixture("h200-x2-vm"))
            .assert()
            .stdout(predicate::str::contains(needle));
    }
}

#[test]
fn output_file_takes_format_from_extension() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.json");
    gpuaudit()
        .arg("--root")
        .arg(fixture("h200-x2-vm"))
        .arg("--output")
        .arg(&p)
        .assert()
        .success()
        .stdout("");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(v["schema"], "gpuaudit.report/1");
}

#[test]
fn checks_lists_every_catalog_id() {
    let out = gpuaudit().arg("checks").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut at = 0;
    for c in gpuaudit_core::checks::all() {
        // Every id, in catalog order.
        let Some(i) = text[at..].find(&format!("{} ", c.id)) else {
            panic!("{} missing from `gpuaudit checks`, or out of order", c.id);
        };
        at += i;
    }
}

#[test]
fn explain_documents_every_check() {
    for c in gpuaudit_core::checks::all() {
        let out = gpuaudit().args(["explain", c.id]).output().unwrap();
        assert!(out.status.success(), "{}", c.id);
        let text = String::from_utf8_lossy(&out.stdout);
        for section in [
            "What it looks at",
            "Why it matters",
            "How to verify by hand",
            "How to fix",
        ] {
            assert!(text.contains(section), "{}: no '{section}'", c.id);
        }
    }
    // A check the profiles change says how; one they do not change has no such section.
    gpuaudit()
        .args(["explain", "memory.ecc"])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "What the profiles change\n  --profile hpc: ECC off fails instead of warning",
        ));
    gpuaudit()
        .args(["explain", "pcie.link"])
        .assert()
        .success()
        .stdout(predicate::str::contains("What the profiles change").not());
    gpuaudit()
        .args(["explain", "pcie.nope"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean pcie.link"));
}

#[test]
fn live_audit_without_gpu_runs_and_says_so() {
    // CI machines have no GPU: the live audit still runs its host checks.
    let out = gpuaudit()
        .args(["--facts-only", "--format", "json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "exit {code}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if r["gpus"].as_array().is_some_and(|g| g.is_empty()) {
        let f = &findings(&r, "gpu.present")[0];
        assert!(
            f["message"]
                .as_str()
                .unwrap_or("")
                .contains("No NVIDIA GPU found"),
            "{f}"
        );
    }
}

#[test]
fn collect_then_audit_gives_the_live_findings() {
    let d = tempfile::tempdir().unwrap();
    let snap = d.path().join("snap");
    gpuaudit()
        .args(["collect", "--out"])
        .arg(&snap)
        .assert()
        .success();
    gpuaudit()
        .args(["collect", "--out"])
        .arg(&snap)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists"));
    let live = gpuaudit()
        .args(["--facts-only", "--format", "json"])
        .output()
        .unwrap();
    let offline = gpuaudit()
        .arg("--root")
        .arg(&snap)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let live: serde_json::Value = serde_json::from_slice(&live.stdout).unwrap();
    let offline: serde_json::Value = serde_json::from_slice(&offline.stdout).unwrap();
    let key = |r: &serde_json::Value, measured: &[String]| -> Vec<String> {
        r["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                let check = f["check"].as_str().unwrap_or("").to_string();
                // Measured checks skip in both, with a reason that names the mode.
                let msg = if measured.contains(&check) {
                    String::new()
                } else {
                    f["message"].as_str().unwrap_or("").to_string()
                };
                format!("{} {} {} {}", check, f["status"], f["gpu"], msg)
            })
            .collect()
    };
    let measured: Vec<String> = gpuaudit_core::checks::all()
        .iter()
        .filter(|c| c.kind == gpuaudit_core::checks::CheckKind::Measured)
        .map(|c| c.id.to_string())
        .collect();
    assert_eq!(key(&live, &measured), key(&offline, &measured));
}

#[test]
fn models_lists_every_model_and_the_names_expect_accepts() {
    let db = gpuaudit_core::spec::SpecDb::embedded();
    // Wide enough for one line per model (at 80 columns each model takes two: tests/terminal.rs).
    let out = gpuaudit()
        .arg("models")
        .env("COLUMNS", "500")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("KEY "), "{text}");
    for g in &db.gpus {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(g.key.as_str()))
            .unwrap_or_else(|| panic!("{} not listed", g.key));
        assert!(line.contains(&g.name), "{line}");
        assert!(line.contains(&g.expect_names().join(", ")), "{line}");
    }
    assert!(
        text.contains(&format!("{} models.", db.gpus.len())),
        "{text}"
    );

    let out = gpuaudit()
        .args(["models", "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "gpuaudit.models/1");
    let models = v["models"].as_array().unwrap();
    assert_eq!(models.len(), db.gpus.len());
    for (m, g) in models.iter().zip(&db.gpus) {
        assert_eq!(m["key"], g.key.as_str());
        assert_eq!(m["nvlink"], g.nvlink_kind().as_str());
        let names: Vec<String> = m["expect_names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, g.expect_names(), "{}", g.key);
        assert_eq!(
            m["pci_device_ids"][0].as_str().unwrap(),
            format!("0x{:04x}", g.pci_device_ids[0])
        );
    }
    let h200 = models
        .iter()
        .find(|m| m["key"] == "h200-sxm-141gb")
        .unwrap();
    assert_eq!(h200["memory_gb"], 141.0);
    assert_eq!(h200["nvlink"], "direct");
    // A figure the database lacks is null, not 0 (the H20 has no NVIDIA datasheet).
    let h20 = models.iter().find(|m| m["key"] == "h20").unwrap();
    assert!(h20["memory_gb"].is_null());

    gpuaudit()
        .args(["models", "--format", "yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("[possible values: table, json]"));
}

#[test]
fn expect_accepts_the_names_models_lists() {
    // Every listed name is checked against the database in gpuaudit-core's tests; here a
    // few go through the command line, the way a user types them.
    for name in [
        "v100s:8",
        "a100:8",
        "rtx4090",
        "rtx-pro-6000:2",
        "gh200",
        "p100-sxm2-16gb",
        "rtx-2080-ti",
        "b300:8",
    ] {
        let out = gpuaudit()
            .args(["--format", "json", "--root"])
            .arg(fixture("h200-x2-vm"))
            .args(["--expect", name])
            .output()
            .unwrap();
        assert_ne!(
            out.status.code(),
            Some(2),
            "--expect {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn an_unknown_expect_model_is_refused_with_the_names_known() {
    let out = gpuaudit()
        .args(["--root"])
        .arg(fixture("h200-x2-vm"))
        .args(["--expect", "x100:8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--expect 'x100:8': unknown GPU model 'x100'; known: a10, a100,"),
        "{err}"
    );
    assert!(err.contains("v100s") && err.contains("rtx-4090"), "{err}");
    assert!(err.contains("`gpuaudit models`"), "{err}");
    assert!(out.stdout.is_empty());
}
