//! Gathering facts: from the live machine or from a snapshot directory. Both go through the
//! same file readers and parsers; they differ only where the live machine is asked (NVML,
//! commands) and the snapshot holds the answers under `cmd/`.

pub mod files;
pub mod nvswitch;
pub mod pcie_tree;

use crate::command;
use crate::host::{self, HostOptions};
use crate::kernlog;
use crate::nvml::{self, NvmlAnswer};
use crate::root::RootFs;
use gpuaudit_core::facts::{
    normalize_bus_id, plausible, Facts, GpuFacts, KernelLogPcie, MeasuredFacts, NetFacts, Origin,
    Topology, ValueSource,
};
use gpuaudit_core::parse::{gpu_information, nvlink, nvsmi_xml, procfs, topo, ParseError};
use gpuaudit_core::spec::SpecDb;
use gpuaudit_core::Reading;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const SNAPSHOT_FORMAT: &str = "gpuaudit-snapshot/1";

#[derive(Clone, Debug)]
pub struct GatherOptions {
    /// Hard limit for each helper command (nvidia-smi, nvcc, ldd).
    pub command_timeout: Duration,
    /// Hard limit for the NVML child (`__nvml facts`).
    pub nvml_timeout: Duration,
    /// The host and software-stack sources (data directories, interpreters, host measurements).
    pub host: HostOptions,
}

impl Default for GatherOptions {
    fn default() -> Self {
        GatherOptions {
            command_timeout: Duration::from_secs(15),
            nvml_timeout: nvml::TIMEOUT,
            host: HostOptions::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot directory {0} does not exist")]
    NotFound(PathBuf),
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    #[error("cannot read snapshot directory {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
    #[error("{0} is not a gpuaudit snapshot: it has none of meta.json, proc/, sys/, etc/, cmd/")]
    NotASnapshot(PathBuf),
    #[error(
        "{path}: unsupported snapshot format {format} (this gpuaudit reads \"{SNAPSHOT_FORMAT}\")"
    )]
    Format { path: PathBuf, format: String },
}

/// What a snapshot's meta.json says that the report shows.
#[derive(Debug, Default, PartialEq)]
struct Meta {
    /// The description, or why meta.json could not be used.
    description: Option<String>,
    /// When `collect` wrote it (RFC 3339, UTC).
    collected_at: Option<String>,
}

/// What a snapshot's meta.json says, where it says anything usable. A format other than
/// [`SNAPSHOT_FORMAT`] (another version, a number, a list) is refused; a meta.json that is
/// missing, unreadable or not JSON is not (the facts are in the other files), and its reason
/// stands in for the description. A `collected_at` that is not an RFC 3339 time is left out.
fn read_meta(root: &RootFs) -> Result<Meta, SnapshotError> {
    let text = match root.read_text("meta.json") {
        Ok(Some(t)) => t,
        Ok(None) => return Ok(Meta::default()),
        Err(e) => {
            return Ok(Meta {
                description: Some(e),
                collected_at: None,
            })
        }
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(Meta {
            description: Some("meta.json is not valid JSON".into()),
            collected_at: None,
        });
    };
    match v.get("format") {
        None => {}
        Some(serde_json::Value::String(f)) if f == SNAPSHOT_FORMAT => {}
        Some(other) => {
            let shown = match other {
                serde_json::Value::String(f) => format!("\"{f}\""),
                v => v.to_string(),
            };
            return Err(SnapshotError::Format {
                path: root.root().join("meta.json"),
                format: gpuaudit_core::parse::fact_line(&shown),
            });
        }
    }
    Ok(Meta {
        description: v
            .get("description")
            .and_then(|d| d.as_str())
            .map(gpuaudit_core::parse::fact_line),
        collected_at: v
            .get("collected_at")
            .and_then(|t| t.as_str())
            .and_then(crate::time::normalize_rfc3339),
    })
}

/// The snapshot directory can be read and looks like a snapshot.
fn check_snapshot_dir(dir: &Path, root: &RootFs) -> Result<(), SnapshotError> {
    let unreadable = |e: std::io::Error| SnapshotError::Unreadable {
        path: dir.to_path_buf(),
        reason: crate::root::io_reason(&e),
    };
    match root.root_stat() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SnapshotError::NotFound(dir.to_path_buf()))
        }
        Err(e) => return Err(unreadable(e)),
        Ok(s) if s.kind != crate::root::FileKind::Dir => {
            return Err(SnapshotError::NotADirectory(dir.to_path_buf()))
        }
        Ok(_) => {}
    }
    // A directory that cannot be listed or searched is unreadable, not "not a snapshot".
    root.list_io("").map_err(unreadable)?;
    let mut found = false;
    for k in ["meta.json", "proc", "sys", "etc", "cmd"] {
        match root.stat_io(k) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(unreadable(e))
            }
            // There, if broken (a link loop): the readings under it say why.
            _ => found = true,
        }
    }
    if !found {
        return Err(SnapshotError::NotASnapshot(dir.to_path_buf()));
    }
    Ok(())
}

/// Facts from a snapshot directory written by `gpuaudit collect` (or by hand).
pub fn snapshot(dir: &Path, opts: &GatherOptions) -> Result<Facts, SnapshotError> {
    gather(&RootFs::new(dir), opts)
}

/// Facts from `root`: the live machine, or a snapshot directory. Where `root` records
/// (`gpuaudit collect`), everything read is copied into its snapshot on the way.
pub fn gather(root: &RootFs, opts: &GatherOptions) -> Result<Facts, SnapshotError> {
    if root.is_live() {
        let (mut facts, host) = live_deferred_in(root, opts);
        facts.host = host.join();
        return Ok(facts);
    }
    let dir = root.root();
    // The snapshot's own checks and meta.json are not the machine's readings: a collect from
    // a snapshot writes a meta.json of its own.
    let quiet = root.unrecorded();
    check_snapshot_dir(dir, &quiet)?;
    let meta = read_meta(&quiet)?;
    let origin = Origin::Snapshot {
        path: dir.display().to_string(),
        description: meta.description,
        collected_at: meta.collected_at,
    };
    Ok(snapshot_facts(root, origin, opts))
}

fn snapshot_facts(root: &RootFs, origin: Origin, opts: &GatherOptions) -> Facts {
    let root = root.clone();
    let mut facts = Facts::empty(origin, "snapshot: not collected");
    let cmd = |name: &str| root.read(&format!("cmd/{name}"));

    let libc = match cmd("ldd-version.txt") {
        Ok(t) => files::libc_from_ldd(&t),
        Err(_) => files::libc_from_files(&root),
    };
    read_files(
        &root,
        &mut facts,
        libc,
        cmd("nvcc-version.txt").ok().as_deref(),
    );

    // nvidia-smi -q -x stands in for NVML; the kernel module's files for both.
    if let Err(no) = snapshot_driver(&root, &mut facts) {
        if let NoFacts::Unreadable(why) = &no {
            facts.driver.report_unreadable = Some(why.clone());
        }
        apply_files_fallback(&root, &mut facts, vec![no.into_reason()]);
    }
    facts.topology = topology_from(cmd("nvidia-smi-topo-m.txt"));
    if let Ok(text) = cmd("nvidia-smi-nvlink-s.txt") {
        apply_nvlink_status(&mut facts, &text);
    }
    // Unreadable (permission denied, a FIFO, the unreadable marker) is not absent.
    apply_kernel_log(&mut facts, snapshot_kernel_log(&root));
    if facts
        .pcie_errors
        .paths
        .value()
        .is_some_and(|p| !p.is_empty() && p.iter().all(|x| x.upstream_unknown.is_some()))
    {
        facts.pcie_errors.paths = Reading::unavailable(NO_PATHS);
    }
    facts.nvswitch = nvswitch::read(&root, nvswitch::snapshot_version(&root));
    facts.host = host::gather(&root, &opts.host);
    // No toolkit directory in a snapshot without a host part: nobody looked for one.
    if !host::has_host_part(&root) && facts.toolkit.value().is_some_and(Vec::is_empty) {
        facts.toolkit = Reading::unavailable(host::NO_HOST_PART);
    }
    facts.measured = MeasuredFacts::not_run(host::SNAPSHOT_NOT_MEASURED);
    finish(&mut facts);
    facts
}

/// Why a source of the driver's facts (NVML, nvidia-smi, a snapshot's file) gave none.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NoFacts {
    /// It is not there, did not answer, or answered with an error of its own: the words.
    NoAnswer(String),
    /// It answered, or its file is there, but what it gave could not be read (malformed,
    /// refused, empty, too large, not a regular file): the GPUs are not known, which is not
    /// "no GPU" (`DriverFacts::report_unreadable`).
    Unreadable(String),
}

impl NoFacts {
    fn into_reason(self) -> String {
        match self {
            NoFacts::NoAnswer(r) | NoFacts::Unreadable(r) => r,
        }
    }
}

/// The snapshot's driver report: `cmd/nvidia-smi-q.xml`, else `cmd/driver-error.txt` (where
/// `collect` found a driver that did not answer, its reason).
fn snapshot_driver(root: &RootFs, facts: &mut Facts) -> Result<(), NoFacts> {
    const XML: &str = "cmd/nvidia-smi-q.xml";
    const DRIVER_ERROR: &str = "cmd/driver-error.txt";
    match root.read_text(XML) {
        Ok(Some(xml)) => return apply_nvsmi(facts, &xml, &[]),
        // There, but not read: larger than the cap, not a regular file, the unreadable marker.
        Err(e) => return Err(NoFacts::Unreadable(naming(&root.display(XML), e))),
        Ok(None) => {}
    }
    let path = root.display(DRIVER_ERROR);
    match root.read_text(DRIVER_ERROR) {
        Ok(Some(t)) if t.trim().is_empty() => Err(NoFacts::Unreadable(format!(
            "{path}: empty file (the reason the driver did not answer is not in it)"
        ))),
        Ok(Some(t)) => Err(NoFacts::NoAnswer(gpuaudit_core::parse::host::truncate(
            t.trim(),
            1000,
        ))),
        Ok(None) => Err(NoFacts::NoAnswer(format!(
            "snapshot has no nvidia-smi output ({}: no such file)",
            root.display(XML)
        ))),
        Err(e) => Err(NoFacts::Unreadable(naming(&path, e))),
    }
}

/// `why` with the file's path in front, where it does not start with it already (the
/// unreadable marker's reason is written as the collecting run gave it).
fn naming(path: &str, why: String) -> String {
    if why.starts_with(path) {
        why
    } else {
        format!("{path}: {why}")
    }
}

/// The host sources still being read (Python interpreters take seconds).
pub struct PendingHost(std::thread::JoinHandle<gpuaudit_core::facts::HostFacts>);

impl PendingHost {
    pub fn join(self) -> gpuaudit_core::facts::HostFacts {
        self.0
            .join()
            .unwrap_or_else(|_| gpuaudit_core::facts::HostFacts::unread("the host sources failed"))
    }
}

/// Facts from the machine gpuaudit runs on.
pub fn live(opts: &GatherOptions) -> Facts {
    let (mut facts, host) = live_deferred(opts);
    facts.host = host.join();
    facts
}

/// Like [`live`], but the host sources go on reading in the background, so that the GPU
/// measurements can run meanwhile; `facts.host` is filled by the caller from the handle.
pub fn live_deferred(opts: &GatherOptions) -> (Facts, PendingHost) {
    live_deferred_in(&RootFs::live(), opts)
}

/// [`live_deferred`] through `root` (the live machine's, recording or not).
fn live_deferred_in(root: &RootFs, opts: &GatherOptions) -> (Facts, PendingHost) {
    let root = root.clone();
    let mut facts = Facts::empty(Origin::Live, "not read");
    let t = opts.command_timeout;

    // nvidia-smi's topology matrix takes a while: ask for it while NVML is read.
    let r = root.clone();
    let topo_job = std::thread::spawn(move || {
        r.command("nvidia-smi-topo-m.txt", "nvidia-smi", &["topo", "-m"], t)
    });
    // The host sources may ask Python interpreters (seconds): in parallel too.
    let host_opts = opts.host.clone();
    let r = root.clone();
    let host_job = std::thread::spawn(move || host::gather(&r, &host_opts));
    let r = root.clone();
    let nvcc_job = std::thread::spawn(move || {
        // Only where a toolkit directory has no version file of its own; a snapshot keeps
        // the answer wherever there is an nvcc (its reading decides then).
        let nvcc = "usr/local/cuda/bin/nvcc";
        let quiet = r.unrecorded();
        if quiet.exists(nvcc)
            && (r.is_recording()
                || !quiet.exists("usr/local/cuda/version.json")
                    && !quiet.exists("usr/local/cuda/version.txt")
                    && !quiet.exists("usr/local/cuda/include/cuda.h"))
        {
            r.command(
                "nvcc-version.txt",
                &crate::root::abs(nvcc),
                &["--version"],
                t,
            )
            .ok()
        } else {
            None
        }
    });

    let libc = match root.command("ldd-version.txt", "ldd", &["--version"], t) {
        Ok(out) => files::libc_from_ldd(&out),
        // musl's ldd prints its version on stderr and exits 1.
        Err(e) if e.to_ascii_lowercase().contains("musl") => files::libc_from_ldd(&e),
        Err(_) => files::libc_from_files(&root),
    };

    // NVML in a child with a hard timeout; then nvidia-smi; then the kernel module's files.
    let mut failed: Vec<String> = Vec::new();
    // Those of `failed` that answered with what could not be read.
    let mut unreadable: Vec<String> = Vec::new();
    match nvml::read_facts(opts.nvml_timeout) {
        Ok(NvmlAnswer::Loaded {
            driver_version,
            cuda_version,
            gpus,
        }) => {
            facts.driver.version = driver_version;
            facts.driver.cuda_version = cuda_version;
            match gpus {
                Reading::Value(g) => {
                    facts.driver.query = Reading::Value("nvml".into());
                    // NVML lists every device it counts (one it cannot open with the reason).
                    facts.driver.attached_gpus = Reading::Value(g.len() as u32);
                    facts.gpus = Reading::Value(g);
                }
                Reading::Unavailable(e) => failed.push(e),
            }
        }
        Ok(NvmlAnswer::Failed { reason }) => failed.push(reason),
        Err(e) => {
            if e.unreadable {
                unreadable.push(e.reason.clone());
            }
            failed.push(e.reason);
        }
    }
    if !failed.is_empty() {
        // nvidia-smi may still work (a static build), or say why the driver does not answer.
        let out = command::run_output(
            &crate::process::Cmd::new("nvidia-smi").args(["-q", "-x"]),
            t,
        );
        record_nvsmi(&root, &out.clone().map_err(|f| f.reason), &failed);
        let smi = out
            .map_err(|f| match f.too_large {
                true => NoFacts::Unreadable(f.reason),
                false => NoFacts::NoAnswer(f.reason),
            })
            .and_then(|xml| apply_nvsmi(&mut facts, &xml, &failed));
        match smi {
            Err(no) => {
                if let NoFacts::Unreadable(r) = &no {
                    unreadable.push(r.clone());
                }
                failed.push(no.into_reason());
            }
            Ok(()) => {
                failed.clear();
                unreadable.clear();
            }
        }
    }

    if root.is_recording() {
        // A snapshot cannot hold NVML's answers: nvidia-smi's XML stands in for the facts
        // there, and its per-link listing for the NVLinks' state (the XML has none).
        if failed.is_empty() {
            let out = command::run("nvidia-smi", &["-q", "-x"], t);
            record_nvsmi(&root, &out, &failed);
        }
        let _ = root.command(
            "nvidia-smi-nvlink-s.txt",
            "nvidia-smi",
            &["nvlink", "-s"],
            t,
        );
    }

    let nvcc_out = nvcc_job.join().ok().flatten();
    read_files(&root, &mut facts, libc, nvcc_out.as_deref());
    if !failed.is_empty() {
        if !unreadable.is_empty() {
            facts.driver.report_unreadable = Some(unreadable.join("; "));
        }
        apply_files_fallback(&root, &mut facts, failed);
    }
    let log = live_kernel_log(opts.command_timeout);
    record_kernel_log(&root, &log);
    apply_kernel_log(&mut facts, log);
    facts.nvswitch = nvswitch::read(&root, nvswitch::live_version(&root, t));
    facts.topology = topology_from(
        topo_job
            .join()
            .unwrap_or_else(|_| Err("nvidia-smi topo -m: failed".into())),
    );
    facts.measured = MeasuredFacts::not_run("facts-only audit");
    finish(&mut facts);
    (facts, PendingHost(host_job))
}

/// The snapshot's driver report, from `nvidia-smi -q -x` (`out`): its XML (where it printed
/// an error instead, that text), or, where NVML did not answer either (`nvml_failed`: its
/// reasons), `cmd/driver-error.txt` with both reasons, worded as the live audit words them.
fn record_nvsmi(root: &RootFs, out: &Result<String, String>, nvml_failed: &[String]) {
    const XML: &str = "cmd/nvidia-smi-q.xml";
    const DRIVER_ERROR: &str = "cmd/driver-error.txt";
    if !root.is_recording() {
        return;
    }
    match out {
        Ok(xml) => root.record(XML, xml),
        Err(smi_err) if nvml_failed.is_empty() => root.record_note(format!(
            "{smi_err}: NVML answers but nvidia-smi does not, so the snapshot has no GPU details"
        )),
        Err(smi_err) => {
            let why = format!("{}; {smi_err}", nvml_failed.join("; "));
            root.record_note(why.clone());
            root.record(DRIVER_ERROR, format!("{why}\n"));
        }
    }
}

fn read_files(
    root: &RootFs,
    facts: &mut Facts,
    libc: Reading<gpuaudit_core::facts::Libc>,
    nvcc: Option<&str>,
) {
    facts.machine = files::machine(root, libc);
    facts.pci_gpus = files::pci_gpus(root);
    let gpu_ids = facts
        .pci_gpus
        .as_ref()
        .map(|p| p.iter().map(|f| f.bus_id.clone()).collect::<Vec<_>>());
    facts.pcie_tree = pcie_tree::read(root, &gpu_ids);
    facts.pcie_errors.uptime_s = files::uptime(root);
    facts.pcie_errors.paths = match &facts.pci_gpus {
        Reading::Value(list) => Reading::Value(
            list.iter()
                .map(|p| crate::pcipath::aer_path(root, &p.bus_id))
                .collect(),
        ),
        Reading::Unavailable(e) => Reading::Unavailable(e.clone()),
    };
    facts.modules = files::modules(root);
    facts.toolkit = files::toolkits(root, nvcc);
    // The kernel module's GPU files stand in for the driver's report where it is not read: a
    // snapshot keeps them whether or not this reading needed them.
    if root.is_recording() {
        let _ = gpus_from_files(root, facts, "");
    }
    facts.net = NetFacts {
        somaxconn: host::gather_somaxconn(root),
    };
    match root.read("proc/driver/nvidia/version") {
        Ok(text) => match procfs::parse_driver_version(&text) {
            Ok((version, flavor, line)) => {
                facts.driver.module_flavor = Reading::Value(flavor);
                facts.driver.proc_version = Reading::Value(line);
                // The kernel module's version stands in where the driver was not asked.
                if facts.driver.version.value().is_none() {
                    facts.driver.version = Reading::Value(version);
                }
            }
            Err(e) => {
                let r = format!("{}: {e}", root.display("proc/driver/nvidia/version"));
                facts.driver.module_flavor = Reading::Unavailable(r.clone());
                facts.driver.proc_version = Reading::Unavailable(r);
            }
        },
        Err(e) => {
            facts.driver.module_flavor = Reading::Unavailable(e.clone());
            facts.driver.proc_version = Reading::Unavailable(e);
        }
    }
}

/// The facts `nvidia-smi -q -x` gives, held against the plausibility limits; `failed` are the
/// reasons the sources before it (NVML) did not answer, kept in `driver.query`. `Err`: why
/// the XML gave nothing: nvidia-smi's own error (it printed that instead of XML), or XML
/// that could not be read.
fn apply_nvsmi(facts: &mut Facts, xml: &str, failed: &[String]) -> Result<(), NoFacts> {
    let log = nvsmi_xml::parse(xml).map_err(|e| {
        let why = format!("nvidia-smi -q -x: {e}");
        match e {
            ParseError::NotXml(_) => NoFacts::NoAnswer(why),
            ParseError::Empty | ParseError::Malformed(_) => NoFacts::Unreadable(why),
        }
    })?;
    facts.driver.query = Reading::Value(answered_by("nvidia-smi", failed));
    if let Some(v) = log.driver_version {
        facts.driver.version = Reading::Value(v);
    } else if facts.driver.version.value().is_none() {
        facts.driver.version = Reading::unavailable("nvidia-smi: no driver_version");
    }
    match log
        .cuda_version
        .as_deref()
        .and_then(gpuaudit_core::facts::CudaVersion::parse)
    {
        Some(c) => facts.driver.cuda_version = Reading::Value(c),
        None if facts.driver.cuda_version.value().is_none() => {
            facts.driver.cuda_version = Reading::unavailable("nvidia-smi: no cuda_version")
        }
        None => {}
    }
    facts.driver.attached_gpus = log.attached_gpus;
    if log.gpus_left_out > 0 {
        facts.driver.gpus_left_out = Some(format!(
            "nvidia-smi lists {} GPUs; the first {} were read",
            log.gpus.len() + log.gpus_left_out,
            log.gpus.len()
        ));
    }
    facts.gpus = plausible::filter_gpus(Reading::Value(log.gpus), "nvidia-smi");
    Ok(())
}

/// "nvidia-smi (NVML did not answer within 15 s ...)": the source that answered, and why the
/// ones before it did not.
fn answered_by(source: &str, failed: &[String]) -> String {
    if failed.is_empty() {
        source.to_string()
    } else {
        format!("{source} ({})", failed.join("; "))
    }
}

/// Neither NVML nor nvidia-smi answered: the kernel module's `/proc/driver/nvidia/gpus/*/
/// information` files still name each GPU (the PCIe link comes from sysfs, which pcie.link
/// reads itself). Where the module lists no GPU, the reasons stand.
fn apply_files_fallback(root: &RootFs, facts: &mut Facts, failed: Vec<String>) {
    let why = failed.join("; ");
    match gpus_from_files(root, facts, &why) {
        Some(gpus) => {
            facts.driver.query = Reading::Value(answered_by(
                &format!("files: {}", root.display("proc/driver/nvidia/gpus")),
                &failed,
            ));
            facts.gpus = Reading::Value(gpus);
        }
        None => {
            facts.driver.query = Reading::Unavailable(why.clone());
            facts.gpus = Reading::Unavailable(why.clone());
        }
    }
    if facts.driver.version.value().is_none() {
        facts.driver.version = Reading::Unavailable(why.clone());
    }
    if facts.driver.cuda_version.value().is_none() {
        facts.driver.cuda_version = Reading::Unavailable(why);
    }
}

fn gpus_from_files(root: &RootFs, facts: &Facts, why: &str) -> Option<Vec<GpuFacts>> {
    let mut dirs = root.list("proc/driver/nvidia/gpus").ok()?;
    dirs.sort();
    dirs.truncate(plausible::MAX_GPUS as usize);
    let mut out = Vec::new();
    for bus in dirs {
        let rel = format!("proc/driver/nvidia/gpus/{bus}/information");
        let Ok(text) = root.read(&rel) else { continue };
        let Ok(info) = gpu_information::parse_gpu_information(&text) else {
            continue;
        };
        let bus_id = normalize_bus_id(info.bus_location.as_deref().unwrap_or(&bus));
        let reason = match &facts.driver.report_unreadable {
            Some(_) => format!(
                "the driver's report could not be read ({why}); {} has only the model, UUID and \
                 VBIOS",
                root.display("proc/driver/nvidia/gpus")
            ),
            None => format!(
                "NVML and nvidia-smi did not answer ({why}); {} has only the model, UUID and \
                 VBIOS",
                root.display("proc/driver/nvidia/gpus")
            ),
        };
        let mut g = GpuFacts::unread(
            out.len() as u32,
            &bus_id,
            gpuaudit_core::checks::gpu::present::FILES_SOURCE,
            &reason,
        );
        let text_or = |v: Option<String>| match v {
            Some(v) => Reading::Value(v),
            None => Reading::Unavailable(reason.clone()),
        };
        g.name = text_or(info.model);
        g.uuid = text_or(info.uuid);
        g.vbios = text_or(info.vbios);
        if let Some(f) = facts
            .pci_gpus
            .value()
            .and_then(|p| p.iter().find(|f| f.bus_id.eq_ignore_ascii_case(&bus_id)))
        {
            g.pci_device_id = Reading::Value(f.device);
            if let (Some(sd), Some(sv)) = (f.subsystem_device.value(), f.subsystem_vendor.value()) {
                g.pci_subsystem_id = Reading::Value(((*sd as u32) << 16) | *sv as u32);
            }
        }
        out.push(g);
    }
    (!out.is_empty()).then_some(out)
}

fn topology_from(out: Result<String, String>) -> Reading<Topology> {
    match out {
        Ok(text) => topo::parse(&text)
            .map_err(|e| format!("nvidia-smi topo -m: {e}"))
            .into(),
        Err(e) => Reading::Unavailable(e),
    }
}

fn apply_nvlink_status(facts: &mut Facts, text: &str) {
    let Ok(per_gpu) = nvlink::parse_status(text) else {
        return;
    };
    if let Reading::Value(gpus) = &mut facts.gpus {
        for block in per_gpu {
            if let Some(g) = gpus.iter_mut().find(|g| g.index == block.gpu) {
                // NVML's "all links are inActive" is a reading (none of the links is up, as
                // NVML reports per link on the live machine); a block without lines is not.
                if g.nvlinks.value().is_none() && (!block.links.is_empty() || block.all_inactive) {
                    g.nvlinks = Reading::Value(block.links);
                }
            }
        }
    }
}

/// Why a snapshot has no kernel log: none of its files is there.
pub const NO_EXTRACT: &str =
    "snapshot has no kernel log extract (cmd/kernel-log.txt, cmd/dmesg-xid.txt, var/log/kern.log)";
/// A snapshot whose GPU directories are not links into /sys/devices: written before the PCI
/// paths and their AER counters were collected.
pub const NO_PATHS: &str =
    "snapshot: the GPUs' PCI paths and AER counters were not collected (written before pcie.aer)";

/// Now, seconds since 1970 (GPUAUDIT_NOW where set): the end of the kernel log's lookback.
fn now_s() -> i64 {
    crate::time::now()
        .ok()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .unwrap_or_else(jiff::Timestamp::now)
        .as_second()
}

/// The live kernel log (see [`kernlog::read_live`]).
pub fn live_kernel_log(timeout: Duration) -> Result<(kernlog::Extract, bool), String> {
    kernlog::read_live(now_s(), timeout).map(|x| (x, false))
}

/// A snapshot's kernel log, read from whichever of its files is there; recorded as the
/// extract it gives (the old Xid-only file as it is), not as the files it came from.
fn snapshot_kernel_log(root: &RootFs) -> Result<(kernlog::Extract, bool), String> {
    match kernlog::read_snapshot(&root.unrecorded()) {
        Some(Ok((x, true))) => {
            root.keep(kernlog::OLD_EXTRACT);
            Ok((x, true))
        }
        Some(r) => {
            record_kernel_log(root, &r);
            r
        }
        None => Err(NO_EXTRACT.to_string()),
    }
}

/// The kernel log's extract (every kernel-log check's lines, dated, bounded) into the
/// snapshot as `cmd/kernel-log.txt`; where no log could be read, the reasons in its place.
fn record_kernel_log(root: &RootFs, r: &Result<(kernlog::Extract, bool), String>) {
    match r {
        Ok((x, _)) => root.record(kernlog::EXTRACT, x.to_file()),
        Err(e) if root.is_recording() => {
            root.record_note(format!("kernel log not collected: {e}"));
            root.record_mark(kernlog::EXTRACT, e);
        }
        Err(_) => {}
    }
}

/// The kernel log's extract into the facts every kernel-log check reads: the Xid lines
/// (health.xid, memory.errors) and the PCIe lines (pcie.aer). `xid_only`: the extract holds
/// Xid lines only (a snapshot's old cmd/dmesg-xid.txt).
fn apply_kernel_log(facts: &mut Facts, r: Result<(kernlog::Extract, bool), String>) {
    match r {
        Ok((x, xid_only)) => {
            let text = x.text();
            facts.xid_events = Reading::Value(files::xids_from_text(&text));
            facts.pcie_errors.log = if xid_only {
                Reading::unavailable(format!(
                    "the snapshot's kernel log extract ({}) holds the Xid lines only",
                    kernlog::OLD_EXTRACT
                ))
            } else {
                let (aer, notices) = gpuaudit_core::parse::kernlog::parse_pcie(&text);
                Reading::Value(KernelLogPcie {
                    source: x.source,
                    aer,
                    notices,
                })
            };
        }
        Err(e) => {
            facts.xid_events = Reading::Unavailable(e.clone());
            facts.pcie_errors.log = Reading::Unavailable(e);
        }
    }
}

/// Fill what follows from the model where the source could not read it: the compute
/// capability is a property of the model (nvidia-smi -q does not print it). Each value says
/// where it came from.
fn finish(facts: &mut Facts) {
    if let Reading::Value(gpus) = &mut facts.gpus {
        for g in gpus.iter_mut() {
            fill_from_spec(g);
        }
    }
}

fn fill_from_spec(g: &mut GpuFacts) {
    if g.compute_capability.value().is_some() {
        if g.compute_capability_source.is_none() {
            g.compute_capability_source = ValueSource::of_facts(&g.source);
        }
        return;
    }
    let spec = SpecDb::embedded().identify_gpu(g);
    if let Some(cc) = spec.and_then(|s| s.compute_capability()) {
        g.compute_capability = Reading::Value(cc);
        g.compute_capability_source = Some(ValueSource::Datasheet);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fifo(p: &Path) {
        use std::os::unix::ffi::OsStrExt;
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }

    fn snapshot_of(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (rel, content) in files {
            let p = d.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, content).unwrap();
        }
        d
    }

    const FIXTURE: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/snapshots/h200-x2-vm"
    );

    /// A copy of the 2xH200 snapshot's driver files, with the XML replaced.
    fn snapshot_with_xml(xml: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let src = Path::new(FIXTURE);
        for bus in ["0000:00:06.0", "0000:00:07.0"] {
            let rel = format!("proc/driver/nvidia/gpus/{bus}/information");
            fs::create_dir_all(d.path().join(&rel).parent().unwrap()).unwrap();
            fs::copy(src.join(&rel), d.path().join(&rel)).unwrap();
        }
        fs::create_dir_all(d.path().join("cmd")).unwrap();
        if let Some(x) = xml {
            fs::write(d.path().join("cmd/nvidia-smi-q.xml"), x).unwrap();
        }
        d
    }

    fn opts() -> GatherOptions {
        GatherOptions::default()
    }

    #[test]
    fn an_unreadable_os_release_keeps_its_reason() {
        let d = snapshot_of(&[("usr/lib/os-release", "ID=debian\nPRETTY_NAME=\"Debian\"\n")]);
        fifo(&d.path().join("etc/os-release"));
        let f = snapshot(d.path(), &opts()).unwrap();
        assert_eq!(
            f.machine.os.reason(),
            Some("/etc/os-release: a FIFO, not a regular file: not read")
        );
        // Only a missing /etc/os-release falls back to /usr/lib/os-release.
        fs::remove_file(d.path().join("etc/os-release")).unwrap();
        let f = snapshot(d.path(), &opts()).unwrap();
        assert_eq!(f.machine.os.value().unwrap().pretty_name, "Debian");
    }

    #[test]
    fn an_unreadable_pci_function_is_a_reason_not_a_gpu_less() {
        let dev = "sys/bus/pci/devices/0000:00:06.0";
        let d = snapshot_of(&[
            (&format!("{dev}/vendor"), "0x10de\n"),
            (&format!("{dev}/device"), "0x2335\n"),
            (&format!("{dev}/class"), "0x030200\n"),
        ]);
        assert_eq!(
            snapshot(d.path(), &opts())
                .unwrap()
                .pci_gpus
                .value()
                .unwrap()
                .len(),
            1
        );
        fifo(&d.path().join("sys/bus/pci/devices/0000:00:07.0/vendor"));
        let f = snapshot(d.path(), &opts()).unwrap();
        let why = f.pci_gpus.reason().unwrap();
        assert!(
            why.starts_with("/sys/bus/pci/devices/0000:00:07.0/vendor: a FIFO"),
            "{why}"
        );
        fs::write(d.path().join(dev).join("class"), "garbage\n").unwrap();
        fs::remove_file(d.path().join("sys/bus/pci/devices/0000:00:07.0/vendor")).unwrap();
        let f = snapshot(d.path(), &opts()).unwrap();
        assert!(f
            .pci_gpus
            .reason()
            .unwrap()
            .contains("class: not a PCI id: 'garbage'"));
    }

    #[test]
    fn dmi_strings_are_read_and_placeholders_are_reasons() {
        let d = snapshot_of(&[
            ("sys/class/dmi/id/sys_vendor", "Amazon EC2\n"),
            ("sys/class/dmi/id/product_name", "p5.48xlarge\n"),
            ("sys/class/dmi/id/board_vendor", "To be filled by O.E.M.\n"),
            ("sys/class/dmi/id/board_name", "\n"),
        ]);
        let dmi = snapshot(d.path(), &opts()).unwrap().machine.dmi;
        assert_eq!(
            dmi.sys_vendor.value().map(String::as_str),
            Some("Amazon EC2")
        );
        assert_eq!(dmi.instance_type(), Some("p5.48xlarge"));
        assert_eq!(
            dmi.board_vendor.reason(),
            Some(
                "/sys/class/dmi/id/board_vendor: a firmware placeholder ('To be filled by O.E.M.')"
            )
        );
        assert_eq!(
            dmi.board_name.reason(),
            Some("/sys/class/dmi/id/board_name: empty file")
        );
        assert!(dmi.product_version.reason().is_some());
    }

    #[test]
    fn meta_json_format_and_description() {
        let d = snapshot_of(&[("meta.json", r#"{"format": 7}"#)]);
        let e = snapshot(d.path(), &opts()).unwrap_err().to_string();
        assert!(e.ends_with("meta.json: unsupported snapshot format 7 (this gpuaudit reads \"gpuaudit-snapshot/1\")"), "{e}");
        let d = snapshot_of(&[(
            "meta.json",
            r#"{"format": "gpuaudit-snapshot/1", "description": "x"}"#,
        )]);
        let f = snapshot(d.path(), &opts()).unwrap();
        assert_eq!(
            f.origin,
            Origin::Snapshot {
                path: d.path().display().to_string(),
                description: Some("x".into()),
                collected_at: None,
            }
        );
        // collected_at is read back in UTC; one that is no RFC 3339 time is left out.
        for (written, read) in [
            ("2026-12-01T10:24:13Z", Some("2026-12-01T10:24:13Z")),
            ("2026-12-01T11:24:13+01:00", Some("2026-12-01T10:24:13Z")),
            ("yesterday", None),
            ("2026-13-01T10:24:13Z", None),
        ] {
            let d = snapshot_of(&[(
                "meta.json",
                &format!(r#"{{"format": "gpuaudit-snapshot/1", "collected_at": "{written}"}}"#),
            )]);
            let f = snapshot(d.path(), &opts()).unwrap();
            let Origin::Snapshot { collected_at, .. } = f.origin else {
                panic!("a snapshot")
            };
            assert_eq!(collected_at.as_deref(), read, "{written}");
        }
        // No format at all (a hand-made snapshot) and a damaged meta.json are read.
        for meta in [r#"{"description": "by hand"}"#, "{ not json"] {
            let d = snapshot_of(&[("meta.json", meta)]);
            assert!(snapshot(d.path(), &opts()).is_ok(), "{meta}");
        }
        let d = snapshot_of(&[("other", "")]);
        assert!(matches!(
            snapshot(d.path(), &opts()),
            Err(SnapshotError::NotASnapshot(_))
        ));
    }

    #[test]
    fn attached_gpus_and_the_compute_capabilitys_source_are_carried() {
        // One <gpu> of the four the driver says are attached (as in the real A100 MIG log).
        let xml = "<nvidia_smi_log><attached_gpus>4</attached_gpus><gpu id=\"00000000:01:00.0\">\
                   <product_name>NVIDIA A100-SXM4-80GB</product_name>\
                   <pci><pci_device_id>20B210DE</pci_device_id></pci></gpu></nvidia_smi_log>";
        let d = snapshot_of(&[("cmd/nvidia-smi-q.xml", xml)]);
        let f = snapshot(d.path(), &opts()).unwrap();
        assert_eq!(f.driver.attached_gpus, Reading::Value(4));
        let g = &f.gpus.value().unwrap()[0];
        // nvidia-smi -q has no compute capability: the datasheet's, and said so.
        assert_eq!(
            g.compute_capability.value().map(|c| c.to_string()),
            Some("8.0".into())
        );
        assert_eq!(g.compute_capability_source, Some(ValueSource::Datasheet));
        // A model the database does not know: nothing filled, no source.
        let xml = "<nvidia_smi_log><gpu id=\"00000000:01:00.0\">\
                   <product_name>Radeon</product_name></gpu></nvidia_smi_log>";
        let d = snapshot_of(&[("cmd/nvidia-smi-q.xml", xml)]);
        let f = snapshot(d.path(), &opts()).unwrap();
        let g = &f.gpus.value().unwrap()[0];
        assert!(g.compute_capability.value().is_none());
        assert_eq!(g.compute_capability_source, None);
    }

    #[test]
    fn a_compute_capability_already_read_keeps_its_source() {
        let mut g = GpuFacts::unread(0, "0000:01:00.0", "nvml", "not read");
        g.compute_capability =
            Reading::Value(gpuaudit_core::facts::ComputeCapability { major: 9, minor: 0 });
        fill_from_spec(&mut g);
        assert_eq!(g.compute_capability_source, Some(ValueSource::Nvml));
        g.compute_capability_source = Some(ValueSource::Cuda);
        fill_from_spec(&mut g);
        assert_eq!(g.compute_capability_source, Some(ValueSource::Cuda));
    }

    #[test]
    fn gpus_beyond_the_cap_are_said() {
        let xml = format!(
            "<nvidia_smi_log>{}</nvidia_smi_log>",
            "<gpu id=\"00000000:01:00.0\"/>".repeat(300)
        );
        let d = snapshot_of(&[("cmd/nvidia-smi-q.xml", &xml)]);
        let f = snapshot(d.path(), &opts()).unwrap();
        assert_eq!(f.gpus.value().unwrap().len(), 256);
        assert_eq!(
            f.driver.gpus_left_out.as_deref(),
            Some("nvidia-smi lists 300 GPUs; the first 256 were read")
        );
    }

    fn fixture_xml() -> String {
        fs::read_to_string(Path::new(FIXTURE).join("cmd/nvidia-smi-q.xml")).unwrap()
    }

    #[test]
    fn a_broken_xml_falls_back_to_the_kernel_modules_files() {
        let d = snapshot_with_xml(Some("<?xml version=\"1.0\" ?><nvidia_smi_log><gpu"));
        let f = snapshot(d.path(), &GatherOptions::default()).unwrap();
        let q = f.driver.query.value().unwrap();
        assert!(
            q.starts_with("files: /proc/driver/nvidia/gpus (nvidia-smi -q -x: "),
            "{q}"
        );
        let gpus = f.gpus.value().unwrap();
        assert_eq!(gpus.len(), 2);
        assert_eq!(gpus[1].index, 1);
        assert_eq!(gpus[1].pci_bus_id, "0000:00:07.0");
        assert_eq!(gpus[1].source, "procfs");
        assert_eq!(gpus[1].name, Reading::Value("NVIDIA H200".into()));
        assert_eq!(gpus[1].vbios, Reading::Value("96.00.a5.00.1a".into()));
        let why = gpus[1].power.limit_w.reason().unwrap();
        assert!(
            why.starts_with("the driver's report could not be read (nvidia-smi -q -x"),
            "{why}"
        );
        assert!(f.driver.report_unreadable.is_some());
    }

    /// Every way the driver's report can be there and not read: `report_unreadable` says why
    /// (and the GPUs the kernel module's files name say so too); every way it is absent or is
    /// the driver's own error leaves it unset.
    #[test]
    fn a_driver_report_there_but_not_read_is_said_so() {
        let unreadable = |d: &tempfile::TempDir| {
            let f = snapshot(d.path(), &opts()).unwrap();
            let why = f.driver.report_unreadable.clone();
            if let Some(w) = &why {
                assert_eq!(f.gpus.value().map(Vec::len), Some(2), "{w}");
                let r = f.gpus.value().unwrap()[0].power.limit_w.reason().unwrap();
                assert!(
                    r.starts_with("the driver's report could not be read ("),
                    "{r}"
                );
            }
            why
        };
        let entity = "<?xml version=\"1.0\"?><!DOCTYPE nvidia_smi_log [<!ENTITY e \"x\">]>\
                      <nvidia_smi_log><driver_version>&e;</driver_version></nvidia_smi_log>";
        for (xml, said) in [
            (
                "<?xml version=\"1.0\" ?><nvidia_smi_log><gpu",
                "nvidia-smi -q -x: malformed: ",
            ),
            (entity, "declares an entity"),
            ("", "nvidia-smi -q -x: empty"),
            ("<other/>", "root element is <other>"),
        ] {
            let d = snapshot_with_xml(Some(xml));
            let why = unreadable(&d).unwrap_or_else(|| panic!("{xml:?} read as no report"));
            assert!(why.contains(said), "{xml:?}: {why}");
        }
        // Larger than the cap, a FIFO, the unreadable marker of the collecting run.
        let d = snapshot_with_xml(None);
        let xml = d.path().join("cmd/nvidia-smi-q.xml");
        fs::write(&xml, vec![b' '; (16 << 20) + 1]).unwrap();
        assert_eq!(
            unreadable(&d).as_deref(),
            Some("cmd/nvidia-smi-q.xml: larger than 16 MiB, not read")
        );
        fs::remove_file(&xml).unwrap();
        fifo(&xml);
        assert_eq!(
            unreadable(&d).as_deref(),
            Some("cmd/nvidia-smi-q.xml: a FIFO, not a regular file: not read")
        );
        fs::remove_file(&xml).unwrap();
        fs::write(
            &xml,
            "# gpuaudit-unreadable: nvidia-smi: timed out after 15 s\n",
        )
        .unwrap();
        assert_eq!(
            unreadable(&d).as_deref(),
            Some("cmd/nvidia-smi-q.xml: nvidia-smi: timed out after 15 s")
        );
        // No XML: cmd/driver-error.txt, there but not read, or empty.
        fs::remove_file(&xml).unwrap();
        let err = d.path().join("cmd/driver-error.txt");
        fifo(&err);
        assert_eq!(
            unreadable(&d).as_deref(),
            Some("cmd/driver-error.txt: a FIFO, not a regular file: not read")
        );
        fs::remove_file(&err).unwrap();
        fs::write(&err, "\n").unwrap();
        assert!(unreadable(&d)
            .unwrap()
            .contains("driver-error.txt: empty file"));
        // The driver's own words, or nothing at all: no unread report.
        fs::write(
            &err,
            "NVML: the NVIDIA driver is not loaded; nvidia-smi: not found\n",
        )
        .unwrap();
        assert_eq!(unreadable(&d), None);
        fs::remove_file(&err).unwrap();
        assert_eq!(unreadable(&d), None);
        let f = snapshot(d.path(), &opts()).unwrap();
        let q = f.driver.query.value().unwrap();
        assert!(
            q.contains("snapshot has no nvidia-smi output (cmd/nvidia-smi-q.xml: no such file)"),
            "{q}"
        );
        let said = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.";
        fs::write(&xml, format!("{said}\n")).unwrap();
        assert_eq!(unreadable(&d), None);
        let r = snapshot(d.path(), &opts()).unwrap().gpus.value().unwrap()[0]
            .power
            .limit_w
            .reason()
            .unwrap()
            .to_string();
        assert!(r.starts_with("NVML and nvidia-smi did not answer ("), "{r}");
        assert!(r.contains(said), "{r}");
    }

    #[test]
    fn no_gpu_in_the_files_either_keeps_the_reason() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("cmd")).unwrap();
        fs::write(
            d.path().join("cmd/driver-error.txt"),
            "NVML: the NVIDIA driver is not loaded; nvidia-smi: not found\n",
        )
        .unwrap();
        let f = snapshot(d.path(), &GatherOptions::default()).unwrap();
        assert_eq!(
            f.gpus.reason(),
            Some("NVML: the NVIDIA driver is not loaded; nvidia-smi: not found")
        );
        assert_eq!(f.driver.query.reason(), f.gpus.reason());
    }

    #[test]
    fn implausible_xml_values_are_not_facts() {
        let xml = fixture_xml()
            .replacen(
                "<current_link_gen>5</current_link_gen>",
                "<current_link_gen>99</current_link_gen>",
                1,
            )
            .replacen(
                "<current_link_width>16x</current_link_width>",
                "<current_link_width>4294967295x</current_link_width>",
                1,
            );
        let d = snapshot_with_xml(Some(&xml));
        let f = snapshot(d.path(), &GatherOptions::default()).unwrap();
        assert_eq!(f.driver.query, Reading::Value("nvidia-smi".into()));
        let g = &f.gpus.value().unwrap()[0];
        assert_eq!(
            g.pcie.gen_current.reason(),
            Some("implausible value from nvidia-smi: PCIe generation 99 (PCIe has generations 1 to 6)")
        );
        assert!(g
            .pcie
            .width_current
            .reason()
            .unwrap()
            .contains("4294967295"));
        // The other GPU is untouched.
        assert_eq!(
            f.gpus.value().unwrap()[1].pcie.gen_current,
            Reading::Value(5)
        );
    }

    #[test]
    fn a_kernel_log_extract_that_cannot_be_read_says_why_not_that_it_is_absent() {
        let d = snapshot_with_xml(None);
        let f = snapshot(d.path(), &GatherOptions::default()).unwrap();
        assert_eq!(f.xid_events.reason(), Some(super::NO_EXTRACT));
        // Unreadable as a FIFO is (a root-only file read by another user is the other case:
        // tests/unprivileged.rs runs that one as nobody).
        fifo(&d.path().join("cmd/dmesg-xid.txt"));
        let f = snapshot(d.path(), &GatherOptions::default()).unwrap();
        let why = f.xid_events.reason().unwrap_or_default();
        assert!(why.starts_with("kernel log extract not read: "), "{why}");
        assert!(why.contains("FIFO"), "{why}");
    }
}
