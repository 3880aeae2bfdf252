//! The gate every group's plan passes first: which GPUs are measured and why the others are
//! not, whether anything can run at all (a GPU, libcuda), whether the group was asked for, the
//! mode, and how the per-GPU groups take the GPUs. In one place so that a reason reads the same
//! in every group and the reasons take precedence the same way: not asked, then nothing to run
//! on, then the group's own (one GPU for a pair, a library missing), which its plan gives.
//!
//! The gate also hands out the groups' time budgets ([`Gate::budget`]), since the limit a
//! user sets (`Options::timeout_s`) replaces every group's alike.

use super::budget::Budget;
use super::plan::Options;
use super::GpuGroup;
use gpuaudit_core::facts::{ComputeCapability, SkippedGpu, NOT_REHEARSED};
use serde::{Deserialize, Serialize};

/// A GPU as the parent knows it before measuring (from NVML or nvidia-smi).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub index: u32,
    pub pci_bus_id: String,
    pub name: Option<String>,
    pub compute_capability: Option<ComputeCapability>,
    /// Why the GPU counts as busy ("2 processes", "utilization 35%"), if it does.
    pub busy: Option<String>,
    /// MIG mode is on: CUDA sees instances, not the GPU.
    pub mig: bool,
}

/// Which libraries were found (the reason where one was not).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LibStatus {
    pub cuda: Option<String>,
    pub cublas: Option<String>,
    pub cublaslt: Option<String>,
    pub nccl: Option<String>,
}

impl LibStatus {
    /// Every library present.
    pub fn all_found() -> Self {
        LibStatus::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Quick,
    Full,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }
}

/// A group's plan: its params, or why it does not run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step<T> {
    Run(T),
    Skip(String),
}

impl<T> Step<T> {
    pub fn params(&self) -> Option<&T> {
        match self {
            Step::Run(p) => Some(p),
            Step::Skip(_) => None,
        }
    }

    pub fn skip_reason(&self) -> Option<&str> {
        match self {
            Step::Run(_) => None,
            Step::Skip(r) => Some(r),
        }
    }
}

/// How the memory and GEMM groups go through the GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuOrder {
    /// One GPU after the other, each with all its measurements (what the anchors were
    /// compared with on the 2xH200).
    #[default]
    OneByOne,
    /// GEMM data type by data type, each on every GPU in turn: a GPU rests while the others
    /// run, so the cool-down between its data types costs no extra time. Memory: one by one.
    Interleaved,
    /// Every GPU at once, each in its own thread (as the burn does).
    AllAtOnce,
}

impl GpuOrder {
    /// `GPUAUDIT_GPU_ORDER=one-by-one|interleaved|all-at-once`.
    pub fn parse(s: &str) -> Option<GpuOrder> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "one-by-one" => Some(GpuOrder::OneByOne),
            "interleaved" => Some(GpuOrder::Interleaved),
            "all-at-once" => Some(GpuOrder::AllAtOnce),
            _ => None,
        }
    }
}

/// What every group's plan starts from.
pub struct Gate<'a> {
    pub opts: &'a Options,
    pub libs: &'a LibStatus,
    /// Every GPU the driver enumerated (a process's cuInit pays for all of them).
    pub targets: &'a [Target],
    /// The GPUs measured, in the driver's order.
    pub gpus: Vec<&'a Target>,
    /// The GPUs left out, each with the reason.
    pub skipped: Vec<SkippedGpu>,
    /// A reason that rules out every group.
    nothing_runs: Option<String>,
}

impl<'a> Gate<'a> {
    /// `targets` are every GPU the driver enumerated; `--gpus`, busy GPUs (unless `force`)
    /// and MIG GPUs are left out with the reason.
    pub fn new(targets: &'a [Target], opts: &'a Options, libs: &'a LibStatus) -> Gate<'a> {
        let mut gpus = Vec::new();
        let mut skipped = Vec::new();
        for t in targets {
            if opts.gpus.as_ref().is_some_and(|g| !g.contains(&t.index)) {
                continue;
            }
            if t.mig {
                skipped.push(SkippedGpu {
                    gpu: t.index,
                    reason: format!(
                        "GPU {} has MIG mode on: measurements need the whole GPU",
                        t.index
                    ),
                });
            } else if let (Some(busy), false) = (&t.busy, opts.force) {
                skipped.push(SkippedGpu {
                    gpu: t.index,
                    reason: format!("GPU {} busy ({busy}); --force to measure anyway", t.index),
                });
            } else {
                gpus.push(t);
            }
        }

        // A reason that rules out every group, in order of what the user can act on first.
        let nothing_runs: Option<String> = if targets.is_empty() {
            Some("no NVIDIA GPU found".into())
        } else if gpus.is_empty() && !skipped.is_empty() {
            Some(
                skipped
                    .iter()
                    .map(|s| s.reason.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        } else if gpus.is_empty() {
            Some("none of the GPUs asked for with --gpus exists".into())
        } else {
            libs.cuda
                .as_ref()
                .map(|r| format!("the CUDA driver library is missing: {r}"))
        };
        Gate {
            opts,
            libs,
            targets,
            gpus,
            skipped,
            nothing_runs,
        }
    }

    pub fn mode(&self) -> Mode {
        if self.opts.full {
            Mode::Full
        } else {
            Mode::Quick
        }
    }

    /// `--full`, `bench`, `burn` and the rehearsal: full sweeps, every dtype, the burn.
    pub fn full(&self) -> bool {
        self.opts.full
    }

    /// How many GPUs are measured.
    pub fn gpu_count(&self) -> u64 {
        self.gpus.len() as u64
    }

    /// Why `g` does not run at all, if it does not. Ordered by precedence: not asked, then
    /// nothing to run on; the group's own reasons come after, in its plan.
    pub fn closed(&self, g: GpuGroup) -> Option<String> {
        self.not_asked(g).or_else(|| self.nothing_runs.clone())
    }

    fn not_asked(&self, g: GpuGroup) -> Option<String> {
        if self.opts.wants(g) {
            None
        } else if g == GpuGroup::Rehearse {
            Some(NOT_REHEARSED.into())
        } else {
            Some(format!(
                "not asked for (measure it with: gpuaudit bench {})",
                g.name()
            ))
        }
    }

    /// For the groups over pairs of GPUs: the count in words ("one", "no") where fewer than
    /// two are measured, for the reason they do not run.
    pub fn fewer_than_two(&self) -> Option<&'static str> {
        match self.gpus.len() {
            0 => Some("no"),
            1 => Some("one"),
            _ => None,
        }
    }

    /// How memory and GEMM take the GPUs: one by one (what the anchors were compared with)
    /// up to 4 GPUs. Beyond, their fixed cost per GPU (allocations, cuBLASLt set-up, ~0.6 s in
    /// the quick audit) and the full GEMM's cool-downs (1 s before each data type after the
    /// first, 5 s a GPU) grow with every GPU: the quick audit runs them on all GPUs at once
    /// (each GPU has its own HBM and power limit, as in the burn), the full one interleaves
    /// the GEMM data types so that a GPU cools while the others run.
    pub fn order(&self) -> GpuOrder {
        let n = self.gpu_count();
        self.opts.gpu_order.unwrap_or(if n <= 4 {
            GpuOrder::OneByOne
        } else if self.full() {
            GpuOrder::Interleaved
        } else {
            GpuOrder::AllAtOnce
        })
    }

    /// The budget of work expected to take `estimate_ms`, with the usual limit.
    pub fn budget(&self, estimate_ms: u64) -> Budget {
        Budget::new(estimate_ms, self.opts.timeout_s)
    }

    /// [`Gate::budget`] with a limit of at least `floor_s`.
    pub fn budget_at_least(&self, estimate_ms: u64, floor_s: u64) -> Budget {
        Budget::at_least(estimate_ms, self.opts.timeout_s, floor_s)
    }

    /// The budget of work whose limit is its own `limit_s` (the burn's length and a margin).
    pub fn budget_within(&self, estimate_ms: u64, limit_s: u64) -> Budget {
        Budget::within(estimate_ms, self.opts.timeout_s, limit_s)
    }
}
