//! `gpuaudit fleet`: a generated fleet of a few hundred reports, with degraded nodes mixed
//! in, summarised by the binary; and a fleet of every fixture's audit.

mod common;

use common::gpuaudit;
use gpuaudit_core::facts::MeasuredFacts;
use gpuaudit_core::testing::{measured, Machine};
use gpuaudit_core::{Policy, Reading, Report};
use serde_json::Value;
use std::path::Path;

/// Healthy nodes of the generated fleet, besides the degraded ones.
const HEALTHY: usize = 290;

/// A measured 2×H200 node named `host`, after `change` to its facts and its measurements.
fn node(
    host: &str,
    facts: impl FnOnce(Machine) -> Machine,
    measure: impl FnOnce(&mut MeasuredFacts),
) -> Report {
    let m = Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| f.machine.hostname = Reading::Value(host.into()))
        .measured(|m| {
            measured::full_run(m, 2);
            measure(m);
        });
    let policy = Policy {
        full: true,
        ..Policy::default()
    };
    Report::build(&facts(m).build(), &policy)
}

/// GPU 1's copy kernel at `share` of what it measured.
fn slower_copy(m: &mut MeasuredFacts, share: f64) {
    if let Reading::Value(mem) = &mut m.memory {
        if let Reading::Value(b) = &mut mem[1].result {
            b.copy_gbps = b.copy_gbps.map(|c| c * share);
        }
    }
}

fn write(dir: &Path, file: &str, r: &Report) {
    std::fs::write(dir.join(file), serde_json::to_string(r).unwrap()).unwrap();
}

/// The fleet: `HEALTHY` healthy nodes, `slow-mem` (GPU 1's copies 12% slower: flagged),
/// `mem-5pct` (5% slower: not), `x8-link` (GPU 1 trained at x8), `old-driver` (another
/// driver of R580), `twin` twice (two files, one hostname), a corrupt file and a report of
/// another schema.
fn fleet_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let healthy = node("template", |m| m, |_| {});
    for i in 0..HEALTHY {
        let mut r = healthy.clone();
        r.machine.hostname = Some(format!("gpu-{i:03}"));
        write(dir.path(), &format!("gpu-{i:03}.json"), &r);
    }
    write(
        dir.path(),
        "slow-mem.json",
        &node("slow-mem", |m| m, |m| slower_copy(m, 0.88)),
    );
    write(
        dir.path(),
        "mem-5pct.json",
        &node("mem-5pct", |m| m, |m| slower_copy(m, 0.95)),
    );
    write(
        dir.path(),
        "x8-link.json",
        &node(
            "x8-link",
            |m| m.gpu(1, |g| g.pcie.width_current = Reading::Value(8)),
            |_| {},
        ),
    );
    write(
        dir.path(),
        "old-driver.json",
        &node(
            "old-driver",
            |m| {
                m.with(|f| {
                    // User space and kernel module alike: only the version differs.
                    f.driver.version = Reading::Value("580.95.05".into());
                    if let Reading::Value(p) = &mut f.driver.proc_version {
                        *p = p.replace("580.159.04", "580.95.05");
                    }
                })
            },
            |_| {},
        ),
    );
    let mut twin = healthy.clone();
    twin.machine.hostname = Some("twin".into());
    write(dir.path(), "twin-a.json", &twin);
    write(dir.path(), "twin-b.json", &twin);
    std::fs::write(
        dir.path().join("corrupt.json"),
        "{ \"schema\": \"gpuaudit.rep",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bench.json"),
        r#"{"schema": "gpuaudit.bench/1", "measured": {}}"#,
    )
    .unwrap();
    // Not a *.json file, not read.
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    dir
}

fn run_json(args: &[&std::ffi::OsStr]) -> (i32, Value, String) {
    let out = gpuaudit()
        .arg("fleet")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_generated_fleet_is_summarised_exactly() {
    let dir = fleet_dir();
    let (code, v, stderr) = run_json(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["schema"], "gpuaudit.fleet/1");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), HEALTHY + 8);
    assert_eq!(v["counts"]["nodes"], HEALTHY + 8);
    assert_eq!(v["counts"]["not_read"], 2);
    // Sorted by file name: bench.json, corrupt.json, gpu-000 ...
    assert_eq!(nodes[0]["name"], "bench");
    assert_eq!(nodes[0]["verdict"], "not-read");
    assert_eq!(
        nodes[0]["not_read"],
        "not a gpuaudit report: schema 'gpuaudit.bench/1' is not one this gpuaudit reads \
         (gpuaudit.report/1)"
    );
    assert_eq!(nodes[1]["name"], "corrupt");
    assert!(
        nodes[1]["not_read"]
            .as_str()
            .unwrap()
            .starts_with("not JSON ("),
        "{}",
        nodes[1]
    );
    assert_eq!(nodes[2]["name"], "gpu-000");
    assert_eq!(nodes[2]["verdict"], "pass");
    assert_eq!(nodes[2]["gpus"][0]["count"], 2);
    assert_eq!(nodes[2]["gpus"][0]["model"], "NVIDIA H200");

    // Only the memory copy figure flags, and only the 12% node (the 5% one is within 10%).
    let flagged: Vec<(String, String)> = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            f["outliers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| {
                    (
                        f["name"].as_str().unwrap().to_string(),
                        o["node"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        flagged,
        vec![("memory_copy_bandwidth".to_string(), "slow-mem".to_string())]
    );
    let copy = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "memory_copy_bandwidth")
        .unwrap();
    assert_eq!(copy["peers"], "NVIDIA H200");
    assert_eq!(copy["nodes"], HEALTHY + 6);
    assert_eq!(copy["median"], 3959.3);
    assert_eq!(copy["outliers"][0]["gpu"], 1);
    let s = copy["outliers"][0]["shortfall"].as_f64().unwrap();
    assert!((s - 0.12).abs() < 1e-9, "{s}");
    assert_eq!(copy["outliers"][0]["kind"], "slow");
    assert_eq!(copy["outliers"][0]["degrees"], Value::Null);
    assert_eq!(copy["nature"], "performance");
    assert_eq!(copy["spread"], "symmetric");
    assert_eq!(copy["log_mad"], Value::Null);
    // The 5% node is to watch, not flagged.
    assert_eq!(copy["watch"].as_array().unwrap().len(), 1);
    assert_eq!(copy["watch"][0]["node"], "mem-5pct");
    // What an H200 attains (data/attainable.toml), and the nodes 10% or more below it.
    assert_eq!(copy["attainable"], 4224.0);
    let m = copy["median_shortfall_to_attainable"].as_f64().unwrap();
    assert!((m - (1.0 - 3959.3 / 4224.0)).abs() < 1e-9, "{m}");
    let below: Vec<&str> = copy["below_attainable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["node"].as_str().unwrap())
        .collect();
    assert_eq!(below, ["slow-mem", "mem-5pct"]);
    let ctx = v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "context_create_ms")
        .unwrap();
    assert_eq!(ctx["spread"], "long-tailed");
    assert!(ctx["log_mad"].is_number(), "{ctx}");
    assert_eq!(v["counts"]["flagged"], 1);
    assert_eq!(v["counts"]["slow"], 1);
    assert_eq!(v["counts"]["anomalous"], 0);
    assert_eq!(v["counts"]["watch"], 1);
    assert_eq!(v["counts"]["below_attainable"], 2);
    assert_eq!(v["rules"]["threshold"], 0.1);
    assert_eq!(v["rules"]["watch_z"], 5.0);
    assert_eq!(v["rules"]["hotter_c"], 10.0);

    // --threshold 5: the 5% node is flagged too, and no longer watched.
    let (_, v5, _) = run_json(&[dir.path().as_os_str(), "--threshold".as_ref(), "5".as_ref()]);
    assert_eq!(v5["rules"]["threshold"], 0.05);
    let copy5 = v5["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "memory_copy_bandwidth")
        .unwrap();
    let flagged5: Vec<&str> = copy5["outliers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["node"].as_str().unwrap())
        .collect();
    assert_eq!(flagged5, ["slow-mem", "mem-5pct"]);
    assert!(copy5["watch"].as_array().unwrap().is_empty());
    assert_eq!(v5["counts"]["flagged"], 2);
    assert_eq!(v5["counts"]["watch"], 0);

    // Drift: the driver alone, the majority first.
    let drift = v["drift"].as_array().unwrap();
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0]["field"], "driver");
    assert_eq!(drift[0]["values"][0]["value"], "580.159.04");
    assert_eq!(
        drift[0]["values"][0]["nodes"].as_array().unwrap().len(),
        HEALTHY + 5
    );
    assert_eq!(drift[0]["values"][1]["value"], "580.95.05");
    assert_eq!(names(&drift[0]["values"][1]["nodes"]), vec!["old-driver"]);

    // The x8 link fails pcie.link on its GPU 1.
    let link = v["failing_checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "pcie.link")
        .unwrap();
    assert_eq!(link["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(link["nodes"][0]["node"], "x8-link");
    assert_eq!(link["nodes"][0]["gpus"], serde_json::json!([1]));

    // One hostname, two files: both kept, each naming the other.
    let twins: Vec<&Value> = nodes.iter().filter(|n| n["hostname"] == "twin").collect();
    assert_eq!(twins.len(), 2);
    assert_eq!(twins[0]["name"], "twin (twin-a)");
    assert_eq!(twins[1]["name"], "twin (twin-b)");
    assert!(twins[0]["same_hostname_as"][0]
        .as_str()
        .unwrap()
        .ends_with("twin-b.json"));

    // The failing nodes are exactly the degraded ones and the unread files.
    let failing: Vec<&str> = nodes
        .iter()
        .filter(|n| n["verdict"] == "fail" || n["verdict"] == "not-read")
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    // (12% slower copies are still within what memory.bandwidth accepts of an H200: only
    // the fleet's own median shows them.)
    assert_eq!(failing, vec!["bench", "corrupt", "x8-link"]);
}

#[test]
fn the_table_fits_80_columns_and_names_what_stands_out() {
    let dir = fleet_dir();
    let out = gpuaudit()
        .arg("fleet")
        .arg(dir.path())
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let t = String::from_utf8(out.stdout).unwrap();
    for l in t.lines() {
        assert!(l.chars().count() <= 80, "{l}");
    }
    assert!(
        t.starts_with(&format!("Fleet of {} nodes: ", HEALTHY + 8)),
        "{t}"
    );
    assert!(
        t.contains("slow-mem 3484 GB/s on GPU 1: 12.0% slower"),
        "{t}"
    );
    // 5% slower where the peers agree exactly: within 10%, far outside the noise.
    assert!(
        t.contains("watch: mem-5pct 3761 GB/s on GPU 1: 5.0% slower (within 10%)"),
        "{t}"
    );
    assert!(
        t.contains("2 nodes 10% or more below what an NVIDIA H200 attains: slow-mem, mem-5pct"),
        "{t}"
    );
    assert!(
        t.contains("; 1 node slower than\n    its peers; 1 node to watch;"),
        "{t}"
    );
    assert!(
        t.contains("driver: 580.159.04 on 295 nodes; 580.95.05 on old-driver"),
        "{t}"
    );
    assert!(t.contains("pcie.link (GPU 1)"), "{t}");
    assert!(
        t.contains("not read: bench.json: not a gpuaudit report: schema"),
        "{t}"
    );
}

#[test]
fn exit_status_0_1_and_2() {
    let dir = tempfile::tempdir().unwrap();
    let healthy = node("h", |m| m, |_| {});
    for i in 0..3 {
        let mut r = healthy.clone();
        r.machine.hostname = Some(format!("h{i}"));
        write(dir.path(), &format!("h{i}.json"), &r);
    }
    let files: Vec<std::path::PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("h{i}.json")))
        .collect();
    let (code, v, _) = run_json(&files.iter().map(|p| p.as_os_str()).collect::<Vec<_>>());
    assert_eq!(code, 0);
    assert_eq!(v["counts"]["pass"], 3);

    // A missing file is a node that was not read: exit 1, not 2.
    let missing = dir.path().join("gone.json");
    let (code, v, _) = run_json(&[files[0].as_os_str(), missing.as_os_str()]);
    assert_eq!(code, 1);
    assert_eq!(v["nodes"][1]["not_read"], "cannot be read: no such file");

    // Nothing readable: exit 2, one line on stderr, nothing on stdout.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[]").unwrap();
    let (code, v, stderr) = run_json(&[bad.as_os_str()]);
    assert_eq!(code, 2);
    assert_eq!(v, Value::Null);
    assert!(
        stderr.contains("no report could be read of 1 file")
            && stderr.contains("it has no \"schema\""),
        "{stderr}"
    );
    // A directory without a report file, no argument, a wrong format: exit 2.
    let empty = tempfile::tempdir().unwrap();
    let (code, _, stderr) = run_json(&[empty.path().as_os_str()]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("no *.json file in this directory"),
        "{stderr}"
    );
    let out = gpuaudit().arg("fleet").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = gpuaudit()
        .args(["fleet", "--format", "html"])
        .arg(&files[0])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// `--fail-on`: a node whose copies are 12% slower than its peers' (flagged, no check
/// failed) exits 0 by default and 1 with `slow`; a node whose host copies are 5% slower (to
/// watch; no attainable figure to fall below) exits 1 only with `watch`.
#[test]
fn fail_on_slow_and_watch_gate_on_stragglers() {
    let fleet = |slow: &dyn Fn(&mut MeasuredFacts)| {
        let dir = tempfile::tempdir().unwrap();
        let healthy = node("h", |m| m, |_| {});
        for i in 0..6 {
            let mut r = healthy.clone();
            r.machine.hostname = Some(format!("h{i}"));
            write(dir.path(), &format!("h{i}.json"), &r);
        }
        write(
            dir.path(),
            "straggler.json",
            &node("straggler", |m| m, slow),
        );
        dir
    };
    let code = |dir: &tempfile::TempDir, level: Option<&str>| {
        let mut c = gpuaudit();
        c.args(["fleet", "--format", "json"]).arg(dir.path());
        if let Some(l) = level {
            c.args(["--fail-on", l]);
        }
        c.output().unwrap().status.code()
    };
    let flagged = fleet(&|m| slower_copy(m, 0.88));
    assert_eq!(code(&flagged, None), Some(0));
    assert_eq!(code(&flagged, Some("fail")), Some(0));
    assert_eq!(code(&flagged, Some("slow")), Some(1));
    assert_eq!(code(&flagged, Some("outlier")), Some(1));
    assert_eq!(code(&flagged, Some("watch")), Some(1));
    let watched = fleet(&|m| {
        if let Reading::Value(p) = &mut m.pcie {
            if let Reading::Value(g) = &mut p.per_gpu[1].result {
                for pt in &mut g.points {
                    pt.gbps *= 0.95;
                }
            }
        }
    });
    assert_eq!(code(&watched, Some("slow")), Some(0));
    assert_eq!(code(&watched, Some("watch")), Some(1));
    assert_eq!(code(&watched, Some("sometimes")), Some(2));
}

/// A directory's entry that is a symbolic link is not followed: it could lead out of the
/// directory, and the fleet would quote its target (a report's hostname, a parse error's
/// text). It is a node not read, with the reason; the file named on its own is read.
#[test]
fn a_symlink_in_the_directory_is_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    write(
        outside.path(),
        "secret.json",
        &node("outside-secret-host", |m| m, |_| {}),
    );
    std::fs::write(outside.path().join("shadow.json"), "root:hunter2-secret\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.json", &node("a", |m| m, |_| {}));
    std::os::unix::fs::symlink(
        outside.path().join("secret.json"),
        dir.path().join("b.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("shadow.json"),
        dir.path().join("c.json"),
    )
    .unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("d.json")).unwrap();
    let (code, v, _) = run_json(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{v}");
    let why = "a symbolic link, not followed (name the file itself to read it)";
    let nodes = v["nodes"].as_array().unwrap();
    let names: Vec<&str> = nodes.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c", "d"]);
    assert_eq!(nodes[0]["not_read"], Value::Null);
    for n in &nodes[1..] {
        assert_eq!(n["not_read"], why, "{n}");
    }
    for format in ["table", "md", "json"] {
        let out = gpuaudit()
            .args(["fleet", "--format", format])
            .arg(dir.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("a symbolic link, not followed"),
            "{format}: {text}"
        );
        assert!(
            !text.contains("outside-secret-host") && !text.contains("hunter2"),
            "{format}: {text}"
        );
    }
    // Named on its own, the link is the user's choice: read.
    let (code, v, _) = run_json(&[dir.path().join("b.json").as_os_str()]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["nodes"][0]["hostname"], "outside-secret-host");
}

/// A JSON file of another shape (a config, a fleet's own summary) is a node not read, its
/// file named, with the reason "not a gpuaudit report"; the others are summarised.
#[test]
fn a_json_that_is_no_report_is_named_and_skipped() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        write(
            dir.path(),
            &format!("h{i}.json"),
            &node(&format!("h{i}"), |m| m, |_| {}),
        );
    }
    std::fs::write(dir.path().join("config.json"), r#"{"nodes": ["a", "b"]}"#).unwrap();
    std::fs::write(dir.path().join("list.json"), "[1, 2]").unwrap();
    let (code, fleet, _) = run_json(&[dir.path().as_os_str()]);
    std::fs::write(dir.path().join("summary.json"), fleet.to_string()).unwrap();
    assert_eq!(code, 1);
    let (code, v, stderr) = run_json(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["counts"]["not_read"], 3);
    let node = |name: &str| {
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .unwrap()
            .clone()
    };
    for name in ["config", "list"] {
        let n = node(name);
        assert_eq!(n["verdict"], "not-read");
        assert_eq!(
            n["not_read"],
            "not a gpuaudit report (it has no \"schema\")"
        );
        assert!(n["file"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{name}.json")));
    }
    assert_eq!(
        node("summary")["not_read"],
        "not a gpuaudit report: schema 'gpuaudit.fleet/1' is not one this gpuaudit reads \
         (gpuaudit.report/1)"
    );
    assert_eq!(v["counts"]["pass"], 3);
    let out = gpuaudit()
        .arg("fleet")
        .arg(dir.path())
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(
        t.contains("not read: config.json: not a gpuaudit report (it has no \"schema\")"),
        "{t}"
    );
    let out = gpuaudit()
        .args(["fleet", "--format", "md"])
        .arg(dir.path())
        .output()
        .unwrap();
    let m = String::from_utf8(out.stdout).unwrap();
    assert!(
        m.contains("| list |  | not read | list.json: not a gpuaudit report"),
        "{m}"
    );
}

#[test]
fn threshold_must_be_a_percentage_between_0_and_100() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.json", &node("a", |m| m, |_| {}));
    for bad in ["0", "100", "x", "-3"] {
        let out = gpuaudit()
            .arg("fleet")
            .arg(format!("--threshold={bad}"))
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--threshold"), "{err}");
    }
    let (code, v, _) = run_json(&[
        dir.path().as_os_str(),
        "--threshold".as_ref(),
        "7.5%".as_ref(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(v["rules"]["threshold"], 0.075);
    let out = gpuaudit()
        .args(["fleet", "--threshold", "7.5"])
        .arg(dir.path())
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("a node stands out 7.5% or more worse"), "{t}");
}

#[test]
fn output_picks_the_format_from_its_extension() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.json", &node("a", |m| m, |_| {}));
    let md = dir.path().join("fleet.md");
    let out = gpuaudit()
        .arg("fleet")
        .arg(dir.path().join("a.json"))
        .arg("--output")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let text = std::fs::read_to_string(&md).unwrap();
    assert!(text.starts_with("### ✅ Fleet of 1 node: 1 pass"), "{text}");
}

/// A small fleet: two healthy nodes, one on an x8 link, one corrupt file, one hostile name,
/// one hot and under-powered with copies a little slow.
fn small_fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.json", &node("node-a", |m| m, |_| {}));
    write(
        dir.path(),
        "b.json",
        &node("node-b", |m| m, |m| slower_copy(m, 0.80)),
    );
    write(
        dir.path(),
        "c.json",
        &node(
            "node-c",
            |m| m.gpu(1, |g| g.pcie.width_current = Reading::Value(8)),
            |_| {},
        ),
    );
    write(
        dir.path(),
        "d.json",
        &node("<b>evil</b>|\x1b[2J", |m| m, |_| {}),
    );
    std::fs::write(dir.path().join("e.json"), "not json").unwrap();
    // Its GPU 1 12 °C hotter and drawing 13% less power than its peers' (anomalies), its
    // copies 5% slower (to watch).
    let mut f = node("node-f", |m| m, |m| slower_copy(m, 0.95));
    for m in f.measurements.iter_mut().filter(|m| m.gpu == Some(1)) {
        match m.name.as_str() {
            "burn_temperature_c" => m.value += 12.0,
            "burn_power_w" => m.value *= 0.87,
            _ => {}
        }
    }
    write(dir.path(), "f.json", &f);
    dir
}

fn render_small(format: &str) -> String {
    let dir = small_fleet();
    let out = gpuaudit()
        .current_dir(dir.path())
        .args(["fleet", ".", "--format", format])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn small_fleet_table() {
    let t = render_small("table");
    assert!(!t.contains('\x1b'), "{t}");
    insta::assert_snapshot!("fleet-table-small", t);
}

#[test]
fn small_fleet_markdown() {
    let m = render_small("md");
    assert!(!m.contains("<b>"), "{m}");
    insta::assert_snapshot!("fleet-md-small", m);
}

#[test]
fn every_fixtures_audit_as_a_fleet() {
    let dir = tempfile::tempdir().unwrap();
    for name in common::all_fixtures() {
        let (_, report) = common::audit(&name, &[]);
        let file = format!("{}.json", name.replace('/', "-"));
        std::fs::write(dir.path().join(file), report.to_string()).unwrap();
    }
    let (code, v, stderr) = run_json(&[dir.path().as_os_str()]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(v["counts"]["not_read"], 0);
    assert_eq!(
        v["nodes"].as_array().unwrap().len(),
        common::all_fixtures().len()
    );
    let x8 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| {
            n["file"]
                .as_str()
                .unwrap()
                .ends_with("/h200-x2-x8-link.json")
        })
        .unwrap();
    assert_eq!(x8["verdict"], "fail");
    assert!(x8["failed_checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["check"] == "pcie.link" && c["gpus"] == serde_json::json!([1])));
    // The real machines run other drivers: the drift lists them.
    let driver = v["drift"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "driver")
        .unwrap();
    assert!(driver["values"].as_array().unwrap().len() > 5, "{driver}");
}

/// The real 1×H200 `--full` report of fixtures/reports, as JSON.
fn real_report() -> Value {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/reports/h200-x1-vm-full.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A fleet with something of everything the summary reads: 24 nodes of the real report, each
/// figure a little apart (a fixed pattern, no randomness), one copying 15% slower, one 15 °C
/// hotter, one drawing 20% less power (judged either way), one 6% slower in its contexts (flagged
/// at `--threshold 5`), others on another driver, kernel, VBIOS, NCCL and PyTorch, one failing pcie.link;
/// 2×H200 nodes of the test builder (one on an x8 link, two of one hostname); an unread file
/// whose stem is a node's hostname, and a report of another schema.
fn mixed_fleet() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let real = real_report();
    for i in 0..24usize {
        let mut v = real.clone();
        v["machine"]["hostname"] = format!("h200-{i:02}").into();
        for m in v["measurements"].as_array_mut().unwrap() {
            let name = m["name"].as_str().unwrap().to_string();
            // ±1.5% in seven steps, a different step per figure and node.
            let step = ((i * 37 + name.len() * 11) % 7) as f64 - 3.0;
            let mut x = m["value"].as_f64().unwrap();
            x = if name == "burn_temperature_c" {
                x + step * 0.5
            } else {
                x * (1.0 + step * 0.005)
            };
            match (i, name.as_str()) {
                (3, "memory_copy_bandwidth") => x *= 0.85,
                (5, "burn_temperature_c") => x += 15.0,
                (7, "burn_power_w") => x *= 0.8,
                (9, "context_create_ms") => x *= 1.06,
                _ => {}
            }
            m["value"] = serde_json::json!(x);
        }
        if i % 5 == 2 {
            v["machine"]["driver_version"] = "580.95.05".into();
            v["machine"]["kernel"] = "Linux version 6.8.0-60-generic (buildd@x) #1 SMP".into();
            v["gpus"][0]["vbios"] = "96.00.A5.00.1B".into();
        }
        for f in v["findings"].as_array_mut().unwrap() {
            if i == 11 && f["check"] == "pcie.link" {
                f["status"] = "fail".into();
                f["message"] = "GPU 0 (0000:00:06.0): link at x8".into();
            }
            if i % 6 == 1 && f["check"] == "cuda.framework" {
                f["evidence"]["torch"] = "2.9.0+cu130".into();
            }
            if i % 8 == 4 && f["check"] == "cuda.libraries" {
                let copies = f["evidence"]["copies"].as_array_mut();
                for c in copies.into_iter().flatten() {
                    *c = c.as_str().unwrap().replace("2.28.3", "2.27.7").into();
                }
            }
        }
        std::fs::write(
            dir.path().join(format!("h200-{i:02}.json")),
            serde_json::to_string_pretty(&v).unwrap(),
        )
        .unwrap();
    }
    for i in 0..4 {
        write(
            dir.path(),
            &format!("pair-{i}.json"),
            &node(&format!("pair-{i}"), |m| m, |_| {}),
        );
    }
    write(
        dir.path(),
        "pair-x8.json",
        &node(
            "pair-x8",
            |m| m.gpu(1, |g| g.pcie.width_current = Reading::Value(8)),
            |m| slower_copy(m, 0.9),
        ),
    );
    let twin = node("twin", |m| m, |_| {});
    write(dir.path(), "twin-1.json", &twin);
    write(dir.path(), "twin-2.json", &twin);
    write(
        dir.path(),
        "lonely-report.json",
        &node("lonely", |m| m, |_| {}),
    );
    std::fs::write(
        dir.path().join("lonely.json"),
        "{ \"schema\": \"gpuaudit.rep",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("zz-bench.json"),
        r#"{"schema": "gpuaudit.bench/1", "measured": {}}"#,
    )
    .unwrap();
    dir
}

/// The mixed fleet in every format (its paths relative: the command runs in its directory),
/// byte for byte as the command wrote it before it streamed its reports (the snapshots were
/// taken at 1ca2b37, which kept every report in memory).
#[test]
fn a_mixed_fleet_reads_as_it_did_before_the_reports_were_streamed() {
    let dir = mixed_fleet();
    for (format, threshold) in [("json", "10"), ("table", "10"), ("md", "10"), ("json", "5")] {
        let out = gpuaudit()
            .current_dir(dir.path())
            .args(["fleet", ".", "--format", format, "--threshold", threshold])
            .env("COLUMNS", "100")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{format}");
        let text = String::from_utf8(out.stdout).unwrap();
        insta::assert_snapshot!(format!("fleet-mixed-{format}-{threshold}"), text);
    }
}
