//! Helpers for the tests that run the real binary.

#![allow(dead_code)]

use assert_cmd::Command;
use gpuaudit_core::Status;
use serde_json::Value;
use std::path::PathBuf;

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots")
}

/// The published outputs of other people's machines (fixtures/real, each with its provenance).
pub fn real_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real")
}

/// A fixture by name: "h200-x2-vm" lies under fixtures/snapshots, "real/a10g-r515" under
/// fixtures/real.
pub fn fixture(name: &str) -> PathBuf {
    match name.strip_prefix("real/") {
        Some(slug) => real_fixtures().join(slug),
        None => fixtures().join(name),
    }
}

fn dirs_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_dir() && p.join("meta.json").is_file())
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// Every fixture: each snapshot directory under fixtures/snapshots by name, then each under
/// fixtures/real as "real/<slug>". A new fixture directory is picked up by every test that
/// goes over all of them.
pub fn all_fixtures() -> Vec<String> {
    let mut names = dirs_in(&fixtures());
    assert!(
        !names.is_empty(),
        "no fixture under {}",
        fixtures().display()
    );
    names.extend(
        dirs_in(&real_fixtures())
            .into_iter()
            .map(|n| format!("real/{n}")),
    );
    names
}

/// A copy of a directory (a fixture, to change files in).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

pub fn gpuaudit() -> Command {
    let mut c = Command::cargo_bin("gpuaudit").expect("the gpuaudit binary is built");
    c.env("NO_COLOR", "1");
    c
}

/// Audit a fixture snapshot with JSON output: (exit code, report).
pub fn audit(name: &str, extra: &[&str]) -> (i32, Value) {
    let out = gpuaudit()
        .arg("audit")
        .arg("--root")
        .arg(fixture(name))
        .args(["--format", "json"])
        .args(extra)
        .output()
        .expect("gpuaudit runs");
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "{name}: stdout is not JSON ({e}); exit {code}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (code, report)
}

/// The check ids that have at least one finding in a report.
pub fn check_ids(report: &Value) -> std::collections::BTreeSet<String> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["check"].as_str().map(str::to_string))
        .collect()
}

pub fn findings<'a>(report: &'a Value, check: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .map(|a| a.iter().filter(|f| f["check"] == check).collect())
        .unwrap_or_default()
}

/// The statuses a check reported for one GPU (`None`: the machine-level findings).
pub fn statuses(report: &Value, check: &str, gpu: Option<u64>) -> Vec<String> {
    findings(report, check)
        .into_iter()
        .filter(|f| f["gpu"].as_u64() == gpu)
        .map(|f| f["status"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The worst status a check reported for one GPU (Status's own order), "none" where it
/// reported nothing about it.
pub fn worst(report: &Value, check: &str, gpu: Option<u64>) -> String {
    statuses(report, check, gpu)
        .into_iter()
        .map(|s| {
            serde_json::from_value::<Status>(Value::String(s.clone()))
                .unwrap_or_else(|e| panic!("{check}: status '{s}': {e}"))
        })
        .max()
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|| "none".into())
}

/// "status check gpu message" per finding, for snapshot tests.
pub fn digest(report: &Value) -> String {
    let mut s = String::new();
    for f in report["findings"].as_array().into_iter().flatten() {
        let gpu = f["gpu"]
            .as_u64()
            .map(|g| g.to_string())
            .unwrap_or_else(|| "-".into());
        s.push_str(&format!(
            "{:<4} {:<22} {:<2} {}\n",
            f["status"].as_str().unwrap_or("?"),
            f["check"].as_str().unwrap_or("?"),
            gpu,
            f["message"].as_str().unwrap_or("?")
        ));
    }
    s
}

/// Render a fixture with the real binary in `format` (table, md, html), with `extra`
/// arguments: (exit code, output). Run from the workspace with the fixture's relative path
/// (`fixtures/snapshots/NAME`), so that the output is the same in any checkout.
pub fn render(name: &str, format: &str, extra: &[&str]) -> (i32, String) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let relative = match name.strip_prefix("real/") {
        Some(slug) => format!("fixtures/real/{slug}"),
        None => format!("fixtures/snapshots/{name}"),
    };
    let out = gpuaudit()
        .current_dir(root)
        .arg("--root")
        .arg(relative)
        .args(["--format", format])
        .args(extra)
        .env("COLUMNS", "80")
        // The report says when it ran: one clock, so that the views' snapshots hold.
        .env("GPUAUDIT_NOW", "2026-12-01T10:00:00Z")
        .output()
        .expect("gpuaudit runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A report with everything `--full` measures, on `n` healthy H200s (the figures of
/// `gpuaudit_core::testing::measured::full_run`), after `change`.
pub fn measured_report(
    n: u32,
    change: impl FnOnce(&mut gpuaudit_core::facts::MeasuredFacts),
) -> gpuaudit_core::Report {
    use gpuaudit_core::testing::{measured, Machine};
    let facts = Machine::healthy("h200-sxm-141gb", n)
        .measured(|m| {
            measured::full_run(m, n);
            change(m);
        })
        .build();
    let policy = gpuaudit_core::Policy {
        full: true,
        ..gpuaudit_core::Policy::default()
    };
    gpuaudit_core::Report::build(&facts, &policy)
}

/// Running gpuaudit as another user (`nobody`, uid and gid 65534), for the tests that need
/// permissions to apply: root reads every file whatever its mode.
///
/// A newcomer often clones as root into /root (mode 0700): `nobody` cannot reach anything
/// under it, neither the binary in the target directory nor a fixture. So the binary is
/// copied into a directory made for the test that every user can enter (removed with it), and
/// the test builds what the other user reads in there too ([`OtherUser::dir`]).
pub struct OtherUser {
    /// Mode 0755, in a temporary directory whose every ancestor others may enter.
    pub dir: tempfile::TempDir,
    /// The gpuaudit binary, copied into `dir` (mode 0755).
    pub bin: PathBuf,
}

/// The uid and gid the tests become.
pub const NOBODY: u32 = 65534;

/// Where `nobody` can work, or why it cannot (not root, no directory others can enter, the
/// privilege to change user dropped). The caller says it in one line, as "SKIPPED: ...", and
/// checks only what it can; where `GPUAUDIT_REQUIRE_OTHER_USER=1` (CI, as root) it fails
/// instead.
pub fn other_user() -> Result<OtherUser, String> {
    let why = other_user_inner();
    if let Err(e) = &why {
        if std::env::var("GPUAUDIT_REQUIRE_OTHER_USER").as_deref() == Ok("1") {
            panic!("GPUAUDIT_REQUIRE_OTHER_USER=1, but the tests cannot run as nobody: {e}");
        }
    }
    why
}

fn other_user_inner() -> Result<OtherUser, String> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("not root: cannot become nobody".into());
    }
    // $TMPDIR first; where others cannot enter it (a TMPDIR under /root), the usual ones.
    let candidates = [
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
        PathBuf::from("/dev/shm"),
    ];
    let base = candidates
        .iter()
        .find(|d| d.is_dir() && others_can_enter(d))
        .ok_or_else(|| {
            format!(
                "no temporary directory that nobody can enter ({})",
                candidates
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    let dir = tempfile::Builder::new()
        .prefix("gpuaudit-other-user-")
        .tempdir_in(base)
        .map_err(|e| format!("cannot make a directory in {}: {e}", base.display()))?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", dir.path().display()))?;
    let bin = dir.path().join("gpuaudit");
    let built = assert_cmd::cargo::cargo_bin("gpuaudit");
    std::fs::copy(&built, &bin).map_err(|e| format!("cannot copy {}: {e}", built.display()))?;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", bin.display()))?;
    // Can this process give up root at all (a container without CAP_SETUID cannot)?
    let mut probe = std::process::Command::new(&bin);
    probe
        .arg("--version")
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    as_nobody(&mut probe);
    match probe.status() {
        Ok(s) if s.success() => Ok(OtherUser { dir, bin }),
        Ok(s) => Err(format!("gpuaudit --version as nobody exited with {s}")),
        Err(e) => Err(format!("cannot start a process as uid {NOBODY}: {e}")),
    }
}

/// Whether users other than the owner may enter `dir` and every directory above it.
pub fn others_can_enter(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors().all(|d| {
        std::fs::metadata(d).is_ok_and(|m| m.is_dir() && m.permissions().mode() & 0o001 != 0)
    })
}

/// Make `cmd` run as nobody (no supplementary groups, then gid, then uid), after whatever
/// `pre_exec` it has already.
pub fn as_nobody(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(NOBODY) != 0
                || libc::setuid(NOBODY) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The process `cmd` starts may map at most `bytes` of address space (RLIMIT_AS, set between
/// fork and exec): a reader that grows without bound fails in it instead of taking the
/// machine. With one malloc arena (`MALLOC_ARENA_MAX=1`), since each reserves 64 MB a thread.
pub fn limit_address_space(cmd: &mut std::process::Command, bytes: u64) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `child`'s exit status, or `None` where it ran past `deadline` (then it is killed and
/// reaped): a test that would hang fails instead.
pub fn wait_within(
    child: &mut std::process::Child,
    deadline: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("the child can be waited for") {
            return Some(s);
        }
        if t0.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A rehearsal small enough for a shared CI machine (`gpuaudit rehearse` with these flags).
pub const SMALL_REHEARSAL: &[&str] = &[
    "rehearse",
    "--seconds",
    "5",
    "--dataset-mb",
    "2",
    "--batch",
    "4",
    "--sample-kb",
    "16",
    "--tensor-kb",
    "16",
    "--readers",
    "1",
    "--workers",
    "1",
    "--transform-cost",
    "1",
    "--format",
    "json",
];

/// [`SMALL_REHEARSAL`] without its `--format json`: the view a person gets.
pub fn small_rehearsal_as_table() -> Vec<&'static str> {
    SMALL_REHEARSAL
        .iter()
        .copied()
        .take_while(|a| *a != "--format")
        .collect()
}
