//! Snapshots built to break the audit: FIFOs and device links where files should be, links
//! that leave the snapshot, files of gigabytes, entity and Include bombs, escape sequences in
//! every text that reaches the terminal. Each is audited by the real binary under a deadline
//! and a memory limit; it must finish, give a complete report (every check id), show nothing
//! from outside the snapshot and write no raw control character to the terminal.

mod common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Long enough for a debug build on a busy machine; a blocked open() never ends.
const DEADLINE: Duration = Duration::from_secs(20);
/// Address space for the audit: the binary, its threads and what it reads. The file cap is
/// 16 MiB (700,000 GPUs in 14 MB peak at 125 MB resident), so a few hundred MB is plenty;
/// 24 GB for `/dev/zero` or 7 GB for an entity bomb is far past it.
const MEMORY_LIMIT: u64 = 512 << 20;
/// Written in files outside the snapshot; must never appear in a report.
const OUTSIDE: &str = "MARKER-OUTSIDE-THE-SNAPSHOT";

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// A copy of a fixture as `<tmp>/snap`, next to `<tmp>/outside` (a file outside the snapshot
/// that holds [`OUTSIDE`]).
struct Snap {
    tmp: tempfile::TempDir,
}

impl Snap {
    fn new() -> Snap {
        Snap::made(tempfile::tempdir().unwrap())
    }

    /// In the other user's directory, which it can enter wherever the checkout is.
    fn for_other_user(other: &common::OtherUser) -> Snap {
        let tmp = tempfile::tempdir_in(other.dir.path()).unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        Snap::made(tmp)
    }

    fn made(tmp: tempfile::TempDir) -> Snap {
        common::copy_dir(&common::fixture("host-clean"), &tmp.path().join("snap"));
        fs::write(tmp.path().join("outside"), format!("{OUTSIDE}\n")).unwrap();
        Snap { tmp }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("snap")
    }

    fn outside(&self) -> PathBuf {
        self.tmp.path().join("outside")
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    /// Replace `rel` (a file, a directory or a link) with nothing.
    fn remove(&self, rel: &str) {
        let p = self.path(rel);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => fs::remove_dir_all(&p).unwrap(),
            Ok(_) => fs::remove_file(&p).unwrap(),
            Err(_) => {}
        }
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        self.remove(rel);
        fs::write(self.path(rel), content).unwrap();
    }

    fn fifo(&self, rel: &str) {
        self.remove(rel);
        let c = std::ffi::CString::new(self.path(rel).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn link(&self, rel: &str, target: impl AsRef<Path>) {
        self.remove(rel);
        symlink(target, self.path(rel)).unwrap();
    }

    /// Audit it with the real binary under [`DEADLINE`] and [`MEMORY_LIMIT`].
    fn audit(&self, format: &str) -> Run {
        run_audit(&self.root(), format, None)
    }
}

/// The binary on `root`: killed (and the test failed) past the deadline; its address space
/// limited; as the `nobody` user, with the binary copied where it can reach it, where
/// `other` is given (root reads every file whatever its permissions, so "permission denied"
/// needs another user).
fn run_audit(root: &Path, format: &str, other: Option<&common::OtherUser>) -> Run {
    // Once with openat2, once with the walk that stands in for it on old kernels: the same
    // report either way.
    let kernel = run_once(root, format, other, false);
    let walked = run_once(root, format, other, true);
    assert_eq!(
        (kernel.code, &kernel.stdout, &kernel.stderr),
        (walked.code, &walked.stdout, &walked.stderr),
        "{}: openat2 and the walk disagree",
        root.display()
    );
    kernel
}

fn run_once(root: &Path, format: &str, other: Option<&common::OtherUser>, walk: bool) -> Run {
    let out_dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (out_dir.path().join("out"), out_dir.path().join("err"));
    let bin = match other {
        Some(o) => o.bin.clone(),
        None => assert_cmd::cargo::cargo_bin("gpuaudit"),
    };
    let mut cmd = Command::new(bin);
    cmd.args(["--format", format, "--color", "never", "--root"])
        .arg(root)
        .env("NO_COLOR", "1")
        // One malloc arena: each one reserves 64 MB of address space per thread.
        .env("MALLOC_ARENA_MAX", "1")
        .env("GPUAUDIT_NO_OPENAT2", if walk { "1" } else { "0" })
        // The two runs compared are dated alike.
        .env("GPUAUDIT_NOW", "2026-12-01T10:24:13Z")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap());
    common::limit_address_space(&mut cmd, MEMORY_LIMIT);
    if let Some(o) = other {
        common::as_nobody(&mut cmd);
        // The working directory must be one nobody can enter.
        cmd.current_dir(o.dir.path());
    }
    let mut child = cmd.spawn().expect("gpuaudit starts");
    let Some(status) = common::wait_within(&mut child, DEADLINE) else {
        panic!(
            "{}: gpuaudit still running after {DEADLINE:?}; killed",
            root.display()
        );
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap_or_default()).into_owned();
    Run {
        code: status.code(),
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// Exit 0 or 1 with a JSON report that has every check, nothing from outside the snapshot.
fn complete(run: &Run, what: &str) -> serde_json::Value {
    assert!(
        matches!(run.code, Some(0) | Some(1)),
        "{what}: exit {:?}; stderr: {}",
        run.code,
        run.stderr
    );
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}",
            &run.stdout[..200.min(run.stdout.len())]
        )
    });
    let seen = common::check_ids(&report);
    for c in gpuaudit_core::checks::all() {
        assert!(
            seen.contains(c.id),
            "{what}: {} missing from the report",
            c.id
        );
    }
    assert_clean(run, what);
    report
}

fn assert_clean(run: &Run, what: &str) {
    for (name, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !text.contains(OUTSIDE),
            "{what}: the outside file leaked into {name}"
        );
        assert!(
            !text.contains("root:x:0:0"),
            "{what}: /etc/passwd leaked into {name}"
        );
    }
}

fn raw_controls(s: &str) -> Vec<char> {
    s.chars()
        .filter(|&c| c.is_control() && c != '\n' && c != '\t')
        .collect()
}

#[test]
fn fifos_in_place_of_files_are_refused_not_waited_for() {
    for rel in [
        "proc/modules",
        "cmd/nvidia-smi-q.xml",
        "meta.json",
        "sys/bus/pci/devices/0000:00:06.0/driver",
        "etc/ssh/sshd_config",
        "cmd/env.json",
    ] {
        let s = Snap::new();
        s.fifo(rel);
        let run = s.audit("json");
        complete(&run, rel);
        // meta.json's reason is the snapshot's description, which the report does not carry.
        if rel != "meta.json" {
            let shown = rel
                .strip_prefix("cmd/")
                .map_or(format!("/{rel}"), str::to_string);
            let why = format!("{shown}: a FIFO, not a regular file: not read");
            assert!(
                run.stdout.contains(&why),
                "{rel}: the report does not say {why:?}"
            );
        }
    }
}

#[test]
fn device_links_resolve_inside_the_snapshot() {
    for target in [
        "/dev/tty",
        "/dev/zero",
        "../../../../../../../../../../dev/zero",
    ] {
        let s = Snap::new();
        s.link("meta.json", target);
        s.link("proc/version", target);
        let run = s.audit("json");
        let r = complete(&run, target);
        assert!(
            run.stdout.len() < 4 << 20,
            "{target}: a report of {} bytes",
            run.stdout.len()
        );
        assert_eq!(r["machine"]["kernel"], serde_json::Value::Null, "{target}");
    }
}

#[test]
fn links_out_of_the_snapshot_read_nothing_outside() {
    let s = Snap::new();
    let outside = s.outside();
    // Absolute, relative just far enough, relative far too far, and a real system file.
    s.link("proc/sys/kernel/hostname", &outside);
    s.link("proc/version", "../../outside");
    s.link(
        "etc/os-release",
        format!("{}{}", "../".repeat(30), outside.display()),
    );
    s.link("proc/cpuinfo", "/etc/passwd");
    // The XML and the driver's error as links to files outside with the marker in them.
    let xml = s.tmp.path().join("outside.xml");
    fs::write(
        &xml,
        format!(
            "<nvidia_smi_log><driver_version>1</driver_version><gpu id=\"00000000:00:06.0\">\
             <product_name>{OUTSIDE}</product_name></gpu></nvidia_smi_log>"
        ),
    )
    .unwrap();
    s.link("cmd/nvidia-smi-q.xml", &xml);
    let r = complete(&s.audit("json"), "links out");
    assert_eq!(r["machine"]["hostname"], serde_json::Value::Null);
    let s = Snap::new();
    s.remove("cmd/nvidia-smi-q.xml");
    s.link("cmd/driver-error.txt", s.outside());
    complete(&s.audit("json"), "driver-error link");
    let s = Snap::new();
    s.link("cmd/driver-error.txt", "/etc/passwd");
    let run = s.audit("table");
    assert!(matches!(run.code, Some(0) | Some(1)), "{}", run.stderr);
    assert_clean(&run, "driver-error link to /etc/passwd");
}

#[test]
fn sys_linked_to_the_hosts_sys_is_not_the_host() {
    let s = Snap::new();
    s.link("sys", "/sys");
    let run = s.audit("json");
    complete(&run, "sys -> /sys");
    assert!(
        run.stdout
            .contains("/sys/bus/pci/devices: too many levels of symbolic links"),
        "the snapshot's sys is a loop; the report should say so"
    );
    // Physical NICs of the auditing machine must not show up in the snapshot's report.
    for nic in fs::read_dir("/sys/class/net")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = nic.file_name().to_string_lossy().into_owned();
        if nic.path().join("device").exists() {
            assert!(
                !run.stdout.contains(&format!("\"{name}\"")),
                "the host's {name} appears in the snapshot's report"
            );
        }
    }
}

#[test]
fn sshd_include_bombs_finish_and_stay_inside() {
    let s = Snap::new();
    s.write(
        "etc/ssh/sshd_config",
        format!(
            "Include /etc/ssh/sshd_config.d/*\nInclude ../../../../../../{}\nInclude {}\n\
             PasswordAuthentication no\nPermitRootLogin no\n",
            s.outside().display(),
            s.outside().display()
        ),
    );
    // Outside the snapshot: a setting that would turn the verdict.
    fs::write(
        s.outside(),
        format!("PasswordAuthentication yes\n# {OUTSIDE}\n"),
    )
    .unwrap();
    for i in 0..60 {
        s.write(
            &format!("etc/ssh/sshd_config.d/{i:02}.conf"),
            "Include /etc/ssh/sshd_config.d/*\nX11Forwarding no\n",
        );
    }
    let run = s.audit("json");
    let r = complete(&run, "include bomb");
    let ssh: Vec<&serde_json::Value> = common::findings(&r, "env.ssh");
    assert!(
        ssh.iter().all(|f| f["message"]
            .as_str()
            .unwrap_or("")
            .contains("sshd refuses passwords")),
        "an Include outside the snapshot changed env.ssh: {ssh:?}"
    );
}

#[test]
fn xml_entity_bomb_and_a_flood_of_gpus_stay_small() {
    let s = Snap::new();
    let big = "a".repeat(1 << 20);
    s.write(
        "cmd/nvidia-smi-q.xml",
        format!(
            "<?xml version=\"1.0\"?>\n<!DOCTYPE nvidia_smi_log [<!ENTITY a \"{big}\">]>\n\
             <nvidia_smi_log><driver_version>{}</driver_version></nvidia_smi_log>\n",
            "&a;".repeat(1000)
        ),
    );
    let run = s.audit("json");
    let r = complete(&run, "entity bomb");
    // Refused before any expansion, and said to be a report that could not be read.
    let present = &common::findings(&r, "gpu.present")[0];
    let msg = present["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("the driver's report could not be read"),
        "{msg}"
    );
    assert!(msg.contains("declares an entity"), "{msg}");
    assert!(!run.stdout.contains("No NVIDIA GPU found"));
    assert!(
        run.stdout.len() < 1 << 20,
        "a report of {} bytes",
        run.stdout.len()
    );

    // 700,000 GPUs in 14 MB: the first 256 are read.
    let s = Snap::new();
    let mut xml = String::from("<nvidia_smi_log><driver_version>580.1</driver_version>");
    for _ in 0..700_000 {
        xml.push_str("<gpu id=\"0:1:0.0\"/>");
    }
    xml.push_str("</nvidia_smi_log>");
    s.write("cmd/nvidia-smi-q.xml", xml);
    let r = complete(&s.audit("json"), "700k GPUs");
    assert_eq!(r["gpus"].as_array().map(Vec::len), Some(256));
}

#[test]
fn a_huge_internal_dtd_subset_is_refused_in_time() {
    // 15 MiB of declarations that change nothing, under the 16 MiB file cap: nvidia-smi's own
    // DTD is 28 KB; this one is refused at 1 MiB, without reading on.
    let s = Snap::new();
    let decl = "<!ELEMENT a_name_of_some_length (#PCDATA)>\n";
    s.write(
        "cmd/nvidia-smi-q.xml",
        format!(
            "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log [\n{}]>\n<nvidia_smi_log>\
             <driver_version>580.1</driver_version></nvidia_smi_log>\n",
            decl.repeat((15 << 20) / decl.len())
        ),
    );
    let run = s.audit("json");
    let r = complete(&run, "huge internal subset");
    let msg = common::findings(&r, "gpu.present")[0]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        msg.contains("the driver's report could not be read"),
        "{msg}"
    );
    assert!(msg.contains("larger than 1024 KiB"), "{msg}");
}

#[test]
fn huge_files_are_reported_not_truncated() {
    let s = Snap::new();
    for rel in ["proc/cpuinfo", "cmd/nvidia-smi-q.xml", "meta.json"] {
        s.remove(rel);
        fs::File::create(s.path(rel))
            .unwrap()
            .set_len(10 << 30)
            .unwrap();
    }
    let run = s.audit("json");
    complete(&run, "sparse 10 GB");
    assert!(run
        .stdout
        .contains("cmd/nvidia-smi-q.xml: larger than 16 MiB, not read"));
    assert!(!run.stdout.contains("unexpected end"), "{}", run.stdout);
    // A report there but too large to read is not "no GPU".
    assert!(run.stdout.contains("the driver's report could not be read"));
    assert!(!run.stdout.contains("No NVIDIA GPU found"));
}

#[test]
fn control_characters_never_reach_the_terminal_raw() {
    let evil = "x\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[1;1H\u{9b}2J\u{9d}0;t\u{9c}\rPASS";
    let s = Snap::new();
    s.write("proc/sys/kernel/hostname", format!("{evil}\n"));
    s.write(
        "etc/os-release",
        format!("ID=ubuntu\nPRETTY_NAME=\"{evil}\"\n"),
    );
    s.write(
        "sys/bus/pci/devices/0000:00:07.0/driver",
        format!("nouveau{evil}\n"),
    );
    let env = serde_json::json!({
        "CUDA_VISIBLE_DEVICES": format!("0{evil}\n  PASS  gpu.present  forged"),
        "CUDA_LAUNCH_BLOCKING": evil,
        "HOME": "/root",
    });
    s.write("cmd/env.json", env.to_string());
    // XML 1.0 allows the C1 controls (raw and as character references), not ESC.
    let xml = fs::read_to_string(common::fixture("host-clean").join("cmd/nvidia-smi-q.xml"))
        .unwrap()
        .replacen(
            "<product_name>",
            "<product_name>\u{9b}2J\u{9d}0;title&#x9c;&#x85;",
            1,
        );
    s.write("cmd/nvidia-smi-q.xml", xml);
    // The JSON report keeps the text exactly.
    let r = complete(&s.audit("json"), "control characters (json)");
    assert!(r["machine"]["hostname"]
        .as_str()
        .unwrap()
        .contains('\u{1b}'));
    assert!(r["gpus"][0]["name"].as_str().unwrap().contains('\u{9b}'));
    for format in ["table", "md"] {
        let run = s.audit(format);
        assert!(
            matches!(run.code, Some(0) | Some(1)),
            "{format}: {}",
            run.stderr
        );
        assert_eq!(raw_controls(&run.stdout), Vec::<char>::new(), "{format}");
        assert_eq!(
            raw_controls(&run.stderr),
            Vec::<char>::new(),
            "{format} stderr"
        );
        assert!(
            !run.stdout
                .lines()
                .any(|l| l.trim_start().starts_with("PASS  gpu.present  forged")),
            "{format}: a forged line"
        );
        // Markdown escapes the backslash and the bracket too, so that it shows as written.
        let escaped = if format == "md" {
            "\\\\x1b\\]0;pwned"
        } else {
            "\\x1b]0;pwned"
        };
        assert!(
            run.stdout.contains(escaped),
            "{format}: escaped, not dropped"
        );
        assert_clean(&run, format);
    }
}

#[test]
fn markdown_escapes_html() {
    let s = Snap::new();
    s.write(
        "proc/sys/kernel/hostname",
        "<script>alert(1)</script><img src=x onerror=alert(2)>\n",
    );
    let run = s.audit("md");
    assert!(matches!(run.code, Some(0) | Some(1)), "{}", run.stderr);
    assert!(!run.stdout.contains("<script>") && !run.stdout.contains("<img"));
    assert!(run.stdout.contains("&lt;script&gt;"));
}

#[test]
fn meta_json_with_another_format_is_refused_in_one_line() {
    for (meta, shown) in [
        (r#"{"format": 7}"#, "format 7"),
        (
            r#"{"format": "gpuaudit-snapshot/2"}"#,
            "format \"gpuaudit-snapshot/2\"",
        ),
        (
            r#"{"format": ["gpuaudit-snapshot/1"]}"#,
            "format [\"gpuaudit-snapshot/1\"]",
        ),
    ] {
        let s = Snap::new();
        s.write("meta.json", meta);
        let run = s.audit("json");
        assert_eq!(run.code, Some(2), "{meta}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr
                .contains(&format!("unsupported snapshot {shown}")),
            "{meta}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty());
    }
}

/// Permission denied needs a user that permissions apply to: as root, the audit runs as
/// `nobody` ([`common::other_user`]), on a snapshot made in its directory and readable to it.
fn open_up(p: &Path) {
    let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
    for e in walk(p) {
        let mode = if e.is_dir() { 0o755 } else { 0o644 };
        let _ = fs::set_permissions(&e, fs::Permissions::from_mode(mode));
    }
}

fn walk(p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(p).into_iter().flatten().flatten() {
        let path = e.path();
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            out.extend(walk(&path));
        }
        out.push(path);
    }
    out
}

/// Who the permission tests run as: as root, `nobody` (with the binary and the snapshots
/// where it can reach them); as another user, that user, whom permissions bind already.
/// `Err` where root cannot become nobody: the test says so in one line and checks nothing
/// it could not.
fn permission_runner() -> Result<Option<common::OtherUser>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    common::other_user().map(Some)
}

#[test]
fn unreadable_snapshots_and_files_say_permission_denied() {
    let other = match permission_runner() {
        Ok(o) => o,
        Err(why) => {
            eprintln!("SKIPPED: permission denied needs another user, and {why}");
            return;
        }
    };
    let snap = || match &other {
        Some(o) => Snap::for_other_user(o),
        None => Snap::new(),
    };
    let s = snap();
    open_up(s.tmp.path());
    fs::set_permissions(s.root(), fs::Permissions::from_mode(0o000)).unwrap();
    let run = run_audit(&s.root(), "json", other.as_ref());
    fs::set_permissions(s.root(), fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot read snapshot directory")
            && run.stderr.contains("permission denied")
            && !run.stderr.contains("not a gpuaudit snapshot"),
        "{}",
        run.stderr
    );

    // An unreadable GPU sysfs directory is a reason, not a GPU less.
    let s = snap();
    open_up(s.tmp.path());
    let gpu_dir = s.path("sys/bus/pci/devices/0000:00:07.0");
    fs::set_permissions(&gpu_dir, fs::Permissions::from_mode(0o000)).unwrap();
    let run = run_audit(&s.root(), "json", other.as_ref());
    fs::set_permissions(&gpu_dir, fs::Permissions::from_mode(0o755)).unwrap();
    complete(&run, "unreadable GPU directory");
    assert!(
        run.stdout
            .contains("/sys/bus/pci/devices/0000:00:07.0/vendor: permission denied"),
        "{}",
        run.stdout
    );
}
