//! gpuaudit as a user who is not root, on the live machine and on a snapshot with root-only
//! files: it runs (exit 0 or 1, no panic), every check is in the report, and a finding that
//! could not read a file says so with the permission that was missing.
//!
//! It needs root to become `nobody` (`common::other_user`: the binary and the snapshots are
//! copied into a directory nobody can enter, since the checkout may be under /root, mode
//! 0700); as another user, or where root cannot drop its privileges, it says SKIPPED in one
//! line and passes. CI runs as root, with GPUAUDIT_REQUIRE_OTHER_USER=1 (a skip fails).

mod common;
use common::OtherUser;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Where the test runs as nobody, or `None` after saying in one line why it cannot.
fn scratch() -> Option<OtherUser> {
    match common::other_user() {
        Ok(s) => Some(s),
        Err(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// `gpuaudit ARGS --format json` as nobody: (exit code, report, stderr).
fn as_nobody(s: &OtherUser, args: &[&str], home: &str) -> (i32, Value, String) {
    let mut cmd = Command::new(&s.bin);
    cmd.args(args)
        .args(["--format", "json"])
        .env("HOME", home)
        .env("GPUAUDIT_NOW", "2026-01-01T00:00:00Z")
        // The working directory must be one nobody can enter.
        .current_dir(s.dir.path());
    common::as_nobody(&mut cmd);
    let out = cmd.output().expect("gpuaudit starts as nobody");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("exit {code}, not a JSON report ({e}): {stderr}"));
    (code, report, stderr)
}

fn complete_and_calm(code: i32, report: &Value, stderr: &str) {
    assert!(code < 2, "exit {code}: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let ids = common::check_ids(report);
    let all = common::gpuaudit().arg("checks").output().unwrap();
    let listed = String::from_utf8_lossy(&all.stdout).into_owned();
    for line in listed.lines().filter(|l| !l.trim().is_empty()) {
        let id = line.split_whitespace().next().unwrap_or("");
        if id.contains('.') {
            assert!(ids.contains(id), "{id} is not in the report");
        }
    }
    for f in report["findings"].as_array().unwrap() {
        if f["status"] == "skip" {
            assert!(
                !f["message"].as_str().unwrap_or("").trim().is_empty(),
                "a skip without its reason: {f}"
            );
        }
    }
}

#[test]
fn the_live_machine_as_nobody() {
    let Some(s) = scratch() else { return };
    let (code, report, stderr) = as_nobody(&s, &["--facts-only"], "/nonexistent");
    complete_and_calm(code, &report, &stderr);
    // A directory only root may enter, on (nearly) every Linux machine: /root. With HOME
    // there (`sudo -u` without -H keeps it), the storage checks look at its caches and cannot
    // tell whether they exist: they say so instead of "does not exist".
    let root_mode = std::fs::metadata("/root").map(|m| m.permissions().mode() & 0o777);
    if root_mode.is_ok_and(|m| m & 0o001 == 0) {
        let (code, report, stderr) = as_nobody(&s, &["--facts-only"], "/root");
        complete_and_calm(code, &report, &stderr);
        let mounts = common::findings(&report, "storage.mounts");
        for cache in ["/root/.cache/torch", "/root/.cache/huggingface/hub"] {
            assert!(
                mounts.iter().any(|f| f["status"] == "skip"
                    && f["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with(&format!("cannot look at {cache} ("))
                            && m.ends_with(&format!("{cache}: permission denied")))),
                "{cache}: {mounts:?}"
            );
        }
    } else {
        eprintln!("/root can be entered by others here: the HOME=/root case is not tried");
    }
}

#[test]
fn a_snapshot_with_root_only_files_as_nobody() {
    let Some(s) = scratch() else { return };
    // Both snapshots' files, made root-only where a machine has them so (sshd_config is 0600
    // on RHEL and SUSE; the kernel log needs CAP_SYSLOG; /proc/sys files can be 0600).
    for (name, root_only) in [
        (
            "host-clean",
            &["etc/ssh/sshd_config", "proc/mounts", "cmd/env.json"][..],
        ),
        (
            "h200-x2-live",
            &["cmd/dmesg-xid.txt", "proc/sys/net/core/somaxconn"][..],
        ),
    ] {
        let snap = s.dir.path().join(name);
        common::copy_dir(&common::fixture(name), &snap);
        open_to_all(&snap);
        for rel in root_only {
            let p = snap.join(rel);
            assert!(p.is_file(), "{name} has no {rel}");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let (code, report, stderr) =
            as_nobody(&s, &["--root", snap.to_str().unwrap()], "/nonexistent");
        complete_and_calm(code, &report, &stderr);
        let said = |check: &str| -> Vec<String> {
            common::findings(&report, check)
                .iter()
                .map(|f| format!("{} {} {}", f["status"], f["message"], f["evidence"]))
                .collect()
        };
        let denied = |check: &str, path: &str| {
            let all = said(check);
            assert!(
                all.iter().any(|f| f.starts_with("\"skip\"")
                    && f.contains(&format!("{path}: permission denied"))),
                "{name}: {check} does not say {path} was denied: {all:?}"
            );
        };
        match name {
            "host-clean" => {
                denied("env.ssh", "/etc/ssh/sshd_config");
                denied("storage.mounts", "/proc/mounts");
                denied("host.shm", "/proc/mounts");
                denied("cuda.env", "cmd/env.json");
            }
            _ => {
                denied("net.somaxconn", "/proc/sys/net/core/somaxconn");
                // memory.errors judges what it could read and names the kernel log it
                // could not in its evidence.
                for f in common::findings(&report, "memory.errors") {
                    let why = f["evidence"]["xid_events_unavailable"]
                        .as_str()
                        .unwrap_or("");
                    assert!(why.contains("permission denied"), "{f}");
                }
            }
        }
    }
}

/// Directories 0755 and files 0644, as a snapshot someone sent would be.
fn open_to_all(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            open_to_all(&p);
        } else if p.is_file() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}
