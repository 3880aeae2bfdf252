//! The measured checks: context creation, host copies, device memory, GEMM, P2P, all-reduce
//! and the burn. They judge `facts.measured` (filled by gpuaudit-probe's measurement child)
//! against the datasheet (the spec database) and against the GPU's siblings: a GPU 30% below
//! the median of the same model on the machine fails even where the datasheet is unknown.

use super::{Check, CheckDoc, CheckKind};
use crate::facts::{
    median, pcie_link_gbps, Direction, Facts, GemmDtype, GpuFacts, HostMemory, OnGpu,
    ThrottleReason, TopoLink, Verify,
};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};
use crate::units::{bytes, figure, MIB};

/// A figure below this fraction of the median of its siblings (same model, same machine)
/// fails.
pub const SIBLING_FLOOR: f64 = 0.70;

/// Pinned host copies against the link's theoretical one-direction rate: PCIe protocol
/// overhead (TLP headers, flow control) leaves about 80-90% usable; 55 GB/s on a Gen5 x16
/// link (63 GB/s) is normal.
pub const PCIE_WARN: f64 = 0.70;
pub const PCIE_FAIL: f64 = 0.50;
/// NVML samples (50 ms apart) that must all have seen a lower PCIe generation during the
/// copies before it fails (fewer only warn: the generation drops whenever the link idles).
pub const LINK_SAMPLES_FOR_FAIL: u32 = 20;
/// Device copy (read + write) against the datasheet memory bandwidth: 85-92% is what HBM
/// parts reach (H200: 4.3 of 4.8 TB/s).
pub const MEMORY_WARN: f64 = 0.75;
pub const MEMORY_FAIL: f64 = 0.60;
/// GEMM against the datasheet's dense peak: 75-85% is typical on SXM parts (H200 bf16: ~790
/// of 989 TFLOPS), PCIe parts run lower at their power limit.
pub const GEMM_WARN: f64 = 0.60;
pub const GEMM_FAIL: f64 = 0.45;
/// P2P one direction against the link (NVLink: half the datasheet's bidirectional figure,
/// scaled by the links between the pair; else the PCIe rate).
pub const P2P_WARN: f64 = 0.60;
pub const P2P_FAIL: f64 = 0.35;
/// All-reduce bus bandwidth at the largest size against the slowest GPU's link.
pub const NCCL_WARN: f64 = 0.50;
pub const NCCL_FAIL: f64 = 0.30;
/// Burn: coefficient of variation of the per-second TFLOPS above which the load is unsteady;
/// last quarter against the first (TFLOPS, SM clock) below which it sagged.
pub const BURN_CV_WARN: f64 = 0.05;
pub const BURN_SAG_WARN: f64 = 0.90;

pub const CHECKS: &[Check] = &[
    Check {
        id: "cuda.context-latency",
        title: "time to cuInit + create a context + first allocation, over fresh processes",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "Runs a fresh process several times (5 in the quick audit, 10 with --full) that \
                   times cuInit, cuDevicePrimaryCtxRetain + cuCtxSetCurrent, and the first 1 MiB \
                   cuMemAlloc, and reports the median and maximum of each phase, with the \
                   persistence mode of the GPUs. cuInit initialises every visible GPU, so it \
                   grows with their number: the limit is 0.5 s + 0.25 s per GPU (warn), 10 s \
                   (fail); a maximum above 3x the median warns (jitter).",
            why: "Every new CUDA process (each training launch, each inference worker, each \
                  notebook kernel) pays this before its first kernel. Without persistence mode \
                  the driver tears the GPUs down when the last process exits and initialises \
                  them again next time, which can take seconds on a large machine.",
            verify: "python3 -c 'import time,ctypes; c=ctypes.CDLL(\"libcuda.so.1\"); \
                     t=time.time(); c.cuInit(0); print(time.time()-t)' (repeat a few times); \
                     nvidia-smi -q | grep -i persistence",
            fix: "Enable persistence: run the nvidia-persistenced daemon (preferred) or `sudo \
                  nvidia-smi -pm 1`. On a cloud instance or Kubernetes node, ask the provider \
                  to enable it in the host image. Limit the GPUs a process sees with \
                  CUDA_VISIBLE_DEVICES when it needs only some.",
        },
        run: check_context,
    },
    Check {
        id: "pcie.bandwidth",
        title: "measured host<->device copy bandwidth against the PCIe link",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "Copies between host and GPU, pinned and pageable, both directions (one size in \
                   the quick audit, 4 KiB to 1 GiB with --full), timed with CUDA events, data \
                   verified; then pinned copies on every GPU at once. The pinned figure at the \
                   largest size is compared with the link's theoretical one-direction rate \
                   (generation x width): below 70% warns, below 50% fails; a GPU below 70% of \
                   its siblings fails; a link that trained below its maximum while the copies \
                   ran fails (a lower generation seen in fewer than 20 samples warns: links \
                   drop their generation when idle); a GPU losing more than 30% when all copy \
                   at once shares an upstream link (warn).",
            why: "Every batch a GPU trains on and every result it returns crosses this link. A \
                  card in a x8 slot, a link stuck at Gen3, a PCIe switch shared by several GPUs \
                  or a noisy riser halves data loading and checkpointing, and slows multi-GPU \
                  jobs that fall back to host copies.",
            verify: "nvidia-smi -q | grep -A4 'Link Width'; lspci -vv -s <bus id> | grep LnkSta; \
                     PyTorch: time x.cuda(non_blocking=True) on a pinned 1 GiB tensor with \
                     torch.cuda.Event",
            fix: "Reseat the card or move it to a x16 slot wired to the CPU; check BIOS PCIe \
                  settings (generation, bifurcation); replace a riser that lowers the rate. On \
                  a cloud instance, ask for a host where the GPU has its own x16 link. Use \
                  pinned memory (pin_memory=True) for host->GPU copies.",
        },
        run: check_pcie,
    },
    Check {
        id: "memory.bandwidth",
        title: "measured device-memory bandwidth against the datasheet",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "gpuaudit's own read, write, copy and triad kernels (16-byte accesses, several \
                   loads in flight per thread, grid sized from the SM count, buffers several \
                   times the L2) and the driver's device-to-device memcpy. Copies count bytes \
                   read plus written. The better of the copy kernel and memcpy is compared with \
                   the datasheet memory bandwidth: below 75% warns, below 60% fails; a GPU \
                   below 70% of its siblings fails; a copy whose data does not verify fails.",
            why: "Most of deep learning outside the big matrix multiplies (attention, \
                  normalisation, optimiser steps, inference decoding) is limited by memory \
                  bandwidth. A lower figure means memory clocks held down, a power cap, ECC \
                  repair in progress, or a different (slower-memory) model than ordered.",
            verify: "PyTorch: a=torch.empty(4<<30,dtype=torch.uint8,device='cuda'); b=torch.empty_like(a); \
                     time b.copy_(a) with torch.cuda.Event; bandwidth = 2*size/time. \
                     nvidia-smi -q -d CLOCK (memory clock against its maximum).",
            fix: "Check the memory clock and power limit (nvidia-smi -q -d CLOCK,POWER), pending \
                  ECC page retirement or row remapping (reset the GPU when idle), and that the \
                  model is the one ordered (gpu.identity). On a cloud instance, report the \
                  figure to the provider.",
        },
        run: check_memory,
    },
    Check {
        id: "compute.gemm",
        title: "measured matrix-multiply TFLOPS per data type against the datasheet",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "Square GEMMs on random data (8192 with --full, 4096 and bf16 only in the \
                   quick audit): bf16, fp16, tf32 and fp8 (compute capability 8.9 and later) \
                   through cuBLASLt with a 32 MiB workspace, fp32 and fp64 through cuBLAS. \
                   Sampled outputs are checked against a CPU f64 reference (fp32 strictly \
                   enough to catch a TF32 path). TFLOPS are compared with the datasheet's dense \
                   peak: below 60% warns, below 45% fails (75-85% is normal on SXM parts); a \
                   GPU below 70% of its siblings fails; wrong results fail.",
            why: "Matrix multiplies are most of the work of training and inference. A GPU that \
                  reaches a fraction of its peak is power- or clock-limited, hot, a slower \
                  variant (PCIe instead of SXM), or shared.",
            verify: "PyTorch: a=torch.randn(8192,8192,device='cuda',dtype=torch.bfloat16); \
                     time a@a with torch.cuda.Event; TFLOPS = 2*8192**3/time/1e12.",
            fix: "Check power limit and clocks (power.limit, clocks.max, clocks.throttle), \
                  cooling, and that no other process uses the GPU. On a cloud instance, report \
                  the figure with the GPU's serial number to the provider.",
        },
        run: check_gemm,
    },
    Check {
        id: "p2p.bandwidth",
        title: "measured GPU<->GPU bandwidth and latency against the link",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "For every ordered pair of GPUs: whether peer access is possible, a 1 GiB copy \
                   (256 MiB in the quick audit), both directions at once, and back-to-back \
                   4-byte copies (latency); data verified. One direction is compared with the \
                   link: NVLink (half the datasheet's bidirectional figure, scaled by the \
                   links between the pair) or PCIe: below 60% warns, below 35% fails; a pair \
                   below 70% of the median of the pairs over the same kind of link fails; no \
                   peer access between NVLink-connected GPUs fails (warns over PCIe).",
            why: "Tensor and pipeline parallelism and NCCL move activations and gradients \
                  between GPUs constantly. Without peer access copies go through host memory; \
                  a missing NVLink halves or worse every collective.",
            verify: "nvidia-smi topo -m; nvidia-smi nvlink -s; PyTorch: \
                     torch.cuda.can_device_access_peer(0,1) and time b.copy_(a) between \
                     cuda:0 and cuda:1.",
            fix: "Check NVLink state (nvlink.status) and the fabric manager on NVSwitch \
                  systems; in a VM, ask for peer-to-peer to be enabled (PCIe ACS / IOMMU \
                  settings, the hypervisor's P2P support).",
        },
        run: check_p2p,
    },
    Check {
        id: "nccl.allreduce",
        title: "measured all-reduce bus bandwidth and latency across the GPUs",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "NCCL all-reduce (float32 sum, out of place) across all measured GPUs in one \
                   process, 8 B to 1 GiB with --full (8 B, 1 MiB and 256 MiB in the quick \
                   audit), timed with events, sum verified; nccl-tests' definitions: busbw = \
                   algbw x 2(n-1)/n. NVLink multicast (NVLS) is disabled. The bus bandwidth at \
                   the largest size is compared with the slowest GPU's link (NVLink one \
                   direction, or PCIe): below 50% warns, below 30% fails; latency at 1 MiB above \
                   500 us warns.",
            why: "Data-parallel training all-reduces the gradients every step; its bandwidth \
                  bounds the scaling from one GPU to many, and small-message latency bounds \
                  tensor parallelism.",
            verify: "nccl-tests: all_reduce_perf -b 8 -e 1G -f 2 -g <number of GPUs> (with \
                     NCCL_NVLS_ENABLE=0 to compare); NCCL_DEBUG=INFO shows the transport used \
                     (P2P/NVLink, SHM, NET).",
            fix: "Check p2p.bandwidth and nvlink.status; make sure NCCL_P2P_DISABLE and \
                  NCCL_SHM_DISABLE are not set (cuda.env), /dev/shm is large enough \
                  (host.shm), and on NVSwitch systems that the fabric manager runs.",
        },
        run: check_nccl,
    },
    Check {
        id: "stability.burn",
        title: "sustained GEMM load: steadiness, clocks, throttling, result correctness",
        kind: CheckKind::Measured,
        doc: CheckDoc {
            what: "With --full (or `gpuaudit burn`): the same seeded GEMM on every GPU at once \
                   for 60 s, TFLOPS per second, NVML sampled 5 times a second (SM clock, power, \
                   temperature, each throttle reason on its own). Fails on hardware slowdown, \
                   hardware thermal or power-brake throttling, on results that change between \
                   identical GEMMs or differ from the other GPUs', or fail a CPU check, and on \
                   a GPU below 70% of its siblings; warns on software thermal slowdown, TFLOPS \
                   varying more than 5% (coefficient of variation), or TFLOPS or SM clock \
                   ending more than 10% below where they started.",
            why: "A GPU that passes a short test can still throttle after a minute of real \
                  load (cooling, power delivery) or compute wrong results (a failing chip): \
                  the first costs hours of training time, the second silently corrupts it.",
            verify: "Run a long GEMM loop (or gpu-burn) while watching `nvidia-smi dmon -s pucv` \
                     and `nvidia-smi -q -d PERFORMANCE` (clock event reasons).",
            fix: "Hardware slowdown or thermal throttling: check airflow, fans, inlet \
                  temperature and power cabling; on a cloud instance report the GPU (serial \
                  number) to the provider. Wrong results: drain the GPU and have it replaced.",
        },
        run: check_burn,
    },
];

// ---------------------------------------------------------------- shared helpers

/// The group's value, or the findings that say why it is missing.
fn group<'a, T>(id: &str, facts: &'a Facts, r: &'a Reading<T>) -> Result<&'a T, Vec<Finding>> {
    if let Some(why) = &facts.measured.not_run {
        return Err(vec![Finding::skip(id, why.clone())]);
    }
    match r {
        Reading::Value(v) => Ok(v),
        Reading::Unavailable(why) => Err(vec![Finding::skip(id, why.clone())]),
    }
}

fn gpu_facts(facts: &Facts, gpu: u32) -> Option<&GpuFacts> {
    facts.gpu_list().iter().find(|g| g.index == gpu)
}

/// The spec entry of a GPU, from the driver's facts or (failing those) from what CUDA said.
pub fn spec_of(facts: &Facts, gpu: u32) -> Option<&'static GpuSpec> {
    let db = SpecDb::embedded();
    if let Some(g) = gpu_facts(facts, gpu) {
        let s = db.identify_gpu(g);
        if s.is_some() {
            return s;
        }
    }
    let d = facts.measured.device(gpu)?;
    db.identify(
        None,
        Some(&d.name),
        Some(d.total_memory_bytes / (1024 * 1024)),
    )
}

/// The model name siblings are grouped by.
fn model(facts: &Facts, gpu: u32) -> String {
    if let Some(s) = spec_of(facts, gpu) {
        return s.key.clone();
    }
    gpu_facts(facts, gpu)
        .and_then(|g| g.name.value().cloned())
        .or_else(|| facts.measured.device(gpu).map(|d| d.name.clone()))
        .unwrap_or_default()
}

/// `Some(median)` when `value` is below [`SIBLING_FLOOR`] of the median of the other GPUs of
/// the same model (with two GPUs, the other one).
fn below_siblings(facts: &Facts, gpu: u32, value: f64, all: &[(u32, f64)]) -> Option<f64> {
    let m = model(facts, gpu);
    let others: Vec<f64> = all
        .iter()
        .filter(|(g, _)| *g != gpu && model(facts, *g) == m)
        .map(|(_, v)| *v)
        .collect();
    let med = median(&others)?;
    (med > 0.0 && value < SIBLING_FLOOR * med).then_some(med)
}

/// The PCIe link's theoretical one-direction rate, GB/s, from the driver's maximum (or the
/// datasheet).
pub(crate) fn pcie_expected(facts: &Facts, gpu: u32) -> Option<(f64, u32, u32)> {
    let g = gpu_facts(facts, gpu);
    let gen = g
        .and_then(|g| g.pcie.gen_max.value().copied())
        .or_else(|| spec_of(facts, gpu).and_then(|s| s.pcie_gen))?;
    let width = g
        .and_then(|g| g.pcie.width_max.value().copied())
        .or_else(|| spec_of(facts, gpu).and_then(|s| s.pcie_width))?;
    pcie_link_gbps(gen, width).map(|r| (r, gen, width))
}

fn rate_status(ratio: f64, warn: f64, fail: f64) -> Status {
    if ratio < fail {
        Status::Fail
    } else if ratio < warn {
        Status::Warn
    } else {
        Status::Pass
    }
}

fn worse(a: Status, b: Status) -> Status {
    if b.severity() > a.severity() {
        b
    } else {
        a
    }
}

fn failed_verifications(v: &[Verify]) -> Vec<String> {
    v.iter()
        .filter(|v| !v.ok)
        .map(|v| match &v.detail {
            Some(d) => format!("{}: {d}", v.what),
            None => v.what.clone(),
        })
        .collect()
}

/// One finding per GPU of a per-GPU group: skipped GPUs keep their reason.
fn per_gpu<T>(
    id: &str,
    policy: &Policy,
    items: &[OnGpu<T>],
    mut judge: impl FnMut(u32, &T) -> Finding,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for item in items {
        if !policy.selects(item.gpu) {
            continue;
        }
        out.push(match &item.result {
            Reading::Value(v) => judge(item.gpu, v),
            Reading::Unavailable(why) => Finding::skip(id, why.clone()).gpu(item.gpu),
        });
    }
    if out.is_empty() {
        out.push(Finding::skip(id, "no GPU measured"));
    }
    out
}

fn label(facts: &Facts, gpu: u32) -> String {
    gpu_facts(facts, gpu)
        .map(GpuFacts::label)
        .unwrap_or_else(|| format!("GPU {gpu}"))
}

// ---------------------------------------------------------------- cuda.context-latency

fn check_context(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    const ID: &str = "cuda.context-latency";
    let c = match group(ID, facts, &facts.measured.context) {
        Ok(c) => c,
        Err(f) => return f,
    };
    let n = c
        .visible_gpus
        .unwrap_or_else(|| facts.gpu_list().len() as u32)
        .max(1);
    let limit = 500.0 + 250.0 * n as f64;
    let med = c.total_ms.median;
    let off: Vec<u32> = c
        .persistence_mode
        .value()
        .map(|v| v.iter().filter(|p| !p.enabled).map(|p| p.gpu).collect())
        .unwrap_or_default();
    let mut status = if med > 10_000.0 {
        Status::Fail
    } else if med > limit {
        Status::Warn
    } else {
        Status::Pass
    };
    let jitter = c.total_ms.max > 3.0 * med && c.total_ms.max > limit;
    if jitter {
        status = worse(status, Status::Warn);
    }
    let mut msg = format!(
        "cuInit + context + first allocation: {} ms median, {} ms max over {} fresh processes \
         (cuInit {} ms; {n} GPU{} visible)",
        figure(med),
        figure(c.total_ms.max),
        c.runs,
        figure(c.init_ms.median),
        if n == 1 { "" } else { "s" }
    );
    if status != Status::Pass {
        msg.push_str(&format!("; above the {} ms expected", figure(limit)));
    }
    if jitter {
        msg.push_str("; the slowest run took over 3x the median");
    }
    if !off.is_empty() {
        msg.push_str(&format!(
            "; persistence mode is off on GPU {}",
            off.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let mut f = Finding::new(ID, status, msg)
        .with("total_ms", c.total_ms)
        .with("init_ms", c.init_ms)
        .with("context_ms", c.context_ms)
        .with("alloc_ms", c.alloc_ms)
        .with("runs", c.runs)
        .with("visible_gpus", n)
        .with("expected_max_ms", limit)
        .with("persistence_mode", &c.persistence_mode);
    if !c.failures.is_empty() {
        f = f.with("failed_runs", &c.failures);
    }
    if status != Status::Pass {
        f = f.fix(if off.is_empty() {
            "Find what slows driver initialisation (many GPUs visible, a VM's IOMMU): limit \
             CUDA_VISIBLE_DEVICES to the GPUs a process needs."
        } else {
            "Enable persistence mode: run nvidia-persistenced, or `sudo nvidia-smi -pm 1`."
        });
    }
    vec![f]
}

// ---------------------------------------------------------------- pcie.bandwidth

fn check_pcie(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "pcie.bandwidth";
    let p = match group(ID, facts, &facts.measured.pcie) {
        Ok(p) => p,
        Err(f) => return f,
    };
    let pinned = |dir: Direction| -> Vec<(u32, f64)> {
        p.per_gpu
            .iter()
            .filter_map(|g| {
                let v = g.result.value()?.largest(dir, HostMemory::Pinned)?;
                Some((g.gpu, v.gbps))
            })
            .collect()
    };
    let (all_h2d, all_d2h) = (pinned(Direction::H2d), pinned(Direction::D2h));
    let concurrent = |gpu: u32, dir: Direction| -> Option<f64> {
        p.all_at_once
            .value()?
            .iter()
            .find(|c| c.direction == dir)?
            .per_gpu
            .iter()
            .find(|v| v.gpu == gpu)
            .map(|v| v.value)
    };
    per_gpu(ID, policy, &p.per_gpu, |gpu, g| {
        let who = label(facts, gpu);
        let (Some(h2d), Some(d2h)) = (
            g.largest(Direction::H2d, HostMemory::Pinned),
            g.largest(Direction::D2h, HostMemory::Pinned),
        ) else {
            return Finding::skip(ID, format!("{who}: no pinned copy was measured")).gpu(gpu);
        };
        let worst = h2d.gbps.min(d2h.gbps);
        let mut status = Status::Pass;
        let mut notes: Vec<String> = Vec::new();
        let mut fix = None;
        let expected = pcie_expected(facts, gpu);
        let mut msg = format!(
            "{who}: pinned host->GPU {} GB/s, GPU->host {} GB/s ({})",
            figure(h2d.gbps),
            figure(d2h.gbps),
            bytes(h2d.size_bytes)
        );
        if let Some((rate, gen, width)) = expected {
            let ratio = worst / rate;
            msg.push_str(&format!(
                ", {:.0}% of the Gen{gen} x{width} link's {} GB/s",
                ratio * 100.0,
                figure(rate)
            ));
            let s = rate_status(ratio, PCIE_WARN, PCIE_FAIL);
            if s != Status::Pass {
                fix = Some(
                    "Check the slot and link (pcie.link), risers and BIOS PCIe settings; use \
                     pinned memory; on a cloud instance ask for a host where the GPU has its \
                     own x16 link.",
                );
            }
            status = worse(status, s);
            if let Reading::Value(l) = &g.link_under_load {
                // Width holds at idle, so a narrower link fails outright; the generation drops
                // between copies, so a lower one fails only when enough samples saw it.
                let narrow = l.width < width;
                let slow = l.gen < gen;
                if narrow || slow {
                    let sure = narrow || l.samples >= LINK_SAMPLES_FOR_FAIL;
                    status = worse(status, if sure { Status::Fail } else { Status::Warn });
                    notes.push(format!(
                        "the link ran at Gen{} x{} during the copies ({} NVML samples); it \
                         supports Gen{gen} x{width}",
                        l.gen, l.width, l.samples
                    ));
                    fix = Some(
                        "Reseat the card or move it to a slot that trains at full width and \
                         generation; replace a riser that lowers the rate; check BIOS PCIe \
                         settings.",
                    );
                }
            }
        } else {
            msg.push_str(" (link rate unknown: judged against the other GPUs only)");
        }
        for (dir, v, all) in [
            (Direction::H2d, h2d.gbps, &all_h2d),
            (Direction::D2h, d2h.gbps, &all_d2h),
        ] {
            if let Some(med) = below_siblings(facts, gpu, v, all) {
                status = Status::Fail;
                notes.push(format!(
                    "{} is {:.0}% below the median of the same GPUs here ({} GB/s)",
                    dir.label(),
                    (1.0 - v / med) * 100.0,
                    figure(med)
                ));
                fix.get_or_insert(
                    "Compare this GPU's slot and link with the others (pcie.link, nvidia-smi \
                     topo -m): a shared switch, a x8 slot or a riser.",
                );
            }
        }
        if let Some(c) = concurrent(gpu, Direction::H2d) {
            if c < SIBLING_FLOOR * h2d.gbps {
                status = worse(status, Status::Warn);
                notes.push(format!(
                    "with every GPU copying at once it gets {} GB/s ({:.0}% less): an upstream \
                     link is shared",
                    figure(c),
                    (1.0 - c / h2d.gbps) * 100.0
                ));
            }
        }
        let bad = failed_verifications(&g.verify);
        if !bad.is_empty() {
            status = Status::Fail;
            notes.push(format!("copied data differs: {}", bad.join("; ")));
            fix =
                Some("Data corrupted in transfer: drain the machine and report the GPU and slot.");
        }
        if !notes.is_empty() {
            msg.push_str("; ");
            msg.push_str(&notes.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("h2d_pinned_gbps", h2d.gbps)
            .with("d2h_pinned_gbps", d2h.gbps)
            .with("size_bytes", h2d.size_bytes)
            .with(
                "h2d_pageable_gbps",
                g.largest(Direction::H2d, HostMemory::Pageable)
                    .map(|p| p.gbps),
            )
            .with(
                "d2h_pageable_gbps",
                g.largest(Direction::D2h, HostMemory::Pageable)
                    .map(|p| p.gbps),
            )
            .with("link_gbps", expected.map(|e| e.0))
            .with("link_under_load", &g.link_under_load)
            .with("all_gpus_h2d_gbps", concurrent(gpu, Direction::H2d));
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}

// ---------------------------------------------------------------- memory.bandwidth

fn check_memory(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "memory.bandwidth";
    let m = match group(ID, facts, &facts.measured.memory) {
        Ok(m) => m,
        Err(f) => return f,
    };
    let all: Vec<(u32, f64)> = m
        .iter()
        .filter_map(|g| Some((g.gpu, g.result.value()?.best_copy_gbps())))
        .collect();
    per_gpu(ID, policy, m, |gpu, b| {
        let who = label(facts, gpu);
        let v = b.best_copy_gbps();
        let mut status = Status::Pass;
        let mut fix = None;
        let mut msg = format!(
            "{who}: device copy {} GB/s (read + write, {} buffers)",
            figure(v),
            bytes(b.buffer_bytes)
        );
        let spec = spec_of(facts, gpu);
        if let Some((s, peak)) = spec.and_then(|s| Some((s, s.memory_bandwidth_gbps?))) {
            let ratio = v / peak;
            msg.push_str(&format!(
                ", {:.0}% of the {} datasheet's {} GB/s",
                ratio * 100.0,
                s.name,
                figure(peak)
            ));
            status = rate_status(ratio, MEMORY_WARN, MEMORY_FAIL);
            if status != Status::Pass {
                fix = Some(
                    "Check the memory clock and power limit (nvidia-smi -q -d CLOCK,POWER), \
                     pending ECC retirement or row remapping, and that the model is the one \
                     ordered.",
                );
            }
        } else {
            msg.push_str(" (model not in the spec database: judged against the other GPUs only)");
        }
        if let Some(med) = below_siblings(facts, gpu, v, &all) {
            status = Status::Fail;
            msg.push_str(&format!(
                "; {:.0}% below the median of the same GPUs here ({} GB/s)",
                (1.0 - v / med) * 100.0,
                figure(med)
            ));
            fix.get_or_insert(
                "Compare this GPU's clocks, power limit and ECC state with the others.",
            );
        }
        let bad = failed_verifications(&b.verify);
        if !bad.is_empty() {
            status = Status::Fail;
            msg.push_str(&format!("; data check failed: {}", bad.join("; ")));
            fix = Some("Device memory returned wrong data: drain the GPU, check memory.errors, and have it replaced.");
        }
        if let Some(n) = &b.note {
            msg.push_str(&format!("; {n}"));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("copy_gbps", v)
            .with("copy_kernel_gbps", b.copy_gbps)
            .with("memcpy_gbps", b.memcpy_gbps)
            .with("read_gbps", b.read_gbps)
            .with("write_gbps", b.write_gbps)
            .with("triad_gbps", b.triad_gbps)
            .with("buffer_bytes", b.buffer_bytes)
            .with("datasheet_gbps", spec.map(|s| s.memory_bandwidth_gbps));
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}

// ---------------------------------------------------------------- compute.gemm

/// The datasheet figure a dtype's GEMM is compared with. fp64 GEMMs run on the fp64 tensor
/// cores where the GPU has them (A100, H100/H200: cuBLAS uses DMMA).
pub fn gemm_expected(spec: &GpuSpec, d: GemmDtype) -> Option<f64> {
    let t = &spec.tflops;
    match d {
        GemmDtype::Fp64 => t.fp64_tensor.or(t.fp64),
        GemmDtype::Fp32 => t.fp32,
        GemmDtype::Tf32 => t.tf32,
        GemmDtype::Fp16 => t.fp16,
        GemmDtype::Bf16 => t.bf16,
        GemmDtype::Fp8 => t.fp8,
    }
}

fn check_gemm(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "compute.gemm";
    let m = match group(ID, facts, &facts.measured.gemm) {
        Ok(m) => m,
        Err(f) => return f,
    };
    let of = |d: GemmDtype| -> Vec<(u32, f64)> {
        m.iter()
            .filter_map(|g| {
                let r = g.result.value()?.iter().find(|r| r.dtype == d)?;
                Some((g.gpu, r.result.value()?.tflops))
            })
            .collect()
    };
    per_gpu(ID, policy, m, |gpu, results| {
        let who = label(facts, gpu);
        let spec = spec_of(facts, gpu);
        let mut status = Status::Pass;
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut missing = Vec::new();
        let mut evidence = crate::finding::Evidence::new();
        let mut fix = None;
        for r in results {
            let name = r.dtype.as_str();
            let p = match &r.result {
                Reading::Value(p) => p,
                Reading::Unavailable(why) => {
                    missing.push(format!("{name}: {why}"));
                    continue;
                }
            };
            let exp = spec.and_then(|s| gemm_expected(s, r.dtype));
            parts.push(match exp {
                Some(e) => format!("{name} {} ({:.0}%)", figure(p.tflops), p.tflops / e * 100.0),
                None => format!("{name} {}", figure(p.tflops)),
            });
            if let Some(e) = exp {
                let ratio = p.tflops / e;
                let s = rate_status(ratio, GEMM_WARN, GEMM_FAIL);
                if s != Status::Pass {
                    problems.push(format!("{name} at {:.0}% of the datasheet", ratio * 100.0));
                    fix.get_or_insert(
                        "Check power limit, clocks and throttle reasons (power.limit, \
                         clocks.throttle), cooling, and other processes on the GPU.",
                    );
                }
                status = worse(status, s);
            }
            if let Some(med) = below_siblings(facts, gpu, p.tflops, &of(r.dtype)) {
                status = Status::Fail;
                problems.push(format!(
                    "{name} {:.0}% below the median of the same GPUs here ({})",
                    (1.0 - p.tflops / med) * 100.0,
                    figure(med)
                ));
                fix.get_or_insert(
                    "Compare this GPU's clocks, power limit and temperature with the others.",
                );
            }
            if !p.verified {
                status = Status::Fail;
                problems.push(if r.dtype == GemmDtype::Fp32 {
                    format!(
                        "fp32 results off by {:.1e} (limit {:.0e}): not computed in full fp32 \
                         precision (TF32?) or wrong",
                        p.max_error, p.tolerance
                    )
                } else {
                    format!(
                        "{name} results wrong: error {:.1e} against the CPU (limit {:.0e})",
                        p.max_error, p.tolerance
                    )
                });
                fix = Some(
                    "Wrong GEMM results: rerun; if it repeats, drain the GPU and have it \
                     replaced (check memory.errors and the kernel log for XID errors).",
                );
            }
            evidence.insert(
                name,
                serde_json::json!({
                    "tflops": p.tflops, "expected": exp, "size": p.m,
                    "max_error": p.max_error, "verified": p.verified, "library": p.library,
                }),
            );
        }
        if parts.is_empty() {
            return Finding::skip(ID, format!("{who}: {}", missing.join("; "))).gpu(gpu);
        }
        let size = results
            .iter()
            .find_map(|r| r.result.value().map(|p| p.m))
            .unwrap_or(0);
        let mut msg = format!(
            "{who}: {size}x{size} GEMM TFLOPS {}{}",
            parts.join(", "),
            if spec.is_some() {
                " of the datasheet's dense peak"
            } else {
                " (model not in the spec database: judged against the other GPUs only)"
            }
        );
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        if !missing.is_empty() {
            msg.push_str(&format!("; not measured: {}", missing.join("; ")));
        }
        let mut f = Finding::new(ID, status, msg).gpu(gpu).evidence(evidence);
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}

// ---------------------------------------------------------------- p2p.bandwidth

/// What one direction between two GPUs should reach, and over what.
pub fn p2p_expected(facts: &Facts, src: u32, dst: u32) -> Option<(f64, String)> {
    let link = facts.topology.value().and_then(|t| {
        let i = t.gpus.iter().position(|l| l == &format!("GPU{src}"))?;
        let j = t.gpus.iter().position(|l| l == &format!("GPU{dst}"))?;
        t.links.get(i)?.get(j).cloned()
    });
    let nvlink_spec = spec_of(facts, src).and_then(|s| s.nvlink.clone());
    let active_links = |g: u32| -> Option<u32> {
        gpu_facts(facts, g)?
            .nvlinks
            .value()
            .map(|v| v.iter().filter(|l| l.active).count() as u32)
    };
    let nv = match (&link, &nvlink_spec) {
        (Some(TopoLink::NvLink(k)), Some(s)) => Some((*k).min(s.links.unwrap_or(*k))),
        (None, Some(s)) => match (active_links(src), active_links(dst)) {
            (Some(a), Some(b)) if a > 0 && b > 0 => Some(a.min(b).min(s.links.unwrap_or(a))),
            _ => None,
        },
        _ => None,
    };
    if let (Some(k), Some(s)) = (nv, &nvlink_spec) {
        // Datasheets give the total over both directions and all links; without a link count
        // the bonded set is taken as all of them.
        let per_dir = s.bandwidth_gbps / 2.0 * k as f64 / s.links.unwrap_or(k).max(1) as f64;
        return Some((per_dir, format!("NVLink x{k}")));
    }
    let a = pcie_expected(facts, src)?;
    let b = pcie_expected(facts, dst)?;
    Some((
        a.0.min(b.0),
        format!("PCIe Gen{} x{}", a.1.min(b.1), a.2.min(b.2)),
    ))
}

fn check_p2p(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "p2p.bandwidth";
    let p = match group(ID, facts, &facts.measured.p2p) {
        Ok(p) => p,
        Err(f) => return f,
    };
    // Pairs over the same kind of link are siblings.
    let kind = |a: u32, b: u32| p2p_expected(facts, a, b).map(|e| e.1).unwrap_or_default();
    let values: Vec<(u32, u32, f64)> = p
        .pairs
        .iter()
        .filter_map(|x| Some((x.src, x.dst, *x.gbps.value()?)))
        .collect();
    let mut out = Vec::new();
    for &src in &p.gpus {
        if !policy.selects(src) {
            continue;
        }
        let who = label(facts, src);
        let mine: Vec<_> = p.pairs.iter().filter(|x| x.src == src).collect();
        if mine.is_empty() {
            continue;
        }
        let mut status = Status::Pass;
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut evidence = Vec::new();
        let mut fix = None;
        for x in &mine {
            let exp = p2p_expected(facts, x.src, x.dst);
            let k = kind(x.src, x.dst);
            match &x.gbps {
                Reading::Value(v) => {
                    let mut part = format!("-> GPU {} {} GB/s", x.dst, figure(*v));
                    if let Some((e, over)) = &exp {
                        let ratio = v / e;
                        part.push_str(&format!(
                            " ({:.0}% of {over}'s {})",
                            ratio * 100.0,
                            figure(*e)
                        ));
                        let s = rate_status(ratio, P2P_WARN, P2P_FAIL);
                        if s != Status::Pass {
                            problems.push(format!(
                                "GPU {} -> GPU {} at {:.0}% of its {over} link",
                                x.src,
                                x.dst,
                                ratio * 100.0
                            ));
                            fix.get_or_insert(
                                "Check nvlink.status and nvidia-smi topo -m; on NVSwitch systems \
                                 the fabric manager; in a VM, the hypervisor's P2P support.",
                            );
                        }
                        status = worse(status, s);
                    }
                    let same: Vec<f64> = values
                        .iter()
                        .filter(|(a, b, _)| kind(*a, *b) == k)
                        .map(|(_, _, v)| *v)
                        .collect();
                    if same.len() >= 2 {
                        if let Some(med) = median(&same) {
                            if *v < SIBLING_FLOOR * med {
                                status = Status::Fail;
                                problems.push(format!(
                                    "GPU {} -> GPU {} is {:.0}% below the median of the pairs \
                                     ({} GB/s)",
                                    x.src,
                                    x.dst,
                                    (1.0 - v / med) * 100.0,
                                    figure(med)
                                ));
                            }
                        }
                    }
                    parts.push(part);
                }
                Reading::Unavailable(why) => {
                    status = worse(status, Status::Warn);
                    problems.push(format!(
                        "GPU {} -> GPU {} not measured: {why}",
                        x.src, x.dst
                    ));
                }
            }
            if !x.peer_access {
                let nvlink = exp.as_ref().is_some_and(|e| e.1.starts_with("NVLink"));
                status = worse(status, if nvlink { Status::Fail } else { Status::Warn });
                problems.push(format!(
                    "no peer access GPU {} -> GPU {}: copies go through host memory",
                    x.src, x.dst
                ));
                fix.get_or_insert(
                    "Enable peer-to-peer: on bare metal check ACS/IOMMU settings in the BIOS; \
                     in a VM ask the provider for P2P support between the GPUs.",
                );
            }
            if let Some(v) = &x.verify {
                if !v.ok {
                    status = Status::Fail;
                    problems.push(format!(
                        "data check failed: {}{}",
                        v.what,
                        v.detail
                            .as_ref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    ));
                    fix =
                        Some("GPU-to-GPU copies corrupted data: drain the machine and report it.");
                }
            }
            if let Reading::Value(l) = &x.latency_us {
                if *l > 100.0 {
                    status = worse(status, Status::Warn);
                    problems.push(format!(
                        "GPU {} -> GPU {} small copies take {} us each",
                        x.src,
                        x.dst,
                        figure(*l)
                    ));
                }
            }
            evidence.push(serde_json::json!({
                "dst": x.dst, "gbps": x.gbps, "latency_us": x.latency_us,
                "peer_access": x.peer_access, "expected_gbps": exp.as_ref().map(|e| e.0),
                "link": exp.as_ref().map(|e| e.1.clone()),
            }));
        }
        let bidir: Vec<serde_json::Value> = p
            .bidirectional
            .iter()
            .filter(|b| b.a == src || b.b == src)
            .map(|b| serde_json::json!({"a": b.a, "b": b.b, "gbps": b.gbps}))
            .collect();
        let mut msg = format!("{who}: {}", parts.join(", "));
        if parts.is_empty() {
            msg = format!("{who}: no copy measured");
        }
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(src)
            .with("pairs", evidence)
            .with("bidirectional", bidir)
            .with("size_bytes", p.size_bytes);
        if let Some(x) = fix {
            f = f.fix(x);
        }
        out.push(f);
    }
    if out.is_empty() {
        out.push(Finding::skip(ID, "no GPU pair measured"));
    }
    out
}

// ---------------------------------------------------------------- nccl.allreduce

fn check_nccl(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    const ID: &str = "nccl.allreduce";
    let a = match group(ID, facts, &facts.measured.nccl) {
        Ok(a) => a,
        Err(f) => return f,
    };
    let Some(big) = a.largest() else {
        return vec![Finding::skip(ID, "no all-reduce size was measured")];
    };
    let n = a.gpus.len() as u32;
    // The slowest GPU's link to its peers bounds the bus bandwidth.
    let expected = a
        .gpus
        .iter()
        .flat_map(|&x| {
            a.gpus
                .iter()
                .filter(move |&&y| y != x)
                .map(move |&y| (x, y))
        })
        .filter_map(|(x, y)| p2p_expected(facts, x, y))
        .min_by(|p, q| p.0.total_cmp(&q.0));
    let mib = a.at(MIB);
    let mut status = Status::Pass;
    let mut msg = format!(
        "all-reduce over {n} GPUs: bus bandwidth {} GB/s at {}",
        figure(big.busbw_gbps),
        bytes(big.size_bytes)
    );
    let mut fix = None;
    if let Some((e, over)) = &expected {
        let ratio = big.busbw_gbps / e;
        msg.push_str(&format!(
            " ({:.0}% of {over}'s {} GB/s)",
            ratio * 100.0,
            figure(*e)
        ));
        status = rate_status(ratio, NCCL_WARN, NCCL_FAIL);
        if status != Status::Pass {
            fix = Some(
                "Check p2p.bandwidth and nvlink.status, that NCCL_P2P_DISABLE / NCCL_SHM_DISABLE \
                 are not set (cuda.env), and /dev/shm (host.shm).",
            );
        }
    }
    if let Some(m) = mib {
        msg.push_str(&format!("; 1 MiB takes {} us", figure(m.time_us)));
        if m.time_us > 500.0 {
            status = worse(status, Status::Warn);
            msg.push_str(" (slow: above 500 us)");
        }
    }
    let bad = failed_verifications(&a.verify);
    if !bad.is_empty() {
        status = Status::Fail;
        msg.push_str(&format!("; wrong sums: {}", bad.join("; ")));
        fix = Some("All-reduce produced wrong sums: drain the machine and report it.");
    }
    let mut f = Finding::new(ID, status, msg)
        .with("gpus", &a.gpus)
        .with("nccl_version", &a.nccl_version)
        .with("busbw_gbps", big.busbw_gbps)
        .with("algbw_gbps", big.algbw_gbps)
        .with("size_bytes", big.size_bytes)
        .with("latency_1mib_us", mib.map(|m| m.time_us))
        .with("expected_gbps", expected.as_ref().map(|e| e.0));
    if let Some(x) = fix {
        f = f.fix(x);
    }
    vec![f]
}

// ---------------------------------------------------------------- stability.burn

fn check_burn(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "stability.burn";
    let b = match group(ID, facts, &facts.measured.burn) {
        Ok(b) => b,
        Err(f) => return f,
    };
    let medians: Vec<(u32, f64)> = b
        .per_gpu
        .iter()
        .filter_map(|g| Some((g.gpu, g.result.value()?.tflops_stats?.median)))
        .collect();
    // The checksum most self-consistent GPUs agree on, per model.
    let checksums: Vec<(u32, String)> = b
        .per_gpu
        .iter()
        .filter_map(|g| {
            let v = g.result.value()?;
            v.self_consistent.then(|| (g.gpu, v.checksum.clone()))
        })
        .collect();
    let odd_one_out = |gpu: u32, sum: &str| -> Option<Vec<u32>> {
        let m = model(facts, gpu);
        let same: Vec<&(u32, String)> = checksums
            .iter()
            .filter(|(g, _)| model(facts, *g) == m)
            .collect();
        if same.len() < 2 {
            return None;
        }
        let agree = same.iter().filter(|(_, s)| s == sum).count();
        let others: Vec<u32> = same
            .iter()
            .filter(|(g, s)| *g != gpu && s != sum)
            .map(|(g, _)| *g)
            .collect();
        // Wrong unless its result is the one most siblings share (with two GPUs that
        // disagree, both are flagged: neither can be trusted).
        let max_other = same
            .iter()
            .filter(|(_, s)| s != sum)
            .map(|(_, s)| same.iter().filter(|(_, t)| t == s).count())
            .max()
            .unwrap_or(0);
        (!others.is_empty() && agree <= max_other).then_some(others)
    };
    per_gpu(ID, policy, &b.per_gpu, |gpu, g| {
        let who = label(facts, gpu);
        let mut status = Status::Pass;
        let mut problems: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut fix: Option<&str> = None;
        let Some(stats) = g.tflops_stats else {
            return Finding::skip(ID, format!("{who}: no full second of load was measured"))
                .gpu(gpu);
        };
        let mut msg = format!(
            "{who}: {} TFLOPS median over {:.0} s of {} GEMMs (min {}, max {})",
            figure(stats.median),
            b.seconds,
            b.dtype.as_str(),
            figure(stats.min),
            figure(stats.max)
        );
        if let Some(cv) = g.tflops_cv {
            if cv > BURN_CV_WARN {
                status = worse(status, Status::Warn);
                problems.push(format!(
                    "TFLOPS vary by {:.1}% (coefficient of variation)",
                    cv * 100.0
                ));
                fix.get_or_insert(
                    "Watch clocks, power and temperature under load (nvidia-smi dmon -s pucv).",
                );
            }
        }
        let q = (g.tflops.len() / 4).max(1);
        if g.tflops.len() >= 4 {
            if let (Some(first), Some(last)) = (
                median(&g.tflops[..q]),
                median(&g.tflops[g.tflops.len() - q..]),
            ) {
                if first > 0.0 && last / first < BURN_SAG_WARN {
                    status = worse(status, Status::Warn);
                    problems.push(format!(
                        "TFLOPS fell {:.0}% from the first to the last quarter",
                        (1.0 - last / first) * 100.0
                    ));
                    fix.get_or_insert("Check cooling: the GPU slows down as it heats.");
                }
            }
        }
        if let Some(med) = below_siblings(facts, gpu, stats.median, &medians) {
            status = Status::Fail;
            problems.push(format!(
                "{:.0}% below the median of the same GPUs here ({} TFLOPS)",
                (1.0 - stats.median / med) * 100.0,
                figure(med)
            ));
            fix.get_or_insert("Compare this GPU's clocks, power and temperature with the others.");
        }
        match &g.telemetry {
            Reading::Value(t) => {
                for seen in &t.throttle {
                    let share = seen.samples as f64 / t.samples.max(1) as f64;
                    if seen.reason.is_hardware_fault() {
                        status = Status::Fail;
                        problems.push(format!(
                            "{} in {:.0}% of the samples",
                            seen.reason.name(),
                            share * 100.0
                        ));
                        fix = Some(
                            "Hardware slowdown under load: check airflow, fans, inlet \
                             temperature and power cabling; on a cloud instance report the GPU \
                             (serial number) to the provider.",
                        );
                    } else if seen.reason == ThrottleReason::SwThermalSlowdown && share > 0.10 {
                        status = worse(status, Status::Warn);
                        problems.push(format!(
                            "software thermal slowdown in {:.0}% of the samples",
                            share * 100.0
                        ));
                        fix.get_or_insert(
                            "Check cooling: the GPU reaches its slowdown temperature under load.",
                        );
                    } else if seen.reason == ThrottleReason::SwPowerCap && share > 0.5 {
                        notes.push("held at its power limit".into());
                    }
                }
                if let (Some(first), Some(last)) = (t.sm_clock_first_mhz, t.sm_clock_last_mhz) {
                    if first > 0.0 && last / first < BURN_SAG_WARN {
                        status = worse(status, Status::Warn);
                        problems.push(format!(
                            "SM clock fell from {first:.0} to {last:.0} MHz during the run"
                        ));
                        fix.get_or_insert("Check cooling and power delivery.");
                    }
                }
                if let Some(c) = t.sm_clock_mhz {
                    notes.push(format!("SM clock {:.0} MHz median", c.median));
                }
                if let Some(p) = t.power_w {
                    notes.push(format!("{:.0} W", p.median));
                }
                if let Some(tc) = t.temperature_c {
                    notes.push(format!("up to {:.0} C", tc.max));
                }
            }
            Reading::Unavailable(why) => notes.push(format!("no NVML telemetry ({why})")),
        }
        if !g.self_consistent {
            status = Status::Fail;
            problems.push("identical GEMMs gave different results during the run".into());
            fix = Some("The GPU computes inconsistently: drain it and have it replaced.");
        } else if let Some(others) = odd_one_out(gpu, &g.checksum) {
            status = Status::Fail;
            problems.push(format!(
                "its results differ from GPU {}'s on the same inputs",
                others
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            fix = Some("GPUs disagree on identical work: rerun; if it repeats, drain the GPU whose result stands alone and have it replaced.");
        }
        if !g.verified {
            status = Status::Fail;
            problems.push(format!(
                "results wrong against the CPU (error {:.1e}, limit {:.0e})",
                g.max_error, g.tolerance
            ));
            fix = Some("The GPU computes wrong results under load: drain it and have it replaced.");
        }
        if !notes.is_empty() {
            msg.push_str(&format!(" ({})", notes.join(", ")));
        }
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("tflops", stats)
            .with("tflops_cv", g.tflops_cv)
            .with("checksum", &g.checksum)
            .with("self_consistent", g.self_consistent)
            .with("max_error", g.max_error)
            .with("telemetry", &g.telemetry);
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::*;
    use crate::units::GIB;

    const GB: u64 = 1 << 30;

    fn h200(i: u32) -> GpuFacts {
        let mut g = GpuFacts::unread(i, &format!("0000:00:0{}.0", 6 + i), "nvml", "test");
        g.name = Reading::Value("NVIDIA H200".into());
        g.pci_device_id = Reading::Value(0x2335);
        g.memory.total_mib = Reading::Value(143_771);
        g.pcie.gen_max = Reading::Value(5);
        g.pcie.width_max = Reading::Value(16);
        g
    }

    fn facts(n: u32) -> Facts {
        let mut f = Facts::empty(Origin::Live, "test");
        f.gpus = Reading::Value((0..n).map(h200).collect());
        f.measured = MeasuredFacts {
            not_run: None,
            mode: Some("full".into()),
            ..MeasuredFacts::not_run("not measured in this test")
        };
        f
    }

    fn run(id: &str, f: &Facts) -> Vec<Finding> {
        let c = CHECKS.iter().find(|c| c.id == id).unwrap();
        (c.run)(f, &Policy::default())
    }

    fn status(fs: &[Finding], gpu: u32) -> Status {
        fs.iter().find(|f| f.gpu == Some(gpu)).unwrap().status
    }

    fn stats(v: f64) -> Stats {
        Stats {
            n: 10,
            median: v,
            min: v,
            max: v,
        }
    }

    fn pcie_gpu(h2d: f64, d2h: f64) -> PcieGpu {
        let pt = |direction, host_memory, gbps| CopyPoint {
            direction,
            host_memory,
            size_bytes: GB,
            gbps,
            repeats: 5,
        };
        PcieGpu {
            points: vec![
                pt(Direction::H2d, HostMemory::Pinned, h2d),
                pt(Direction::D2h, HostMemory::Pinned, d2h),
                pt(Direction::H2d, HostMemory::Pageable, 20.0),
            ],
            link_under_load: Reading::Value(PcieLinkState {
                gen: 5,
                width: 16,
                samples: 10,
            }),
            verify: vec![Verify {
                what: "h2d".into(),
                ok: true,
                detail: None,
            }],
        }
    }

    #[test]
    fn all_seven_are_registered_as_measured() {
        for id in [
            "cuda.context-latency",
            "pcie.bandwidth",
            "memory.bandwidth",
            "compute.gemm",
            "p2p.bandwidth",
            "nccl.allreduce",
            "stability.burn",
        ] {
            let c = crate::checks::find(id).unwrap_or_else(|| panic!("{id}"));
            assert_eq!(c.kind, CheckKind::Measured);
            assert!(!c.doc.what.is_empty() && !c.doc.fix.is_empty());
        }
    }

    #[test]
    fn not_measured_is_one_skip_with_the_reason() {
        let mut f = facts(2);
        f.measured = MeasuredFacts::not_run("snapshot audit: nothing is measured");
        for c in CHECKS {
            let out = (c.run)(&f, &Policy::default());
            assert_eq!(out.len(), 1, "{}", c.id);
            assert_eq!(out[0].status, Status::Skip);
            assert_eq!(out[0].message, "snapshot audit: nothing is measured");
        }
        let mut f = facts(2);
        f.measured.burn = Reading::unavailable("quick audit: run with --full (or gpuaudit burn)");
        let out = run("stability.burn", &f);
        assert_eq!(out[0].status, Status::Skip);
        assert!(out[0].message.contains("--full"));
    }

    #[test]
    fn pcie_judged_against_the_link_and_siblings() {
        let mut f = facts(3);
        let mut low_link = pcie_gpu(55.0, 55.0);
        low_link.link_under_load = Reading::Value(PcieLinkState {
            gen: 4,
            width: 16,
            samples: 40,
        });
        f.measured.pcie = Reading::Value(PcieBandwidth {
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(pcie_gpu(55.4, 55.3))),
                OnGpu::new(1, Reading::Value(pcie_gpu(27.0, 27.0))),
                OnGpu::new(2, Reading::Value(low_link)),
            ],
            all_at_once: Reading::Value(vec![ConcurrentCopy {
                direction: Direction::H2d,
                size_bytes: GB,
                per_gpu: vec![GpuValue {
                    gpu: 0,
                    value: 30.0,
                }],
                total_gbps: 30.0,
            }]),
        });
        let out = run("pcie.bandwidth", &f);
        assert_eq!(out.len(), 3);
        // GPU 0: 88% of 63 GB/s, but it shares its upstream link with another GPU.
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Warn, "{}", g0.message);
        assert!(g0.message.contains("88%"), "{}", g0.message);
        assert!(g0.message.contains("shared"), "{}", g0.message);
        // GPU 1: 43% of the link and half its siblings.
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("below the median"), "{}", g1.message);
        // GPU 2: fast enough, but the link trained at Gen4 under load.
        let g2 = out.iter().find(|x| x.gpu == Some(2)).unwrap();
        assert_eq!(g2.status, Status::Fail);
        assert!(g2.message.contains("Gen4 x16"), "{}", g2.message);
        // A lower generation seen in a few samples only (the link idles between copies)
        // warns; a narrower link fails at once.
        let mut few = pcie_gpu(55.0, 55.0);
        few.link_under_load = Reading::Value(PcieLinkState {
            gen: 1,
            width: 16,
            samples: 3,
        });
        let mut narrow = pcie_gpu(55.0, 55.0);
        narrow.link_under_load = Reading::Value(PcieLinkState {
            gen: 5,
            width: 8,
            samples: 3,
        });
        f.measured.pcie = Reading::Value(PcieBandwidth {
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(few)),
                OnGpu::new(1, Reading::Value(narrow)),
            ],
            all_at_once: Reading::unavailable("x"),
        });
        let out = run("pcie.bandwidth", &f);
        assert_eq!(status(&out, 0), Status::Warn);
        assert_eq!(status(&out, 1), Status::Fail);
    }

    fn membw(copy: f64) -> MemoryBandwidth {
        MemoryBandwidth {
            buffer_bytes: 4 * GB,
            copy_gbps: copy,
            memcpy_gbps: Some(copy * 0.99),
            read_gbps: None,
            write_gbps: None,
            triad_gbps: None,
            sweep: vec![],
            verify: vec![],
            note: None,
        }
    }

    #[test]
    fn memory_against_datasheet_and_siblings() {
        let mut f = facts(3);
        let mut bad_data = membw(4300.0);
        bad_data.verify.push(Verify {
            what: "copy kernel".into(),
            ok: false,
            detail: Some("12 words differ".into()),
        });
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(4300.0))),
            OnGpu::new(1, Reading::Value(membw(3300.0))),
            OnGpu::new(2, Reading::Value(bad_data)),
        ]);
        let out = run("memory.bandwidth", &f);
        assert_eq!(status(&out, 0), Status::Pass);
        // 69% of 4800: warn; not 30% below its siblings.
        assert_eq!(status(&out, 1), Status::Warn);
        assert_eq!(status(&out, 2), Status::Fail);
        assert!(
            out[0].message.contains("90% of the NVIDIA H200"),
            "{}",
            out[0].message
        );
    }

    #[test]
    fn unknown_model_is_judged_by_siblings_only() {
        let mut f = facts(2);
        if let Reading::Value(g) = &mut f.gpus {
            for x in g.iter_mut() {
                x.pci_device_id = Reading::Value(0xFFFF);
                x.name = Reading::Value("NVIDIA Mystery".into());
            }
        }
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(1000.0))),
            OnGpu::new(1, Reading::Value(membw(600.0))),
        ]);
        let out = run("memory.bandwidth", &f);
        assert_eq!(status(&out, 0), Status::Pass);
        assert_eq!(status(&out, 1), Status::Fail, "{}", out[1].message);
        assert!(out[1].message.contains("40% below"), "{}", out[1].message);
    }

    fn gemm_point(tflops: f64, verified: bool) -> GemmPoint {
        GemmPoint {
            m: 8192,
            n: 8192,
            k: 8192,
            tflops,
            ms_per_gemm: 1.0,
            repeats: 20,
            batches: vec![tflops],
            library: "cublasLt 130001".into(),
            layout: "NN".into(),
            max_error: if verified { 1e-3 } else { 5e-4 },
            tolerance: 1e-4,
            samples: 32,
            verified,
        }
    }

    #[test]
    fn gemm_per_dtype() {
        let mut f = facts(2);
        let r = |d, t, ok| GemmResult {
            dtype: d,
            result: Reading::Value(gemm_point(t, ok)),
        };
        f.measured.gemm = Reading::Value(vec![
            OnGpu::new(
                0,
                Reading::Value(vec![
                    r(GemmDtype::Bf16, 789.0, true),
                    r(GemmDtype::Fp32, 50.8, true),
                    GemmResult {
                        dtype: GemmDtype::Fp8,
                        result: Reading::unavailable("cuBLASLt has no algorithm"),
                    },
                ]),
            ),
            OnGpu::new(
                1,
                Reading::Value(vec![
                    r(GemmDtype::Bf16, 780.0, true),
                    r(GemmDtype::Fp32, 50.0, false),
                ]),
            ),
        ]);
        let out = run("compute.gemm", &f);
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Pass, "{}", g0.message);
        assert!(g0.message.contains("bf16 789 (80%)"), "{}", g0.message);
        assert!(g0.message.contains("not measured: fp8"), "{}", g0.message);
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("TF32"), "{}", g1.message);
    }

    fn topo_nv18() -> Topology {
        Topology {
            gpus: vec!["GPU0".into(), "GPU1".into()],
            links: vec![
                vec![TopoLink::Itself, TopoLink::NvLink(18)],
                vec![TopoLink::NvLink(18), TopoLink::Itself],
            ],
            nics: vec![],
            gpu_nic: vec![],
            nic_names: vec![],
            cpu_affinity: vec![],
            numa_affinity: vec![],
        }
    }

    fn p2p(gbps01: f64, peer: bool) -> P2pMatrix {
        let pair = |src, dst, gbps| P2pPair {
            src,
            dst,
            peer_access: peer,
            gbps: Reading::Value(gbps),
            latency_us: Reading::Value(6.0),
            verify: Some(Verify {
                what: "x".into(),
                ok: true,
                detail: None,
            }),
        };
        P2pMatrix {
            gpus: vec![0, 1],
            size_bytes: GB,
            pairs: vec![pair(0, 1, gbps01), pair(1, 0, 394.0)],
            bidirectional: vec![P2pBidir {
                a: 0,
                b: 1,
                gbps: Reading::Value(740.0),
            }],
        }
    }

    #[test]
    fn p2p_against_nvlink() {
        let mut f = facts(2);
        f.topology = Reading::Value(topo_nv18());
        assert_eq!(
            p2p_expected(&f, 0, 1),
            Some((450.0, "NVLink x18".to_string()))
        );
        f.measured.p2p = Reading::Value(p2p(393.7, true));
        let out = run("p2p.bandwidth", &f);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|x| x.status == Status::Pass), "{out:?}");
        f.measured.p2p = Reading::Value(p2p(150.0, false));
        let out = run("p2p.bandwidth", &f);
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Fail);
        assert!(g0.message.contains("no peer access"), "{}", g0.message);
        assert!(g0.message.contains("below the median"), "{}", g0.message);
    }

    fn allreduce(busbw: f64, ok: bool) -> AllReduce {
        AllReduce {
            gpus: vec![0, 1],
            nccl_version: Some("2.27.7".into()),
            points: vec![
                AllReducePoint {
                    size_bytes: MIB,
                    time_us: 57.6,
                    algbw_gbps: 18.2,
                    busbw_gbps: 18.2,
                    iterations: 50,
                },
                AllReducePoint {
                    size_bytes: GIB,
                    time_us: 3270.0,
                    algbw_gbps: busbw,
                    busbw_gbps: busbw,
                    iterations: 10,
                },
            ],
            verify: vec![Verify {
                what: "sum".into(),
                ok,
                detail: None,
            }],
        }
    }

    #[test]
    fn allreduce_against_the_slowest_link() {
        let mut f = facts(2);
        f.topology = Reading::Value(topo_nv18());
        f.measured.nccl = Reading::Value(allreduce(328.3, true));
        let out = run("nccl.allreduce", &f);
        assert_eq!(out[0].status, Status::Pass, "{}", out[0].message);
        assert!(
            out[0].message.contains("73% of NVLink x18"),
            "{}",
            out[0].message
        );
        assert!(
            out[0].message.contains("1 MiB takes 57.6 us"),
            "{}",
            out[0].message
        );
        f.measured.nccl = Reading::Value(allreduce(100.0, false));
        let out = run("nccl.allreduce", &f);
        assert_eq!(out[0].status, Status::Fail);
    }

    fn burn_gpu(tflops: f64, checksum: &str, throttle: Vec<ThrottleSeen>) -> BurnGpu {
        let windows = vec![tflops; 60];
        BurnGpu {
            tflops_stats: Stats::of(&windows),
            tflops_cv: coefficient_of_variation(&windows),
            tflops: windows,
            checksum: checksum.into(),
            self_consistent: true,
            max_error: 1e-3,
            tolerance: 3e-2,
            verified: true,
            telemetry: Reading::Value(Telemetry {
                samples: 300,
                interval_ms: 200,
                sm_clock_mhz: Some(stats(1755.0)),
                sm_clock_first_mhz: Some(1755.0),
                sm_clock_last_mhz: Some(1755.0),
                power_w: Some(stats(690.0)),
                temperature_c: Some(stats(70.0)),
                throttle,
            }),
        }
    }

    #[test]
    fn burn_throttling_and_disagreeing_results() {
        let mut f = facts(3);
        let cap = ThrottleSeen {
            reason: ThrottleReason::SwPowerCap,
            samples: 280,
        };
        let hw = ThrottleSeen {
            reason: ThrottleReason::HwSlowdown,
            samples: 3,
        };
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(burn_gpu(700.0, "aa", vec![cap.clone()]))),
                OnGpu::new(1, Reading::Value(burn_gpu(700.0, "aa", vec![cap, hw]))),
                OnGpu::new(2, Reading::Value(burn_gpu(700.0, "bb", vec![]))),
            ],
        });
        let out = run("stability.burn", &f);
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Pass, "{}", g0.message);
        assert!(
            g0.message.contains("held at its power limit"),
            "{}",
            g0.message
        );
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("hw_slowdown"), "{}", g1.message);
        let g2 = out.iter().find(|x| x.gpu == Some(2)).unwrap();
        assert_eq!(g2.status, Status::Fail);
        assert!(
            g2.message.contains("differ from GPU 0, 1"),
            "{}",
            g2.message
        );
    }

    #[test]
    fn burn_unsteady_warns_and_two_disagreeing_gpus_both_fail() {
        let mut f = facts(2);
        let mut shaky = burn_gpu(700.0, "aa", vec![]);
        shaky.tflops = (0..60)
            .map(|i| if i % 2 == 0 { 600.0 } else { 800.0 })
            .collect();
        shaky.tflops_cv = coefficient_of_variation(&shaky.tflops);
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![OnGpu::new(0, Reading::Value(shaky))],
        });
        let out = run("stability.burn", &f);
        assert_eq!(out[0].status, Status::Warn, "{}", out[0].message);
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(burn_gpu(700.0, "aa", vec![]))),
                OnGpu::new(1, Reading::Value(burn_gpu(700.0, "bb", vec![]))),
            ],
        });
        let out = run("stability.burn", &f);
        assert!(out.iter().all(|x| x.status == Status::Fail), "{out:?}");
    }

    fn ctx(total: f64, persistence: bool) -> ContextLatency {
        ContextLatency {
            runs: 10,
            visible_gpus: Some(2),
            init_ms: stats(total * 0.75),
            context_ms: stats(total * 0.24),
            alloc_ms: stats(total * 0.01),
            total_ms: stats(total),
            persistence_mode: Reading::Value(vec![GpuFlag {
                gpu: 0,
                enabled: persistence,
            }]),
            failures: vec![],
        }
    }

    #[test]
    fn context_latency_limits() {
        let mut f = facts(2);
        f.measured.context = Reading::Value(ctx(424.0, true));
        let out = run("cuda.context-latency", &f);
        assert_eq!(out[0].status, Status::Pass, "{}", out[0].message);
        f.measured.context = Reading::Value(ctx(4000.0, false));
        let out = run("cuda.context-latency", &f);
        assert_eq!(out[0].status, Status::Warn);
        assert!(out[0].message.contains("persistence mode is off on GPU 0"));
        assert!(out[0].fix.as_ref().unwrap().contains("nvidia-persistenced"));
        f.measured.context = Reading::Value(ctx(12_000.0, true));
        assert_eq!(run("cuda.context-latency", &f)[0].status, Status::Fail);
    }

    #[test]
    fn busy_gpu_keeps_its_reason_per_gpu() {
        let mut f = facts(2);
        f.measured.memory = Reading::Value(vec![
            OnGpu::new(0, Reading::Value(membw(4300.0))),
            OnGpu::new(
                1,
                Reading::unavailable(
                    "GPU 1 busy (2 processes running on it); --force to measure anyway",
                ),
            ),
        ]);
        let out = run("memory.bandwidth", &f);
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Skip);
        assert!(g1.message.contains("--force"));
    }
}
