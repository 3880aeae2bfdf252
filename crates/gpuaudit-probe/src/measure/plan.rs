//! What to measure: a pure function of the GPUs, the options and the libraries found.
//!
//! The plan decides everything that can be decided without touching a GPU (which groups run,
//! on which GPUs, at which sizes, within which time limits, and why a group or GPU is left
//! out), so it is tested here and the child process only executes it.

use gpuaudit_core::facts::{ComputeCapability, GemmDtype, SkippedGpu};
use serde::{Deserialize, Serialize};

/// A measurement group: one check's worth of measurements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    Context,
    Pcie,
    Memory,
    Gemm,
    P2p,
    Nccl,
    Burn,
}

impl Group {
    pub const ALL: [Group; 7] = [
        Group::Context,
        Group::Pcie,
        Group::Memory,
        Group::Gemm,
        Group::P2p,
        Group::Nccl,
        Group::Burn,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Group::Context => "context",
            Group::Pcie => "pcie",
            Group::Memory => "memory",
            Group::Gemm => "gemm",
            Group::P2p => "p2p",
            Group::Nccl => "nccl",
            Group::Burn => "burn",
        }
    }

    /// The check that judges this group.
    pub fn check_id(self) -> &'static str {
        match self {
            Group::Context => "cuda.context-latency",
            Group::Pcie => "pcie.bandwidth",
            Group::Memory => "memory.bandwidth",
            Group::Gemm => "compute.gemm",
            Group::P2p => "p2p.bandwidth",
            Group::Nccl => "nccl.allreduce",
            Group::Burn => "stability.burn",
        }
    }

    /// `gpuaudit bench NAME`: the group name or its check id.
    pub fn parse(s: &str) -> Option<Group> {
        let s = s.trim().to_ascii_lowercase();
        Group::ALL
            .into_iter()
            .find(|g| g.name() == s || g.check_id() == s)
    }

    /// Whether the group runs in the measurement child (all but context creation, which
    /// runs in processes of its own).
    pub fn in_child(self) -> bool {
        self != Group::Context
    }
}

/// A kernel launch shape for the bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchShape {
    pub blocks_per_sm: u32,
    pub threads: u32,
}

impl LaunchShape {
    /// "4x512" (blocks per SM x threads per block).
    pub fn parse(s: &str) -> Option<LaunchShape> {
        let (b, t) = s.trim().split_once(['x', 'X'])?;
        let shape = LaunchShape {
            blocks_per_sm: b.trim().parse().ok()?,
            threads: t.trim().parse().ok()?,
        };
        let ok = (1..=64).contains(&shape.blocks_per_sm)
            && (32..=1024).contains(&shape.threads)
            && shape.threads % 32 == 0;
        ok.then_some(shape)
    }

    /// A comma-separated list, e.g. `GPUAUDIT_MEMBW_LAUNCH=4x512,8x256`.
    pub fn parse_list(s: &str) -> Option<Vec<LaunchShape>> {
        let v: Option<Vec<LaunchShape>> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(LaunchShape::parse)
            .collect();
        v.filter(|v| !v.is_empty())
    }
}

/// What the user asked for.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Options {
    /// `--full` (also `bench` and `burn`): full sweeps, every dtype, the burn.
    pub full: bool,
    /// `gpuaudit bench NAME...` / `gpuaudit burn`: only these groups; `None` is every group
    /// of the mode.
    pub groups: Option<Vec<Group>>,
    pub burn_seconds: u32,
    /// Measure GPUs that are busy too.
    pub force: bool,
    /// Fresh processes for context creation (default 5 quick, 10 full).
    pub ctx_runs: Option<u32>,
    /// `--gpus`: only these GPU indices.
    pub gpus: Option<Vec<u32>>,
    /// Hard limit per group, replacing the computed one.
    pub timeout_s: Option<u64>,
    /// Launch shapes for the bandwidth kernels (`GPUAUDIT_MEMBW_LAUNCH`); `None`: defaults.
    pub memory_launch: Option<Vec<LaunchShape>>,
    /// GEMM size override (`GPUAUDIT_GEMM_SIZE`), square.
    pub gemm_size: Option<u64>,
    /// GEMM operand layout override (`GPUAUDIT_GEMM_LAYOUT=nn|tn`).
    pub gemm_layout: Option<GemmLayout>,
}

/// Operand layout of the GEMMs (column-major, as cuBLAS sees them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmLayout {
    /// NN (what PyTorch's `a @ b` on row-major tensors becomes), TN for fp8 (cuBLASLt's only
    /// fp8 layout).
    #[default]
    Auto,
    Nn,
    Tn,
}

impl GemmLayout {
    pub fn parse(s: &str) -> Option<GemmLayout> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(GemmLayout::Auto),
            "nn" => Some(GemmLayout::Nn),
            "tn" => Some(GemmLayout::Tn),
            _ => None,
        }
    }

    /// Whether A is transposed for this dtype.
    pub fn a_transposed(self, dtype: GemmDtype) -> bool {
        match self {
            GemmLayout::Tn => true,
            GemmLayout::Nn => dtype == GemmDtype::Fp8,
            GemmLayout::Auto => dtype == GemmDtype::Fp8,
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            full: false,
            groups: None,
            burn_seconds: 60,
            force: false,
            ctx_runs: None,
            gpus: None,
            timeout_s: None,
            memory_launch: None,
            gemm_size: None,
            gemm_layout: None,
        }
    }
}

impl Options {
    /// `gpuaudit bench [NAME...]`: full measurements of the named groups (all but the burn
    /// when none is named).
    pub fn bench(groups: &[Group]) -> Options {
        let groups = if groups.is_empty() {
            Group::ALL
                .into_iter()
                .filter(|g| *g != Group::Burn)
                .collect()
        } else {
            groups.to_vec()
        };
        Options {
            full: true,
            groups: Some(groups),
            ..Options::default()
        }
    }

    /// `gpuaudit burn [SECS]`.
    pub fn burn(seconds: u32) -> Options {
        Options {
            full: true,
            groups: Some(vec![Group::Burn]),
            burn_seconds: seconds,
            ..Options::default()
        }
    }

    fn wants(&self, g: Group) -> bool {
        self.groups.as_ref().is_none_or(|v| v.contains(&g))
    }
}

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

/// Expected run time (drives the progress bar) and hard limit of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub estimate_ms: u64,
    pub timeout_s: u64,
}

impl Budget {
    fn new(estimate_ms: u64, override_s: Option<u64>) -> Budget {
        Budget {
            estimate_ms,
            timeout_s: override_s.unwrap_or(30 + estimate_ms * 4 / 1000),
        }
    }
}

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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextParams {
    pub runs: u32,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieParams {
    pub sizes: Vec<u64>,
    pub pageable: bool,
    /// Bytes per timed batch at small sizes (a batch is one copy at the largest sizes).
    pub batch_bytes: u64,
    /// Timed batches per size (median taken).
    pub batches: u32,
    /// Size of the all-GPUs-at-once copies; `None`: not measured (one GPU).
    pub all_at_once_size: Option<u64>,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryParams {
    /// Upper bound of each buffer; the child sizes down from free memory.
    pub max_buffer_bytes: u64,
    /// Repeats per kernel and shape (median taken).
    pub repeats: u32,
    pub shapes: Vec<LaunchShape>,
    /// Also read, write and triad (the copy kernel and memcpy always run).
    pub all_kernels: bool,
    /// Both copy variants (default caching and streaming hints).
    pub both_copy_variants: bool,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmParams {
    pub dtypes: Vec<GemmDtype>,
    /// Square size (sized down in the child where memory is short).
    pub size: u64,
    /// Timed batches per dtype (the best is kept).
    pub batches: u32,
    /// Idle time before each dtype after the first, so that each starts on a GPU that has
    /// cooled a little (a hot GPU at its power limit clocks lower).
    #[serde(default)]
    pub cooldown_ms: u64,
    /// CPU-checked output elements per dtype.
    pub verify_samples: u32,
    pub workspace_bytes: u64,
    pub layout: GemmLayout,
    pub budget: Budget,
}

impl GemmParams {
    /// GEMMs per timed batch: enough that one batch takes tens of milliseconds.
    pub fn repeats(&self, dtype: GemmDtype) -> u32 {
        let big = self.size >= 8192;
        match dtype {
            GemmDtype::Fp64 | GemmDtype::Fp32 if big => 5,
            GemmDtype::Fp64 | GemmDtype::Fp32 => 10,
            GemmDtype::Tf32 if big => 10,
            _ => 20,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pParams {
    pub size: u64,
    pub repeats: u32,
    /// Back-to-back 4-byte copies timed for the latency.
    pub latency_copies: u32,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NcclParams {
    pub sizes: Vec<u64>,
    pub warmup: u32,
    pub budget: Budget,
}

impl NcclParams {
    /// Timed iterations at a size (nccl-tests style: more for small messages).
    pub fn iterations(&self, size: u64) -> u32 {
        if size >= 1 << 30 {
            10
        } else if size >= 64 << 20 {
            20
        } else {
            50
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurnParams {
    pub seconds: u32,
    /// Preferred dtype; the child falls back to fp16, then fp32, on GPUs without it.
    pub dtype: GemmDtype,
    pub size: u64,
    pub verify_samples: u32,
    pub workspace_bytes: u64,
    pub layout: GemmLayout,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanGpu {
    pub index: u32,
    pub pci_bus_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub mode: Mode,
    /// The GPUs measured.
    pub gpus: Vec<PlanGpu>,
    pub skipped_gpus: Vec<SkippedGpu>,
    pub context: Step<ContextParams>,
    pub pcie: Step<PcieParams>,
    pub memory: Step<MemoryParams>,
    pub gemm: Step<GemmParams>,
    pub p2p: Step<P2pParams>,
    pub nccl: Step<NcclParams>,
    pub burn: Step<BurnParams>,
    /// Limit for a child to start (cuInit, contexts, kernels loaded) before its first group.
    pub startup_timeout_s: u64,
}

impl Plan {
    pub fn budget(&self, g: Group) -> Option<Budget> {
        match g {
            Group::Context => self.context.params().map(|p| p.budget),
            Group::Pcie => self.pcie.params().map(|p| p.budget),
            Group::Memory => self.memory.params().map(|p| p.budget),
            Group::Gemm => self.gemm.params().map(|p| p.budget),
            Group::P2p => self.p2p.params().map(|p| p.budget),
            Group::Nccl => self.nccl.params().map(|p| p.budget),
            Group::Burn => self.burn.params().map(|p| p.budget),
        }
    }

    pub fn skip_reason(&self, g: Group) -> Option<&str> {
        match g {
            Group::Context => self.context.skip_reason(),
            Group::Pcie => self.pcie.skip_reason(),
            Group::Memory => self.memory.skip_reason(),
            Group::Gemm => self.gemm.skip_reason(),
            Group::P2p => self.p2p.skip_reason(),
            Group::Nccl => self.nccl.skip_reason(),
            Group::Burn => self.burn.skip_reason(),
        }
    }

    pub fn runs(&self, g: Group) -> bool {
        self.budget(g).is_some()
    }

    /// The child processes to start, each with the groups it runs in order. Quick mode runs
    /// every group in one child (each child pays cuInit again), NCCL last: results stream out
    /// group by group, so a crash or hang costs only the group it happened in (the parent
    /// restarts a child for the groups after it). Full mode gives every group a fresh child.
    pub fn jobs(&self) -> Vec<Vec<Group>> {
        let child: Vec<Group> = Group::ALL
            .into_iter()
            .filter(|g| g.in_child() && self.runs(*g))
            .collect();
        match self.mode {
            Mode::Full => child.into_iter().map(|g| vec![g]).collect(),
            Mode::Quick if child.is_empty() => Vec::new(),
            Mode::Quick => vec![child],
        }
    }

    /// Expected time of everything planned, milliseconds (progress bar length).
    pub fn estimate_ms(&self) -> u64 {
        let groups: u64 = Group::ALL
            .into_iter()
            .filter_map(|g| self.budget(g))
            .map(|b| b.estimate_ms)
            .sum();
        groups + self.jobs().len() as u64 * self.child_startup_ms()
    }

    /// cuInit (about 100 ms + 100 ms per GPU on H200s), contexts and kernel loading.
    pub fn child_startup_ms(&self) -> u64 {
        300 + 150 * self.gpus.len() as u64
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Sizes from `from` to `to` (powers of two), `factor` apart, plus `extra`, sorted.
fn sweep(from: u64, to: u64, factor: u64, extra: &[u64]) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = from;
    while s <= to {
        v.push(s);
        s = s.saturating_mul(factor.max(2));
    }
    v.extend_from_slice(extra);
    v.sort_unstable();
    v.dedup();
    v
}

/// The plan for these GPUs. `targets` are every GPU the driver enumerated; `--gpus`, busy
/// GPUs (unless `force`) and MIG GPUs are left out with the reason.
pub fn plan(targets: &[Target], opts: &Options, libs: &LibStatus) -> Plan {
    let mode = if opts.full { Mode::Full } else { Mode::Quick };
    let full = opts.full;
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
    let n = gpus.len() as u64;
    let over = opts.timeout_s;

    // A reason that rules out every group, in order of what the user can act on first.
    let none_reason: Option<String> = if targets.is_empty() {
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

    let not_asked = |g: Group| -> Option<String> {
        if opts.wants(g) {
            None
        } else {
            Some(format!(
                "not asked for (measure it with: gpuaudit bench {})",
                g.name()
            ))
        }
    };
    // Ordered by precedence: not asked, nothing to run on, then group-specific reasons.
    let gate = |g: Group| -> Option<String> { not_asked(g).or_else(|| none_reason.clone()) };

    let context = match gate(Group::Context) {
        Some(r) => Step::Skip(r),
        None => {
            let runs = opts
                .ctx_runs
                .unwrap_or(if full { 10 } else { 5 })
                .clamp(1, 100);
            let per_run = 250 + 120 * targets.len() as u64;
            Step::Run(ContextParams {
                runs,
                budget: Budget::new(runs as u64 * per_run, over),
            })
        }
    };

    let pcie = match gate(Group::Pcie) {
        Some(r) => Step::Skip(r),
        None => {
            let (sizes, batches, est) = if full {
                (sweep(4 * KIB, GIB, 4, &[]), 5, 2500)
            } else {
                (vec![256 * MIB], 3, 350)
            };
            let all_at_once_size = (n >= 2).then_some(if full { GIB } else { 256 * MIB });
            let all_est = if n >= 2 { est / 4 } else { 0 };
            Step::Run(PcieParams {
                sizes,
                pageable: true,
                batch_bytes: if full { 64 * MIB } else { 256 * MIB },
                batches,
                all_at_once_size,
                budget: Budget::new(n * est + all_est, over),
            })
        }
    };

    let memory = match gate(Group::Memory) {
        Some(r) => Step::Skip(r),
        None => {
            let default_shapes = if full {
                vec![
                    LaunchShape {
                        blocks_per_sm: 4,
                        threads: 512,
                    },
                    LaunchShape {
                        blocks_per_sm: 8,
                        threads: 256,
                    },
                    LaunchShape {
                        blocks_per_sm: 2,
                        threads: 1024,
                    },
                    LaunchShape {
                        blocks_per_sm: 16,
                        threads: 128,
                    },
                ]
            } else {
                vec![LaunchShape {
                    blocks_per_sm: 4,
                    threads: 512,
                }]
            };
            let shapes = opts.memory_launch.clone().unwrap_or(default_shapes);
            let est_per_gpu = if full {
                400 + 60 * shapes.len() as u64 * 5
            } else {
                150
            };
            Step::Run(MemoryParams {
                max_buffer_bytes: if full { 4 * GIB } else { GIB },
                repeats: if full { 10 } else { 5 },
                shapes,
                all_kernels: full,
                both_copy_variants: full,
                budget: Budget::new(n * est_per_gpu, over),
            })
        }
    };

    let tensor_lib_missing = libs.cublaslt.clone();
    let gemm = match gate(Group::Gemm) {
        Some(r) => Step::Skip(r),
        None => {
            let cc_min = gpus.iter().filter_map(|t| t.compute_capability).min();
            let wanted: Vec<GemmDtype> = if full {
                GemmDtype::ALL.to_vec()
            } else {
                // One tensor-core figure: bf16 where the GPU has it, fp16 on Volta/Turing.
                match cc_min {
                    Some(cc) if !GemmDtype::Bf16.supported_on(cc) => vec![GemmDtype::Fp16],
                    _ => vec![GemmDtype::Bf16],
                }
            };
            // fp8 is kept when any GPU may have it (unknown capability included): the child
            // reports it unsupported per GPU.
            let cc_max = gpus.iter().filter_map(|t| t.compute_capability).max();
            let dtypes: Vec<GemmDtype> = wanted
                .into_iter()
                .filter(|d| cc_max.is_none_or(|cc| d.supported_on(cc)))
                .filter(|d| match d {
                    GemmDtype::Fp64 | GemmDtype::Fp32 => libs.cublas.is_none(),
                    _ => tensor_lib_missing.is_none(),
                })
                .collect();
            if dtypes.is_empty() {
                let why = [libs.cublaslt.as_deref(), libs.cublas.as_deref()]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join("; ");
                Step::Skip(if why.is_empty() {
                    "no GEMM data type to measure on these GPUs".into()
                } else {
                    why
                })
            } else {
                let size = opts.gemm_size.unwrap_or(if full { 8192 } else { 4096 });
                let cooldown_ms = if full { 1000 } else { 0 };
                let per_dtype = if full { 350 + cooldown_ms } else { 60 };
                Step::Run(GemmParams {
                    size,
                    batches: if full { 3 } else { 2 },
                    cooldown_ms,
                    verify_samples: if full { 32 } else { 16 },
                    workspace_bytes: 32 * MIB,
                    layout: opts.gemm_layout.unwrap_or_default(),
                    budget: Budget::new(n * (400 + per_dtype * dtypes.len() as u64), over),
                    dtypes,
                })
            }
        }
    };

    let pairs = n * n.saturating_sub(1);
    let p2p = match gate(Group::P2p) {
        Some(r) => Step::Skip(r),
        None if n < 2 => Step::Skip(format!(
            "{} GPU measured: GPU-to-GPU copies need two",
            if n == 1 { "one" } else { "no" }
        )),
        None => Step::Run(P2pParams {
            size: if full { GIB } else { 256 * MIB },
            repeats: if full { 10 } else { 5 },
            latency_copies: 200,
            budget: Budget::new(200 + pairs * if full { 120 } else { 40 }, over),
        }),
    };

    let nccl = match gate(Group::Nccl) {
        Some(r) => Step::Skip(r),
        None if n < 2 => Step::Skip(format!(
            "{} GPU measured: an all-reduce needs two",
            if n == 1 { "one" } else { "no" }
        )),
        None => match &libs.nccl {
            Some(r) => Step::Skip(r.clone()),
            None => {
                let sizes = if full {
                    sweep(8, GIB, 4, &[MIB, GIB])
                } else {
                    vec![8, MIB, 256 * MIB]
                };
                let est = 800 + 100 * n + sizes.len() as u64 * if full { 120 } else { 80 };
                Step::Run(NcclParams {
                    sizes,
                    warmup: 5,
                    budget: Budget::new(est, over),
                })
            }
        },
    };

    let burn = match gate(Group::Burn) {
        Some(r) => Step::Skip(r),
        None if !full => Step::Skip("quick audit: run with --full (or gpuaudit burn)".into()),
        None => match &tensor_lib_missing {
            Some(r) => Step::Skip(r.clone()),
            None => {
                let seconds = opts.burn_seconds.clamp(1, 24 * 3600);
                let est = seconds as u64 * 1000 + 1500;
                Step::Run(BurnParams {
                    seconds,
                    dtype: GemmDtype::Bf16,
                    size: opts.gemm_size.unwrap_or(8192),
                    verify_samples: 16,
                    workspace_bytes: 32 * MIB,
                    layout: opts.gemm_layout.unwrap_or_default(),
                    budget: Budget {
                        estimate_ms: est,
                        timeout_s: over.unwrap_or(seconds as u64 + 90),
                    },
                })
            }
        },
    };

    Plan {
        mode,
        gpus: gpus
            .iter()
            .map(|t| PlanGpu {
                index: t.index,
                pci_bus_id: t.pci_bus_id.clone(),
            })
            .collect(),
        skipped_gpus: skipped,
        context,
        pcie,
        memory,
        gemm,
        p2p,
        nccl,
        burn,
        startup_timeout_s: 60 + 5 * n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200(i: u32) -> Target {
        Target {
            index: i,
            pci_bus_id: format!("0000:00:0{}.0", 6 + i),
            name: Some("NVIDIA H200".into()),
            compute_capability: Some(ComputeCapability { major: 9, minor: 0 }),
            busy: None,
            mig: false,
        }
    }

    fn v100(i: u32) -> Target {
        Target {
            compute_capability: Some(ComputeCapability { major: 7, minor: 0 }),
            name: Some("Tesla V100-SXM2-16GB".into()),
            ..h200(i)
        }
    }

    #[test]
    fn quick_plan_on_two_gpus() {
        let p = plan(
            &[h200(0), h200(1)],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert_eq!(p.mode, Mode::Quick);
        assert_eq!(p.gpus.len(), 2);
        for g in [
            Group::Context,
            Group::Pcie,
            Group::Memory,
            Group::Gemm,
            Group::P2p,
        ] {
            assert!(p.runs(g), "{g:?}");
        }
        assert!(p.runs(Group::Nccl));
        assert_eq!(
            p.burn.skip_reason(),
            Some("quick audit: run with --full (or gpuaudit burn)")
        );
        assert_eq!(p.gemm.params().unwrap().dtypes, vec![GemmDtype::Bf16]);
        assert_eq!(p.gemm.params().unwrap().size, 4096);
        let nccl = p.nccl.params().unwrap();
        assert!(nccl.sizes.contains(&MIB) && nccl.sizes.contains(&(256 * MIB)));
        assert_eq!(p.context.params().unwrap().runs, 5);
        // One child, NCCL (the likeliest to hang) last.
        assert_eq!(
            p.jobs(),
            vec![vec![
                Group::Pcie,
                Group::Memory,
                Group::Gemm,
                Group::P2p,
                Group::Nccl
            ]]
        );
        // The quick audit must fit in 10 s on 2 GPUs.
        assert!(p.estimate_ms() < 8_000, "{}", p.estimate_ms());
    }

    #[test]
    fn full_plan_on_two_gpus_fits_two_minutes() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[h200(0), h200(1)], &opts, &LibStatus::all_found());
        assert_eq!(p.gemm.params().unwrap().dtypes.len(), 6);
        assert_eq!(p.gemm.params().unwrap().size, 8192);
        assert_eq!(p.burn.params().unwrap().seconds, 60);
        let pcie = p.pcie.params().unwrap();
        assert_eq!(pcie.sizes.first(), Some(&(4 * KIB)));
        assert_eq!(pcie.sizes.last(), Some(&GIB));
        assert_eq!(pcie.all_at_once_size, Some(GIB));
        let nccl = p.nccl.params().unwrap();
        assert_eq!(nccl.sizes.first(), Some(&8));
        assert_eq!(nccl.sizes.last(), Some(&GIB));
        assert!(nccl.sizes.contains(&MIB));
        assert_eq!(p.jobs().len(), 6);
        assert!(p.estimate_ms() < 110_000, "{}", p.estimate_ms());
        assert!(p.burn.params().unwrap().budget.timeout_s >= 60);
    }

    #[test]
    fn one_gpu_has_no_p2p_or_allreduce() {
        let p = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        assert!(p.p2p.skip_reason().unwrap().contains("need two"));
        assert!(p.nccl.skip_reason().unwrap().contains("needs two"));
        assert!(p.pcie.params().unwrap().all_at_once_size.is_none());
    }

    #[test]
    fn busy_gpu_is_skipped_unless_forced() {
        let mut busy = h200(1);
        busy.busy = Some("2 processes".into());
        let p = plan(
            &[h200(0), busy.clone()],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(
            p.skipped_gpus[0].reason,
            "GPU 1 busy (2 processes); --force to measure anyway"
        );
        assert!(p.p2p.skip_reason().is_some());
        let forced = plan(
            &[h200(0), busy.clone()],
            &Options {
                force: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(forced.gpus.len(), 2);
        // All GPUs busy: every group says why.
        let all = plan(&[busy], &Options::default(), &LibStatus::all_found());
        assert!(all.gemm.skip_reason().unwrap().contains("GPU 1 busy"));
        assert!(all.context.skip_reason().unwrap().contains("GPU 1 busy"));
    }

    #[test]
    fn fp8_only_where_the_gpu_has_it() {
        let full = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[v100(0)], &full, &LibStatus::all_found());
        let d = &p.gemm.params().unwrap().dtypes;
        assert!(!d.contains(&GemmDtype::Fp8));
        assert!(!d.contains(&GemmDtype::Bf16));
        assert!(d.contains(&GemmDtype::Fp16) && d.contains(&GemmDtype::Fp64));
        // Quick on Volta measures fp16.
        let q = plan(&[v100(0)], &Options::default(), &LibStatus::all_found());
        assert_eq!(q.gemm.params().unwrap().dtypes, vec![GemmDtype::Fp16]);
        let h = plan(&[h200(0)], &full, &LibStatus::all_found());
        assert!(h.gemm.params().unwrap().dtypes.contains(&GemmDtype::Fp8));
    }

    #[test]
    fn missing_libraries_cost_their_groups_only() {
        let libs = LibStatus {
            nccl: Some("libnccl not found (looked in /usr/lib)".into()),
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let full = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&[h200(0), h200(1)], &full, &libs);
        assert_eq!(
            p.nccl.skip_reason(),
            Some("libnccl not found (looked in /usr/lib)")
        );
        assert_eq!(
            p.gemm.params().unwrap().dtypes,
            vec![GemmDtype::Fp32, GemmDtype::Fp64]
        );
        assert!(p.burn.skip_reason().is_some());
        assert!(p.runs(Group::Pcie) && p.runs(Group::P2p));

        let no_cuda = LibStatus {
            cuda: Some("libcuda.so.1 not found".into()),
            ..LibStatus::default()
        };
        let p = plan(&[h200(0)], &full, &no_cuda);
        assert!(Group::ALL.into_iter().all(|g| !p.runs(g)));
        assert!(p.pcie.skip_reason().unwrap().contains("libcuda.so.1"));
    }

    #[test]
    fn no_gpu_and_gpu_selection() {
        let p = plan(&[], &Options::default(), &LibStatus::all_found());
        assert_eq!(p.pcie.skip_reason(), Some("no NVIDIA GPU found"));
        let p = plan(
            &[h200(0), h200(1)],
            &Options {
                gpus: Some(vec![1]),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(p.gpus.len(), 1);
        assert_eq!(p.gpus[0].index, 1);
        assert!(p.skipped_gpus.is_empty());
    }

    #[test]
    fn bench_and_burn_select_groups() {
        let p = plan(
            &[h200(0), h200(1)],
            &Options::bench(&[Group::Gemm]),
            &LibStatus::all_found(),
        );
        assert!(p.runs(Group::Gemm));
        assert!(p
            .pcie
            .skip_reason()
            .unwrap()
            .contains("gpuaudit bench pcie"));
        let p = plan(&[h200(0)], &Options::burn(30), &LibStatus::all_found());
        assert_eq!(p.burn.params().unwrap().seconds, 30);
        assert!(!p.runs(Group::Gemm));
        assert_eq!(p.jobs(), vec![vec![Group::Burn]]);
        let all = Options::bench(&[]);
        assert!(!all.wants(Group::Burn) && all.wants(Group::Nccl));
    }

    #[test]
    fn mig_gpu_is_left_out() {
        let mut m = h200(0);
        m.mig = true;
        let p = plan(&[m, h200(1)], &Options::default(), &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 1);
        assert!(p.skipped_gpus[0].reason.contains("MIG"));
    }

    #[test]
    fn group_names_and_shapes_parse() {
        assert_eq!(Group::parse("gemm"), Some(Group::Gemm));
        assert_eq!(Group::parse("nccl.allreduce"), Some(Group::Nccl));
        assert_eq!(Group::parse("x"), None);
        assert_eq!(
            LaunchShape::parse_list("4x512, 8X256"),
            Some(vec![
                LaunchShape {
                    blocks_per_sm: 4,
                    threads: 512
                },
                LaunchShape {
                    blocks_per_sm: 8,
                    threads: 256
                }
            ])
        );
        assert_eq!(LaunchShape::parse("4x500"), None);
        assert_eq!(LaunchShape::parse_list(""), None);
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep(8, 128, 4, &[64]), vec![8, 32, 64, 128]);
        assert_eq!(sweep(4 * KIB, GIB, 4, &[]).len(), 10);
    }

    #[test]
    fn plan_round_trips_as_json() {
        let p = plan(
            &[h200(0), h200(1)],
            &Options::default(),
            &LibStatus::all_found(),
        );
        let j = serde_json::to_string(&p).unwrap();
        let back: Plan = serde_json::from_str(&j).unwrap();
        assert_eq!(back, p);
    }
}
