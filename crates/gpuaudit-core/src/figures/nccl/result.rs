//! What the nccl group measured: NCCL all-reduce over every GPU.

use crate::figures::common::Verify;
use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busbw_follows_nccl_tests() {
        assert_eq!(allreduce_busbw(100.0, 2), 100.0);
        assert_eq!(allreduce_busbw(100.0, 8), 175.0);
        assert_eq!(allreduce_busbw(100.0, 1), 0.0);
    }
}
