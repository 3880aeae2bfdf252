//! deploy/slurm/prolog.sh with the real binary on snapshots and a stand-in `scontrol` that
//! records its arguments: it drains on a failed drain check, with the check and message as
//! the reason, and leaves the node alone otherwise.

mod common;
use std::path::Path;
use std::process::Command;

/// Runs the prolog on snapshot `name` with `env`: (exit code, what scontrol was asked).
fn prolog(name: &str, env: &[(&str, &str)]) -> (i32, String) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let calls = tmp.path().join("scontrol.calls");
    let fake = bin.join("scontrol");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done >> '{}'\n",
            calls.display()
        ),
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&fake)
        .status()
        .unwrap();
    let gpuaudit = assert_cmd::cargo::cargo_bin("gpuaudit");
    let snapshot = repo.join("fixtures/snapshots").join(name);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.arg(repo.join("deploy/slurm/prolog.sh"))
        .env("PATH", path)
        .env("GPUAUDIT", gpuaudit)
        .env("GPUAUDIT_ARGS", format!("--root {}", snapshot.display()))
        .env("SLURMD_NODENAME", "gpu-node-07")
        .env_remove("GPUAUDIT_DRAIN_CHECKS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let asked = std::fs::read_to_string(&calls).unwrap_or_default();
    (out.status.code().unwrap_or(-1), asked)
}

#[test]
fn the_prolog_drains_a_node_whose_drain_check_fails() {
    let (code, asked) = prolog("h200-x2-x8-link", &[]);
    assert_eq!(code, 0);
    let args: Vec<&str> = asked.lines().collect();
    assert_eq!(
        args[..3],
        ["update", "nodename=gpu-node-07", "state=drain"],
        "{asked}"
    );
    let reason = args[3];
    assert!(
        reason.starts_with("reason=gpuaudit: pcie.link: GPU 1 (00:07.0) trained at x8"),
        "{reason}"
    );
    assert!(!reason.contains('\n'));
    // Asked to reject the job too: exit 1 (Slurm requeues it).
    let (code, _) = prolog("h200-x2-x8-link", &[("GPUAUDIT_PROLOG_REJECT", "1")]);
    assert_eq!(code, 1);
}

#[test]
fn the_prolog_leaves_the_node_alone_when_no_drain_check_fails() {
    // pcie.link is not among the checks asked for.
    let (code, asked) = prolog(
        "h200-x2-x8-link",
        &[("GPUAUDIT_DRAIN_CHECKS", "gpu.present,memory.errors")],
    );
    assert_eq!((code, asked.as_str()), (0, ""));
    let (code, asked) = prolog("h200-x2-vm", &[]);
    assert_eq!((code, asked.as_str()), (0, ""));
    // An audit that cannot run (exit 2) drains nothing and fails no job.
    let (code, asked) = prolog("h200-x2-vm", &[("GPUAUDIT_ARGS", "--root /nonexistent")]);
    assert_eq!((code, asked.as_str()), (0, ""));
}
