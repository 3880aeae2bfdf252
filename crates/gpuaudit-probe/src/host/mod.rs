//! The host around the GPU: the CUDA libraries, Python/PyTorch, the environment, containers,
//! storage, the network, Jupyter and ssh.
//!
//! [`gather`] reads everything through a [`RootFs`]: on the live machine it also reads the
//! process environment, stats device nodes, resolves symbolic links, asks Python interpreters
//! and (when asked) measures storage and loopback; from a snapshot it reads what a recording
//! [`RootFs`] kept there instead (`gpuaudit collect` is this gather on a recording reader:
//! files are copied as read, and each reading that is no copy, a reduced file or a listing
//! under `cmd/`, is recorded by the reader that makes it). Both go through the same parsers
//! in `gpuaudit_core::parse::host`, so a snapshot audited on the machine that wrote it gives
//! the same facts as the live audit.
//!
//! Paths in facts and messages are the machine's ("/etc/ssh/sshd_config"), never the snapshot
//! directory's.

mod container;
mod env;
mod fabric;
mod graphics;
pub(crate) mod iobench;
mod jupyter;
mod libraries;
mod loopback;
mod python;
mod ssh;
mod storage;
pub mod versions;

use crate::root::RootFs;
use gpuaudit_core::facts::HostFacts;
use gpuaudit_core::parse::host::listing::{format_data_dirs, format_env, format_libraries};
use gpuaudit_core::reading::Reading;
use std::path::PathBuf;
use std::time::Duration;

/// What a live gather may do beyond reading files.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// `--data-dir`: where datasets and models live. Empty: the current directory and the
    /// Hugging Face and torch caches.
    pub data_dirs: Vec<PathBuf>,
    /// Run storage.throughput (live machine only; `--full`: a few seconds per directory).
    pub measure_storage: bool,
    /// Run net.loopback (live machine only; at most 2 s).
    pub measure_loopback: bool,
    /// Ask each Python environment's interpreter about PyTorch (live machine only).
    pub ask_interpreter: bool,
    /// Hard limit for one interpreter (importing torch takes 3 s or more).
    pub interpreter_timeout: Duration,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            data_dirs: Vec::new(),
            measure_storage: false,
            measure_loopback: false,
            ask_interpreter: true,
            interpreter_timeout: Duration::from_secs(30),
        }
    }
}

/// Why measured readings are missing on a snapshot.
pub const SNAPSHOT_NOT_MEASURED: &str = "snapshot audit: nothing is measured";
/// Why measured readings are missing on a live audit that did not ask for measurements.
pub const NOT_ASKED: &str = "measurements were not asked for";
/// Why storage.throughput is missing on a quick live audit.
pub const NOT_ASKED_STORAGE: &str = "quick audit: storage throughput runs with --full";

/// Everything about the host around the GPU. Safe to call from a thread; it blocks for as long
/// as the interpreters (bounded by `interpreter_timeout`, run in parallel) and the
/// measurements (a few seconds per data directory, 2 s of loopback) take.
pub fn gather(root: &RootFs, opts: &HostOptions) -> HostFacts {
    let live = root.is_live();
    // What is no file (the environment, the data directories' status, the libraries resolved
    // from the loader's cache, links and wheels) is kept in a snapshot as its listing under
    // cmd/, read from sources that are not copied.
    let quiet = root.unrecorded();
    let env = env::read_env(&quiet);
    // cmd/env.json marks a snapshot that has a host part; one collected from a snapshot
    // without it must not claim one.
    if has_host_part(&quiet) {
        root.record_reading(env::SNAPSHOT_FILE, &env, format_env);
    }
    let env_value = env.value().cloned().unwrap_or_default();
    let mounts = storage::read_mounts(root);
    let data_dirs = storage::data_dirs(&quiet, opts, &env_value);
    root.record_reading(storage::DATA_DIRS_FILE, &data_dirs, |d| format_data_dirs(d));
    let sites = python::discover(root, &env_value);
    let python_envs = python::read_envs(root, &sites, opts);
    let libraries = libraries::read(&quiet, &env_value, &sites);
    root.record_reading(libraries::LISTING, &libraries, |l| format_libraries(l));
    let container = container::read(root, &env_value, mounts.value().map(Vec::as_slice));
    let throughput = if !live {
        Reading::unavailable(SNAPSHOT_NOT_MEASURED)
    } else if !opts.measure_storage {
        Reading::unavailable(NOT_ASKED_STORAGE)
    } else {
        let dirs = data_dirs.value().cloned().unwrap_or_default();
        Reading::Value(iobench::measure_all(&dirs))
    };
    let loopback = if !live {
        Reading::unavailable(SNAPSHOT_NOT_MEASURED)
    } else if !opts.measure_loopback {
        Reading::unavailable(NOT_ASKED)
    } else {
        loopback::measure()
    };
    let mut host = HostFacts {
        env,
        libraries,
        python: python_envs,
        container,
        mounts,
        data_dirs,
        throughput,
        loopback,
        fabric: fabric::read(root),
        jupyter: jupyter::read(root, &env_value, &sites),
        ssh: ssh::read(root),
        graphics: graphics::read(root),
        versions: versions::read(root),
    };
    if !has_host_part(root) {
        absence_proves_nothing(&mut host);
    }
    host
}

/// Why "nothing found" is no answer in a snapshot without a host part.
pub const NO_HOST_PART: &str =
    "not in the snapshot (it has no host part: no cmd/env.json, which gpuaudit collect writes)";

/// Whether the host around the GPU was collected into this root: always on the live machine;
/// in a snapshot, `collect` writes cmd/env.json (the environment, or the reason it could not)
/// every time, so a snapshot without it was made by hand or before the host checks, and its
/// missing files were never looked for.
pub fn has_host_part(root: &RootFs) -> bool {
    root.is_live() || root.exists(env::SNAPSHOT_FILE)
}

/// In a snapshot without a host part, the readings that rest on a file being absent ("no
/// sshd configuration", "no RDMA device", "not in a container") become unavailable: nobody
/// looked. Readings of files that are there stay as read.
fn absence_proves_nothing(h: &mut HostFacts) {
    fn unless<T>(r: &mut Reading<T>, nothing: impl Fn(&T) -> bool) {
        if r.value().is_some_and(nothing) {
            *r = Reading::unavailable(NO_HOST_PART);
        }
    }
    unless(&mut h.python, Vec::is_empty);
    unless(&mut h.jupyter, Vec::is_empty);
    unless(&mut h.ssh.sshd, Option::is_none);
    unless(&mut h.fabric.rdma, Vec::is_empty);
    unless(&mut h.fabric.nics, Vec::is_empty);
    unless(&mut h.graphics, |g| {
        g.vulkan_icds.is_empty() && g.egl_vendors.is_empty()
    });
    let c = &mut h.container;
    unless(&mut c.inside, Option::is_none);
    unless(&mut c.docker, Option::is_none);
    unless(&mut c.containerd, Option::is_none);
    unless(&mut c.cdi, Vec::is_empty);
    unless(&mut c.toolkit, |t| {
        t.found.is_empty() && t.engines.is_empty()
    });
}

pub use libraries::Inventory as LibraryInventory;

/// The CUDA libraries of the live machine: the inventory cuda.libraries reports, with
/// `first_dirs` (machine paths) searched before everything else. The measurements pick the
/// libraries they load from it.
pub fn live_library_inventory(first_dirs: &[String]) -> LibraryInventory {
    let root = RootFs::live();
    let env = env::live_env();
    let sites = python::discover(&root, &env);
    libraries::inventory(&root, &env, &sites, first_dirs)
}

/// storage.throughput alone (`gpuaudit bench storage`): a few seconds per directory.
pub fn measure_storage(
    dirs: &[gpuaudit_core::facts::DataDir],
) -> Vec<gpuaudit_core::facts::DirThroughput> {
    iobench::measure_all(dirs)
}

/// net.loopback alone: at most 1000 round trips or 2 s.
pub fn measure_loopback() -> Reading<gpuaudit_core::facts::LoopbackRtt> {
    loopback::measure()
}

/// /proc/sys/net/core/somaxconn.
pub fn gather_somaxconn(root: &RootFs) -> Reading<u32> {
    let rel = "proc/sys/net/core/somaxconn";
    match root.read_text(rel) {
        Ok(Some(t)) => match t.trim().parse::<u32>() {
            Ok(v) => Reading::Value(v),
            Err(_) => Reading::unavailable(format!(
                "{}: not a number: '{}'",
                crate::root::abs(rel),
                gpuaudit_core::parse::host::truncate(t.trim(), 40)
            )),
        },
        Ok(None) => Reading::unavailable(format!("{}: no such file", crate::root::abs(rel))),
        Err(e) => Reading::unavailable(e),
    }
}
