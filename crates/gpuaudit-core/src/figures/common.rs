//! The pieces every group's result is built of: a result on one GPU, statistics of samples,
//! a check of the output, a value per GPU.

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuFlag {
    pub gpu: u32,
    pub enabled: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuValue {
    pub gpu: u32,
    pub value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
