//! `gpuaudit compare`: the binary on reports it builds: audits of fixture snapshots
//! (`--format json` into a temporary directory) and measured reports built from the testing
//! machine, in every format; exact cells, exit codes, `--name`, hostile names.

mod common;

use common::{fixture, gpuaudit};
use gpuaudit_core::testing::{measured, Machine};
use gpuaudit_core::{Policy, Reading, Report};
use regex::Regex;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The fixture's audit as JSON in `dir` (at a fixed time, so the views are the same each run).
fn audit_into(dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(format!("{name}.json"));
    let o = gpuaudit()
        .env("GPUAUDIT_NOW", "2026-12-01T10:00:00Z")
        .arg("audit")
        .arg("--root")
        .arg(fixture(name))
        .args(["--format", "json", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{name}: {o:?}");
    out
}

/// A measured 2×H200 report named `host` whose GPU 1 copies device memory at `copy` GB/s.
fn measured_into(dir: &Path, host: &str, copy: f64) -> PathBuf {
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| f.machine.hostname = Reading::Value(host.into()))
        .measured(|m| {
            measured::full_run(m, 2);
            if let Reading::Value(mem) = &mut m.memory {
                if let Reading::Value(b) = &mut mem[1].result {
                    b.copy_gbps = Some(copy);
                }
            }
        })
        .build();
    let r = Report::build(
        &f,
        &Policy {
            full: true,
            ..Policy::default()
        },
    );
    let file: String = host
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let p = dir.join(format!("{file}.json"));
    std::fs::write(&p, serde_json::to_string(&r).unwrap()).unwrap();
    p
}

fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let o = gpuaudit().arg("compare").args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn os(p: &Path) -> &std::ffi::OsStr {
    p.as_os_str()
}

fn snapshots(dir: &Path) -> Vec<PathBuf> {
    ["h200-x2-vm", "h200-x2-x8-link", "h200-x2-power-capped"]
        .iter()
        .map(|n| audit_into(dir, n))
        .collect()
}

fn json(files: &[PathBuf], extra: &[&str]) -> Value {
    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    args.extend(["--format", "json"].iter().map(std::ffi::OsStr::new));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn figure<'a>(v: &'a Value, key: &str) -> &'a Value {
    v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no figure {key}"))
}

fn check<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"] == id)
        .unwrap()
}

#[test]
fn three_snapshots_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let files = snapshots(dir.path());
    let v = json(
        &files,
        &["--name", "vm", "--name", "x8", "--name", "capped"],
    );
    assert_eq!(v["schema"], "gpuaudit.compare/1");
    let names: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["vm", "x8", "capped"]);
    assert_eq!(v["columns"][1]["verdict"], "fail");
    assert_eq!(v["columns"][0]["audited_at"], "2026-12-01T10:00:00Z");
    let link = figure(&v, "pcie_link");
    assert_eq!(link["differs"], true);
    assert_eq!(link["cells"][0]["best"], true);
    assert_eq!(link["cells"][1]["text"], "gen5 x8 of gen5 x16");
    assert_eq!(link["cells"][1]["gpu"], 1);
    assert_eq!(link["cells"][1]["best"], false);
    let power = figure(&v, "power_limit");
    assert_eq!(power["differs"], true);
    assert_eq!(power["cells"][2]["best"], false);
    assert!(power["cells"][2]["ratio"].as_f64().unwrap() < 0.95);
    let gemm = figure(&v, "gemm_tflops_bf16");
    for c in gemm["cells"].as_array().unwrap() {
        assert!(c["value"].is_null(), "never 0: {c}");
        assert_eq!(c["text"], "not measured");
        assert_eq!(c["not_measured"], "snapshot audit: nothing is measured");
        assert_eq!(c["best"], false);
    }
    assert_eq!(gemm["differs"], false);
    let pl = check(&v, "pcie.link");
    assert_eq!(pl["differs"], true);
    assert_eq!(pl["cells"][1]["status"], "fail");
    assert_eq!(pl["cells"][1]["gpus"], serde_json::json!([1]));
    assert_eq!(check(&v, "gpu.present")["differs"], false);
}

#[test]
fn measured_figures_best_and_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let a = measured_into(dir.path(), "a", 4000.0);
    let b = measured_into(dir.path(), "b", 4000.0 * 0.95);
    let c = measured_into(dir.path(), "c", 4000.0 * 0.94);
    let v = json(&[a.clone(), b.clone()], &[]);
    let copy = figure(&v, "memory_copy_bandwidth");
    assert_eq!(copy["cells"][0]["best"], true);
    assert_eq!(copy["cells"][1]["value"], 3800.0);
    assert_eq!(copy["differs"], false, "5% is within the noise");
    let v = json(&[a, c], &[]);
    assert_eq!(figure(&v, "memory_copy_bandwidth")["differs"], true);
    assert_eq!(
        figure(&v, "gemm_tflops_bf16")["cells"][1]["best"],
        true,
        "a tie"
    );
}

#[test]
fn wrong_arguments_and_files_are_exit_2_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let a = measured_into(dir.path(), "a", 4000.0);
    let b = measured_into(dir.path(), "b", 4000.0);
    let (code, out, err) = run(&[os(&a), os(&b), "--name".as_ref(), "one".as_ref()]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(
        err.trim(),
        "gpuaudit: --name given once for 2 reports: name every report, in order, or none"
    );
    let three = ["--name", "x", "--name", "y", "--name", "z"].map(std::ffi::OsStr::new);
    let (code, _, err) = run(&[&[os(&a), os(&b)], &three[..]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--name given 3 times for 2 reports"), "{err}");
    let (code, _, _) = run(&[os(&a)]);
    assert_eq!(code, 2, "one report is not a comparison");
    let bad = dir.path().join("bench.json");
    std::fs::write(&bad, r#"{"schema": "gpuaudit.bench/1"}"#).unwrap();
    let (code, out, err) = run(&[os(&a), os(&bad)]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("bench.json") && err.contains("gpuaudit.bench/1"),
        "{err}"
    );
    let (code, _, err) = run(&[os(&a), "--format".as_ref(), "pdf".as_ref(), os(&b)]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn hostile_names_stay_text() {
    let dir = tempfile::tempdir().unwrap();
    let a = measured_into(dir.path(), "<script>alert(1)</script>", 4000.0);
    let b = measured_into(dir.path(), "b|c", 4000.0);
    let (a2, b2) = (a, b);
    let (code, html, _) = run(&[os(&a2), os(&b2), "--format".as_ref(), "html".as_ref()]);
    assert_eq!(code, 0);
    assert!(!html.contains("<script"), "markup from a report");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let (code, md, _) = run(&[os(&a2), os(&b2), "--format".as_ref(), "md".as_ref()]);
    assert_eq!(code, 0);
    assert!(md.contains("| b\\|c |"), "{md}");
    assert!(md.contains("&lt;script&gt;"));
}

#[test]
fn the_table_and_markdown_of_a_small_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = ["h200-x2-vm", "h200-x2-x8-link"]
        .iter()
        .map(|n| audit_into(dir.path(), n))
        .collect();
    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    args.extend(
        ["--name", "vm", "--name", "x8"]
            .iter()
            .map(std::ffi::OsStr::new),
    );
    let (code, table, _) = run(&args);
    assert_eq!(code, 0);
    for l in table.lines() {
        assert!(l.chars().count() <= 80, "{l}");
    }
    insta::assert_snapshot!("compare_table", table);
    args.extend(["--format", "md"].iter().map(std::ffi::OsStr::new));
    let (code, md, _) = run(&args);
    assert_eq!(code, 0);
    insta::assert_snapshot!("compare_md", md);
}

/// `--redact`: one mapping over every report and the files' names; every view says so.
#[test]
fn redact_replaces_the_hosts_of_every_report_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("gpu-node-17");
    std::fs::create_dir(&sub).unwrap();
    let a = measured_into(&sub, "gpu-node-17", 3959.3);
    let b = measured_into(dir.path(), "gpu-node-18", 3959.3);
    let files = vec![a, b];
    let plain = json(&files, &[]);
    assert!(plain.get("redacted").is_none(), "absent when not redacted");
    let v = json(&files, &["--redact"]);
    assert_eq!(v["redacted"], true);
    let text = v.to_string();
    assert!(!text.contains("gpu-node-1"), "{text}");
    let cols = v["columns"].as_array().unwrap();
    assert_eq!(cols[0]["hostname"], "host-1");
    // The second host's number comes after those the first report names (its kernel's and
    // driver's builders, `buildd@lcy02-amd64-001`, are hosts too).
    let second = cols[1]["hostname"].as_str().unwrap();
    assert!(
        second != "host-1" && Regex::new(r"^host-[0-9]+$").unwrap().is_match(second),
        "{second}"
    );
    assert_eq!(cols[0]["name"], "host-1");
    // The directory named after the first host is that host's placeholder too.
    assert!(
        cols[0]["file"]
            .as_str()
            .unwrap()
            .ends_with("/host-1/gpu_node_17.json"),
        "{}",
        cols[0]["file"]
    );
    for format in ["table", "md", "html"] {
        let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
        args.extend(["--redact", "--format", format].map(std::ffi::OsStr::new));
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains("gpu-node-1"), "{format}: {out}");
        // Wrapped in the table: the words in order.
        let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            words.contains(
                "redacted: hosts, addresses, serials, UUIDs, users, paths and ids replaced"
            ),
            "{format}: {out}"
        );
    }
}

/// Two audits of one host in files named after it with a suffix (`gpu-node-17-a.json`): the
/// columns are named by their stems, which `--redact` replaces as the host's variants.
#[test]
fn redact_replaces_a_hosts_name_in_file_stems_with_a_suffix() {
    let dir = tempfile::tempdir().unwrap();
    let made = measured_into(dir.path(), "gpu-node-17", 3959.3);
    let files: Vec<PathBuf> = ["gpu-node-17-a.json", "gpu-node-17-b.json"]
        .iter()
        .map(|n| {
            let p = dir.path().join(n);
            std::fs::copy(&made, &p).unwrap();
            p
        })
        .collect();
    let plain = json(&files, &[]);
    assert_eq!(plain["columns"][1]["name"], "gpu-node-17 (gpu-node-17-b)");
    let v = json(&files, &["--redact"]);
    assert_eq!(v["columns"][0]["name"], "host-1 (host-1-a)");
    assert_eq!(v["columns"][1]["name"], "host-1 (host-1-b)");
    for format in ["table", "md", "html", "json"] {
        let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
        args.extend(["--redact", "--format", format].map(std::ffi::OsStr::new));
        let (code, out, err) = run(&args);
        assert_eq!(code, 0, "{err}");
        assert!(!out.contains("node-17"), "{format}: {out}");
    }
}

/// The saved report of the real 1×H200 VM (fixtures/reports), copied into `dir` as `name`.
fn real_report_into(dir: &Path, name: &str) -> PathBuf {
    let from = common::fixtures().join("../reports/h200-x1-vm-full.json");
    let to = dir.join(format!("{name}.json"));
    std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    to
}

/// Issue 23: NVLink differs in value, not in wording. Three real snapshots that all pass,
/// one of them with its link counts gone from the evidence (as an older report, or one
/// whose listing was not read, has it): "pass" beside "pass · 18/18 links" is no difference,
/// and every pass is the best.
#[test]
fn nvlink_that_passes_everywhere_does_not_differ_whatever_its_wording() {
    let dir = tempfile::tempdir().unwrap();
    let files = snapshots(dir.path());
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    for f in r["findings"].as_array_mut().unwrap() {
        if f["check"] == "nvlink.status" {
            let ev = f["evidence"].as_object_mut().unwrap();
            ev.remove("links_active");
            ev.remove("spec_links");
        }
    }
    std::fs::write(&files[0], serde_json::to_string(&r).unwrap()).unwrap();
    let v = json(&files, &[]);
    let nv = figure(&v, "nvlink");
    let texts: Vec<&str> = nv["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["pass", "pass · 18/18 links", "pass · 18/18 links"]);
    assert_eq!(nv["differs"], false, "{nv}");
    assert!(nv["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["best"] == true));
    // The table: no ≠ on the row.
    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    args.push(std::ffi::OsStr::new("--color=never"));
    let (code, t, err) = run(&args);
    assert_eq!(code, 0, "{err}");
    let line = t.lines().find(|l| l.contains("NVLink")).unwrap();
    assert!(!line.starts_with('≠'), "{line}");
    // Links that differ in number still differ, and only the most links up is the best.
    let mut r: Value = serde_json::from_str(&std::fs::read_to_string(&files[1]).unwrap()).unwrap();
    for f in r["findings"].as_array_mut().unwrap() {
        if f["check"] == "nvlink.status" && f["gpu"] == 1 {
            f["evidence"]["links_active"] = 12.into();
        }
    }
    std::fs::write(&files[1], serde_json::to_string(&r).unwrap()).unwrap();
    let v = json(&files, &[]);
    let nv = figure(&v, "nvlink");
    assert_eq!(nv["differs"], true, "{nv}");
    let best: Vec<bool> = nv["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["best"].as_bool().unwrap())
        .collect();
    assert_eq!(best, [true, false, true]);
}

/// Issue 23: ★ marks the best of something; a note ("info": this VM's one GPU has nothing to
/// link) is nothing to prefer, on the real 1×H200 report.
#[test]
fn an_nvlink_note_is_never_the_best() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        real_report_into(dir.path(), "a"),
        real_report_into(dir.path(), "b"),
    ];
    let v = json(&files, &["--name", "a", "--name", "b"]);
    let nv = figure(&v, "nvlink");
    assert_eq!(nv["cells"][0]["status"], "info", "{nv}");
    assert_eq!(nv["differs"], false);
    assert!(nv["cells"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["best"] == false));
    let (code, t, err) = run(&[
        os(&files[0]),
        os(&files[1]),
        std::ffi::OsStr::new("--color=never"),
    ]);
    assert_eq!(code, 0, "{err}");
    let line = t.lines().find(|l| l.contains("NVLink")).unwrap();
    assert!(!line.contains('★'), "{line}");
    // Beside a machine whose NVLink passes, the note differs and the pass is the best.
    let x2 = audit_into(dir.path(), "h200-x2-vm");
    let v = json(&[files[0].clone(), x2], &[]);
    let nv = figure(&v, "nvlink");
    assert_eq!(nv["differs"], true);
    assert_eq!(nv["cells"][0]["best"], false);
    assert_eq!(nv["cells"][1]["best"], true);
}

/// Issue 23: at 80 columns a column's name longer than its column breaks after one of its
/// hyphens, never inside a word ("h200-x2-power-ca" / "pped"), and no line is wider.
#[test]
fn column_names_break_between_their_parts_at_80_columns() {
    let dir = tempfile::tempdir().unwrap();
    let files = snapshots(dir.path());
    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    args.push(std::ffi::OsStr::new("--color=never"));
    let o = gpuaudit()
        .env("COLUMNS", "80")
        .arg("compare")
        .args(&args)
        .output()
        .unwrap();
    let t = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.trim_start().starts_with("machine"))
        .unwrap();
    assert!(lines[at].ends_with("h200-x2-power-"), "{}", lines[at]);
    assert_eq!(lines[at + 1].trim(), "capped", "{t}");
    assert!(!lines.iter().any(|l| l.trim() == "pped"), "{t}");
    for l in &lines {
        assert!(l.chars().count() <= 80, "wider than 80: {l}");
    }
    // Temperatures and latencies in the units a person reads (the JSON keeps "us").
    assert!(t.contains("(µs)"), "{t}");
}
