//! `nvidia-smi -q -x`: the driver's view of every GPU, as XML.
//!
//! Tag names differ between driver generations (`clocks_throttle_reasons` before R535,
//! `clocks_event_reasons` after; power under `power_readings` or `gpu_power_readings`); both
//! are accepted. "N/A" and missing elements become `Reading::Unavailable` with the reason.

use super::ParseError;
use crate::facts::GpuFacts;

/// What one `nvidia-smi -q -x` run says.
#[derive(Clone, Debug)]
pub struct NvsmiLog {
    pub driver_version: Option<String>,
    /// `<cuda_version>`: the newest CUDA the driver supports ("13.0").
    pub cuda_version: Option<String>,
    /// In document order; `index` is the position (nvidia-smi lists GPUs in NVML order).
    pub gpus: Vec<GpuFacts>,
}

pub fn parse(_xml: &str) -> Result<NvsmiLog, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}
