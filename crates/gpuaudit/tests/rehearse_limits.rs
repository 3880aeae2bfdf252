//! `gpuaudit rehearse` refuses sizes whose products the machine cannot hold, before it
//! allocates or writes anything, and leaves nothing in $TMPDIR on any way out; its output
//! goes through the one writer (a full disk is one line and exit 2, a closed pipe is quiet).
//! The real binary, a private TMPDIR each, a deadline on every run.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::SMALL_REHEARSAL as SMALL;

fn gpuaudit(args: &[&str], tmp: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpuaudit"));
    c.args(args)
        .env("TMPDIR", tmp)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// Waits for `child` at most `limit` (killed past it: the test fails instead of hanging),
/// then reads what it wrote on stderr (piped).
fn finish(mut child: Child, limit: Duration) -> (ExitStatus, String) {
    let Some(status) = common::wait_within(&mut child, limit) else {
        panic!("gpuaudit rehearse ran past {limit:?}");
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status, err)
}

fn left_in(tmp: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

/// The binary with `args`: (status, stderr, stdout).
fn run(args: &[&str], tmp: &Path, limit: Duration) -> (ExitStatus, String, String) {
    let out = tempfile::NamedTempFile::new().unwrap();
    let child = gpuaudit(args, tmp)
        .stdout(Stdio::from(out.reopen().unwrap()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (st, err) = finish(child, limit);
    (st, err, std::fs::read_to_string(out.path()).unwrap())
}

#[test]
fn products_past_the_machine_are_refused_with_one_line_and_nothing_left() {
    // Every one past the 64 GiB cap: refused on any machine, however large.
    for (args, says) in [
        (
            &["--workers", "16", "--tensor-kb", "262144"][..],
            "gpuaudit rehearse: --batch 256 × --tensor-kb 262144 × 2 staged batches + (3 × \
             --workers 16 + 2 × --readers ",
        ),
        (
            &[
                "--readers",
                "256",
                "--workers",
                "16",
                "--sample-kb",
                "262144",
            ][..],
            "2 × --readers 256) × --sample-kb 262144 = 140.3 GiB, more than the ",
        ),
        (
            &["--batch", "65536", "--tensor-kb", "262144"][..],
            "--batch 65536 × --tensor-kb 262144 × 2 staged batches",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let all: Vec<&str> = ["rehearse", "--seconds", "5"]
            .iter()
            .chain(args)
            .copied()
            .collect();
        let t0 = Instant::now();
        let (st, err, out) = run(&all, tmp.path(), Duration::from_secs(60));
        assert_eq!(st.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(" allows"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
        // Refused before anything ran: no dataset, no measurement.
        assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    }
}

#[test]
fn huge_flag_values_are_a_clean_refusal_not_an_overflow() {
    for (args, says) in [
        (
            &["--sample-kb", "18446744073709551615"][..],
            "gpuaudit: --sample-kb 18446744073709551615: must be between 1 and 262144",
        ),
        (
            &["--tensor-kb", "18446744073709551615"][..],
            "gpuaudit: --tensor-kb 18446744073709551615: must be between 1 and 262144",
        ),
        (
            &["--dataset-mb", "18446744073709551615"][..],
            "gpuaudit: --dataset-mb 18446744073709551615: must be between 1 and 65536",
        ),
        (
            &["--workers", "4294967295", "--readers", "4294967295"][..],
            "gpuaudit: --readers 4294967295: must be between 1 and 256",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let all: Vec<&str> = ["rehearse"].iter().chain(args).copied().collect();
        let (st, err, _) = run(&all, tmp.path(), Duration::from_secs(60));
        assert_eq!(st.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim(), says, "{args:?}");
        assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
    }
}

#[test]
fn a_dataset_past_the_free_space_of_its_directory_is_refused() {
    // An empty data directory gets a dataset: 64 GiB rounded up to whole samples of 262143
    // KiB is 257 files, past the 64 GiB cap (and past half the free space of most disks).
    // The memory it needs (eight samples held, 2 GiB) fits a machine with 4 GiB available.
    let tmp = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let (st, err, _) = run(
        &[
            "rehearse",
            "--seconds",
            "5",
            "--data-dir",
            data.path().to_str().unwrap(),
            "--dataset-mb",
            "65536",
            "--sample-kb",
            "262143",
            "--tensor-kb",
            "1",
            "--readers",
            "1",
            "--workers",
            "1",
            "--batch",
            "1",
        ],
        tmp.path(),
        Duration::from_secs(60),
    );
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "gpuaudit rehearse: --dataset-mb 65536 as 257 files × --sample-kb 262143 written to \
             {} = 64.2 GiB, more than the ",
            data.path().display()
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(left_in(data.path()), Vec::<std::path::PathBuf>::new());
    assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
}

#[test]
fn a_full_disk_on_stdout_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let child = gpuaudit(SMALL, tmp.path())
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (st, err) = finish(child, Duration::from_secs(120));
    assert_eq!(st.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        ["gpuaudit: cannot write to standard output: No space left on device (os error 28)"],
        "{err}"
    );
    assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
}

#[test]
fn a_reader_that_went_away_ends_the_output_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = gpuaudit(SMALL, tmp.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let (st, err) = finish(child, Duration::from_secs(120));
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("cannot write"), "{err}");
    // The rehearsal's own status: 1 without a GPU (its note on stderr), else the finding's.
    assert!(matches!(st.code(), Some(0 | 1)), "{st:?}: {err}");
    assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
}

#[test]
fn a_signal_during_the_rehearsal_removes_its_dataset() {
    for (sig, code) in [(libc::SIGTERM, 143), (libc::SIGINT, 130)] {
        let tmp = tempfile::tempdir().unwrap();
        let child = gpuaudit(SMALL, tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Wait for the dataset to be written, then interrupt the stages.
        let end = Instant::now() + Duration::from_secs(60);
        while left_in(tmp.path()).is_empty() {
            assert!(Instant::now() < end, "no dataset appeared");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: a signal to the child this test started.
        unsafe {
            libc::kill(child.id() as i32, sig);
        }
        let (st, err) = finish(child, Duration::from_secs(60));
        use std::os::unix::process::ExitStatusExt;
        assert!(
            st.code() == Some(code) || st.signal() == Some(sig),
            "{st:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(left_in(tmp.path()), Vec::<std::path::PathBuf>::new());
    }
}
