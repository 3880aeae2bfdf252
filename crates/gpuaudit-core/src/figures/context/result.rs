//! What the context group measured: cuInit, context and first allocation in fresh processes.

use crate::figures::common::{GpuFlag, Stats};
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

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
