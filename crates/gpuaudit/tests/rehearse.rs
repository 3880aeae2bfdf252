//! `gpuaudit rehearse` on this machine (no GPU needed): the CPU stages run for real, the GPU
//! stages say why they could not, the exit status follows bench's, the dataset goes away.

mod common;

use serde_json::Value;

use common::SMALL_REHEARSAL as SMALL;

fn run(extra: &[&str], tmp: &std::path::Path) -> (i32, Value, String) {
    let out = common::gpuaudit()
        .args(SMALL)
        .args(extra)
        .env("TMPDIR", tmp)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .expect("gpuaudit runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}; stderr: {stderr}"));
    (out.status.code().unwrap_or(-1), v, stderr)
}

fn stage<'a>(v: &'a Value, key: &str) -> &'a Value {
    let r = &v["rehearsal"];
    r["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(r["gpu"]["stages"].as_array().into_iter().flatten())
        .find(|s| s["stage"] == key)
        .map(|s| &s["result"])
        .unwrap_or(&Value::Null)
}

#[test]
fn the_cpu_stages_run_and_the_gpu_stages_say_why_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, v, stderr) = run(&[], tmp.path());
    assert_eq!(v["schema"], "gpuaudit.rehearse/1");
    for key in ["read", "transform", "loader"] {
        let s = stage(&v, key);
        assert!(
            s["samples_per_s"].as_f64().unwrap_or(0.0) > 0.0,
            "{key}: {s}"
        );
    }
    let gpu_ran = v["rehearsal"]["gpu"].get("unavailable").is_none();
    let f = &v["findings"][0];
    assert_eq!(f["check"], "workload.pipeline");
    if gpu_ran {
        // On a GPU machine the exit status is the finding's.
        assert_eq!(code, i32::from(f["status"] == "fail"), "{v}");
    } else {
        // Nothing measured on a GPU: exit 1, as bench; the finding and stderr say why.
        assert_eq!(code, 1, "{v}");
        assert_eq!(f["status"], "skip");
        let msg = f["message"].as_str().unwrap();
        assert!(
            msg.starts_with("the GPU stages could not run: ")
                && msg.contains("the CPU stages alone: storage read "),
            "{msg}"
        );
        assert!(stderr.contains("the GPU stages could not run"), "{stderr}");
        assert!(v["rehearsal"]["gpu"]["unavailable"].is_string(), "{v}");
    }
    let names: Vec<&str> = v["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert!(names.contains(&"rehearse_read_samples_per_s"), "{names:?}");
    // The generated dataset is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().flatten().collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn a_slow_data_directory_shows_in_the_read_stage() {
    // Planted slow storage: an empty data directory gets a dataset of its own, read at
    // 0.5 MB/s; the transform alone runs far faster.
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (_, v, _) = run(
        &[
            "--data-dir",
            data.path().to_str().unwrap(),
            "--read-throttle-mbps",
            "0.5",
        ],
        tmp.path(),
    );
    let read = stage(&v, "read");
    let bps = read["bytes_per_s"].as_f64().unwrap();
    assert!(bps < 0.65e6 && bps > 0.2e6, "{read}");
    let transform = stage(&v, "transform")["samples_per_s"].as_f64().unwrap();
    assert!(
        transform > 2.0 * read["samples_per_s"].as_f64().unwrap(),
        "{v}"
    );
    let data_src = &v["rehearsal"]["data"];
    assert_eq!(data_src["generated"], true);
    assert_eq!(data_src["page_cache"], false);
    assert!(read["method"]
        .as_str()
        .unwrap()
        .contains("dropped from the page cache"));
    assert_eq!(v["rehearsal"]["config"]["read_throttle_mb_s"], 0.5);
    // The dataset written into the data directory is gone too.
    assert_eq!(std::fs::read_dir(data.path()).unwrap().count(), 0);
}

#[test]
fn bad_arguments_are_exit_2_with_one_line() {
    for (args, says) in [
        (
            &["rehearse", "--width", "1004"][..],
            "--width 1004: must be a multiple of 8",
        ),
        (
            &["rehearse", "--seconds", "1"][..],
            "--seconds 1: must be between 5 and 600",
        ),
        (
            &[
                "rehearse",
                "--data-dir",
                "/nonexistent/gpuaudit",
                "--seconds",
                "5",
            ][..],
            "--data-dir /nonexistent/gpuaudit: ",
        ),
        (
            &["bench", "rehearse"][..],
            "the rehearsal is `gpuaudit rehearse`",
        ),
    ] {
        let out = common::gpuaudit().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn the_check_is_listed_and_explained() {
    let out = common::gpuaudit().arg("checks").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("workload.pipeline"));
    let out = common::gpuaudit()
        .args(["explain", "workload.pipeline"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gpuaudit rehearse"), "{text}");
}

/// The rehearsal prints a table or JSON: another format is refused by the command line.
#[test]
fn rehearse_refuses_other_formats() {
    let out = common::gpuaudit()
        .args(["rehearse", "--format", "md"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("possible values: table, json"), "{err}");
}
