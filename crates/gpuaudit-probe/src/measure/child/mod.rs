//! The measurement child process: the only place gpuaudit touches CUDA.
//!
//! `gpuaudit __measure` reads a [`ChildRequest`] (JSON, on stdin or as the one argument),
//! initialises CUDA, opens the planned GPUs, runs the asked groups in order and writes one
//! [`ChildMsg`] per line on stdout. Each group runs under `catch_unwind`: a missing symbol on
//! an old driver (cudarc panics) costs that group, not the others. A crash, an abort or a hang
//! is the parent's to handle (it kills the child after the group's time limit).
//!
//! This is the frame every group's executor runs in (`measure::<group>::run`): the GPUs
//! opened ([`Ctx`]), the CUDA driver wrappers (`cu`), the protocol lines ([`progress`],
//! [`log`]) and the guard that turns a panic into the group's failure ([`guarded`]).

pub(crate) mod cu;

use super::protocol::{ChildMsg, ChildRequest, GroupResult};
use super::{burn, gemm, memory, nccl, p2p, pcie, rehearse};
use crate::measure::GpuGroup;
use cu::{Gpu, Kernels};
use gpuaudit_core::facts::{ComputeCapability, CudaDevice, OnGpu, SkippedGpu};
use gpuaudit_core::Reading;
use std::io::Read;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// A failure inside the child, as one sentence for the report.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Fail(pub String);

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Self {
        Fail(s.to_string())
    }
}

static STDOUT: Mutex<()> = Mutex::new(());

/// Writes one protocol line (any thread).
pub fn emit(msg: &ChildMsg) {
    let line = msg.to_line();
    let _guard = STDOUT.lock();
    crate::process::write_line(&line);
}

pub fn progress(group: GpuGroup, fraction: f64, message: impl Into<String>) {
    emit(&ChildMsg::Progress {
        group,
        fraction: fraction.clamp(0.0, 1.0),
        message: message.into(),
    });
}

pub fn log(message: impl Into<String>) {
    emit(&ChildMsg::Log {
        message: message.into(),
    });
}

/// The text of a caught panic.
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic".to_string()
    }
}

/// Runs `f`, turning a panic into a failure (cudarc panics when a symbol is missing).
pub fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, Fail>) -> Result<T, Fail> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(Fail(format!("{what}: {}", explain_panic(&panic_text(&*p))))),
    }
}

/// cudarc's panics, in words: a library it could not open, a symbol an old driver or library
/// lacks.
fn explain_panic(text: &str) -> String {
    let t = first_line(text);
    if let Some(rest) = t.strip_prefix("Unable to dynamically load the \"") {
        let lib = rest.split('"').next().unwrap_or("?");
        return format!("the lib{lib} library could not be loaded");
    }
    if let Some(rest) = t.strip_prefix("Missing symbol ") {
        let sym = rest.split(':').next().unwrap_or(rest);
        return format!(
            "{sym} is missing from the loaded library (the driver or library is older than \
             this call needs)"
        );
    }
    t
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    if l.len() > 400 {
        format!(
            "{}...",
            &l[..l.char_indices().nth(400).map_or(l.len(), |(i, _)| i)]
        )
    } else {
        l.to_string()
    }
}

/// The GPUs open in this child, with their kernels.
pub struct Ctx {
    pub gpus: Vec<Gpu>,
    pub kernels: Vec<Kernels>,
    pub devices: Vec<CudaDevice>,
    pub unavailable: Vec<SkippedGpu>,
}

impl Ctx {
    pub fn device(&self, gpu: u32) -> Option<&CudaDevice> {
        self.devices.iter().find(|d| d.gpu == gpu)
    }

    /// One result per GPU that measured (in `gpus` order), then the GPUs that could not be
    /// opened, each with its reason.
    pub fn per_gpu<T>(&self, measured: Vec<Reading<T>>) -> Vec<OnGpu<T>> {
        let mut out: Vec<OnGpu<T>> = self
            .gpus
            .iter()
            .zip(measured)
            .map(|(g, r)| OnGpu::new(g.index, r))
            .collect();
        for u in &self.unavailable {
            out.push(OnGpu::new(u.gpu, Reading::unavailable(u.reason.clone())));
        }
        out
    }
}

fn read_request(args: &[String]) -> Result<ChildRequest, Fail> {
    let text = match args.iter().find(|a| a.trim_start().starts_with('{')) {
        Some(a) => a.clone(),
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| Fail(format!("reading the plan from stdin: {e}")))?;
            s
        }
    };
    serde_json::from_str(&text).map_err(|e| Fail(format!("the plan is not valid JSON: {e}")))
}

fn device_facts(g: &Gpu, pci_bus_id: &str) -> Result<CudaDevice, Fail> {
    use cudarc::driver::sys::CUdevice_attribute as A;
    let opt = |a| {
        cu::attribute(g.dev, a)
            .ok()
            .filter(|v| *v > 0)
            .map(|v| v as u32)
    };
    let (free, total) = g.mem_info()?;
    Ok(CudaDevice {
        gpu: g.index,
        ordinal: g.ordinal,
        name: cu::device_name(g.dev)?,
        pci_bus_id: pci_bus_id.to_string(),
        compute_capability: ComputeCapability {
            major: g.cc.0,
            minor: g.cc.1,
        },
        sm_count: g.sm_count,
        l2_bytes: opt(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).unwrap_or(0) as u64,
        total_memory_bytes: cu::device_total_mem(g.dev).unwrap_or(total),
        free_memory_bytes: free,
        memory_clock_khz: opt(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
        memory_bus_width_bits: opt(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
        clock_khz: opt(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
        unified_addressing: opt(A::CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING).is_some(),
    })
}

/// Opens the planned GPUs: CUDA ordinals are matched to NVML indices by PCI bus id, since
/// CUDA's order (fastest first, CUDA_VISIBLE_DEVICES) need not be NVML's.
fn open(req: &ChildRequest) -> Result<Ctx, Fail> {
    let count = cu::device_count()?;
    let mut by_bus = Vec::new();
    for ord in 0..count {
        let dev = cu::device_by_ordinal(ord)?;
        by_bus.push((cu::device_bus_id(dev)?, ord, dev));
    }
    let mut ctx = Ctx {
        gpus: Vec::new(),
        kernels: Vec::new(),
        devices: Vec::new(),
        unavailable: Vec::new(),
    };
    for pg in &req.plan.gpus {
        let want = gpuaudit_core::facts::normalize_bus_id(&pg.pci_bus_id);
        let Some((bus, ord, dev)) = by_bus.iter().find(|(b, _, _)| *b == want) else {
            let cvd = std::env::var("CUDA_VISIBLE_DEVICES")
                .map(|v| format!(" (CUDA_VISIBLE_DEVICES={v})"))
                .unwrap_or_default();
            ctx.unavailable.push(SkippedGpu {
                gpu: pg.index,
                reason: format!(
                    "GPU {} ({}) is not visible to CUDA{cvd}",
                    pg.index, pg.pci_bus_id
                ),
            });
            continue;
        };
        let opened = Gpu::open(pg.index, *ord, *dev).and_then(|g| {
            let d = device_facts(&g, bus)?;
            let k = Kernels::load(&g)?;
            Ok((g, d, k))
        });
        match opened {
            Ok((g, d, k)) => {
                ctx.gpus.push(g);
                ctx.devices.push(d);
                ctx.kernels.push(k);
            }
            Err(e) => ctx.unavailable.push(SkippedGpu {
                gpu: pg.index,
                reason: format!("GPU {}: {e}", pg.index),
            }),
        }
    }
    Ok(ctx)
}

/// `gpuaudit __measure [PLAN_JSON]`: returns the process exit status.
pub fn child_main(args: &[String]) -> i32 {
    let req = match read_request(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gpuaudit __measure: {e}");
            return 2;
        }
    };
    let started = guarded("loading the CUDA driver library", || {
        cu::init()?;
        let v = cu::driver_version().ok();
        emit(&ChildMsg::Hello {
            pid: std::process::id(),
            driver_version: v,
        });
        open(&req)
    });
    let ctx = match started {
        Ok(c) => c,
        Err(e) => {
            for g in &req.groups {
                if let Some(r) = GroupResult::unavailable(*g, &e.0) {
                    emit(&ChildMsg::Result(r));
                }
            }
            emit(&ChildMsg::Done);
            return 0;
        }
    };
    emit(&ChildMsg::Devices {
        devices: ctx.devices.clone(),
        unavailable: ctx.unavailable.clone(),
    });
    for &group in &req.groups {
        emit(&ChildMsg::Start { group });
        let result = if ctx.gpus.is_empty() {
            let why = ctx
                .unavailable
                .iter()
                .map(|s| s.reason.as_str())
                .collect::<Vec<_>>()
                .join("; ");
            GroupResult::unavailable(group, &why)
        } else {
            run_group(&ctx, &req, group)
        };
        if let Some(r) = result {
            emit(&ChildMsg::Result(r));
        }
    }
    emit(&ChildMsg::Done);
    0
}

fn run_group(ctx: &Ctx, req: &ChildRequest, group: GpuGroup) -> Option<GroupResult> {
    let plan = &req.plan;
    let what = format!("{} measurement", group.name());
    Some(match group {
        GpuGroup::Context => return None,
        GpuGroup::Pcie => GroupResult::Pcie(match plan.pcie.params() {
            Some(p) => reading(guarded(&what, || pcie::run(ctx, p))),
            None => Reading::unavailable(plan.pcie.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::Memory => GroupResult::Memory(match plan.memory.params() {
            Some(p) => reading(guarded(&what, || memory::run(ctx, p))),
            None => Reading::unavailable(plan.memory.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::Gemm => GroupResult::Gemm(match plan.gemm.params() {
            Some(p) => reading(guarded(&what, || gemm::run(ctx, p))),
            None => Reading::unavailable(plan.gemm.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::P2p => GroupResult::P2p(match plan.p2p.params() {
            Some(p) => reading(guarded(&what, || p2p::run(ctx, p))),
            None => Reading::unavailable(plan.p2p.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::Nccl => GroupResult::Nccl(match plan.nccl.params() {
            Some(p) => reading(guarded(&what, || nccl::run(ctx, p))),
            None => Reading::unavailable(plan.nccl.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::Burn => GroupResult::Burn(match plan.burn.params() {
            Some(p) => reading(guarded(&what, || burn::run(ctx, p))),
            None => Reading::unavailable(plan.burn.skip_reason().unwrap_or("not planned")),
        }),
        GpuGroup::Rehearse => GroupResult::Rehearse(Box::new(match plan.rehearse.params() {
            Some(p) => reading(guarded(&what, || rehearse::run(ctx, p))),
            None => Reading::unavailable(plan.rehearse.skip_reason().unwrap_or("not planned")),
        })),
    })
}

pub fn reading<T>(r: Result<T, Fail>) -> Reading<T> {
    match r {
        Ok(v) => Reading::Value(v),
        Err(e) => Reading::Unavailable(e.0),
    }
}

/// GB/s from bytes and milliseconds.
pub fn gbps(bytes: f64, ms: f64) -> f64 {
    if ms <= 0.0 {
        0.0
    } else {
        bytes / (ms / 1e3) / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::plan::{plan, LibStatus, Options, Target};

    #[test]
    fn no_driver_library_costs_every_group_and_nothing_else() {
        // On a machine without libcuda (or where the plan's GPU does not exist) every group
        // must come back unavailable with a reason, and the function must return normally.
        let t = Target {
            index: 0,
            pci_bus_id: "0000:ff:1f.7".into(),
            name: None,
            compute_capability: Some(ComputeCapability { major: 9, minor: 0 }),
            busy: None,
            mig: false,
        };
        let p = plan(&[t], &Options::default(), &LibStatus::all_found());
        let req = ChildRequest {
            plan: p,
            groups: vec![GpuGroup::Pcie, GpuGroup::Gemm, GpuGroup::Rehearse],
        };
        let json = serde_json::to_string(&req).unwrap();
        assert_eq!(child_main(&[json]), 0);
    }

    #[test]
    fn panics_read_as_sentences() {
        assert_eq!(
            explain_panic("Unable to dynamically load the \"nccl\" shared library - searched"),
            "the libnccl library could not be loaded"
        );
        assert!(
            explain_panic("Missing symbol cuMemcpy3DBatchAsync: undefined")
                .starts_with("cuMemcpy3DBatchAsync is missing")
        );
        assert_eq!(explain_panic("boom\nmore"), "boom");
    }

    #[test]
    fn bad_request_is_exit_2() {
        assert_eq!(child_main(&["{not json".to_string()]), 2);
    }
}
