//! What the pcie group measured: host <-> device copies, their link under load, latency.

use crate::figures::common::{GpuValue, OnGpu, Verify};
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLinkState {
    pub gen: u32,
    pub width: u32,
    /// NVML samples taken while the copies ran.
    pub samples: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_host_readings_default_to_not_read_in_old_reports() {
        // Reports written before the bidirectional, SM and latency readings still parse.
        let old = r#"{"points":[],"verify":[]}"#;
        let g: PcieGpu = serde_json::from_str(old).unwrap();
        assert!(g.bidirectional.value().is_none());
        assert!(g.sm_copy.value().is_none());
        assert!(g.latency.value().is_none());
    }
}
