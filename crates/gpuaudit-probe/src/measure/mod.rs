//! The GPU measurements (DESIGN.md, "Measurements: method and bar").
//!
//! [`run`] is the parent side: it finds the CUDA libraries without loading them, plans
//! (a pure function: [`plan::plan`]), runs context-creation probes as fresh processes, runs
//! the GPU work in child processes with hard time limits, samples NVML meanwhile, and
//! returns [`MeasuredFacts`]. The children are this same binary, re-executed with a hidden
//! subcommand that the command line routes to [`child_main`] / [`ctx_probe_main`]:
//!
//! ```text
//! gpuaudit __measure        reads a ChildRequest (JSON) on stdin; JSON lines on stdout
//! gpuaudit __ctx-probe      one context-creation sample; one JSON line on stdout
//! ```
//!
//! A hung GPU, an aborting library or a missing symbol costs the group it happened in (one
//! finding), never the audit. No GPU setting is ever changed.
//!
//! Supported software: drivers from CUDA 11.0 (R450) on. cudarc is built with `cuda-12000`
//! bindings and dynamic loading; every driver symbol called (cuInit, cuDevicePrimaryCtx*,
//! cuMemAlloc_v2, cuMemcpy*Async_v2, cuMemcpyPeerAsync, cuEvent*, cuModuleLoadDataEx,
//! cuLaunchKernel, cuCtxEnablePeerAccess, ...) exists since CUDA 11.0 and is kept by newer
//! drivers for binary compatibility, and the kernels are PTX ISA 7.0 for compute_70 (Volta
//! and later, JIT-compiled by the driver). cuBLAS/cuBLASLt 11, 12 or 13 (the newest major the
//! driver supports is chosen), fp8 GEMMs need cuBLASLt 11.8+ and compute capability 8.9+.
//! NCCL: any 2.x with ncclCommInitAll/ncclAllReduce/group calls (bindings `nccl-02022`). A
//! symbol an older library lacks fails its group with the symbol's name.

mod budget;
mod burn;
mod child;
mod context;
mod fill;
mod gate;
mod gemm;
mod group;
pub mod libs;
mod memory;
mod nccl;
mod p2p;
mod parent;
mod pcie;
pub mod plan;
pub mod protocol;
mod rehearse;
mod sizes;

pub use child::child_main;
pub use context::ctx_probe_main;
pub use group::{GpuGroup, HOST_GROUPS};
pub use plan::{GemmLayout, GpuOrder, LaunchShape, Options, RehearseRequest};

use crate::nvml::{self, GpuState, Watcher};
use gpuaudit_core::facts::{
    ContextLatency, Facts, GpuFlag, LibraryUse, MeasuredFacts, OnGpu, RehearsalGpu, SkippedGpu,
    Stats,
};
use gpuaudit_core::Reading;
use parent::{ChildCmd, Sample};
use plan::{LibStatus, Plan, Target};
use protocol::{ChildMsg, GroupResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The hidden subcommand of the measurement child.
pub const CHILD_SUBCOMMAND: &str = "__measure";
/// The hidden subcommand of one context-creation probe.
pub const CTX_PROBE_SUBCOMMAND: &str = "__ctx-probe";

/// Progress for the command line's bar. Positions are in milliseconds of expected run time,
/// so the bar moves at the pace the work does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// What runs now: "bf16 GEMM on GPU 0".
    pub message: String,
    pub done_ms: u64,
    pub total_ms: u64,
}

/// NVML sampling interval (several samples a second, as the burn needs).
const SAMPLE_MS: u32 = 200;
/// NVML sampling interval while the host copies run.
const PCIE_SAMPLE_MS: u32 = 50;

/// Applies the environment overrides meant for tuning runs on the device:
/// `GPUAUDIT_MEMBW_LAUNCH=4x512,8x256`, `GPUAUDIT_GEMM_SIZE=8192`, `GPUAUDIT_GEMM_LAYOUT=nn|tn`.
pub fn apply_env_overrides(opts: &mut Options) {
    if opts.memory_launch.is_none() {
        opts.memory_launch = std::env::var("GPUAUDIT_MEMBW_LAUNCH")
            .ok()
            .and_then(|s| LaunchShape::parse_list(&s));
    }
    if opts.gemm_size.is_none() {
        opts.gemm_size = std::env::var("GPUAUDIT_GEMM_SIZE")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .filter(|n| (256..=65536).contains(n));
    }
    if opts.gemm_layout.is_none() {
        opts.gemm_layout = std::env::var("GPUAUDIT_GEMM_LAYOUT")
            .ok()
            .and_then(|s| GemmLayout::parse(&s));
    }
    if opts.gpu_order.is_none() {
        opts.gpu_order = std::env::var("GPUAUDIT_GPU_ORDER")
            .ok()
            .and_then(|s| GpuOrder::parse(&s));
    }
}

/// Why a GPU counts as busy: compute processes on it, or utilisation while nothing of ours
/// runs. `None`: idle.
pub fn busy_reason(processes: Option<usize>, utilization_pct: Option<u32>) -> Option<String> {
    match (processes, utilization_pct) {
        (Some(n), _) if n > 0 => Some(format!(
            "{n} process{} running on it",
            if n == 1 { "" } else { "es" }
        )),
        (_, Some(u)) if u >= 10 => Some(format!("utilization {u}%")),
        _ => None,
    }
}

/// The GPUs as the parent knows them, with the watcher's fresh busy reading where NVML
/// answers (the facts' own readings otherwise).
fn targets(facts: &Facts, state: &[GpuState]) -> Vec<Target> {
    facts
        .gpu_list()
        .iter()
        .map(|g| {
            let fresh = state.iter().find(|s| s.gpu == g.index);
            let procs = fresh
                .and_then(|s| s.processes)
                .or_else(|| g.processes.value().map(Vec::len));
            let util = fresh
                .and_then(|s| s.utilization)
                .or_else(|| g.utilization_pct.value().copied());
            Target {
                index: g.index,
                pci_bus_id: g.pci_bus_id.clone(),
                name: g.name.value().cloned(),
                compute_capability: g.compute_capability.value().copied(),
                busy: busy_reason(procs, util),
                mig: g.mig.current.value().copied().unwrap_or(false),
            }
        })
        .collect()
}

/// Starts the NVML watcher where NVML answered for the facts (a library that hung or crashed
/// then is not asked again); its state, or why there is none.
fn start_watcher(facts: &Facts) -> (Option<Watcher>, Vec<GpuState>, Option<String>) {
    let gpus: Vec<u32> = facts.gpu_list().iter().map(|g| g.index).collect();
    if gpus.is_empty() {
        return (None, Vec::new(), None);
    }
    if !facts.gpu_list().iter().all(|g| g.source == "nvml") {
        let why = facts
            .driver
            .query
            .value()
            .cloned()
            .or_else(|| facts.driver.query.reason().map(str::to_string))
            .unwrap_or_default();
        return (
            None,
            Vec::new(),
            Some(format!(
                "NVML not sampled: it did not answer for the facts ({why})"
            )),
        );
    }
    match Watcher::start(&gpus, nvml::TIMEOUT) {
        Ok((w, state)) => (Some(w), state, None),
        Err(e) => (None, Vec::new(), Some(format!("NVML not sampled: {e}"))),
    }
}

/// Measures what `opts` asks on the GPUs of `facts`. Never panics; every group that could
/// not run says why. `progress` is called often (from this thread).
pub fn run(facts: &Facts, opts: &Options, progress: &mut dyn FnMut(&Progress)) -> MeasuredFacts {
    run_with_rehearsal(facts, opts, progress).0
}

/// [`run`], and the rehearse group's result (`gpuaudit rehearse`; otherwise the reason it
/// did not run).
pub fn run_with_rehearsal(
    facts: &Facts,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> (MeasuredFacts, Reading<RehearsalGpu>) {
    let mut opts = opts.clone();
    apply_env_overrides(&mut opts);
    let (watcher, state, watch_note) = start_watcher(facts);
    let targets = targets(facts, &state);
    let driver_major = facts.driver.cuda_version.value().map(|v| v.major);
    let found = libs::find(&libs::live_inventory(), driver_major, &|p| p.is_file());
    let status = LibStatus {
        cuda: found.cuda.as_ref().err().cloned(),
        cublas: found.cublas.as_ref().err().cloned(),
        cublaslt: found.cublaslt.as_ref().err().cloned(),
        nccl: found.nccl.as_ref().err().cloned(),
    };
    let plan = plan::plan(&targets, &opts, &status);
    let persistence = persistence_of(facts, &state);
    let (mut m, rehearsal) = run_plan(&plan, &found, watcher, &persistence, progress);
    if let Some(n) = watch_note {
        if GpuGroup::ALL.into_iter().any(|g| plan.runs(g)) {
            m.notes.insert(0, n);
        }
    }
    m.libraries = libs::Lib::ALL
        .into_iter()
        .map(|l| LibraryUse {
            name: l.name().to_string(),
            path: match found.get(l) {
                Ok(p) => Reading::Value(p.display().to_string()),
                Err(e) => Reading::Unavailable(e.clone()),
            },
        })
        .collect();
    (m, rehearsal)
}

/// A result slot per group, starting as the plan's reason for not running it.
fn skipped(plan: &Plan, g: GpuGroup) -> String {
    plan.skip_reason(g)
        .map(str::to_string)
        .unwrap_or_else(|| "not measured".into())
}

/// Persistence mode per GPU: the watcher's fresh reading, else the facts'.
fn persistence_of(facts: &Facts, state: &[GpuState]) -> Reading<Vec<GpuFlag>> {
    let v: Vec<GpuFlag> = facts
        .gpu_list()
        .iter()
        .filter_map(|g| {
            let fresh = state
                .iter()
                .find(|s| s.gpu == g.index)
                .and_then(|s| s.persistence);
            Some(GpuFlag {
                gpu: g.index,
                enabled: fresh.or_else(|| g.persistence_mode.value().copied())?,
            })
        })
        .collect();
    if v.is_empty() {
        Reading::unavailable("NVML did not report persistence mode")
    } else {
        Reading::Value(v)
    }
}

fn run_plan(
    plan: &Plan,
    found: &libs::Found,
    watcher: Option<Watcher>,
    persistence: &Reading<Vec<GpuFlag>>,
    progress: &mut dyn FnMut(&Progress),
) -> (MeasuredFacts, Reading<RehearsalGpu>) {
    let mut rehearsal = Reading::Unavailable(skipped(plan, GpuGroup::Rehearse));
    let mut m = MeasuredFacts {
        not_run: None,
        mode: Some(plan.mode.as_str().to_string()),
        cuda_driver_version: None,
        libraries: Vec::new(),
        devices: Reading::unavailable("no measurement process ran"),
        skipped_gpus: plan.skipped_gpus.clone(),
        context: Reading::Unavailable(skipped(plan, GpuGroup::Context)),
        pcie: Reading::Unavailable(skipped(plan, GpuGroup::Pcie)),
        memory: Reading::Unavailable(skipped(plan, GpuGroup::Memory)),
        gemm: Reading::Unavailable(skipped(plan, GpuGroup::Gemm)),
        p2p: Reading::Unavailable(skipped(plan, GpuGroup::P2p)),
        nccl: Reading::Unavailable(skipped(plan, GpuGroup::Nccl)),
        burn: Reading::Unavailable(skipped(plan, GpuGroup::Burn)),
        rehearsal: gpuaudit_core::facts::not_rehearsed(),
        notes: Vec::new(),
    };
    let anything = GpuGroup::ALL.into_iter().any(|g| plan.runs(g));
    if !anything {
        return (m, rehearsal);
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            let why = format!("cannot find gpuaudit's own executable to run measurements: {e}");
            fail_all(&mut m, &mut rehearsal, plan, &why);
            return (m, rehearsal);
        }
    };
    let links = match libs::LinkDir::create(found) {
        Ok(l) => l,
        Err(e) => {
            let why =
                format!("could not prepare the library links in the temporary directory: {e}");
            fail_all(&mut m, &mut rehearsal, plan, &why);
            return (m, rehearsal);
        }
    };
    let env = parent::child_env(Some(links.ld_library_path()));
    let total_ms = plan.estimate_ms().max(1);
    let mut done_ms = 0u64;
    let mut report = |message: String, at: u64, done: &mut u64| {
        *done = (*done).max(at.min(total_ms));
        progress(&Progress {
            message,
            done_ms: *done,
            total_ms,
        });
    };

    // Context creation first, while nothing else of ours holds the GPUs.
    if let Some(p) = plan.context.params() {
        let cmd = ChildCmd {
            program: exe.clone(),
            args: vec![CTX_PROBE_SUBCOMMAND.into()],
            env: env.clone(),
        };
        let per = p.budget.estimate_ms / p.runs.max(1) as u64;
        let limit = Duration::from_secs((p.budget.timeout_s / p.runs.max(1) as u64).max(20));
        let base = done_ms;
        let (samples, failures) = parent::run_ctx_probes(&cmd, p.runs, limit, |i| {
            report(
                format!("context creation {}/{}", i + 1, p.runs),
                base + per * i as u64,
                &mut done_ms,
            );
        });
        done_ms = done_ms.max(base + p.budget.estimate_ms);
        m.context = context_facts(&samples, &failures, plan, persistence);
    }

    // NVML samples while the children run, tagged with the group in progress.
    let phase: Mutex<(Option<GpuGroup>, bool)> = Mutex::new((None, false));
    let stop = AtomicBool::new(false);
    let samples: Mutex<Vec<Sample>> = Mutex::new(Vec::new());
    let mut child_devices: Option<(Vec<gpuaudit_core::facts::CudaDevice>, Vec<SkippedGpu>)> = None;
    let mut driver_version = None;
    let mut results: Vec<GroupResult> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let have_watcher = watcher.is_some();
    std::thread::scope(|s| {
        if let Some(w) = watcher {
            s.spawn(|| sampler(w, &phase, &stop, &samples));
        }
        let cmd = ChildCmd {
            program: exe.clone(),
            args: vec![CHILD_SUBCOMMAND.into()],
            env: env.clone(),
        };
        for job in plan.jobs() {
            let mut base = done_ms + plan.child_startup_ms();
            let mut group_est = 0u64;
            let job_results = parent::run_job(&cmd, plan, &job, &mut |msg| match msg {
                ChildMsg::Hello {
                    driver_version: v, ..
                } => driver_version = *v,
                ChildMsg::Devices {
                    devices,
                    unavailable,
                } => {
                    if child_devices.is_none() {
                        child_devices = Some((devices.clone(), unavailable.clone()));
                    }
                }
                ChildMsg::Start { group } => {
                    if let Ok(mut p) = phase.lock() {
                        *p = (Some(*group), false);
                    }
                    group_est = plan.budget(*group).map_or(0, |b| b.estimate_ms);
                    report(format!("{} measurement", group.name()), base, &mut done_ms);
                }
                ChildMsg::Progress {
                    group,
                    fraction,
                    message,
                } => {
                    if let Ok(mut p) = phase.lock() {
                        if p.0 == Some(*group) {
                            // The rehearsal's samples count only while the whole pipeline
                            // runs (not during its stages alone).
                            p.1 = *group != GpuGroup::Rehearse
                                || message.starts_with(protocol::PIPELINE_PROGRESS);
                        }
                    }
                    let at = base + (group_est as f64 * fraction.clamp(0.0, 1.0)) as u64;
                    report(message.clone(), at, &mut done_ms);
                }
                ChildMsg::Result(r) => {
                    if let Ok(mut p) = phase.lock() {
                        *p = (None, false);
                    }
                    base += plan.budget(r.group()).map_or(0, |b| b.estimate_ms);
                    report(format!("{} done", r.group().name()), base, &mut done_ms);
                }
                ChildMsg::Log { message } => {
                    if notes.len() < 100 && !notes.contains(message) {
                        notes.push(message.clone());
                    }
                }
                ChildMsg::Done => {}
            });
            results.extend(job_results);
            if let Ok(mut p) = phase.lock() {
                *p = (None, false);
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    drop(links);

    m.cuda_driver_version = driver_version;
    m.notes = notes;
    if let Some((devices, unavailable)) = child_devices {
        m.devices = Reading::Value(devices);
        for u in unavailable {
            if !m.skipped_gpus.iter().any(|s| s.gpu == u.gpu) {
                m.skipped_gpus.push(u);
            }
        }
    }
    let samples = samples.into_inner().unwrap_or_default();
    for r in results {
        match r {
            GroupResult::Pcie(v) => m.pcie = v,
            GroupResult::Memory(v) => m.memory = v,
            GroupResult::Gemm(v) => m.gemm = v,
            GroupResult::P2p(v) => m.p2p = v,
            GroupResult::Nccl(v) => m.nccl = v,
            GroupResult::Burn(v) => m.burn = v,
            GroupResult::Rehearse(v) => rehearsal = *v,
        }
    }
    attach_samples(&mut m, &samples, have_watcher);
    if let Reading::Value(r) = &mut rehearsal {
        if let Reading::Value(p) = &mut r.pipeline {
            p.nvml_utilization_pct = if have_watcher {
                parent::utilization(&samples, GpuGroup::Rehearse, &r.gpus)
            } else {
                Reading::unavailable("NVML not sampled")
            };
        }
    }
    add_skipped(&mut m);
    report("measurements done".into(), total_ms, &mut done_ms);
    (m, rehearsal)
}

fn fail_all(m: &mut MeasuredFacts, rehearsal: &mut Reading<RehearsalGpu>, plan: &Plan, why: &str) {
    for g in GpuGroup::ALL {
        if plan.runs(g) {
            match g {
                GpuGroup::Context => m.context = Reading::unavailable(why),
                GpuGroup::Pcie => m.pcie = Reading::unavailable(why),
                GpuGroup::Memory => m.memory = Reading::unavailable(why),
                GpuGroup::Gemm => m.gemm = Reading::unavailable(why),
                GpuGroup::P2p => m.p2p = Reading::unavailable(why),
                GpuGroup::Nccl => m.nccl = Reading::unavailable(why),
                GpuGroup::Burn => m.burn = Reading::unavailable(why),
                GpuGroup::Rehearse => *rehearsal = Reading::unavailable(why),
            }
        }
    }
}

fn context_facts(
    samples: &[protocol::CtxSample],
    failures: &[String],
    plan: &Plan,
    persistence: &Reading<Vec<GpuFlag>>,
) -> Reading<ContextLatency> {
    let stats = |f: fn(&protocol::CtxSample) -> f64| -> Option<Stats> {
        Stats::of(&samples.iter().map(f).collect::<Vec<_>>())
    };
    let (Some(init), Some(ctx), Some(alloc), Some(total)) = (
        stats(|s| s.init_ms),
        stats(|s| s.context_ms),
        stats(|s| s.alloc_ms),
        stats(|s| s.total_ms),
    ) else {
        let mut f = failures.to_vec();
        f.dedup();
        return Reading::Unavailable(if f.is_empty() {
            "no context-creation probe completed".into()
        } else {
            f.join("; ")
        });
    };
    let persistence_mode = persistence.as_ref().and_then(|v| {
        let v: Vec<GpuFlag> = v
            .iter()
            .filter(|f| plan.gpus.iter().any(|g| g.index == f.gpu))
            .cloned()
            .collect();
        if v.is_empty() {
            Reading::unavailable("NVML did not report persistence mode")
        } else {
            Reading::Value(v)
        }
    });
    Reading::Value(ContextLatency {
        runs: samples.len() as u32,
        visible_gpus: samples.first().map(|s| s.devices),
        init_ms: init,
        context_ms: ctx,
        alloc_ms: alloc,
        total_ms: total,
        persistence_mode,
        failures: failures.to_vec(),
    })
}

/// Has the watcher sample NVML every [`SAMPLE_MS`] ([`PCIE_SAMPLE_MS`] during the host
/// copies) while a group runs, until `stop`; each sample is tagged with the group running
/// when it arrived.
fn sampler(
    mut watcher: Watcher,
    phase: &Mutex<(Option<GpuGroup>, bool)>,
    stop: &AtomicBool,
    out: &Mutex<Vec<Sample>>,
) {
    let started = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let (group, loaded) = phase.lock().map(|p| *p).unwrap_or((None, false));
        // The link's generation drops between copies on an idle GPU: sample the host-copy
        // group faster so the copies themselves are caught.
        watcher.set_interval(match group {
            None => 0,
            Some(GpuGroup::Pcie) => PCIE_SAMPLE_MS as u64,
            Some(_) => SAMPLE_MS as u64,
        });
        let batch =
            watcher.samples_until(Instant::now() + Duration::from_millis(PCIE_SAMPLE_MS as u64));
        if group.is_none() || batch.is_empty() {
            continue;
        }
        if let Ok(mut o) = out.lock() {
            let at_ms = started.elapsed().as_millis() as u64;
            o.extend(batch.into_iter().map(|nvml| Sample {
                group,
                loaded,
                at_ms,
                nvml,
            }));
        }
    }
    watcher.stop();
}

fn attach_samples(m: &mut MeasuredFacts, samples: &[Sample], have_nvml: bool) {
    if !have_nvml {
        return;
    }
    if let Reading::Value(p) = &mut m.pcie {
        for g in &mut p.per_gpu {
            if let Reading::Value(v) = &mut g.result {
                v.link_under_load = parent::link_under_load(samples, g.gpu);
            }
        }
    }
    if let Reading::Value(b) = &mut m.burn {
        for g in &mut b.per_gpu {
            if let Reading::Value(v) = &mut g.result {
                v.telemetry = parent::telemetry(samples, g.gpu, SAMPLE_MS);
            }
        }
    }
}

/// Per-GPU groups list every GPU: the ones left out carry the reason.
fn add_skipped(m: &mut MeasuredFacts) {
    let skipped = m.skipped_gpus.clone();
    fn add<T>(v: &mut Vec<OnGpu<T>>, skipped: &[SkippedGpu]) {
        for s in skipped {
            if !v.iter().any(|x| x.gpu == s.gpu) {
                v.push(OnGpu::new(s.gpu, Reading::unavailable(s.reason.clone())));
            }
        }
        v.sort_by_key(|x| x.gpu);
    }
    if let Reading::Value(p) = &mut m.pcie {
        add(&mut p.per_gpu, &skipped);
    }
    if let Reading::Value(v) = &mut m.memory {
        add(v, &skipped);
    }
    if let Reading::Value(v) = &mut m.gemm {
        add(v, &skipped);
    }
    if let Reading::Value(b) = &mut m.burn {
        add(&mut b.per_gpu, &skipped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_means_processes_or_utilisation() {
        assert_eq!(
            busy_reason(Some(2), Some(0)).as_deref(),
            Some("2 processes running on it")
        );
        assert_eq!(
            busy_reason(Some(1), None).as_deref(),
            Some("1 process running on it")
        );
        assert_eq!(
            busy_reason(Some(0), Some(35)).as_deref(),
            Some("utilization 35%")
        );
        assert_eq!(busy_reason(Some(0), Some(3)), None);
        assert_eq!(busy_reason(None, None), None);
    }

    #[test]
    fn nothing_planned_means_no_process_is_started() {
        let facts = Facts::empty(gpuaudit_core::facts::Origin::Live, "test");
        let mut seen = 0;
        let m = run(&facts, &Options::default(), &mut |_| seen += 1);
        assert_eq!(m.pcie.reason(), Some("no NVIDIA GPU found"));
        assert_eq!(m.mode.as_deref(), Some("quick"));
        assert_eq!(m.libraries.len(), 4);
        assert_eq!(seen, 0);
    }
}
