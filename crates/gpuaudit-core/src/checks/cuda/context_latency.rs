//! cuda.context-latency: the measured time a fresh process takes to create a CUDA context.

use crate::checks::judge::group;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::units::figure;

const ID: &str = "cuda.context-latency";

/// The median context creation may take: a base plus a share per visible GPU, since cuInit
/// initialises every GPU it sees (on the H200 VMs here cuInit takes 100 ms with one GPU and
/// 320 ms with two). Above it warns.
pub const BASE_MS: f64 = 500.0;
pub const PER_GPU_MS: f64 = 250.0;
/// A median above this (milliseconds) fails: every process start waits seconds.
pub const FAIL_MS: f64 = 10_000.0;
/// A slowest run above this many times the median (and above the limit) warns: jitter.
pub const JITTER_FACTOR: f64 = 3.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "time to cuInit + create a context + first allocation, over fresh processes",
    looks_at: "measured time to cuInit + create a context + first allocation, over fresh \
               processes (median, max)",
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
    profiles: &[],
    run: check_context,
};

fn check_context(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let c = match group(ID, facts, &facts.measured.context) {
        Ok(c) => c,
        Err(f) => return f,
    };
    let n = c
        .visible_gpus
        .unwrap_or_else(|| facts.gpu_list().len() as u32)
        .max(1);
    let limit = BASE_MS + PER_GPU_MS * n as f64;
    let med = c.total_ms.median;
    let off: Vec<u32> = c
        .persistence_mode
        .value()
        .map(|v| v.iter().filter(|p| !p.enabled).map(|p| p.gpu).collect())
        .unwrap_or_default();
    let mut status = if med > FAIL_MS {
        Status::Fail
    } else if med > limit {
        Status::Warn
    } else {
        Status::Pass
    };
    let jitter = c.total_ms.max > JITTER_FACTOR * med && c.total_ms.max > limit;
    if jitter {
        status = status.max(Status::Warn);
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::Machine;

    #[test]
    fn context_latency_limits() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        f.measured.context = Reading::Value(ctx(424.0, true));
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Pass, "{}", out[0].message);
        f.measured.context = Reading::Value(ctx(4000.0, false));
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Warn);
        assert!(out[0].message.contains("persistence mode is off on GPU 0"));
        assert!(out[0].fix.as_ref().unwrap().contains("nvidia-persistenced"));
        f.measured.context = Reading::Value(ctx(12_000.0, true));
        assert_eq!((CHECK.run)(&f, &Policy::default())[0].status, Status::Fail);
    }
}
