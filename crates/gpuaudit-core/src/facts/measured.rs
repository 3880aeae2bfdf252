//! What was measured on the GPUs, as a whole. Filled by the measurement child process (live
//! audit only).
//!
//! Each measurement group is a [`Reading`]: a group that could not run carries the reason
//! ("quick audit: run with --full", "libnccl not found (looked in ...)", "child process timed
//! out after 120 s"). Per-GPU groups hold one [`OnGpu`] per GPU, so one busy or broken GPU
//! costs its own entry, not the group. Each group's result type lives beside its figures
//! (`figures/<group>/result.rs`); this file holds the whole and what no group owns.
//!
//! Units: bandwidth in GB/s (10^9 bytes per second), time in ms or µs as the field says,
//! compute in TFLOPS (10^12 floating-point operations per second, a multiply-add counted as 2).

use super::gpu::ComputeCapability;
use crate::figures::results::{
    AllReduce, Burn, ContextLatency, GemmResult, MemoryBandwidth, OnGpu, P2pMatrix, PcieBandwidth,
    Rehearsal, NOT_REHEARSED,
};
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
    pub rehearsal: Reading<Rehearsal>,
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
pub fn not_rehearsed() -> Reading<Rehearsal> {
    Reading::unavailable(NOT_REHEARSED)
}

/// The bench JSON and every other `measured` stay as they were without a rehearsal.
fn is_not_rehearsed(r: &Reading<Rehearsal>) -> bool {
    r.reason() == Some(NOT_REHEARSED)
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
        assert_eq!(back.rehearsal.reason(), Some(NOT_REHEARSED));
        let mut m = m;
        m.rehearsal = Reading::unavailable("no NVIDIA GPU found");
        assert!(serde_json::to_value(&m).unwrap().get("rehearsal").is_some());
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
}
