//! `gpuaudit collect --out DIR`: write a snapshot of this machine (`gpuaudit-snapshot/1`).
//!
//! The snapshot mirrors the files gpuaudit reads, under the same paths, and holds the output
//! of the commands it would otherwise ask under `cmd/`, so that auditing the snapshot gives
//! the same findings as the live audit it came from.

use crate::command;
use crate::gather::SNAPSHOT_FORMAT;
use crate::root::{io_reason, normalize, RootFs, UNREADABLE_MARK};
use gpuaudit_core::parse::sysfs;
use gpuaudit_core::Reading;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("{0} already exists: collect writes a new directory (choose another path)")]
    Exists(PathBuf),
    #[error("{0} is a file, not a directory: collect writes a new directory")]
    IsAFile(PathBuf),
    #[error("cannot create {path}: {reason}")]
    Create { path: PathBuf, reason: String },
}

/// What was written, what could not be collected and what could not be written (each a
/// sentence).
#[derive(Debug, Default)]
pub struct CollectSummary {
    pub files: usize,
    /// Readings the machine did not give (the snapshot says so in their place).
    pub notes: Vec<String>,
    /// Files of the snapshot that could not be written ("could not write DIR/x: why"): the
    /// snapshot is incomplete.
    pub failed: Vec<String>,
}

/// The one writer of a snapshot: every file goes through [`write`](Self::write), which records
/// a failure and goes on, so that a full disk costs a list of the files missing, not a
/// snapshot cut off at the first one.
pub struct Collector<'a> {
    pub(crate) src: &'a RootFs,
    out: PathBuf,
    pub summary: CollectSummary,
}

impl<'a> Collector<'a> {
    /// Create `out` (its parents as needed) and nothing else: a path that exists is refused,
    /// so that two collects into one directory cannot mix their files (`mkdir` is atomic: of
    /// two at once, one gets the directory and the other `Exists`).
    pub fn new(src: &'a RootFs, out: &Path) -> Result<Self, CollectError> {
        match fs::symlink_metadata(out) {
            Ok(m) if m.is_file() => return Err(CollectError::IsAFile(out.to_path_buf())),
            Ok(_) => return Err(CollectError::Exists(out.to_path_buf())),
            Err(_) => {}
        }
        let create = |path: &Path, e: std::io::Error| CollectError::Create {
            path: path.to_path_buf(),
            reason: io_reason(&e),
        };
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|e| create(parent, e))?;
        }
        match fs::create_dir(out) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(CollectError::Exists(out.to_path_buf()))
            }
            Err(e) => return Err(create(out, e)),
        }
        Ok(Collector {
            src,
            out: out.to_path_buf(),
            summary: CollectSummary::default(),
        })
    }

    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Write `content` at `rel` in the snapshot (`..` cannot leave it); a failure is recorded
    /// in `summary.failed`.
    pub fn write(&mut self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.out.join(normalize(rel));
        let r = p
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|_| fs::write(&p, content));
        match r {
            Ok(()) => self.summary.files += 1,
            Err(e) => self.summary.failed.push(format!(
                "could not write {}: {}",
                p.display(),
                io_reason(&e)
            )),
        }
    }

    /// A directory that must be there even when empty.
    pub fn dir(&mut self, rel: &str) {
        let p = self.out.join(normalize(rel));
        if let Err(e) = fs::create_dir_all(&p) {
            self.summary.failed.push(format!(
                "could not write {}: {}",
                p.display(),
                io_reason(&e)
            ));
        }
    }

    /// A relative symbolic link at `rel` to `target` (relative to the link's directory: sysfs
    /// links the snapshot keeps, such as /sys/bus/pci/devices/<bdf> into /sys/devices, so that
    /// it resolves them as sysfs does); its parent directories are made.
    pub fn link(&mut self, rel: &str, target: &str) {
        let p = self.out.join(normalize(rel));
        let r = p
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|_| std::os::unix::fs::symlink(target, &p));
        match r {
            Ok(()) => self.summary.files += 1,
            Err(e) => self.summary.failed.push(format!(
                "could not write {}: {}",
                p.display(),
                io_reason(&e)
            )),
        }
    }

    /// The unreadable marker with its reason, in place of a file that could not be read.
    pub fn mark(&mut self, rel: &str, reason: &str) {
        self.write(rel, format!("{UNREADABLE_MARK}{reason}\n"));
    }

    /// An empty file that says "this program exists".
    pub fn marker(&mut self, rel: &str) {
        self.write(rel, b"");
    }

    /// Copy a file from the source root to the same path in the snapshot; a missing file is
    /// left out (the audit says what is missing), an unreadable one becomes the marker with
    /// the reason.
    pub fn copy(&mut self, rel: &str) {
        match self.src.read_bytes(rel) {
            Ok(Some(b)) => self.write(rel, b),
            Ok(None) => {}
            Err(e) => {
                self.summary.notes.push(e.clone());
                self.mark(rel, &e);
            }
        }
    }

    /// A reading, formatted, or the marker with the reason it could not be taken.
    pub fn reading<T>(&mut self, rel: &str, r: &Reading<T>, format: impl Fn(&T) -> String) {
        match r {
            Reading::Value(v) => self.write(rel, format(v)),
            Reading::Unavailable(why) => {
                self.summary.notes.push(format!("{rel}: {why}"));
                self.mark(rel, why);
            }
        }
    }

    /// Run a command and keep its output under `cmd/NAME`; its failure message is kept too,
    /// so the audit of the snapshot sees what the live audit saw.
    pub fn command(&mut self, name: &str, program: &str, args: &[&str], timeout: Duration) {
        match command::run(program, args, timeout) {
            Ok(out) => self.write(&format!("cmd/{name}"), out),
            Err(e) if e.ends_with("not found") => {
                self.summary
                    .notes
                    .push(format!("{program} not found: cmd/{name} not written"));
            }
            Err(e) => {
                self.summary.notes.push(e.clone());
                self.write(&format!("cmd/{name}"), e);
            }
        }
    }
}

/// `gpuaudit collect`: a snapshot of `src` (the live machine, or a snapshot collected again)
/// written into `out`, a directory this call creates. The summary says what was written, what
/// the machine did not give and what could not be written.
pub fn collect(
    src: &RootFs,
    out: &Path,
    description: &str,
    opts: &crate::gather::GatherOptions,
) -> Result<CollectSummary, CollectError> {
    let mut c = Collector::new(src, out)?;
    collect_base(&mut c, description, opts.command_timeout);
    collect_host(&mut c, &opts.host);
    Ok(c.summary)
}

/// Collect everything the facts readers of this crate need. Other sources (the host module)
/// add theirs through the same [`Collector`].
pub fn collect_base(c: &mut Collector, description: &str, timeout: Duration) {
    let meta = serde_json::json!({
        "format": SNAPSHOT_FORMAT,
        "description": description,
        "gpuaudit_version": env!("CARGO_PKG_VERSION"),
        // A GPUAUDIT_NOW that is no time is the clock's: collect's errors are about files.
        "collected_at": crate::time::now().unwrap_or_else(|_| crate::time::now_rfc3339()),
    });
    c.write(
        "meta.json",
        format!(
            "{}\n",
            serde_json::to_string_pretty(&meta).unwrap_or_default()
        ),
    );

    for f in [
        "proc/cpuinfo",
        "proc/meminfo",
        "proc/modules",
        "proc/mounts",
        "proc/version",
        "proc/uptime",
        "proc/sys/net/core/somaxconn",
        "proc/sys/kernel/hostname",
        "proc/driver/nvidia/version",
        "etc/os-release",
    ] {
        c.copy(f);
    }
    collect_dmi(c);
    if !c.src.exists("etc/os-release") {
        c.copy("usr/lib/os-release");
    }
    if let Ok(gpus) = c.src.list("proc/driver/nvidia/gpus") {
        for g in gpus {
            c.copy(&format!("proc/driver/nvidia/gpus/{g}/information"));
        }
    }
    // Before the PCI function files: the links it writes are where those files then go.
    crate::gather::pcie_tree::collect(c, &nvidia_display_functions(c.src));
    collect_pci(c);
    collect_toolkits(c);

    match command::run("nvidia-smi", &["-q", "-x"], timeout) {
        Ok(xml) => c.write("cmd/nvidia-smi-q.xml", xml),
        Err(smi_err) => match crate::gather::nvml_failure(
            crate::nvml::read_facts(crate::nvml::TIMEOUT).map_err(String::from),
        ) {
            Some(nvml_err) => {
                let why = crate::gather::driver_failure(&nvml_err, &smi_err);
                c.summary.notes.push(why.clone());
                c.write("cmd/driver-error.txt", format!("{why}\n"));
            }
            None => c.summary.notes.push(format!(
                "{smi_err}: NVML answers but nvidia-smi does not, so the snapshot has no GPU details"
            )),
        },
    }
    c.command(
        "nvidia-smi-topo-m.txt",
        "nvidia-smi",
        &["topo", "-m"],
        timeout,
    );
    c.command(
        "nvidia-smi-nvlink-s.txt",
        "nvidia-smi",
        &["nvlink", "-s"],
        timeout,
    );
    c.command("ldd-version.txt", "ldd", &["--version"], timeout);
    if c.src.exists("usr/local/cuda/bin/nvcc") {
        c.command(
            "nvcc-version.txt",
            "/usr/local/cuda/bin/nvcc",
            &["--version"],
            timeout,
        );
    }
    collect_kernel_log(c, timeout);
    crate::gather::nvswitch::collect(c, timeout);
}

/// The firmware's DMI strings the report shows, copied (a missing one is left out, as the
/// audit of the snapshot then says).
fn collect_dmi(c: &mut Collector) {
    use crate::gather::files::{DMI_DIR, DMI_FILES};
    for f in DMI_FILES {
        c.copy(&format!("{DMI_DIR}/{f}"));
    }
}

/// The host and software-stack files (see `host::collect_into`).
pub fn collect_host(c: &mut Collector, opts: &crate::host::HostOptions) {
    crate::host::collect_into(c, opts);
}

/// The bus ids of the NVIDIA display and 3D functions (the GPUs, as `pci_gpus` lists them).
fn nvidia_display_functions(src: &RootFs) -> Vec<String> {
    crate::gather::files::pci_gpus(src)
        .into_value()
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.bus_id)
        .collect()
}

pub(crate) fn collect_pci(c: &mut Collector) {
    let Ok(devs) = c.src.list("sys/bus/pci/devices") else {
        return;
    };
    // Present even when empty: "no NVIDIA function on the bus" is a fact too.
    c.dir("sys/bus/pci/devices");
    for d in devs {
        let dir = format!("sys/bus/pci/devices/{d}");
        let vendor = match c.src.read(&format!("{dir}/vendor")) {
            Ok(v) => sysfs::parse_hex_u16(&v),
            Err(_) => {
                // Whether it is a GPU is unknown: the snapshot keeps the reason, as the audit
                // of this machine reports it.
                c.copy(&format!("{dir}/vendor"));
                continue;
            }
        };
        if vendor != Some(0x10de) {
            continue;
        }
        // A GPU's path to its root port (pcie.aer): the link into /sys/devices as sysfs has
        // it, and every function's AER counters on it; the GPU's files below go through it.
        let class = c.src.read(&format!("{dir}/class")).ok();
        if class
            .as_deref()
            .and_then(sysfs::parse_hex_u32)
            .is_some_and(|k| k >> 16 == 0x03)
        {
            collect_aer_path(c, &d);
        }
        for a in [
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
            "class",
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
            "numa_node",
            "local_cpulist",
        ] {
            c.copy(&format!("{dir}/{a}"));
        }
        // The driver link becomes a plain file holding the driver's name (DESIGN's format).
        match c.src.link_name(&format!("{dir}/driver")) {
            Ok(Some(name)) => c.write(&format!("{dir}/driver"), format!("{name}\n")),
            Ok(None) => {}
            Err(e) => c.mark(&format!("{dir}/driver"), &e),
        }
    }
}

fn collect_toolkits(c: &mut Collector) {
    let Ok(names) = c.src.list("usr/local") else {
        return;
    };
    for n in names
        .into_iter()
        .filter(|n| n == "cuda" || n.starts_with("cuda-"))
    {
        let dir = format!("usr/local/{n}");
        c.copy(&format!("{dir}/version.json"));
        c.copy(&format!("{dir}/version.txt"));
        // cuda.h is large; its version define is all gpuaudit reads.
        if let Ok(h) = c.src.read(&format!("{dir}/include/cuda.h")) {
            let line: String = h
                .lines()
                .filter(|l| l.trim_start().starts_with("#define CUDA_VERSION"))
                .take(1)
                .collect();
            if !line.is_empty() {
                c.write(&format!("{dir}/include/cuda.h"), format!("{line}\n"));
            }
        }
        // File names only: the runtime's version is in them.
        for l in c.src.children(&format!("{dir}/lib64")) {
            if l.starts_with("libcudart.so") {
                c.marker(&format!("{dir}/lib64/{l}"));
            }
        }
        for l in c.src.children(&format!("{dir}/compat")) {
            if l.starts_with("libcuda.so") {
                c.marker(&format!("{dir}/compat/{l}"));
            }
        }
        if c.src.exists(&format!("{dir}/bin/nvcc")) {
            c.marker(&format!("{dir}/bin/nvcc"));
        }
    }
}

/// A GPU's link into /sys/devices and the AER files of each function on its path (a missing
/// file is left out, an unreadable one marked with its reason).
fn collect_aer_path(c: &mut Collector, bus: &str) {
    use crate::pcipath::{upstream, AER_FILES, PCI_DEVICES, ROOTPORT_FILES};
    let Ok((rel, _)) = upstream(c.src, bus) else {
        return;
    };
    let Some(under) = rel.strip_prefix("sys/") else {
        return;
    };
    // The directory first: the GPU's own files are written through the link. Another
    // collector of the path (pcie.acs's) may have written the same link already.
    c.dir(&rel);
    let link = format!("{PCI_DEVICES}/{bus}");
    if fs::symlink_metadata(c.out().join(&link)).is_err() {
        c.link(&link, &format!("../../../{under}"));
    }
    for (_, dir) in crate::pcipath::port_dirs(c.src, bus).0 {
        for f in AER_FILES.iter().chain(ROOTPORT_FILES.iter()) {
            c.copy(&format!("{dir}/{f}"));
        }
    }
}

/// The kernel log's extract (every kernel-log check's lines, dated, bounded) goes into the
/// snapshot as cmd/kernel-log.txt; where no log could be read, the reasons in its place.
fn collect_kernel_log(c: &mut Collector, timeout: Duration) {
    use crate::kernlog::{read_snapshot, EXTRACT};
    let r = if c.src.is_live() {
        crate::gather::live_kernel_log(timeout).map(|x| x.0)
    } else {
        match read_snapshot(c.src) {
            // The old Xid-only file is copied as it is.
            Some(Ok((_, true))) => {
                c.copy(crate::kernlog::OLD_EXTRACT);
                return;
            }
            Some(r) => r.map(|x| x.0),
            None => return,
        }
    };
    match r {
        Ok(x) => c.write(EXTRACT, x.to_file()),
        Err(e) => {
            c.summary
                .notes
                .push(format!("kernel log not collected: {e}"));
            c.mark(EXTRACT, &e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_path_is_refused_and_a_file_says_so() {
        let d = tempfile::tempdir().unwrap();
        let src = RootFs::live();
        let file = d.path().join("f");
        fs::write(&file, "x").unwrap();
        let e = Collector::new(&src, &file).err().unwrap();
        assert!(matches!(e, CollectError::IsAFile(_)), "{e}");
        assert!(e.to_string().contains("is a file, not a directory"));
        // An empty directory is refused too: only a directory this run made is written to.
        let e = Collector::new(&src, d.path()).err().unwrap();
        assert!(matches!(e, CollectError::Exists(_)), "{e}");
        let c = Collector::new(&src, &d.path().join("a/b/snap")).unwrap();
        assert!(c.out().is_dir());
    }

    #[test]
    fn every_failed_write_is_listed_and_the_rest_written() {
        let d = tempfile::tempdir().unwrap();
        let src = RootFs::live();
        let mut c = Collector::new(&src, &d.path().join("snap")).unwrap();
        // A file where a directory must go: every write under it fails, also for root.
        fs::write(c.out().join("proc"), "not a directory").unwrap();
        c.write("proc/cpuinfo", "x");
        c.write("proc/meminfo", "x");
        c.write("meta.json", "{}");
        c.write("../../escape", "x");
        assert_eq!(c.summary.failed.len(), 2, "{:?}", c.summary.failed);
        assert!(c.summary.failed[0].contains("proc/cpuinfo"));
        assert!(c.summary.failed[1].contains("proc/meminfo"));
        assert_eq!(c.summary.files, 2);
        // ".." stays inside the snapshot.
        assert!(c.out().join("escape").exists());
        assert!(!d.path().join("escape").exists());
    }

    /// What pcie.aer and health.xid read (the GPUs' PCI paths with their AER counters, the
    /// uptime, the kernel log's extract) is collected and reads back the same.
    #[test]
    fn the_aer_paths_and_the_kernel_log_are_collected_and_read_back() {
        let fixtures =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots");
        for name in ["h200-x2-aer-fatal-upstream", "h200-x2-aer-corrected-gpu"] {
            let from = fixtures.join(name);
            let src = RootFs::new(&from);
            let d = tempfile::tempdir().unwrap();
            let mut c = Collector::new(&src, &d.path().join("snap")).unwrap();
            collect_base(&mut c, "test", Duration::from_secs(5));
            assert_eq!(c.summary.failed, Vec::<String>::new());
            let opts = crate::gather::GatherOptions::default();
            let a = crate::gather::snapshot(&from, &opts).unwrap();
            let b = crate::gather::snapshot(c.out(), &opts).unwrap();
            let json = |f: &gpuaudit_core::facts::Facts| {
                serde_json::to_string_pretty(&(&f.pcie_errors, &f.xid_events)).unwrap()
            };
            assert!(a
                .pcie_errors
                .paths
                .value()
                .is_some_and(|p| p.len() == 2 && p[0].ports.len() == 4));
            assert!(a.pcie_errors.log.is_value());
            assert_eq!(json(&a), json(&b), "{name}");
            // The GPU's directory is the link into /sys/devices, as sysfs has it.
            let link = c.out().join("sys/bus/pci/devices/0000:18:00.0");
            assert!(fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
        }
    }

    #[test]
    fn dmi_strings_are_copied_and_read_back() {
        let machine = tempfile::tempdir().unwrap();
        let dmi = machine.path().join("sys/devices/virtual/dmi/id");
        fs::create_dir_all(&dmi).unwrap();
        // As in sysfs: /sys/class/dmi/id is a link to the virtual device's directory.
        fs::create_dir_all(machine.path().join("sys/class/dmi")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/dmi/id",
            machine.path().join("sys/class/dmi/id"),
        )
        .unwrap();
        fs::write(dmi.join("sys_vendor"), "Dell Inc.\n").unwrap();
        fs::write(dmi.join("product_name"), "PowerEdge XE9680\n").unwrap();
        fs::write(dmi.join("product_serial"), "SECRET\n").unwrap();
        let src = RootFs::new(machine.path());
        let d = tempfile::tempdir().unwrap();
        let mut c = Collector::new(&src, &d.path().join("snap")).unwrap();
        collect_dmi(&mut c);
        let snap = c.out().join("sys/class/dmi/id");
        assert_eq!(
            fs::read_to_string(snap.join("sys_vendor")).unwrap(),
            "Dell Inc.\n"
        );
        assert_eq!(
            fs::read_to_string(snap.join("product_name")).unwrap(),
            "PowerEdge XE9680\n"
        );
        // Only the strings the report shows: no serial, nothing for what is missing.
        assert!(!snap.join("product_serial").exists());
        assert!(!snap.join("board_name").exists());
        assert_eq!(c.summary.files, 2);
        let dmi =
            crate::gather::files::machine(&RootFs::new(c.out()), Reading::unavailable("x")).dmi;
        assert_eq!(
            dmi.product_name.value().map(String::as_str),
            Some("PowerEdge XE9680")
        );
        assert_eq!(dmi.instance_type(), None);
    }

    #[test]
    fn two_collects_into_one_directory_one_wins() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("snap");
        let src = RootFs::live();
        let wins: usize = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| Collector::new(&src, &out).is_ok()))
                .collect();
            hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
        });
        assert_eq!(wins, 1);
    }
}
