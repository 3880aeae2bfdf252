//! What net.loopback measured: TCP round trips over the loopback interface.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoopbackRtt {
    pub round_trips: u32,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub method: String,
}
