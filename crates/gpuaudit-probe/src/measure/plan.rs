//! What to measure: a pure function of the GPUs, the options and the libraries found.
//!
//! The plan decides everything that can be decided without touching a GPU (which groups run,
//! on which GPUs, at which sizes, within which time limits, and why a group or GPU is left
//! out), so it is tested here and the child process only executes it.

use super::group::GpuGroup;
use crate::rehearse::loader::LoaderConfig;
use gpuaudit_core::facts::{
    ComputeCapability, GemmDtype, RehearsalConfig, SkippedGpu, NOT_REHEARSED,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    pub groups: Option<Vec<GpuGroup>>,
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
    /// How the per-GPU groups take the GPUs (`GPUAUDIT_GPU_ORDER`); `None`: the planner's
    /// choice.
    #[serde(default)]
    pub gpu_order: Option<GpuOrder>,
    /// `gpuaudit rehearse`: what to rehearse.
    #[serde(default)]
    pub rehearse: Option<RehearseRequest>,
}

/// What `gpuaudit rehearse` asks of the measurement child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearseRequest {
    pub config: RehearsalConfig,
    pub loader: LoaderConfig,
    /// The dataset's files, which the child's pipeline reads.
    pub files: Vec<PathBuf>,
    /// Milliseconds for each GPU stage alone.
    pub stage_ms: u64,
    /// Milliseconds for the whole pipeline (unless `config.steps` says how many steps).
    pub pipeline_ms: u64,
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
            gpu_order: None,
            rehearse: None,
        }
    }
}

impl Options {
    /// `gpuaudit bench [NAME...]`: full measurements of the named groups (all but the burn
    /// when none is named).
    pub fn bench(groups: &[GpuGroup]) -> Options {
        let groups = if groups.is_empty() {
            GpuGroup::BENCH
                .into_iter()
                .filter(|g| *g != GpuGroup::Burn)
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

    /// `gpuaudit rehearse`: the rehearsal's GPU stages alone.
    pub fn rehearse(req: RehearseRequest) -> Options {
        Options {
            full: true,
            groups: Some(vec![GpuGroup::Rehearse]),
            rehearse: Some(req),
            ..Options::default()
        }
    }

    /// `gpuaudit burn [SECS]`.
    pub fn burn(seconds: u32) -> Options {
        Options {
            full: true,
            groups: Some(vec![GpuGroup::Burn]),
            burn_seconds: seconds,
            ..Options::default()
        }
    }

    fn wants(&self, g: GpuGroup) -> bool {
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
        Budget::at_least(estimate_ms, override_s, 0)
    }

    /// Like [`Budget::new`], with a limit of at least `floor_s` (work whose worst case is far
    /// slower than its usual case).
    fn at_least(estimate_ms: u64, override_s: Option<u64>, floor_s: u64) -> Budget {
        Budget {
            estimate_ms,
            timeout_s: override_s.unwrap_or((30 + estimate_ms * 4 / 1000).max(floor_s)),
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
    /// Also, per GPU: both directions at once, copies by the SMs through mapped host memory,
    /// and the host <-> device latency (nvbandwidth's figures; `--full` and bench only).
    #[serde(default)]
    pub host_extras: bool,
    pub budget: Budget,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryParams {
    /// Upper bound of each buffer; the child sizes down from free memory.
    pub max_buffer_bytes: u64,
    /// Repeats per kernel and shape (median taken).
    pub repeats: u32,
    pub shapes: Vec<LaunchShape>,
    /// The read kernel's shapes: `shapes` and at least one of 8 or more blocks per SM (the
    /// grid-stride read needs that many in flight to reach HBM's rate on an H200: 4451-4499
    /// GB/s at 8x256 against 3900 at 4 blocks per SM).
    #[serde(default)]
    pub read_shapes: Vec<LaunchShape>,
    /// Threads per block of the flat kernels (one 16-byte vector per thread, a grid covering
    /// the array), each tried; empty: no flat kernel.
    #[serde(default)]
    pub flat_threads: Vec<u32>,
    /// Also read, write, triad and add (the copy kernels and memcpy always run).
    pub all_kernels: bool,
    /// Both copy variants (default caching and streaming hints).
    pub both_copy_variants: bool,
    /// Every GPU at once (each HBM is its own: the figures are those of one GPU alone).
    #[serde(default)]
    pub gpus_at_once: bool,
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
    #[serde(default)]
    pub order: GpuOrder,
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
    /// Also one-to-all and all-to-one copies from/to every GPU (nvbandwidth's patterns;
    /// `--full` and bench only).
    #[serde(default)]
    pub patterns: bool,
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

/// The reference batch of the rehearsal: the GPU step also runs at this batch where the
/// rehearsed batch is smaller, to tell a batch too small for the GPU (256 is the batch per
/// GPU of NVIDIA's ResNet-50 recipes, large enough to fill an H100's SMs with this model).
pub const REHEARSE_REFERENCE_BATCH: u32 = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearseParams {
    pub request: RehearseRequest,
    /// cuBLASLt was found (bf16 on GPUs that have it).
    pub lt: bool,
    /// cuBLAS was found (fp32 elsewhere).
    pub blas: bool,
    /// Why the all-reduce does not run (one GPU, no NCCL); `None`: it runs.
    pub allreduce_skip: Option<String>,
    /// The GPU step at this batch too, where the rehearsed one is smaller.
    pub reference_batch: Option<u32>,
    pub workspace_bytes: u64,
    pub budget: Budget,
}

impl RehearseParams {
    /// Expected time of the child's work: set-up (allocations, fills, cuBLASLt, NCCL), each
    /// stage alone, the reference step, the pipeline.
    pub fn estimate_ms(req: &RehearseRequest, gpus: u64, reference: bool, allreduce: bool) -> u64 {
        let stages = 2 + reference as u64 + allreduce as u64;
        1000 + 300 * gpus + stages * req.stage_ms + req.pipeline_ms
    }
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
    #[serde(default = "not_rehearsed")]
    pub rehearse: Step<RehearseParams>,
    /// Limit for a child to start (cuInit, contexts, kernels loaded) before its first group.
    pub startup_timeout_s: u64,
}

impl Plan {
    pub fn budget(&self, g: GpuGroup) -> Option<Budget> {
        match g {
            GpuGroup::Context => self.context.params().map(|p| p.budget),
            GpuGroup::Pcie => self.pcie.params().map(|p| p.budget),
            GpuGroup::Memory => self.memory.params().map(|p| p.budget),
            GpuGroup::Gemm => self.gemm.params().map(|p| p.budget),
            GpuGroup::P2p => self.p2p.params().map(|p| p.budget),
            GpuGroup::Nccl => self.nccl.params().map(|p| p.budget),
            GpuGroup::Burn => self.burn.params().map(|p| p.budget),
            GpuGroup::Rehearse => self.rehearse.params().map(|p| p.budget),
        }
    }

    pub fn skip_reason(&self, g: GpuGroup) -> Option<&str> {
        match g {
            GpuGroup::Context => self.context.skip_reason(),
            GpuGroup::Pcie => self.pcie.skip_reason(),
            GpuGroup::Memory => self.memory.skip_reason(),
            GpuGroup::Gemm => self.gemm.skip_reason(),
            GpuGroup::P2p => self.p2p.skip_reason(),
            GpuGroup::Nccl => self.nccl.skip_reason(),
            GpuGroup::Burn => self.burn.skip_reason(),
            GpuGroup::Rehearse => self.rehearse.skip_reason(),
        }
    }

    pub fn runs(&self, g: GpuGroup) -> bool {
        self.budget(g).is_some()
    }

    /// The child processes to start, each with the groups it runs in order. Quick mode runs
    /// every group in one child (each child pays cuInit again), NCCL last: results stream out
    /// group by group, so a crash or hang costs only the group it happened in (the parent
    /// restarts a child for the groups after it). Full mode gives every group a fresh child.
    pub fn jobs(&self) -> Vec<Vec<GpuGroup>> {
        let child: Vec<GpuGroup> = GpuGroup::ALL
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
        let groups: u64 = GpuGroup::ALL
            .into_iter()
            .filter_map(|g| self.budget(g))
            .map(|b| b.estimate_ms)
            .sum();
        groups + self.jobs().len() as u64 * self.child_startup_ms()
    }

    /// Process start, cuInit over the machine's GPUs, then a context and the kernels on each
    /// GPU measured (about 140 ms a GPU: the primary context and first allocation took 111 ms
    /// on the H200s).
    pub fn child_startup_ms(&self) -> u64 {
        let machine = (self.gpus.len() + self.skipped_gpus.len()) as u64;
        100 + cuinit_ms(machine) + 140 * self.gpus.len() as u64
    }
}

fn not_rehearsed() -> Step<RehearseParams> {
    Step::Skip(NOT_REHEARSED.into())
}

const KIB: u64 = 1 << 10;

/// Copies of the one-to-all and all-to-one patterns over `n` GPUs (each plus its warm-up):
/// 2n patterns of n - 1 copies, `repeats` + 1 times.
pub fn pattern_copies(n: usize, repeats: u32) -> u64 {
    if n < 2 {
        return 0;
    }
    2 * n as u64 * (n as u64 - 1) * (repeats as u64 + 1)
}

/// Milliseconds a GPU's host extras take (bidirectional copies at 1 GiB, SM copies, latency).
const HOST_EXTRAS_MS: u64 = 400;

/// The grid-stride read's fewest blocks per SM that reach HBM's rate (measured on an H200).
pub const READ_MIN_BLOCKS_PER_SM: u32 = 8;

/// The read kernel's launch shapes: `shapes`, plus 8x256 when none of them has
/// [`READ_MIN_BLOCKS_PER_SM`] blocks per SM.
pub fn read_shapes(shapes: &[LaunchShape]) -> Vec<LaunchShape> {
    let mut v = shapes.to_vec();
    if !v.iter().any(|s| s.blocks_per_sm >= READ_MIN_BLOCKS_PER_SM) {
        v.push(LaunchShape {
            blocks_per_sm: READ_MIN_BLOCKS_PER_SM,
            threads: 256,
        });
    }
    v
}
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// cuInit on a machine with `gpus` GPUs, milliseconds. On the 2xH200 VM it took 100 ms with
/// one GPU visible and 326 ms (median of 10) with both; taken as linear in the GPU count,
/// which is what the planner assumes for 8 GPUs (1.7 s). Bare metal does better (an 8xV100
/// DGX: 80 ms for one GPU, 390 ms for eight), so on most machines this errs long.
fn cuinit_ms(gpus: u64) -> u64 {
    100 + 225 * gpus.saturating_sub(1)
}

/// The ordered pairs of the P2P matrix, as positions in the list of GPUs measured: every GPU
/// to every other, n(n-1) of them.
pub fn ordered_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .collect()
}

/// The unordered pairs (a < b), each measured with copies both ways at once: n(n-1)/2.
pub fn unordered_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect()
}

/// Copies of the P2P size the child makes for `n` GPUs: per ordered pair a warm-up, the timed
/// repeats and the verified one; per unordered pair a warm-up and the timed repeats, both
/// ways.
pub fn p2p_copies(n: usize, repeats: u32) -> u64 {
    let r = repeats.max(1) as u64;
    ordered_pairs(n).len() as u64 * (r + 2) + unordered_pairs(n).len() as u64 * 2 * (r + 1)
}

/// The largest power of two not above `x` (at least 1).
fn pow2_floor(x: u64) -> u64 {
    if x <= 1 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

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

    let not_asked = |g: GpuGroup| -> Option<String> {
        if opts.wants(g) {
            None
        } else if g == GpuGroup::Rehearse {
            Some(NOT_REHEARSED.into())
        } else {
            Some(format!(
                "not asked for (measure it with: gpuaudit bench {})",
                g.name()
            ))
        }
    };
    // Ordered by precedence: not asked, nothing to run on, then group-specific reasons.
    let gate = |g: GpuGroup| -> Option<String> { not_asked(g).or_else(|| none_reason.clone()) };

    let context = match gate(GpuGroup::Context) {
        Some(r) => Step::Skip(r),
        None => {
            // Each probe is a fresh process that pays cuInit over every GPU of the machine
            // (plus ~110 ms for the context and first allocation, ~50 ms to start): 0.5 s a
            // probe on 2 GPUs, ~1.8 s on 8. The runs are fitted to a time budget (quick 2.5 s,
            // full 10 s), never fewer than a median needs.
            let per_run = cuinit_ms(targets.len() as u64) + 160;
            let (most, least, budget_ms) = if full { (10, 5, 10_000) } else { (5, 3, 2_500) };
            let fitted = (budget_ms / per_run).clamp(least, most) as u32;
            let runs = opts.ctx_runs.unwrap_or(fitted).clamp(1, 100);
            Step::Run(ContextParams {
                runs,
                budget: Budget::new(runs as u64 * per_run, over),
            })
        }
    };

    let pcie = match gate(GpuGroup::Pcie) {
        Some(r) => Step::Skip(r),
        None => {
            // The quick audit copies one size per GPU, one GPU after the other (they share the
            // host's memory). Beyond 4 GPUs it copies 64 MiB instead of 256 MiB: a pinned copy
            // still takes over a millisecond at gen5 x16, against microseconds of start-up,
            // and the pageable copies, most of the time per GPU, take a quarter as long.
            let quick_size = if n > 4 { 64 * MIB } else { 256 * MIB };
            let (sizes, batches, est) = if full {
                (sweep(4 * KIB, GIB, 4, &[]), 5, 2500)
            } else {
                (vec![quick_size], 3, 30 + 320 * quick_size / (256 * MIB))
            };
            let all_at_once_size = (n >= 2).then_some(if full { GIB } else { quick_size });
            let all_est = if n >= 2 { est / 4 } else { 0 };
            // The host extras (both directions at once, SM copies, latency) take ~0.3 s a GPU
            // at 1 GiB over gen5 x16: full audit and bench only, the quick audit's 10 s stay.
            let extras_est = if full { HOST_EXTRAS_MS } else { 0 };
            Step::Run(PcieParams {
                sizes,
                pageable: true,
                batch_bytes: if full { 64 * MIB } else { quick_size },
                batches,
                all_at_once_size,
                host_extras: full,
                budget: Budget::new(n * (est + extras_est) + all_est, over),
            })
        }
    };

    // Memory and GEMM go GPU by GPU, which is what the anchors were compared with, up to 4
    // GPUs. Beyond, their fixed cost per GPU (allocations, cuBLASLt set-up, ~0.6 s in the
    // quick audit) and the full GEMM's cool-downs (1 s before each data type after the first,
    // 5 s a GPU) grow with every GPU: the quick audit runs them on all GPUs at once (each GPU
    // has its own HBM and power limit, as in the burn), the full one interleaves the GEMM
    // data types so that a GPU cools while the others run.
    let order = opts.gpu_order.unwrap_or(if n <= 4 {
        GpuOrder::OneByOne
    } else if full {
        GpuOrder::Interleaved
    } else {
        GpuOrder::AllAtOnce
    });
    let at_once = order == GpuOrder::AllAtOnce;

    let memory = match gate(GpuGroup::Memory) {
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
            let read_shapes = read_shapes(&shapes);
            // The flat kernels: 256 threads was the best flat copy on an H200 (4291 GB/s
            // against 4133 at 1024), the triad was as fast at 256 and 1024. The quick audit
            // tries the flat copy at 256 only (one more launch, ~10 ms).
            let flat_threads = if full {
                vec![256, 512, 1024]
            } else {
                vec![256]
            };
            let est_per_gpu = if full {
                400 + 60 * (shapes.len() as u64 * 6 + flat_threads.len() as u64 * 3)
            } else {
                160
            };
            let est = if at_once {
                est_per_gpu + 50 * n
            } else {
                n * est_per_gpu
            };
            Step::Run(MemoryParams {
                max_buffer_bytes: if full { 4 * GIB } else { GIB },
                repeats: if full { 10 } else { 5 },
                shapes,
                read_shapes,
                flat_threads,
                all_kernels: full,
                both_copy_variants: full,
                gpus_at_once: at_once,
                budget: Budget::new(est, over),
            })
        }
    };

    let tensor_lib_missing = libs.cublaslt.clone();
    let gemm = match gate(GpuGroup::Gemm) {
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
                let work = if full { 350 } else { 60 };
                let d = dtypes.len() as u64;
                let rests = d.saturating_sub(1) * cooldown_ms;
                let est = match order {
                    GpuOrder::OneByOne => n * (400 + work * d + rests),
                    // A GPU's rest is the others' turn; only what that leaves short is slept.
                    GpuOrder::Interleaved => {
                        n * (400 + work * d)
                            + d.saturating_sub(1)
                                * cooldown_ms.saturating_sub(n.saturating_sub(1) * work)
                    }
                    GpuOrder::AllAtOnce => 400 + work * d + rests + 50 * n,
                };
                Step::Run(GemmParams {
                    size,
                    batches: if full { 3 } else { 2 },
                    cooldown_ms,
                    verify_samples: if full { 32 } else { 16 },
                    workspace_bytes: 32 * MIB,
                    layout: opts.gemm_layout.unwrap_or_default(),
                    order,
                    budget: Budget::new(est, over),
                    dtypes,
                })
            }
        }
    };

    let p2p = match gate(GpuGroup::P2p) {
        Some(r) => Step::Skip(r),
        None if n < 2 => Step::Skip(format!(
            "{} GPU measured: GPU-to-GPU copies need two",
            if n == 1 { "one" } else { "no" }
        )),
        None => {
            // The matrix grows as n²: 8 GPUs have 56 ordered pairs and 28 both-ways pairs,
            // 1288 copies in the full plan, 28 times the 2-GPU matrix. Over NVLink (~400 GB/s)
            // 1 GiB copies would still take only ~3.5 s, but between GPUs without P2P the
            // copies go through host memory at ~10 GB/s: 1288 GiB would take over two minutes.
            // So the size is the largest power of two that keeps the copied volume under a
            // cap (full 384 GiB: 1 GiB up to 4 GPUs, 256 MiB on 8; quick 48 GiB: 256 MiB up
            // to 4 GPUs, 64 MiB on 8). 64 MiB still takes 0.17 ms a copy at NVLink speed,
            // against microseconds of start-up between back-to-back copies.
            let (largest, repeats, cap) = if full {
                (GIB, 10, 384 * GIB)
            } else {
                (256 * MIB, 5, 48 * GIB)
            };
            let copies = p2p_copies(n as usize, repeats);
            let size = pow2_floor(cap / copies.max(1)).clamp(64 * MIB, largest);
            let volume = copies * size;
            let pairs = ordered_pairs(n as usize).len() as u64;
            // Peer access, syncs, verification and the 4-byte copies: ~15 ms a pair; the
            // copies at 200 GB/s (between NVLink and PCIe). The limit holds copies through
            // host memory at 10 GB/s.
            // The patterns (full only) copy n - 1 buffers for each of 2n patterns: 2 n (n - 1)
            // copies of `size` per repeat, as much again as the ordered pairs.
            let pattern_volume = if full {
                pattern_copies(n as usize, repeats) * size
            } else {
                0
            };
            let est = 200 + 15 * pairs + (volume + pattern_volume) / 200_000_000;
            Step::Run(P2pParams {
                size,
                repeats,
                latency_copies: 200,
                patterns: full,
                budget: Budget::at_least(
                    est,
                    over,
                    30 + (volume + pattern_volume) / 10_000_000_000,
                ),
            })
        }
    };

    let nccl = match gate(GpuGroup::Nccl) {
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

    let burn = match gate(GpuGroup::Burn) {
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

    let rehearse = match gate(GpuGroup::Rehearse) {
        Some(r) => Step::Skip(r),
        None => match &opts.rehearse {
            None => Step::Skip(NOT_REHEARSED.into()),
            Some(_) if libs.cublaslt.is_some() && libs.cublas.is_some() => Step::Skip(format!(
                "no GEMM library for the model: {}; {}",
                libs.cublaslt.as_deref().unwrap_or(""),
                libs.cublas.as_deref().unwrap_or("")
            )),
            Some(req) => {
                let allreduce_skip = if n < 2 {
                    Some(format!(
                        "{} GPU rehearsed: no gradients to all-reduce",
                        if n == 1 { "one" } else { "no" }
                    ))
                } else {
                    libs.nccl.clone()
                };
                let reference_batch = (req.config.batch < REHEARSE_REFERENCE_BATCH)
                    .then_some(REHEARSE_REFERENCE_BATCH);
                let est = RehearseParams::estimate_ms(
                    req,
                    n,
                    reference_batch.is_some(),
                    allreduce_skip.is_none(),
                );
                Step::Run(RehearseParams {
                    request: req.clone(),
                    lt: libs.cublaslt.is_none(),
                    blas: libs.cublas.is_none(),
                    allreduce_skip,
                    reference_batch,
                    workspace_bytes: 32 * MIB,
                    budget: Budget::new(est, over),
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
        rehearse,
        startup_timeout_s: 60 + 5 * n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200(i: u32) -> Target {
        Target {
            index: i,
            pci_bus_id: format!("0000:00:{:02x}.0", 6 + i),
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
            GpuGroup::Context,
            GpuGroup::Pcie,
            GpuGroup::Memory,
            GpuGroup::Gemm,
            GpuGroup::P2p,
        ] {
            assert!(p.runs(g), "{g:?}");
        }
        assert!(p.runs(GpuGroup::Nccl));
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
                GpuGroup::Pcie,
                GpuGroup::Memory,
                GpuGroup::Gemm,
                GpuGroup::P2p,
                GpuGroup::Nccl
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
    fn flat_kernels_read_shapes_and_host_extras_by_mode() {
        let quick = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        let m = quick.memory.params().unwrap();
        assert_eq!(m.flat_threads, vec![256]);
        assert!(!quick.pcie.params().unwrap().host_extras);
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let full = plan(&[h200(0)], &opts, &LibStatus::all_found());
        let m = full.memory.params().unwrap();
        assert_eq!(m.flat_threads, vec![256, 512, 1024]);
        assert!(m.read_shapes.iter().any(|s| s.blocks_per_sm >= 8));
        assert!(full.pcie.params().unwrap().host_extras);
        // The extras are in the full plan's time budget.
        let full_pcie = full.pcie.params().unwrap().budget;
        assert_eq!(full_pcie.estimate_ms, 2500 + HOST_EXTRAS_MS);
    }

    #[test]
    fn device_patterns_run_in_full_plans_on_two_or_more_gpus() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let full = plan(&[h200(0), h200(1)], &opts, &LibStatus::all_found());
        assert!(full.p2p.params().unwrap().patterns);
        let quick = plan(
            &[h200(0), h200(1)],
            &Options::default(),
            &LibStatus::all_found(),
        );
        assert!(!quick.p2p.params().unwrap().patterns);
        // One GPU: no P2P group at all.
        let one = plan(&[h200(0)], &opts, &LibStatus::all_found());
        assert!(one.p2p.params().is_none());
        // 2 GPUs: 4 patterns of 1 copy; 8 GPUs: 16 patterns of 7 copies; each repeats + 1.
        assert_eq!(pattern_copies(2, 10), 2 * 2 * 11);
        assert_eq!(pattern_copies(8, 10), 2 * 8 * 7 * 11);
        assert_eq!(pattern_copies(1, 10), 0);
        assert_eq!(pattern_copies(0, 10), 0);
        // The full plan on 8 GPUs still fits (the patterns add to the P2P group's estimate).
        let eight: Vec<Target> = (0..8).map(h200).collect();
        let p = plan(&eight, &opts, &LibStatus::all_found());
        let p2p = p.p2p.params().unwrap();
        assert!(p2p.patterns);
        let pairs = 56;
        let volume = p2p_copies(8, p2p.repeats) * p2p.size;
        let pv = pattern_copies(8, p2p.repeats) * p2p.size;
        assert_eq!(
            p2p.budget.estimate_ms,
            200 + 15 * pairs + (volume + pv) / 200_000_000
        );
    }

    #[test]
    fn the_read_sweep_always_has_eight_blocks_per_sm() {
        let sh = |b, t| LaunchShape {
            blocks_per_sm: b,
            threads: t,
        };
        // 4 blocks per SM only: 8x256 is added.
        assert_eq!(read_shapes(&[sh(4, 512)]), vec![sh(4, 512), sh(8, 256)]);
        // Just below the minimum: added.
        assert_eq!(read_shapes(&[sh(7, 256)]), vec![sh(7, 256), sh(8, 256)]);
        // At it, or above: the shapes as they are.
        assert_eq!(read_shapes(&[sh(8, 128)]), vec![sh(8, 128)]);
        assert_eq!(
            read_shapes(&[sh(2, 1024), sh(16, 128)]),
            vec![sh(2, 1024), sh(16, 128)]
        );
        assert_eq!(read_shapes(&[]), vec![sh(8, 256)]);
    }

    #[test]
    fn old_plans_without_the_new_memory_fields_still_parse() {
        let p = plan(&[h200(0)], &Options::default(), &LibStatus::all_found());
        let mut v = serde_json::to_value(p.memory.params().unwrap()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("read_shapes");
        o.remove("flat_threads");
        let m: MemoryParams = serde_json::from_value(v).unwrap();
        assert!(m.read_shapes.is_empty() && m.flat_threads.is_empty());
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
        assert!(p.runs(GpuGroup::Pcie) && p.runs(GpuGroup::P2p));

        let no_cuda = LibStatus {
            cuda: Some("libcuda.so.1 not found".into()),
            ..LibStatus::default()
        };
        let p = plan(&[h200(0)], &full, &no_cuda);
        assert!(GpuGroup::ALL.into_iter().all(|g| !p.runs(g)));
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
            &Options::bench(&[GpuGroup::Gemm]),
            &LibStatus::all_found(),
        );
        assert!(p.runs(GpuGroup::Gemm));
        assert!(p
            .pcie
            .skip_reason()
            .unwrap()
            .contains("gpuaudit bench pcie"));
        let p = plan(&[h200(0)], &Options::burn(30), &LibStatus::all_found());
        assert_eq!(p.burn.params().unwrap().seconds, 30);
        assert!(!p.runs(GpuGroup::Gemm));
        assert_eq!(p.jobs(), vec![vec![GpuGroup::Burn]]);
        let all = Options::bench(&[]);
        assert!(!all.wants(GpuGroup::Burn) && all.wants(GpuGroup::Nccl));
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
        assert_eq!(GpuGroup::parse("gemm"), Some(GpuGroup::Gemm));
        assert_eq!(GpuGroup::parse("nccl.allreduce"), Some(GpuGroup::Nccl));
        assert_eq!(GpuGroup::parse("x"), None);
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

    /// n H200s at 0000:00:06.0, 0000:00:07.0, ...
    fn h200s(n: u32) -> Vec<Target> {
        (0..n).map(h200).collect()
    }

    #[test]
    fn pairs_of_the_p2p_matrix() {
        assert_eq!(ordered_pairs(2), vec![(0, 1), (1, 0)]);
        assert_eq!(unordered_pairs(2), vec![(0, 1)]);
        assert!(ordered_pairs(1).is_empty() && unordered_pairs(1).is_empty());
        let o = ordered_pairs(8);
        assert_eq!(o.len(), 56);
        for i in 0..8 {
            for j in 0..8 {
                assert_eq!(o.contains(&(i, j)), i != j, "{i} -> {j}");
            }
        }
        let u = unordered_pairs(8);
        assert_eq!(u.len(), 28);
        assert!(u.iter().all(|&(a, b)| a < b && b < 8));
        // Per ordered pair: warm-up, repeats, the verified copy; per unordered pair: warm-up
        // and repeats, both ways.
        assert_eq!(p2p_copies(2, 10), 2 * 12 + 22);
        assert_eq!(p2p_copies(8, 10), 56 * 12 + 28 * 22);
        assert_eq!(p2p_copies(8, 5), 56 * 7 + 28 * 12);
    }

    #[test]
    fn quick_plan_on_eight_gpus_fits_fifteen_seconds() {
        let p = plan(&h200s(8), &Options::default(), &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(p.gpus[7].pci_bus_id, "0000:00:0d.0");
        for g in [
            GpuGroup::Context,
            GpuGroup::Pcie,
            GpuGroup::Memory,
            GpuGroup::Gemm,
            GpuGroup::P2p,
            GpuGroup::Nccl,
        ] {
            assert!(p.runs(g), "{g:?}");
        }
        assert!(p.burn.skip_reason().is_some());
        // Every probe pays cuInit over 8 GPUs: 3 of them, not 5.
        assert_eq!(p.context.params().unwrap().runs, 3);
        // One size on each GPU in turn, 64 MiB; the all-at-once copies on all 8.
        let pcie = p.pcie.params().unwrap();
        assert_eq!(pcie.sizes, vec![64 * MIB]);
        assert_eq!(pcie.all_at_once_size, Some(64 * MIB));
        // Memory and GEMM on all GPUs at once.
        assert!(p.memory.params().unwrap().gpus_at_once);
        assert_eq!(p.gemm.params().unwrap().order, GpuOrder::AllAtOnce);
        assert_eq!(p.gemm.params().unwrap().dtypes, vec![GemmDtype::Bf16]);
        // The whole matrix (56 pairs one way, 28 both ways) at 64 MiB: 728 copies, ~46 GiB.
        let p2p = p.p2p.params().unwrap();
        assert_eq!((p2p.size, p2p.repeats), (64 * MIB, 5));
        assert_eq!(p2p_copies(8, p2p.repeats) * p2p.size, 728 * 64 * MIB);
        assert!(p2p.budget.estimate_ms < 2_000, "{:?}", p2p.budget);
        // The all-reduce runs over every GPU of the plan.
        assert!(p.nccl.params().is_some());
        assert_eq!(p.jobs().len(), 1);
        // 15 s on 8 GPUs, with the 2-GPU run's slack (7.3 s wall against a 6.6 s estimate).
        assert!(p.estimate_ms() < 14_000, "{}", p.estimate_ms());
    }

    #[test]
    fn full_plan_on_eight_gpus_fits_three_minutes() {
        let opts = Options {
            full: true,
            ..Options::default()
        };
        let p = plan(&h200s(8), &opts, &LibStatus::all_found());
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(p.context.params().unwrap().runs, 5);
        let gemm = p.gemm.params().unwrap();
        assert_eq!(gemm.dtypes.len(), 6);
        assert_eq!(gemm.order, GpuOrder::Interleaved);
        // Interleaved, the 1 s rests happen while the 7 other GPUs run (~350 ms each).
        assert_eq!(gemm.budget.estimate_ms, 8 * (400 + 6 * 350));
        assert!(!p.memory.params().unwrap().gpus_at_once);
        // The complete matrix at 256 MiB: 1288 copies, 322 GiB, ~1 s over NVLink; through
        // host memory at 10 GB/s ~35 s, within the limit.
        let p2p = p.p2p.params().unwrap();
        assert_eq!((p2p.size, p2p.repeats), (256 * MIB, 10));
        let volume = p2p_copies(8, p2p.repeats) * p2p.size;
        assert_eq!(volume, 1288 * 256 * MIB);
        assert!(p2p.budget.estimate_ms < 5_000, "{:?}", p2p.budget);
        assert!(p2p.budget.timeout_s >= volume / 10_000_000_000 + 20);
        assert!(p2p.budget.timeout_s <= 120, "{:?}", p2p.budget);
        let nccl = p.nccl.params().unwrap();
        assert_eq!(nccl.sizes.last(), Some(&GIB));
        assert_eq!(p.burn.params().unwrap().seconds, 60);
        assert_eq!(p.jobs().len(), 6);
        // 3 minutes with the 60 s burn; the 2-GPU full audit ran 93 s against 98 s planned.
        assert!(p.estimate_ms() < 160_000, "{}", p.estimate_ms());
    }

    #[test]
    fn two_gpu_plans_keep_what_the_anchors_were_compared_with() {
        let quick = plan(&h200s(2), &Options::default(), &LibStatus::all_found());
        let full = plan(
            &h200s(2),
            &Options {
                full: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        for p in [&quick, &full] {
            assert_eq!(p.gemm.params().unwrap().order, GpuOrder::OneByOne);
            assert!(!p.memory.params().unwrap().gpus_at_once);
        }
        assert_eq!(quick.p2p.params().unwrap().size, 256 * MIB);
        assert_eq!(quick.pcie.params().unwrap().sizes, vec![256 * MIB]);
        assert_eq!(quick.context.params().unwrap().runs, 5);
        assert_eq!(full.p2p.params().unwrap().size, GIB);
        assert_eq!(full.context.params().unwrap().runs, 10);
        // Four GPUs still go one by one, with 1 GiB P2P copies.
        let four = plan(
            &h200s(4),
            &Options {
                full: true,
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(four.gemm.params().unwrap().order, GpuOrder::OneByOne);
        assert_eq!(four.p2p.params().unwrap().size, GIB);
    }

    #[test]
    fn p2p_size_shrinks_with_the_matrix() {
        for full in [false, true] {
            let opts = Options {
                full,
                ..Options::default()
            };
            let mut last = u64::MAX;
            for n in 2..=16 {
                let p = plan(&h200s(n), &opts, &LibStatus::all_found());
                let p2p = p.p2p.params().unwrap().clone();
                assert!(p2p.size.is_power_of_two() && p2p.size >= 64 * MIB);
                assert!(p2p.size <= last, "{n} GPUs: {}", p2p.size);
                last = p2p.size;
                // The limit holds every copy going through host memory at 10 GB/s.
                let volume = p2p_copies(n as usize, p2p.repeats) * p2p.size;
                assert!(p2p.budget.timeout_s >= volume / 10_000_000_000, "{n} GPUs");
            }
        }
    }

    #[test]
    fn gpu_order_can_be_forced() {
        let p = plan(
            &h200s(8),
            &Options {
                gpu_order: Some(GpuOrder::OneByOne),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert_eq!(p.gemm.params().unwrap().order, GpuOrder::OneByOne);
        assert!(!p.memory.params().unwrap().gpus_at_once);
        // On 2 GPUs, to try the 8-GPU order where it can be compared with the usual one.
        let p = plan(
            &h200s(2),
            &Options {
                gpu_order: Some(GpuOrder::AllAtOnce),
                ..Options::default()
            },
            &LibStatus::all_found(),
        );
        assert!(p.memory.params().unwrap().gpus_at_once);
        assert_eq!(GpuOrder::parse("all-at-once"), Some(GpuOrder::AllAtOnce));
        assert_eq!(GpuOrder::parse(" Interleaved"), Some(GpuOrder::Interleaved));
        assert_eq!(GpuOrder::parse("one_by_one"), Some(GpuOrder::OneByOne));
        assert_eq!(GpuOrder::parse("fast"), None);
    }

    fn rehearse_request(batch: u32) -> RehearseRequest {
        let o = crate::rehearse::Options {
            batch,
            ..crate::rehearse::Options::defaults(16)
        };
        let loader = LoaderConfig {
            sample_bytes: o.sample_bytes,
            tensor_bytes: o.tensor_bytes,
            batch,
            readers: 4,
            workers: 14,
            transform_cost: 4,
            read_throttle_bytes_per_s: None,
            drop_cache: false,
        };
        o.request(loader, vec!["/tmp/d/sample-00000.bin".into()])
    }

    #[test]
    fn an_audit_does_not_rehearse() {
        for full in [false, true] {
            let p = plan(
                &h200s(2),
                &Options {
                    full,
                    ..Options::default()
                },
                &LibStatus::all_found(),
            );
            assert_eq!(p.rehearse.skip_reason(), Some(NOT_REHEARSED));
            assert!(p.jobs().iter().all(|j| !j.contains(&GpuGroup::Rehearse)));
        }
        let p = plan(&h200s(2), &Options::bench(&[]), &LibStatus::all_found());
        assert_eq!(p.rehearse.skip_reason(), Some(NOT_REHEARSED));
        assert_eq!(GpuGroup::parse("rehearse"), None);
        assert_eq!(GpuGroup::parse("workload.pipeline"), None);
    }

    #[test]
    fn a_rehearsal_on_one_gpu_has_no_allreduce_and_a_reference_batch() {
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(2)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.jobs(), vec![vec![GpuGroup::Rehearse]]);
        let r = p.rehearse.params().unwrap();
        assert_eq!(
            r.allreduce_skip.as_deref(),
            Some("one GPU rehearsed: no gradients to all-reduce")
        );
        assert_eq!(r.reference_batch, Some(REHEARSE_REFERENCE_BATCH));
        assert!(r.lt && r.blas);
        // Set-up, the copies, the step, the reference step, the pipeline.
        assert_eq!(r.budget.estimate_ms, 1000 + 300 + 3 * 2400 + 14_000);
        assert_eq!(r.budget.timeout_s, 30 + r.budget.estimate_ms * 4 / 1000);
        assert!(p.pcie.skip_reason().is_some() && p.burn.skip_reason().is_some());
        // At the reference batch, no reference run.
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.rehearse.params().unwrap().reference_batch, None);
    }

    #[test]
    fn the_allreduce_stage_is_planned_from_the_gpus_and_nccl() {
        let p = plan(
            &h200s(8),
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        let r = p.rehearse.params().unwrap();
        assert_eq!(r.allreduce_skip, None);
        assert_eq!(p.gpus.len(), 8);
        assert_eq!(r.budget.estimate_ms, 1000 + 8 * 300 + 3 * 2400 + 14_000);
        let no_nccl = LibStatus {
            nccl: Some("libnccl not found (looked in /usr/lib)".into()),
            ..LibStatus::default()
        };
        let p = plan(
            &h200s(2),
            &Options::rehearse(rehearse_request(256)),
            &no_nccl,
        );
        assert_eq!(
            p.rehearse.params().unwrap().allreduce_skip.as_deref(),
            Some("libnccl not found (looked in /usr/lib)")
        );
        // --gpus 1: one GPU rehearsed.
        let mut o = Options::rehearse(rehearse_request(256));
        o.gpus = Some(vec![1]);
        let p = plan(&h200s(2), &o, &LibStatus::all_found());
        assert!(p.rehearse.params().unwrap().allreduce_skip.is_some());
    }

    #[test]
    fn a_rehearsal_needs_a_gpu_and_a_gemm_library() {
        let p = plan(
            &[],
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert_eq!(p.rehearse.skip_reason(), Some("no NVIDIA GPU found"));
        let none = LibStatus {
            cublas: Some("libcublas not found".into()),
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let p = plan(&h200s(1), &Options::rehearse(rehearse_request(256)), &none);
        assert!(p
            .rehearse
            .skip_reason()
            .unwrap()
            .starts_with("no GEMM library"));
        // cuBLAS alone: fp32 in the child.
        let lt_only_missing = LibStatus {
            cublaslt: Some("libcublasLt not found".into()),
            ..LibStatus::default()
        };
        let p = plan(
            &h200s(1),
            &Options::rehearse(rehearse_request(256)),
            &lt_only_missing,
        );
        let r = p.rehearse.params().unwrap();
        assert!(!r.lt && r.blas);
        let mut busy = h200(0);
        busy.busy = Some("2 processes".into());
        let p = plan(
            &[busy],
            &Options::rehearse(rehearse_request(256)),
            &LibStatus::all_found(),
        );
        assert!(p.rehearse.skip_reason().unwrap().contains("busy"));
    }

    #[test]
    fn a_rehearsal_plan_round_trips_as_json() {
        let p = plan(
            &h200s(2),
            &Options::rehearse(rehearse_request(64)),
            &LibStatus::all_found(),
        );
        let back: Plan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn plan_round_trips_as_json() {
        for (n, full) in [(2, false), (8, false), (8, true)] {
            let opts = Options {
                full,
                ..Options::default()
            };
            let p = plan(&h200s(n), &opts, &LibStatus::all_found());
            let j = serde_json::to_string(&p).unwrap();
            let back: Plan = serde_json::from_str(&j).unwrap();
            assert_eq!(back, p);
        }
    }
}
