//! What was measured on the GPUs. Filled by the measurement child process (live audit only).
//!
//! Each measurement group is a [`Reading`]: a group that could not run carries the reason
//! ("quick audit: run with --full", "libnccl not found (looked in ...)", "child process timed
//! out after 120 s"). Per-GPU groups hold one [`OnGpu`] per GPU, so one busy or broken GPU
//! costs its own entry, not the group.
//!
//! Units: bandwidth in GB/s (10^9 bytes per second), time in ms or µs as the field says,
//! compute in TFLOPS (10^12 floating-point operations per second, a multiply-add counted as 2).

use super::gpu::ComputeCapability;
use super::gpu::ThrottleReason;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MeasuredFacts {
    /// Why nothing was measured ("snapshot audit: nothing is measured", "--facts-only"), or
    /// `None` when measurements ran.
    pub not_run: Option<String>,
    /// "quick" (the default audit) or "full" (`--full`, `bench`, `burn`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The CUDA version the driver supports, as cuDriverGetVersion reports it (13000 = 13.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<u32>,
    /// The libraries the measurements used (or looked for and did not find).
    #[serde(default)]
    pub libraries: Vec<LibraryUse>,
    /// The GPUs as CUDA sees them (read in the child process).
    #[serde(default)]
    pub devices: Reading<Vec<CudaDevice>>,
    /// GPUs left out of the measurements, with the reason (busy, not visible to CUDA, ...).
    #[serde(default)]
    pub skipped_gpus: Vec<SkippedGpu>,
    #[serde(default)]
    pub context: Reading<ContextLatency>,
    #[serde(default)]
    pub pcie: Reading<PcieBandwidth>,
    #[serde(default)]
    pub memory: Reading<Vec<OnGpu<MemoryBandwidth>>>,
    #[serde(default)]
    pub gemm: Reading<Vec<OnGpu<Vec<GemmResult>>>>,
    #[serde(default)]
    pub p2p: Reading<P2pMatrix>,
    #[serde(default)]
    pub nccl: Reading<AllReduce>,
    #[serde(default)]
    pub burn: Reading<Burn>,
    /// `gpuaudit rehearse`: the training-shaped pipeline (a normal audit has none).
    #[serde(default = "not_rehearsed", skip_serializing_if = "is_not_rehearsed")]
    pub rehearsal: Reading<super::rehearsal::Rehearsal>,
    /// Remarks of the measuring processes (sizes skipped for lack of memory, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl MeasuredFacts {
    pub fn not_run(reason: &str) -> Self {
        MeasuredFacts {
            not_run: Some(reason.to_string()),
            mode: None,
            cuda_driver_version: None,
            libraries: Vec::new(),
            devices: Reading::unavailable(reason),
            skipped_gpus: Vec::new(),
            context: Reading::unavailable(reason),
            pcie: Reading::unavailable(reason),
            memory: Reading::unavailable(reason),
            gemm: Reading::unavailable(reason),
            p2p: Reading::unavailable(reason),
            nccl: Reading::unavailable(reason),
            burn: Reading::unavailable(reason),
            rehearsal: not_rehearsed(),
            notes: Vec::new(),
        }
    }

    /// The CUDA view of GPU `gpu` (NVML index), where the child read it.
    pub fn device(&self, gpu: u32) -> Option<&CudaDevice> {
        self.devices.value()?.iter().find(|d| d.gpu == gpu)
    }
}

/// What a report without `gpuaudit rehearse` says of the rehearsal.
pub fn not_rehearsed() -> Reading<super::rehearsal::Rehearsal> {
    Reading::unavailable(super::rehearsal::NOT_REHEARSED)
}

/// The bench JSON and every other `measured` stay as they were without a rehearsal.
fn is_not_rehearsed(r: &Reading<super::rehearsal::Rehearsal>) -> bool {
    r.reason() == Some(super::rehearsal::NOT_REHEARSED)
}

/// A library the measurements looked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryUse {
    /// "libcuda", "libcublas", "libcublasLt", "libnccl".
    pub name: String,
    /// The file used, or why none was.
    pub path: Reading<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedGpu {
    pub gpu: u32,
    pub reason: String,
}

/// One GPU's result in a per-GPU group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
pub struct OnGpu<T> {
    /// NVML index of the GPU.
    pub gpu: u32,
    pub result: Reading<T>,
}

impl<T> OnGpu<T> {
    pub fn new(gpu: u32, result: Reading<T>) -> Self {
        OnGpu { gpu, result }
    }
}

/// A GPU as the CUDA driver API describes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CudaDevice {
    /// NVML index (matched by PCI bus id).
    pub gpu: u32,
    /// CUDA device ordinal in the measuring process.
    pub ordinal: u32,
    pub name: String,
    /// Normalised, sysfs style: "0000:00:06.0".
    pub pci_bus_id: String,
    pub compute_capability: ComputeCapability,
    pub sm_count: u32,
    pub l2_bytes: u64,
    pub total_memory_bytes: u64,
    /// Free when the child started measuring.
    pub free_memory_bytes: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_khz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_width_bits: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_khz: Option<u32>,
    /// Unified addressing is what peer copies through one address space need.
    #[serde(default)]
    pub unified_addressing: bool,
}

/// Median, minimum and maximum of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub n: u32,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stats {
    /// `None` for an empty set; NaN samples are left out.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stats {
            n: n as u32,
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Median of the samples (NaN left out); `None` when there are none.
pub fn median(samples: &[f64]) -> Option<f64> {
    Stats::of(samples).map(|s| s.median)
}

/// Coefficient of variation (standard deviation / mean) of the samples.
pub fn coefficient_of_variation(samples: &[f64]) -> Option<f64> {
    let v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    if v.len() < 2 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if mean == 0.0 {
        return None;
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (v.len() - 1) as f64;
    Some(var.sqrt() / mean.abs())
}

/// A result check made after a measurement (copied data compared, GEMM output against a CPU
/// reference, all-reduce sum).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verify {
    /// What was compared: "h2d pinned 1 GiB", "bf16 GEMM 32 samples vs CPU f64".
    pub what: String,
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

// ---------------------------------------------------------------- context creation

/// `cuInit` + primary context + first allocation, each run in a fresh process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextLatency {
    /// Fresh processes that completed.
    pub runs: u32,
    /// The GPUs the probe process could see (cuInit initialises all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_gpus: Option<u32>,
    /// `cuInit(0)`.
    pub init_ms: Stats,
    /// `cuDeviceGet` + `cuDevicePrimaryCtxRetain` + `cuCtxSetCurrent`.
    pub context_ms: Stats,
    /// The first 1 MiB `cuMemAlloc`.
    pub alloc_ms: Stats,
    /// From just before `cuInit` to after the allocation.
    pub total_ms: Stats,
    /// Persistence mode per GPU while the probes ran (NVML), where readable.
    pub persistence_mode: Reading<Vec<GpuFlag>>,
    /// Runs that failed, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFlag {
    pub gpu: u32,
    pub enabled: bool,
}

// ---------------------------------------------------------------- host <-> device

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Host to device.
    H2d,
    /// Device to host.
    D2h,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::H2d => "h2d",
            Direction::D2h => "d2h",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// Page-locked (`cuMemHostAlloc`): DMA straight from/to the buffer.
    Pinned,
    /// Ordinary memory: the driver stages it through its own pinned buffers.
    Pageable,
}

impl HostMemory {
    pub fn label(self) -> &'static str {
        match self {
            HostMemory::Pinned => "pinned",
            HostMemory::Pageable => "pageable",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieBandwidth {
    pub per_gpu: Vec<OnGpu<PcieGpu>>,
    /// Pinned copies on every GPU at once (a shared upstream link shows here).
    pub all_at_once: Reading<Vec<ConcurrentCopy>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieGpu {
    pub points: Vec<CopyPoint>,
    /// The link as NVML saw it while the copies ran (the highest generation and width seen).
    #[serde(default)]
    pub link_under_load: Reading<PcieLinkState>,
    #[serde(default)]
    pub verify: Vec<Verify>,
    /// Pinned copies both ways at once (two streams, copy engines), as nvbandwidth's
    /// host_to_device_bidirectional_memcpy_ce; `--full` and bench only.
    #[serde(default)]
    pub bidirectional: Reading<BidirectionalCopy>,
    /// Copies done by a kernel reading or writing mapped pinned host memory (SMs, not the
    /// copy engines), as nvbandwidth's host_to_device_memcpy_sm / device_to_host_memcpy_sm.
    #[serde(default)]
    pub sm_copy: Reading<SmHostCopy>,
    /// Host <-> device latency; `--full` and bench only.
    #[serde(default)]
    pub latency: Reading<HostLatency>,
}

/// Both directions at once over one GPU's link, each timed on its own stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BidirectionalCopy {
    pub size_bytes: u64,
    /// Host to device while device to host runs.
    pub h2d_gbps: f64,
    /// Device to host while host to device runs.
    pub d2h_gbps: f64,
    /// The two added.
    pub total_gbps: f64,
}

/// A kernel moving data between device memory and mapped pinned host memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SmHostCopy {
    pub size_bytes: u64,
    pub h2d_gbps: f64,
    pub d2h_gbps: f64,
    /// The kernel and its launch shape ("copy 1056x512").
    pub kernel: String,
}

/// Host <-> device latency, microseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostLatency {
    /// One GPU thread following a chain of dependent loads through mapped pinned host
    /// memory: time per load (median over launches), as nvbandwidth's host_device_latency_sm.
    pub sm_chase_us: f64,
    /// Dependent loads per launch.
    pub chase_steps: u64,
    /// A 4-byte cuMemcpyHtoD then a 4-byte cuMemcpyDtoH, synchronous, timed on the host:
    /// median of the round trips (what a small synchronous copy costs an application).
    pub memcpy_round_trip_us: f64,
    pub round_trips: u32,
}

impl PcieGpu {
    /// The figure at the largest size measured for this direction and memory kind.
    pub fn largest(&self, dir: Direction, mem: HostMemory) -> Option<&CopyPoint> {
        self.points
            .iter()
            .filter(|p| p.direction == dir && p.host_memory == mem)
            .max_by_key(|p| p.size_bytes)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CopyPoint {
    pub direction: Direction,
    pub host_memory: HostMemory,
    pub size_bytes: u64,
    /// Median over the repeats.
    pub gbps: f64,
    pub repeats: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConcurrentCopy {
    pub direction: Direction,
    pub size_bytes: u64,
    pub per_gpu: Vec<GpuValue>,
    /// Sum over the GPUs.
    pub total_gbps: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuValue {
    pub gpu: u32,
    pub value: f64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLinkState {
    pub gen: u32,
    pub width: u32,
    /// NVML samples taken while the copies ran.
    pub samples: u32,
}

// ---------------------------------------------------------------- device memory

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryBandwidth {
    /// Size of each buffer.
    pub buffer_bytes: u64,
    /// gpuaudit's copy kernels, bytes read + written per second: the best launch whose output
    /// verified ([`best_verified`]); `None` when none did (the failures are in `verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<f64>,
    /// `cuMemcpyDtoDAsync` within the GPU, bytes read + written per second; `None` when not
    /// measured or its copy did not verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcpy_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_gbps: Option<f64>,
    /// a = b + s·c over f32, 2 reads + 1 write per element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triad_gbps: Option<f64>,
    /// a = b + c over f32 (BabelStream's Add), 2 reads + 1 write per element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_gbps: Option<f64>,
    /// Every kernel and launch configuration tried, each with whether its output verified.
    #[serde(default)]
    pub sweep: Vec<KernelPoint>,
    /// One entry per kernel (and the memcpy): its output compared after every launch shape.
    #[serde(default)]
    pub verify: Vec<Verify>,
    /// e.g. "buffers only 3x the L2: figures may be inflated".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl MemoryBandwidth {
    /// The device copy figure: the better of the verified copy kernel and memcpy figures;
    /// `None` when neither verified.
    pub fn best_copy_gbps(&self) -> Option<f64> {
        match (self.copy_gbps, self.memcpy_gbps) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The copy kernels' names in [`KernelPoint::kernel`]: the 16-byte grid-stride copy, the same
/// with streaming (evict-first) stores, the eight-words-per-thread tile, and the flat copy (one
/// 16-byte vector per thread, a grid covering the array, as BabelStream's).
pub const COPY_KERNELS: [&str; 4] = ["copy", "copy_cs", "copy_tile8", "copy_flat"];
/// The triad kernels: grid-stride and flat.
pub const TRIAD_KERNELS: [&str; 2] = ["triad", "triad_flat"];
/// The add kernels (a = b + c): grid-stride and flat.
pub const ADD_KERNELS: [&str; 2] = ["add", "add_flat"];
/// The read kernel (XOR reduction, grid-stride).
pub const READ_KERNELS: [&str; 1] = ["read"];
/// The write kernel (pattern stores, grid-stride).
pub const WRITE_KERNELS: [&str; 1] = ["write"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelPoint {
    /// "read", "write", "copy", "copy_cs", "copy_tile8", "triad".
    pub kernel: String,
    pub blocks: u32,
    pub threads: u32,
    pub gbps: f64,
    /// The output of this launch shape was checked and right. A point that was not (or was
    /// measured before points were checked one by one) gives no figure.
    #[serde(default)]
    pub verified: bool,
}

/// The best figure among the points of `kernels` whose output verified; `None` when none did
/// (or none was measured). A fast launch whose output was wrong is never the figure.
pub fn best_verified(points: &[KernelPoint], kernels: &[&str]) -> Option<f64> {
    best_verified_point(points, kernels).map(|p| p.gbps)
}

/// The launch that gave [`best_verified`]'s figure (its kernel and shape, for the method).
pub fn best_verified_point<'a>(
    points: &'a [KernelPoint],
    kernels: &[&str],
) -> Option<&'a KernelPoint> {
    points
        .iter()
        .filter(|p| p.verified && kernels.contains(&p.kernel.as_str()) && p.gbps.is_finite())
        .max_by(|a, b| a.gbps.total_cmp(&b.gbps))
}

// ---------------------------------------------------------------- GEMM

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmDtype {
    Fp64,
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
}

impl GemmDtype {
    /// In the order they are measured: the types training and inference use most come
    /// first, while the GPU is cool (each GEMM heats it, and a hot GPU at its power limit
    /// clocks lower), as a user timing one GEMM by hand would see them.
    pub const ALL: [GemmDtype; 6] = [
        GemmDtype::Bf16,
        GemmDtype::Fp16,
        GemmDtype::Fp8,
        GemmDtype::Tf32,
        GemmDtype::Fp32,
        GemmDtype::Fp64,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GemmDtype::Fp64 => "fp64",
            GemmDtype::Fp32 => "fp32",
            GemmDtype::Tf32 => "tf32",
            GemmDtype::Fp16 => "fp16",
            GemmDtype::Bf16 => "bf16",
            GemmDtype::Fp8 => "fp8",
        }
    }

    pub fn parse(s: &str) -> Option<GemmDtype> {
        GemmDtype::ALL
            .into_iter()
            .find(|d| d.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether a GPU of this compute capability has the hardware for it (tensor cores for
    /// the reduced types).
    pub fn supported_on(self, cc: ComputeCapability) -> bool {
        let v = cc.major * 10 + cc.minor;
        match self {
            GemmDtype::Fp64 | GemmDtype::Fp32 => true,
            GemmDtype::Fp16 => v >= 70,
            GemmDtype::Tf32 | GemmDtype::Bf16 => v >= 80,
            GemmDtype::Fp8 => v >= 89,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmResult {
    pub dtype: GemmDtype,
    pub result: Reading<GemmPoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPoint {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Median over the timed batches.
    pub tflops: f64,
    pub ms_per_gemm: f64,
    /// GEMMs per timed batch.
    pub repeats: u32,
    /// TFLOPS of each timed batch.
    #[serde(default)]
    pub batches: Vec<f64>,
    /// "cublasLt 130001" / "cublas 130001".
    pub library: String,
    /// "TN": A transposed, B not (column-major), as cuBLASLt wants it for fp8.
    pub layout: String,
    /// Largest error of the sampled outputs, relative to the L2 norm of the products summed.
    pub max_error: f64,
    pub tolerance: f64,
    pub samples: u32,
    pub verified: bool,
}

// ---------------------------------------------------------------- GPU <-> GPU

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pMatrix {
    pub gpus: Vec<u32>,
    pub size_bytes: u64,
    /// Every ordered pair.
    pub pairs: Vec<P2pPair>,
    /// Every unordered pair, copies both ways at once.
    #[serde(default)]
    pub bidirectional: Vec<P2pBidir>,
    /// One GPU to all the others and all to one at once (nvbandwidth's one_to_all and
    /// all_to_one_memcpy_ce); `--full` and bench only, empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<P2pPattern>,
}

/// Which way the copies of a [`P2pPattern`] go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// `gpu` copies to every other GPU at once.
    OneToAll,
    /// Every other GPU copies to `gpu` at once.
    AllToOne,
}

impl PatternKind {
    pub fn label(self) -> &'static str {
        match self {
            PatternKind::OneToAll => "one_to_all",
            PatternKind::AllToOne => "all_to_one",
        }
    }
}

/// Copies between one GPU and all the others at the same time (copy engines, each on its own
/// stream, one start and one end for all).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pPattern {
    pub kind: PatternKind,
    /// The one GPU: the source of one-to-all, the destination of all-to-one.
    pub gpu: u32,
    pub peers: Vec<u32>,
    pub size_bytes: u64,
    /// All the copies' bytes over the time from the common start to the last end; a figure
    /// only when every copy's data verified.
    pub gbps: Reading<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

impl P2pMatrix {
    pub fn pair(&self, src: u32, dst: u32) -> Option<&P2pPair> {
        self.pairs.iter().find(|p| p.src == src && p.dst == dst)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pPair {
    pub src: u32,
    pub dst: u32,
    /// `cuDeviceCanAccessPeer(dst -> src)`: whether direct peer copies are possible.
    pub peer_access: bool,
    /// One direction, GB/s.
    pub gbps: Reading<f64>,
    /// Back-to-back 4-byte copies, µs per copy.
    pub latency_us: Reading<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pBidir {
    pub a: u32,
    pub b: u32,
    /// Both directions together, GB/s.
    pub gbps: Reading<f64>,
}

// ---------------------------------------------------------------- NCCL

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllReduce {
    pub gpus: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl_version: Option<String>,
    /// float32 sum, out of place.
    pub points: Vec<AllReducePoint>,
    #[serde(default)]
    pub verify: Vec<Verify>,
}

impl AllReduce {
    pub fn at(&self, size_bytes: u64) -> Option<&AllReducePoint> {
        self.points.iter().find(|p| p.size_bytes == size_bytes)
    }

    pub fn largest(&self) -> Option<&AllReducePoint> {
        self.points.iter().max_by_key(|p| p.size_bytes)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllReducePoint {
    pub size_bytes: u64,
    /// Per all-reduce, the slowest GPU's event time averaged over the iterations.
    pub time_us: f64,
    /// size / time.
    pub algbw_gbps: f64,
    /// algbw × 2(n−1)/n (nccl-tests' definition).
    pub busbw_gbps: f64,
    pub iterations: u32,
}

/// nccl-tests' bus bandwidth of an all-reduce over `n` ranks.
pub fn allreduce_busbw(algbw: f64, n: u32) -> f64 {
    if n == 0 {
        return 0.0;
    }
    algbw * 2.0 * (n as f64 - 1.0) / n as f64
}

// ---------------------------------------------------------------- burn

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Burn {
    pub seconds: f64,
    pub dtype: GemmDtype,
    /// Square GEMM size.
    pub size: u64,
    pub per_gpu: Vec<OnGpu<BurnGpu>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurnGpu {
    /// TFLOPS per window of about a second, in order.
    pub tflops: Vec<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops_stats: Option<Stats>,
    /// Coefficient of variation of the windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops_cv: Option<f64>,
    /// A hash of the whole output of the last GEMM (same seeded inputs on every GPU).
    pub checksum: String,
    /// The output of the first and the last GEMM of the run were bit for bit the same.
    pub self_consistent: bool,
    pub max_error: f64,
    pub tolerance: f64,
    pub verified: bool,
    /// Clocks, power, temperature and throttle reasons sampled by NVML during the run.
    #[serde(default)]
    pub telemetry: Reading<Telemetry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Telemetry {
    pub samples: u32,
    pub interval_ms: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<Stats>,
    /// Median SM clock over the first and the last quarter of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_first_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_last_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<Stats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<Stats>,
    /// Each throttle reason seen, with how many samples had it.
    #[serde(default)]
    pub throttle: Vec<ThrottleSeen>,
    /// Every sample in order, for the burn's timeline (the report's `series.burn`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<TelemetrySample>,
}

/// One NVML sample of one GPU during the burn. A value NVML did not give is `None` (left
/// out of the JSON), never 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TelemetrySample {
    /// Milliseconds since the burn's first sample of this GPU (when the parent received it:
    /// within 50 ms of when NVML was read).
    pub t_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// The clock-event reasons active in this sample, each on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle: Vec<ThrottleReason>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleSeen {
    pub reason: ThrottleReason,
    pub samples: u32,
}

// ---------------------------------------------------------------- the report's flat list

/// One figure of the report's `measurements`, with the datasheet expectation where known.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measurement {
    /// "h2d_pinned_bandwidth", "gemm_tflops", ...
    pub name: String,
    pub gpu: Option<u32>,
    /// The other GPU of a pair (P2P).
    pub peer: Option<u32>,
    pub value: f64,
    pub unit: String,
    pub expected: Option<f64>,
    /// value / expected (for latencies too: above 1 is slower than expected).
    pub ratio: Option<f64>,
    /// What healthy GPUs of the model reach, in `unit`, where it was measured
    /// (data/attainable.toml: the device copy and GEMMs); the datasheet's `expected` is a
    /// peak no GPU reaches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attainable: Option<f64>,
    /// How it was measured, in a sentence.
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// The directory a storage figure is of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_without_rehearsal_serialises_as_before() {
        let m = MeasuredFacts::not_run("x");
        let j = serde_json::to_value(&m).unwrap();
        assert!(j.get("rehearsal").is_none(), "{j}");
        let back: MeasuredFacts = serde_json::from_value(j).unwrap();
        assert_eq!(
            back.rehearsal.reason(),
            Some(super::super::rehearsal::NOT_REHEARSED)
        );
        let mut m = m;
        m.rehearsal = Reading::unavailable("no NVIDIA GPU found");
        assert!(serde_json::to_value(&m).unwrap().get("rehearsal").is_some());
    }

    #[test]
    fn stats_of_samples() {
        let s = Stats::of(&[3.0, 1.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 2.0, 1.0, 3.0));
        assert_eq!(median(&[1.0, 2.0, 3.0, 4.0]), Some(2.5));
        assert!(Stats::of(&[]).is_none());
    }

    #[test]
    fn cv_of_steady_and_unsteady() {
        assert!(coefficient_of_variation(&[100.0, 100.0, 100.0]).unwrap() < 1e-12);
        let cv = coefficient_of_variation(&[90.0, 110.0]).unwrap();
        assert!((cv - 0.1414).abs() < 1e-3, "{cv}");
        assert!(coefficient_of_variation(&[1.0]).is_none());
    }

    #[test]
    fn busbw_follows_nccl_tests() {
        assert_eq!(allreduce_busbw(100.0, 2), 100.0);
        assert_eq!(allreduce_busbw(100.0, 8), 175.0);
        assert_eq!(allreduce_busbw(100.0, 1), 0.0);
    }

    #[test]
    fn not_run_round_trips() {
        let m = MeasuredFacts::not_run("snapshot audit: nothing is measured");
        let j = serde_json::to_string(&m).unwrap();
        let back: MeasuredFacts = serde_json::from_str(&j).unwrap();
        assert_eq!(
            back.gemm.reason(),
            Some("snapshot audit: nothing is measured")
        );
        // An old report without the group fields still reads.
        let old: MeasuredFacts = serde_json::from_str(r#"{"not_run":null}"#).unwrap();
        assert!(old.not_run.is_none());
        assert!(!old.burn.is_value());
    }

    fn point(kernel: &str, gbps: f64, verified: bool) -> KernelPoint {
        KernelPoint {
            kernel: kernel.into(),
            blocks: 264,
            threads: 256,
            gbps,
            verified,
        }
    }

    /// Defect 12: the best of three copy kernels was reported while only the last one's
    /// output was checked. A figure comes only from a launch whose output verified.
    #[test]
    fn the_best_figure_is_the_best_verified_one() {
        let sweep = vec![
            point("copy", 3900.0, true),
            point("copy_cs", 4100.0, false),
            point("copy_tile8", 3950.0, true),
            point("read", 4500.0, true),
            point("write", 4400.0, false),
        ];
        assert_eq!(best_verified(&sweep, &COPY_KERNELS), Some(3950.0));
        assert_eq!(best_verified(&sweep, &["read"]), Some(4500.0));
        assert_eq!(best_verified(&sweep, &["write"]), None);
        assert_eq!(best_verified(&sweep, &["triad"]), None);
        assert_eq!(
            best_verified(&[point("copy", f64::NAN, true)], &["copy"]),
            None
        );
        // An old report without the per-point flag gives no figure from its points.
        let old: KernelPoint =
            serde_json::from_str(r#"{"kernel":"copy","blocks":1,"threads":1,"gbps":1.0}"#).unwrap();
        assert!(!old.verified);
    }

    #[test]
    fn the_best_verified_point_names_its_kernel_and_shape() {
        let pt = |kernel: &str, blocks, gbps, verified| KernelPoint {
            kernel: kernel.into(),
            blocks,
            threads: 256,
            gbps,
            verified,
        };
        let sweep = vec![
            pt("triad", 528, 4110.0, true),
            pt("triad_flat", 1 << 20, 4386.0, true),
            // Faster but wrong: never the figure.
            pt("triad_flat", 1 << 19, 4500.0, false),
            pt("add_flat", 1 << 20, 4390.0, true),
            pt("copy_flat", 1 << 20, f64::NAN, true),
        ];
        let best = best_verified_point(&sweep, &TRIAD_KERNELS).unwrap();
        assert_eq!((best.kernel.as_str(), best.blocks), ("triad_flat", 1 << 20));
        assert_eq!(best_verified(&sweep, &TRIAD_KERNELS), Some(4386.0));
        assert_eq!(best_verified(&sweep, &ADD_KERNELS), Some(4390.0));
        // A figure that is not finite is no figure.
        assert_eq!(best_verified(&sweep, &COPY_KERNELS), None);
        assert_eq!(best_verified_point(&sweep, &READ_KERNELS), None);
        assert!(COPY_KERNELS.contains(&"copy_flat"));
    }

    #[test]
    fn new_host_readings_default_to_not_read_in_old_reports() {
        // Reports written before the bidirectional, SM and latency readings still parse.
        let old = r#"{"points":[],"verify":[]}"#;
        let g: PcieGpu = serde_json::from_str(old).unwrap();
        assert!(g.bidirectional.value().is_none());
        assert!(g.sm_copy.value().is_none());
        assert!(g.latency.value().is_none());
    }

    #[test]
    fn the_copy_figure_is_the_better_verified_one() {
        let mut m = MemoryBandwidth {
            buffer_bytes: 1 << 30,
            copy_gbps: Some(3980.0),
            memcpy_gbps: Some(4290.0),
            read_gbps: None,
            write_gbps: None,
            triad_gbps: None,
            add_gbps: None,
            sweep: vec![],
            verify: vec![],
            note: None,
        };
        assert_eq!(m.best_copy_gbps(), Some(4290.0));
        m.memcpy_gbps = None;
        assert_eq!(m.best_copy_gbps(), Some(3980.0));
        m.copy_gbps = None;
        assert_eq!(m.best_copy_gbps(), None);
        m.memcpy_gbps = Some(4290.0);
        assert_eq!(m.best_copy_gbps(), Some(4290.0));
        m.copy_gbps = Some(4300.0);
        assert_eq!(m.best_copy_gbps(), Some(4300.0));
        // A report of the earlier shape (a bare number) still reads.
        let j = serde_json::json!({"buffer_bytes": 1, "copy_gbps": 12.5});
        let back: MemoryBandwidth = serde_json::from_value(j).unwrap();
        assert_eq!(back.copy_gbps, Some(12.5));
    }

    #[test]
    fn dtype_support_by_compute_capability() {
        let cc = |major, minor| ComputeCapability { major, minor };
        assert!(GemmDtype::Fp8.supported_on(cc(8, 9)));
        assert!(GemmDtype::Fp8.supported_on(cc(9, 0)));
        assert!(!GemmDtype::Fp8.supported_on(cc(8, 6)));
        assert!(!GemmDtype::Bf16.supported_on(cc(7, 5)));
        assert!(GemmDtype::Fp16.supported_on(cc(7, 0)));
        assert_eq!(GemmDtype::parse("BF16"), Some(GemmDtype::Bf16));
    }
}
