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
