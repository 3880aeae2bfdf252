//! The command line itself: typed choices, completions and man pages, output into a closed
//! pipe or onto a full disk, bench and burn without a GPU, explain's lookup.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuaudit"));
    c.env("NO_COLOR", "1");
    c
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The commands whose output a user pipes or redirects, with the exit status each has when
/// its output is read (the audit's is its verdict).
fn commands(dir: &Path) -> Vec<(Vec<String>, i32)> {
    let saved = dir.join("report.json");
    let (code, report) = audit("h200-x8-nvswitch", &[]);
    std::fs::write(&saved, report.to_string()).unwrap();
    let root = fixture("h200-x8-nvswitch").display().to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    vec![
        (s(&["checks"]), 0),
        (s(&["models"]), 0),
        (s(&["models", "--format", "json"]), 0),
        (s(&["explain", "pcie.link"]), 0),
        (s(&["schema"]), 0),
        (s(&["completions", "bash"]), 0),
        (s(&["man"]), 0),
        (s(&["--help"]), 0),
        (s(&["--version"]), 0),
        (s(&["report", &saved.display().to_string()]), 0),
        // One node: the fleet fails where the audit failed.
        (s(&["fleet", &saved.display().to_string()]), code),
        (
            s(&["fleet", &saved.display().to_string(), "--format", "json"]),
            code,
        ),
        (s(&["--root", &root, "--format", "table"]), code),
        (s(&["--root", &root, "--format", "json"]), code),
        (s(&["--root", &root, "--format", "html"]), code),
    ]
}

/// A pipe whose read end is already closed: the first write fails with EPIPE.
fn closed_pipe() -> Stdio {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Stdio::from(write)
}

#[test]
fn a_closed_pipe_stops_the_output_quietly() {
    let d = tempfile::tempdir().unwrap();
    for (args, code) in commands(d.path()) {
        let o = bin().args(&args).stdout(closed_pipe()).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
    }
}

#[test]
fn a_reader_that_leaves_after_one_line_is_no_error() {
    // As `| head -1`: the first line is read, then the pipe is closed under the writer.
    let d = tempfile::tempdir().unwrap();
    for (args, code) in commands(d.path()) {
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?}");
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_full_disk_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    for (args, _) in commands(d.path()) {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = bin().args(&args).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        assert!(
            e.starts_with("gpuaudit: cannot write to standard output: No space left on device"),
            "{args:?}: {e}"
        );
    }
    // A report file on a full disk says which file.
    let o = bin()
        .args(["--output", "/dev/full", "--format", "json", "--root"])
        .arg(fixture("h200-x2-vm"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("gpuaudit: cannot write /dev/full: No space left on device"),
        "{}",
        stderr(&o)
    );
}

fn has_gpu() -> bool {
    let o = bin()
        .args(["--facts-only", "--format", "json"])
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    r["gpus"].as_array().is_some_and(|g| !g.is_empty())
}

#[test]
fn bench_and_burn_without_a_gpu_could_not_run() {
    if has_gpu() {
        eprintln!("this machine has a GPU: the no-GPU exit status is not tested here");
        return;
    }
    for args in [
        vec!["bench"],
        vec!["bench", "pcie"],
        vec!["bench", "--format", "json"],
        vec!["burn", "5"],
    ] {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
        let what = args[0];
        assert!(
            e.starts_with(&format!(
                "gpuaudit: {what}: could not run: no NVIDIA GPU found"
            )),
            "{args:?}: {e}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn bench_and_burn_refuse_bad_arguments() {
    for (args, want) in [
        (vec!["burn", "0"], "SECS must be between 1 and 86400"),
        (vec!["bench", "sorting"], "no measurement 'sorting'"),
        (
            vec!["bench", "--format", "md"],
            "invalid value 'md' for '--format",
        ),
    ] {
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn explain_ids_are_case_insensitive_with_did_you_mean() {
    let want = bin().args(["explain", "pcie.link"]).output().unwrap();
    for id in ["PCIE.LINK", "Pcie.Link", " pcie.link "] {
        let o = bin().args(["explain", id]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{id}");
        assert_eq!(o.stdout, want.stdout, "{id}");
    }
    for (typo, want) in [
        (
            "pcie.lnik",
            "gpuaudit: unknown check 'pcie.lnik'; did you mean pcie.link?\n",
        ),
        (
            "POWER.LIMTI",
            "gpuaudit: unknown check 'POWER.LIMTI'; did you mean power.limit?\n",
        ),
        (
            "gpu.presnet",
            "gpuaudit: unknown check 'gpu.presnet'; did you mean gpu.present?\n",
        ),
        (
            "nothing",
            "gpuaudit: unknown check 'nothing'; `gpuaudit checks` lists them\n",
        ),
    ] {
        let o = bin().args(["explain", typo]).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{typo}");
        assert_eq!(stderr(&o), want);
        assert!(o.stdout.is_empty());
    }
}

#[test]
fn help_lists_the_choices() {
    let o = bin().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for v in [
        "- general:",
        "- train:",
        "- inference:",
        "- hpc:",
        "- render:",
        "- table:",
        "- json:",
        "- md:",
        "- html:",
        "- auto:",
        "- always",
        "- never",
    ] {
        assert!(help.contains(v), "{v}: {help}");
    }
    let o = bin().args(["bench", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        help.contains("- table:") && help.contains("- json:"),
        "{help}"
    );
    assert!(!help.contains("- html:"), "{help}");
    let o = bin().args(["completions", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    for sh in ["bash", "zsh", "fish"] {
        assert!(help.contains(sh), "{sh}: {help}");
    }
    // The choices are checked by the parser: a wrong one names the right ones.
    let o = bin().args(["--color", "sometimes"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("[possible values: auto, always, never]"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn completions_know_the_commands_and_the_choices() {
    for shell in ["bash", "zsh", "fish"] {
        let o = bin().args(["completions", shell]).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", stderr(&o));
        let script = String::from_utf8_lossy(&o.stdout);
        for word in [
            "gpuaudit",
            "explain",
            "report",
            "completions",
            "inference",
            "html",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    // The bash script is one the shell reads without an error.
    let o = bin().args(["completions", "bash"]).output().unwrap();
    if let Ok(bash) = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        use std::io::Write;
        let mut bash = bash;
        bash.stdin.take().unwrap().write_all(&o.stdout).unwrap();
        let r = bash.wait_with_output().unwrap();
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    }
    let o = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn man_pages_of_every_command() {
    let o = bin().arg("man").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let page = String::from_utf8_lossy(&o.stdout);
    assert!(page.contains(".TH gpuaudit 1"), "{page}");
    for word in ["explain", "report", "\\-\\-profile"] {
        assert!(page.contains(word), "{word}");
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("man1");
    let o = bin().args(["man", "--out"]).arg(&dir).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    for page in [
        "gpuaudit.1",
        "gpuaudit-audit.1",
        "gpuaudit-report.1",
        "gpuaudit-fleet.1",
        "gpuaudit-explain.1",
        "gpuaudit-completions.1",
    ] {
        let text = std::fs::read_to_string(dir.join(page)).unwrap_or_default();
        assert!(text.contains(".TH"), "{page}");
    }
    let o = bin()
        .args(["man", "--out", "/dev/full/x"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
}
