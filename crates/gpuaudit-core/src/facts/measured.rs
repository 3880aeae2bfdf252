//! What was measured on the GPUs. Filled by the measurement child process (live audit only).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MeasuredFacts {
    /// Why nothing was measured ("snapshot audit: nothing is measured", "--facts-only"), or
    /// `None` when measurements ran.
    pub not_run: Option<String>,
}

impl MeasuredFacts {
    pub fn not_run(reason: &str) -> Self {
        MeasuredFacts {
            not_run: Some(reason.to_string()),
        }
    }
}

/// One measured figure, as the report lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    pub name: String,
    pub gpu: Option<u32>,
    pub peer: Option<u32>,
    pub value: f64,
    pub unit: String,
    /// What the datasheet (or the link type) leads to expect, where known.
    pub expected: Option<f64>,
    /// value / expected.
    pub ratio: Option<f64>,
    pub method: String,
}
