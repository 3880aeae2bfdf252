//! What the burn measured: sustained GEMMs per GPU with NVML telemetry.

use crate::facts::ThrottleReason;
use crate::figures::common::{OnGpu, Stats};
use crate::figures::gemm::result::GemmDtype;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

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
