//! NVSwitches and the NVIDIA Fabric Manager (nvlink.fabric): the switches' PCI functions, the
//! NVSwitch driver's device nodes, the nvidia-fabricmanager unit, whether nv-fabricmanager
//! runs, its version and its log. The live audit and a snapshot read the same files; a
//! recording reader keeps what cannot be copied as it is (the device nodes as empty files,
//! the matching processes as a list, the log as its bounded head and tail).

use crate::root::{join, RootFs};
use gpuaudit_core::facts::{FabricManager, FabricManagerLog, NvSwitch, NvSwitchFacts};
use gpuaudit_core::parse::fabric_manager::{is_nvswitch_device, parse_log, parse_version};
use gpuaudit_core::parse::sysfs;
use gpuaudit_core::reading::Reading;
use std::time::Duration;

pub const PCI_DEVICES: &str = "sys/bus/pci/devices";
pub const DEV: &str = "dev";
/// The NVSwitch driver's nodes: `nvidia-nvswitch0`, ... (`nvidia-nvswitchctl` is the control
/// node, there without a switch).
pub const NODE_PREFIX: &str = "nvidia-nvswitch";
pub const UNIT: &str = "nvidia-fabricmanager.service";
/// Where systemd looks for the unit, the administrator's first.
pub const UNIT_DIRS: &[&str] = &[
    "etc/systemd/system",
    "usr/lib/systemd/system",
    "lib/systemd/system",
];
/// The link `systemctl enable` makes (the unit's `WantedBy=multi-user.target`).
pub const WANTS: &str = "etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service";
pub const BINARY: &str = "usr/bin/nv-fabricmanager";
/// The kernel keeps 15 characters of a process's name: "nv-fabricmanager" is
/// "nv-fabricmanage" in /proc/<pid>/comm.
pub const COMM: &str = "nv-fabricmanage";
/// The NVLink Subnet Manager's process name (NVLink 5 boards).
pub const NVLSM_COMM: &str = "nvlsm";
pub const LOG: &str = "var/log/fabricmanager.log";
/// The log's first bytes read (its start names the version) and its last (the newest lines).
pub const LOG_HEAD_BYTES: u64 = 64 << 10;
pub const LOG_TAIL_BYTES: u64 = 256 << 10;
/// In a snapshot: the nv-fabricmanager processes ("PID COMM" per line), and the version
/// command's output.
pub const PROCESSES: &str = "cmd/fabricmanager-processes.txt";
pub const VERSION: &str = "cmd/nv-fabricmanager-version.txt";
/// At most this many device nodes are listed.
const MAX_NODES: usize = 256;

/// NVSwitch PCI functions: NVIDIA functions whose device id is an NVSwitch's.
pub fn switches(root: &RootFs) -> Reading<Vec<NvSwitch>> {
    let names = match root.list(PCI_DEVICES) {
        Ok(n) => n,
        Err(e) => return Reading::Unavailable(e),
    };
    let mut out = Vec::new();
    for name in names {
        let dir = join(PCI_DEVICES, &name);
        let id = |a: &str| -> Result<Option<u16>, String> {
            let rel = join(&dir, a);
            match root.read_text(&rel)? {
                Some(t) => Ok(sysfs::parse_hex_u16(&t)),
                None => Ok(None),
            }
        };
        match id("vendor") {
            Ok(Some(0x10de)) => {}
            Ok(_) => continue,
            Err(e) => return Reading::Unavailable(e),
        }
        match id("device") {
            Ok(Some(d)) if is_nvswitch_device(d) => out.push(NvSwitch {
                bus_id: name.to_ascii_lowercase(),
                device: d,
            }),
            Ok(_) => {}
            Err(e) => return Reading::Unavailable(e),
        }
    }
    Reading::Value(out)
}

fn is_node(name: &str) -> bool {
    name.strip_prefix(NODE_PREFIX)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The NVSwitch driver's device nodes under /dev.
pub fn device_nodes(root: &RootFs) -> Reading<Vec<String>> {
    // A snapshot always has the directory (collected from a snapshot without one, it says
    // "no node" where it might say "no listing", as collect always did).
    root.record_dir(DEV);
    if !root.is_live() && !root.exists(DEV) {
        return Reading::unavailable("snapshot has no /dev listing");
    }
    match root.list(DEV) {
        Ok(n) => {
            let nodes: Vec<String> = n
                .into_iter()
                .filter(|n| is_node(n))
                .take(MAX_NODES)
                .collect();
            // A device node is not copied: an empty file says it is there.
            for n in &nodes {
                root.record_marker(&join(DEV, n));
            }
            Reading::Value(nodes)
        }
        Err(e) => Reading::Unavailable(e),
    }
}

/// The unit file systemd would load, where one is installed.
pub fn unit_file(root: &RootFs) -> Reading<Option<String>> {
    let mut found = Reading::Value(None);
    for d in UNIT_DIRS {
        let rel = join(d, UNIT);
        // A snapshot keeps every unit installed (a copy), not only the first.
        root.keep(&rel);
        if !matches!(found, Reading::Value(None)) {
            continue;
        }
        match root.unrecorded().stat(&rel) {
            Ok(Some(_)) => found = Reading::Value(Some(crate::root::abs(&rel))),
            Ok(None) => {}
            Err(e) => found = Reading::Unavailable(e),
        }
        if !root.is_recording() && !matches!(found, Reading::Value(None)) {
            break;
        }
    }
    found
}

/// Whether `systemctl enable` made its link.
pub fn enabled(root: &RootFs) -> Reading<bool> {
    match root.stat(WANTS) {
        Ok(s) => Reading::Value(s.is_some()),
        Err(e) => Reading::Unavailable(e),
    }
}

/// The nv-fabricmanager and nvlsm processes, "PID COMM" each: from /proc where it lists
/// processes, else from a snapshot's list; a snapshot keeps the list (not /proc).
pub fn processes(root: &RootFs) -> Reading<Vec<String>> {
    let r = processes_of(&root.unrecorded());
    root.record_reading(PROCESSES, &r, |p| {
        p.iter().map(|l| format!("{l}\n")).collect()
    });
    r
}

fn processes_of(root: &RootFs) -> Reading<Vec<String>> {
    if !root.is_live() {
        match root.read_text(PROCESSES) {
            Ok(Some(t)) => {
                return Reading::Value(
                    t.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .take(MAX_NODES)
                        .map(str::to_string)
                        .collect(),
                )
            }
            Ok(None) => {}
            Err(e) => return Reading::Unavailable(e),
        }
    }
    // A /proc without process 1 lists no one else's: a snapshot without the list, or a /proc
    // mounted with hidepid.
    if !root.exists("proc/1") {
        return Reading::unavailable(if root.is_live() {
            "/proc shows no process 1 (mounted with hidepid): other users' processes are not visible"
        } else {
            "snapshot has no process list (cmd/fabricmanager-processes.txt)"
        });
    }
    let pids = match root.list("proc") {
        Ok(p) => p,
        Err(e) => return Reading::Unavailable(e),
    };
    let mut out = Vec::new();
    for pid in pids
        .iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
    {
        // A process that ended meanwhile has no comm to read: it is not running.
        if let Ok(Some(comm)) = root.read_text(&format!("proc/{pid}/comm")) {
            let comm = comm.trim();
            if comm == COMM || comm == NVLSM_COMM {
                out.push(format!("{pid} {comm}"));
            }
        }
    }
    Reading::Value(out)
}

/// The version from `nv-fabricmanager --version`'s output (live, or a snapshot's copy).
pub fn version_from(out: Result<String, String>) -> Reading<String> {
    match out {
        Ok(t) => match parse_version(&t) {
            Some(v) => Reading::Value(v),
            None => Reading::unavailable(format!(
                "nv-fabricmanager --version printed no version: '{}'",
                gpuaudit_core::parse::host::truncate(t.trim(), 80)
            )),
        },
        Err(e) => Reading::Unavailable(e),
    }
}

/// `nv-fabricmanager --version`, where it is installed.
pub fn live_version(root: &RootFs, timeout: Duration) -> Reading<String> {
    if !root.exists(BINARY) {
        return Reading::unavailable(format!("{}: not installed", crate::root::abs(BINARY)));
    }
    version_from(root.command(
        "nv-fabricmanager-version.txt",
        &crate::root::abs(BINARY),
        &["--version"],
        timeout,
    ))
}

/// A snapshot's copy of `nv-fabricmanager --version`.
pub fn snapshot_version(root: &RootFs) -> Reading<String> {
    match root.read_text(VERSION) {
        Ok(Some(t)) => version_from(Ok(t)),
        Ok(None) => Reading::unavailable(format!("snapshot has no {VERSION}")),
        Err(e) => Reading::Unavailable(e),
    }
}

/// The log's head and tail, as text.
pub fn log_text(root: &RootFs) -> Result<Option<String>, String> {
    root.read_head_tail(LOG, LOG_HEAD_BYTES, LOG_TAIL_BYTES)
}

pub fn log(root: &RootFs) -> Reading<FabricManagerLog> {
    match log_text(root) {
        Ok(Some(t)) => Reading::Value(parse_log(&t)),
        Ok(None) => Reading::unavailable(format!("{}: no such file", crate::root::abs(LOG))),
        Err(e) => Reading::Unavailable(e),
    }
}

/// A process line ("PID COMM") of the process named `comm`.
fn named(line: &str, comm: &str) -> bool {
    line.split_whitespace().nth(1) == Some(comm)
}

/// Everything nvlink.fabric reads; `version` from the command (live) or its copy.
pub fn read(root: &RootFs, version: Reading<String>) -> NvSwitchFacts {
    let procs = processes(root);
    NvSwitchFacts {
        switches: switches(root),
        device_nodes: device_nodes(root),
        fabric_manager: FabricManager {
            unit_file: unit_file(root),
            enabled: enabled(root),
            running: procs.clone().map(|p| p.iter().any(|l| named(l, COMM))),
            nvlsm_running: procs.map(|p| p.iter().any(|l| named(l, NVLSM_COMM))),
            version,
            log: log(root),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &std::path::Path, rel: &str, text: &str) {
        let p = root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// A machine's files: 2 NVSwitches and a GPU on the bus, the unit enabled, the fabric
    /// manager running, its log.
    fn machine() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        for (bus, dev) in [
            ("0000:05:00.0", "0x22a3"),
            ("0000:06:00.0", "0x22a3"),
            ("0000:18:00.0", "0x2335"),
        ] {
            write(r, &format!("sys/bus/pci/devices/{bus}/vendor"), "0x10de\n");
            write(
                r,
                &format!("sys/bus/pci/devices/{bus}/device"),
                &format!("{dev}\n"),
            );
            write(r, &format!("sys/bus/pci/devices/{bus}/class"), "0x068000\n");
        }
        write(r, "sys/bus/pci/devices/0000:00:01.0/vendor", "0x8086\n");
        write(r, "dev/nvidia-nvswitch0", "");
        write(r, "dev/nvidia-nvswitch1", "");
        write(r, "dev/nvidia-nvswitchctl", "");
        write(
            r,
            "usr/lib/systemd/system/nvidia-fabricmanager.service",
            "[Unit]\n",
        );
        write(r, WANTS, "");
        write(
            r,
            "cmd/fabricmanager-processes.txt",
            "2116 nv-fabricmanage\n",
        );
        write(r, VERSION, "Fabric Manager version is : 580.159.04\n");
        write(
            r,
            LOG,
            "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0\n",
        );
        d
    }

    #[test]
    fn reads_the_switches_the_unit_the_processes_and_the_log() {
        let d = machine();
        let root = RootFs::new(d.path());
        let f = read(&root, snapshot_version(&root));
        let s = f.switches.into_value().unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].bus_id, "0000:05:00.0");
        assert_eq!(s[0].device, 0x22a3);
        assert_eq!(
            f.device_nodes.into_value().unwrap(),
            vec!["nvidia-nvswitch0".to_string(), "nvidia-nvswitch1".into()]
        );
        let fm = f.fabric_manager;
        assert_eq!(
            fm.unit_file,
            Reading::Value(Some(
                "/usr/lib/systemd/system/nvidia-fabricmanager.service".into()
            ))
        );
        assert_eq!(fm.enabled, Reading::Value(true));
        assert_eq!(fm.running, Reading::Value(true));
        assert_eq!(fm.version, Reading::Value("580.159.04".into()));
        let log = fm.log.into_value().unwrap();
        assert_eq!(log.error_count, 1);
    }

    #[test]
    fn what_is_missing_is_said() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("sys/bus/pci/devices")).unwrap();
        let root = RootFs::new(d.path());
        let f = read(&root, snapshot_version(&root));
        assert_eq!(f.switches, Reading::Value(vec![]));
        assert_eq!(
            f.device_nodes.reason(),
            Some("snapshot has no /dev listing")
        );
        let fm = f.fabric_manager;
        assert_eq!(fm.unit_file, Reading::Value(None));
        assert_eq!(fm.enabled, Reading::Value(false));
        assert_eq!(
            fm.running.reason(),
            Some("snapshot has no process list (cmd/fabricmanager-processes.txt)")
        );
        assert!(fm
            .version
            .reason()
            .unwrap()
            .contains("snapshot has no cmd/nv-fabricmanager-version.txt"));
        assert_eq!(
            fm.log.reason(),
            Some("/var/log/fabricmanager.log: no such file")
        );
        // No PCI directory at all: not known.
        let e = tempfile::tempdir().unwrap();
        assert!(switches(&RootFs::new(e.path())).reason().is_some());
        // A version command that printed no version.
        assert!(version_from(Ok("usage: nv-fabricmanager".into()))
            .reason()
            .unwrap()
            .contains("printed no version"));
        assert_eq!(
            version_from(Err("x: timed out".into())).reason(),
            Some("x: timed out")
        );
    }

    #[test]
    fn device_nodes_are_the_numbered_ones() {
        assert!(is_node("nvidia-nvswitch0"));
        assert!(is_node("nvidia-nvswitch12"));
        assert!(!is_node("nvidia-nvswitch"));
        assert!(!is_node("nvidia-nvswitchctl"));
        assert!(!is_node("nvidia0"));
    }

    #[test]
    fn processes_are_found_by_their_comm_where_proc_lists_them() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "proc/1/comm", "systemd\n");
        write(r, "proc/2116/comm", "nv-fabricmanage\n");
        write(r, "proc/3000/comm", "nv-fabricmanager-x\n");
        write(r, "proc/self/comm", "nv-fabricmanage\n");
        let root = RootFs::new(r);
        assert_eq!(
            processes(&root),
            Reading::Value(vec!["2116 nv-fabricmanage".to_string()])
        );
        fs::remove_file(r.join("proc/2116/comm")).unwrap();
        assert_eq!(processes(&root), Reading::Value(vec![]));
    }

    #[test]
    fn a_collected_snapshot_reads_back_the_same_facts() {
        let d = machine();
        // The source as a machine would show it: processes in /proc, no list.
        fs::remove_file(d.path().join(PROCESSES)).unwrap();
        write(d.path(), "proc/1/comm", "systemd\n");
        write(d.path(), "proc/2116/comm", "nv-fabricmanage\n");
        let src = RootFs::new(d.path());
        let out = tempfile::tempdir().unwrap();
        let rec =
            std::sync::Arc::new(crate::root::Recorder::create(&out.path().join("snap")).unwrap());
        // The reading that records is the reading that reads.
        let recording = src.recording(rec.clone());
        let a = read(&recording, snapshot_version(&recording));
        assert_eq!(rec.summary().failed, Vec::<String>::new());
        let snap = RootFs::new(rec.out());
        let b = read(&snap, snapshot_version(&snap));
        assert_eq!(a, b);
        assert_eq!(b.fabric_manager.running, Reading::Value(true));
    }

    #[test]
    fn a_long_log_is_read_by_its_head_and_tail() {
        let d = tempfile::tempdir().unwrap();
        let mut text = String::from(
            "[Jan 01 2025 00:00:00] [INFO] [tid 1] Fabric Manager version 580.159.04 is running\n",
        );
        while (text.len() as u64) < LOG_HEAD_BYTES + LOG_TAIL_BYTES + 100_000 {
            text.push_str("[Jan 01 2025 00:00:01] [INFO] [tid 1] multicast group 0 is freed.\n");
        }
        text.push_str(
            "[Jan 02 2025 00:00:00] [ERROR] [tid 9] detected NVSwitch fatal error 20034\n",
        );
        write(d.path(), LOG, &text);
        let root = RootFs::new(d.path());
        let t = log_text(&root).unwrap().unwrap();
        assert!((t.len() as u64) <= LOG_HEAD_BYTES + LOG_TAIL_BYTES + 1);
        let log = log(&root).into_value().unwrap();
        assert_eq!(log.version.as_deref(), Some("580.159.04"));
        assert_eq!(log.error_count, 1);
        assert!(log.errors[0].contains("fatal error 20034"));
        // Re-read from its own excerpt: the same.
        let e = tempfile::tempdir().unwrap();
        write(e.path(), LOG, &t);
        assert_eq!(log_text(&RootFs::new(e.path())).unwrap().unwrap(), t);
    }
}
