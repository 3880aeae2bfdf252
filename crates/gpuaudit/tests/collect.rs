//! `gpuaudit collect` where it cannot do its job: a path that is a file or exists already, a
//! disk that fills up, two runs into one directory at once. Each exits 2 with every reason
//! said once.

mod common;
use common::*;
use std::os::unix::process::CommandExt;
use std::process::Command;

fn collect(out: &std::path::Path) -> std::process::Output {
    gpuaudit()
        .args(["collect", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_path_that_is_a_file_or_exists_is_refused_in_one_line() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let o = collect(&file);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("is a file, not a directory"), "{e}");
    let o = collect(d.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    // A parent that is a file: the reason once, not the error and its source both.
    let o = collect(&file.join("snap"));
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("gpuaudit: cannot create"), "{e}");
    let reason = e.rsplit(": ").next().unwrap().trim();
    assert_eq!(e.matches(reason).count(), 1, "{e}");
}

#[test]
fn a_full_disk_lists_every_file_not_written_and_exits_2() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("snap");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("gpuaudit"));
    cmd.args(["collect", "--out"]).arg(&out);
    // Files may grow to 512 bytes: /proc/cpuinfo and the mount table do not fit, meta.json
    // does. SIGXFSZ ignored, so a write past the limit fails with EFBIG instead of killing.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 512,
                rlim_max: 512,
            };
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let failed: Vec<&str> = e
        .lines()
        .filter(|l| l.contains("could not write"))
        .collect();
    assert!(failed.iter().any(|l| l.contains("proc/cpuinfo")), "{e}");
    // Every file that is missing or cut short is listed.
    let cpuinfo = std::fs::metadata(out.join("proc/cpuinfo")).map(|m| m.len());
    assert!(cpuinfo.map_or(true, |n| n <= 512));
    assert!(
        e.lines().last().unwrap().contains(&match failed.len() {
            1 => "1 file could not be written".to_string(),
            n => format!("{n} files could not be written"),
        }),
        "{e}"
    );
    assert!(out.join("meta.json").exists());
}

#[test]
fn two_collects_into_one_directory_one_succeeds() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("snap");
    let spawn = || {
        Command::new(assert_cmd::cargo::cargo_bin("gpuaudit"))
            .args(["collect", "--out"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(codes, [Some(0), Some(2)], "{} / {}", stderr(&a), stderr(&b));
    let loser = if a.status.code() == Some(2) { &a } else { &b };
    assert!(
        stderr(loser).contains("already exists"),
        "{}",
        stderr(loser)
    );
}
