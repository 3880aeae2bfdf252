//! Live GPU facts through NVML (libnvidia-ml.so.1, loaded at run time by nvml-wrapper). Only
//! ever called inside the `__nvml` child process (see the module above).
//!
//! NVML's absence is not an error: `load()` returns the reason. Every call is guarded: an NVML
//! function an older driver lacks becomes `Unavailable`, and a panic inside the wrapper (it
//! should not happen, but a bug there must not end the child) is caught and reported the same
//! way.

use gpuaudit_core::facts::plausible;
use gpuaudit_core::facts::{
    normalize_bus_id, ComputeCapability, CudaVersion, Fabric, GpuFacts, GpuProcess, NvLink,
    RemappedRows, RetiredPages, ThrottleReason, VirtualizationMode,
};
use gpuaudit_core::Reading;
use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, GpuVirtualizationMode, MemoryError, TemperatureSensor,
};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the current thread is inside a guarded NVML call (the CLI's panic hook stays quiet
/// there: the panic is turned into a reading's reason).
pub fn in_guarded_call() -> bool {
    GUARDED.with(|g| g.get())
}

fn guarded<T>(f: impl FnOnce() -> Result<T, NvmlError>) -> Reading<T> {
    GUARDED.with(|g| g.set(true));
    let r = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(false));
    match r {
        Ok(Ok(v)) => Reading::Value(v),
        Ok(Err(e)) => Reading::Unavailable(reason(&e)),
        Err(_) => Reading::unavailable("NVML: the call failed inside the library wrapper"),
    }
}

fn reason(e: &NvmlError) -> String {
    match e {
        NvmlError::NotSupported => gpuaudit_core::facts::NVML_NOT_SUPPORTED.into(),
        NvmlError::NoPermission => "NVML: no permission".into(),
        NvmlError::FailedToLoadSymbol(_) => "NVML: this driver's NVML lacks the function".into(),
        NvmlError::FunctionNotFound => "NVML: this driver's NVML lacks the function".into(),
        other => format!("NVML: {other}"),
    }
}

/// NVML, loaded.
pub struct NvmlSource {
    nvml: Nvml,
}

/// The driver as NVML reports it.
pub struct NvmlDriver {
    pub version: Reading<String>,
    pub cuda_version: Reading<CudaVersion>,
}

impl NvmlSource {
    /// Load libnvidia-ml.so.1 and initialise it, or say why not.
    pub fn load() -> Result<NvmlSource, String> {
        GUARDED.with(|g| g.set(true));
        let r = catch_unwind(Nvml::init);
        GUARDED.with(|g| g.set(false));
        match r {
            Ok(Ok(nvml)) => Ok(NvmlSource { nvml }),
            Ok(Err(NvmlError::LibloadingError(e))) => {
                Err(format!("NVML could not be loaded (libnvidia-ml.so.1): {e}"))
            }
            Ok(Err(NvmlError::DriverNotLoaded)) => {
                Err("NVML: the NVIDIA driver is not loaded".to_string())
            }
            Ok(Err(e)) => Err(format!("NVML could not be initialised: {e}")),
            Err(_) => Err("NVML could not be initialised (the library wrapper failed)".into()),
        }
    }

    pub fn driver(&self) -> NvmlDriver {
        NvmlDriver {
            version: guarded(|| self.nvml.sys_driver_version()),
            cuda_version: guarded(|| self.nvml.sys_cuda_driver_version()).and_then(|v| {
                match CudaVersion::from_int(v) {
                    Some(c) => Reading::Value(c),
                    None => Reading::unavailable(format!("NVML: odd CUDA driver version {v}")),
                }
            }),
        }
    }

    /// Every GPU NVML enumerates, in its order; a device that cannot even be opened is
    /// reported with what is known and the reason.
    pub fn gpus(&self) -> Result<Vec<GpuFacts>, String> {
        let count = match guarded(|| self.nvml.device_count()) {
            Reading::Value(c) => c,
            Reading::Unavailable(r) => return Err(r),
        };
        // A broken library's count (2^32 - 1) must not size an allocation or a loop.
        if let Some(why) = plausible::GPU_COUNT.reject(count, "NVML") {
            return Err(why);
        }
        let mut out = Vec::with_capacity(count as usize);
        for i in 0..count {
            match guarded(|| self.nvml.device_by_index(i)) {
                Reading::Value(d) => out.push(read_device(i, &d)),
                Reading::Unavailable(r) => out.push(GpuFacts::unread(
                    i,
                    "unknown",
                    "nvml",
                    &format!("NVML could not open GPU {i}: {r}"),
                )),
            }
        }
        Ok(out)
    }

    /// The library, for the watcher's busy readings and samples.
    pub fn inner(&self) -> &Nvml {
        &self.nvml
    }
}

fn mib(bytes: u64) -> u64 {
    bytes / (1024 * 1024)
}

fn read_device(index: u32, d: &Device) -> GpuFacts {
    let pci = guarded(|| d.pci_info());
    let bus = pci
        .value()
        .map(|p| normalize_bus_id(&p.bus_id))
        .unwrap_or_else(|| "unknown".to_string());
    let mut g = GpuFacts::unread(index, &bus, "nvml", "NVML: not read");

    g.name = guarded(|| d.name());
    g.uuid = guarded(|| d.uuid());
    g.serial = guarded(|| d.serial());
    g.pci_device_id = pci.as_ref().map(|p| (p.pci_device_id >> 16) as u16);
    g.pci_subsystem_id = pci.and_then(|p| match p.pci_sub_system_id {
        Some(s) => Reading::Value(s),
        None => Reading::unavailable("NVML: not reported"),
    });
    g.architecture = guarded(|| d.architecture()).map(|a| a.to_string());
    g.compute_capability = guarded(|| d.cuda_compute_capability()).map(|c| ComputeCapability {
        major: c.major as u32,
        minor: c.minor as u32,
    });
    g.vbios = guarded(|| d.vbios_version());
    g.board_part_number = guarded(|| d.board_part_number());

    let mem = guarded(|| d.memory_info());
    g.memory.total_mib = mem.as_ref().map(|m| mib(m.total));
    g.memory.used_mib = mem.as_ref().map(|m| mib(m.used));
    g.memory.free_mib = mem.as_ref().map(|m| mib(m.free));
    g.memory.reserved_mib = mem.map(|m| mib(m.reserved));
    g.sm_count = guarded(|| d.attributes()).map(|a| a.multiprocessor_count);

    g.pcie.gen_current = guarded(|| d.current_pcie_link_gen());
    g.pcie.gen_max = guarded(|| d.max_pcie_link_gen());
    g.pcie.gen_max_gpu = gpu_max_pcie_gen(d);
    g.pcie.gen_max_host = Reading::unavailable("NVML: not reported separately");
    g.pcie.width_current = guarded(|| d.current_pcie_link_width());
    g.pcie.width_max = guarded(|| d.max_pcie_link_width());
    g.pcie.replay_counter = guarded(|| d.pcie_replay_counter()).and_then(counter_32);

    let watts = |mw: u32| mw as f64 / 1000.0;
    g.power.draw_w = guarded(|| d.power_usage()).map(watts);
    g.power.limit_w = guarded(|| d.enforced_power_limit()).map(watts);
    g.power.default_limit_w = guarded(|| d.power_management_limit_default()).map(watts);
    let cons = guarded(|| d.power_management_limit_constraints());
    g.power.min_limit_w = cons.as_ref().map(|c| watts(c.min_limit));
    g.power.max_limit_w = cons.map(|c| watts(c.max_limit));

    g.clocks.sm_mhz = guarded(|| d.clock_info(Clock::SM));
    g.clocks.mem_mhz = guarded(|| d.clock_info(Clock::Memory));
    g.clocks.sm_max_mhz = guarded(|| d.max_clock_info(Clock::SM));
    g.clocks.mem_max_mhz = guarded(|| d.max_clock_info(Clock::Memory));
    // nvidia-smi's "Applications Clocks / Graphics" is NVML's graphics clock: use the same so
    // live and snapshot audits agree.
    g.clocks.app_sm_mhz = guarded(|| d.applications_clock(Clock::Graphics));
    g.clocks.app_mem_mhz = guarded(|| d.applications_clock(Clock::Memory));
    g.clocks.default_app_sm_mhz = guarded(|| d.default_applications_clock(Clock::Graphics));

    g.throttle_reasons =
        guarded(|| d.current_throttle_reasons()).map(|r| ThrottleReason::decode(r.bits()));
    g.performance_state = guarded(|| d.performance_state()).map(|p| pstate_name(p as u32));
    g.persistence_mode = guarded(|| d.is_in_persistent_mode());
    let mig = guarded(|| d.mig_mode());
    g.mig.current = mig.as_ref().map(|m| m.current == 1);
    g.mig.pending = mig.map(|m| m.pending == 1);
    g.virtualization = guarded(|| d.virtualization_mode()).map(|v| match v {
        GpuVirtualizationMode::Bare => VirtualizationMode::None,
        GpuVirtualizationMode::PassThrough => VirtualizationMode::PassThrough,
        GpuVirtualizationMode::Vgpu => VirtualizationMode::Vgpu,
        GpuVirtualizationMode::HostVgpu => VirtualizationMode::HostVgpu,
        GpuVirtualizationMode::HostVsga => VirtualizationMode::HostVsga,
    });
    g.compute_mode = guarded(|| d.compute_mode()).map(|m| {
        use nvml_wrapper::enum_wrappers::device::ComputeMode;
        match m {
            ComputeMode::Default => "Default",
            ComputeMode::ExclusiveThread => "Exclusive_Thread",
            ComputeMode::Prohibited => "Prohibited",
            ComputeMode::ExclusiveProcess => "Exclusive_Process",
        }
        .to_string()
    });

    let ecc = guarded(|| d.is_ecc_enabled());
    g.ecc.current = ecc.as_ref().map(|e| e.currently_enabled);
    g.ecc.pending = ecc.map(|e| e.pending_enabled);
    g.ecc.volatile_corrected =
        guarded(|| d.total_ecc_errors(MemoryError::Corrected, EccCounter::Volatile));
    g.ecc.volatile_uncorrected =
        guarded(|| d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile));
    g.ecc.aggregate_corrected =
        guarded(|| d.total_ecc_errors(MemoryError::Corrected, EccCounter::Aggregate));
    g.ecc.aggregate_uncorrected =
        guarded(|| d.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Aggregate));

    g.retired_pages = retired_pages(d);
    g.remapped_rows = remapped_rows(d);
    g.temperature_c = guarded(|| d.temperature(TemperatureSensor::Gpu)).and_then(|t| {
        // An unsigned reading that does not fit an i32 is no temperature (the limit says so).
        match i32::try_from(t) {
            Ok(t) => Reading::Value(t),
            Err(_) => Reading::unavailable(format!(
                "implausible value from NVML: {} {t} ({})",
                plausible::TEMPERATURE_C.what,
                plausible::TEMPERATURE_C.why
            )),
        }
    });
    g.utilization_pct = guarded(|| d.utilization_rates()).map(|u| u.gpu);
    g.processes = guarded(|| d.running_compute_processes()).map(|ps| {
        ps.into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                name: None,
                used_mib: match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(mib(b)),
                    UsedGpuMemory::Unavailable => None,
                },
            })
            .collect()
    });
    g.nvlinks = nvlinks(d);
    g.fabric = fabric(d);
    g
}

/// A 32-bit counter as a fact, or why it is none.
fn counter_32(c: u32) -> Reading<u64> {
    match plausible::COUNTER_32.reject(c, "NVML") {
        None => Reading::Value(u64::from(c)),
        Some(why) => Reading::Unavailable(why),
    }
}

fn pstate_name(p: u32) -> String {
    if p <= 15 {
        format!("P{p}")
    } else {
        "unknown".to_string()
    }
}

fn retired_pages(d: &Device) -> Reading<RetiredPages> {
    use nvml_wrapper::enum_wrappers::device::RetirementCause;
    let sbe = guarded(|| d.retired_pages(RetirementCause::MultipleSingleBitEccErrors));
    let dbe = guarded(|| d.retired_pages(RetirementCause::DoubleBitEccError));
    let pending = guarded(|| d.are_pages_pending_retired());
    match (sbe, dbe, pending) {
        (Reading::Value(s), Reading::Value(db), Reading::Value(p)) => {
            Reading::Value(RetiredPages {
                single_bit: s.len() as u64,
                double_bit: db.len() as u64,
                pending: p,
            })
        }
        (Reading::Unavailable(r), _, _)
        | (_, Reading::Unavailable(r), _)
        | (_, _, Reading::Unavailable(r)) => Reading::Unavailable(r),
    }
}

/// `nvmlDeviceGetGpuMaxPcieLinkGeneration` has no wrapper: call the raw binding, after
/// checking that this driver's NVML has it.
fn gpu_max_pcie_gen(d: &Device) -> Reading<u32> {
    let lib = d.nvml().lib();
    let Ok(f) = lib.nvmlDeviceGetGpuMaxPcieLinkGeneration.as_ref() else {
        return Reading::unavailable(
            "NVML: this driver's NVML lacks nvmlDeviceGetGpuMaxPcieLinkGeneration",
        );
    };
    let mut gen: u32 = 0;
    // SAFETY: the handle comes from a live `Device` of this NVML instance and `gen` outlives
    // the call; the function only writes one unsigned int.
    let rc = unsafe { f(d.handle(), &mut gen) };
    if rc == 0 {
        Reading::Value(gen)
    } else {
        Reading::unavailable(format!("NVML: error {rc}"))
    }
}

/// `nvmlDeviceGetRemappedRows` has no wrapper either.
fn remapped_rows(d: &Device) -> Reading<RemappedRows> {
    let lib = d.nvml().lib();
    let Ok(f) = lib.nvmlDeviceGetRemappedRows.as_ref() else {
        return Reading::unavailable("NVML: this driver's NVML lacks nvmlDeviceGetRemappedRows");
    };
    let (mut corr, mut unc, mut pending, mut failure) = (0u32, 0u32, 0u32, 0u32);
    // SAFETY: as above; four out-parameters, each a valid unsigned int.
    let rc = unsafe { f(d.handle(), &mut corr, &mut unc, &mut pending, &mut failure) };
    if rc == 0 {
        if let Some(why) = [corr, unc]
            .into_iter()
            .find_map(|c| plausible::COUNTER_32.reject(c, "NVML"))
        {
            return Reading::Unavailable(format!("{why} (remapped rows)"));
        }
    }
    match rc {
        0 => Reading::Value(RemappedRows {
            correctable: corr as u64,
            uncorrectable: unc as u64,
            pending: pending != 0,
            failure: failure != 0,
        }),
        // NVML_ERROR_NOT_SUPPORTED: before Ampere, and on later GPUs in some VMs and modes
        // (memory.errors, which knows the architecture, says which).
        3 => Reading::unavailable(gpuaudit_core::facts::NVML_NOT_SUPPORTED),
        rc => Reading::unavailable(format!("NVML: error {rc}")),
    }
}

/// NVSwitch fabric registration (`nvmlDeviceGetGpuFabricInfo`, R525 and later).
fn fabric(d: &Device) -> Reading<Fabric> {
    let lib = d.nvml().lib();
    let Ok(f) = lib.nvmlDeviceGetGpuFabricInfo.as_ref() else {
        return Reading::unavailable("NVML: this driver's NVML has no fabric information");
    };
    // SAFETY: a plain C struct of integers and bytes; all-zero is a valid value.
    let mut info: nvml_wrapper_sys::bindings::nvmlGpuFabricInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is live, `info` is a properly sized out-parameter.
    let rc = unsafe { f(d.handle(), &mut info) };
    if rc != 0 {
        return Reading::unavailable(if rc == 3 {
            "NVML: not supported on this GPU".to_string()
        } else {
            format!("NVML: error {rc}")
        });
    }
    let state = match info.state {
        0 => return Reading::unavailable("NVML: not supported on this GPU"),
        1 => "Not Started",
        2 => "In Progress",
        3 => "Completed",
        _ => "Unknown",
    };
    let status = if info.state == 3 {
        Some(if info.status == 0 {
            "Success".to_string()
        } else {
            format!("error {}", info.status)
        })
    } else {
        None
    };
    let uuid: String = info
        .clusterUuid
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let dash = if matches!(i, 4 | 6 | 8 | 10) { "-" } else { "" };
            format!("{dash}{b:02x}")
        })
        .collect();
    Reading::Value(Fabric {
        state: state.to_string(),
        status,
        // The clique and cluster are only meaningful once the registration completed.
        clique_id: (info.state == 3).then_some(info.cliqueId),
        cluster_uuid: gpuaudit_core::facts::fabric_cluster_uuid(&uuid),
    })
}

fn nvlinks(d: &Device) -> Reading<Vec<NvLink>> {
    // NVML_NVLINK_MAX_LINKS is 18 on Hopper drivers and grows with newer parts.
    const MAX_LINKS: u32 = 36;
    let mut links = Vec::new();
    let mut first_err = None;
    for l in 0..MAX_LINKS {
        let w = d.link_wrapper_for(l);
        match guarded(|| w.is_active()) {
            Reading::Value(active) => {
                let version = if active {
                    guarded(|| w.version()).into_value()
                } else {
                    None
                };
                let remote = if active {
                    guarded(|| w.remote_pci_info())
                        .into_value()
                        .map(|p| p.bus_id)
                } else {
                    None
                };
                links.push(NvLink {
                    link: l,
                    active,
                    version,
                    speed_gbps: None,
                    remote_bus_id: remote,
                });
            }
            Reading::Unavailable(r) => {
                first_err.get_or_insert(r);
                // The first link index NVML rejects marks the end of this GPU's links.
                break;
            }
        }
    }
    if links.is_empty() {
        Reading::Unavailable(first_err.unwrap_or_else(|| "NVML: no NVLink".into()))
    } else {
        Reading::Value(links)
    }
}
