//! What the gemm group measured: one GEMM per data type, verified against a CPU reference.

use crate::facts::ComputeCapability;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GemmDtype {
    Fp64,
    Fp32,
    Tf32,
    Fp16,
    Bf16,
    Fp8,
}

impl GemmDtype {
    /// In the order they are measured: the types training and inference use most come
    /// first, while the GPU is cool (each GEMM heats it, and a hot GPU at its power limit
    /// clocks lower), as a user timing one GEMM by hand would see them.
    pub const ALL: [GemmDtype; 6] = [
        GemmDtype::Bf16,
        GemmDtype::Fp16,
        GemmDtype::Fp8,
        GemmDtype::Tf32,
        GemmDtype::Fp32,
        GemmDtype::Fp64,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GemmDtype::Fp64 => "fp64",
            GemmDtype::Fp32 => "fp32",
            GemmDtype::Tf32 => "tf32",
            GemmDtype::Fp16 => "fp16",
            GemmDtype::Bf16 => "bf16",
            GemmDtype::Fp8 => "fp8",
        }
    }

    pub fn parse(s: &str) -> Option<GemmDtype> {
        GemmDtype::ALL
            .into_iter()
            .find(|d| d.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// Whether a GPU of this compute capability has the hardware for it (tensor cores for
    /// the reduced types).
    pub fn supported_on(self, cc: ComputeCapability) -> bool {
        let v = cc.major * 10 + cc.minor;
        match self {
            GemmDtype::Fp64 | GemmDtype::Fp32 => true,
            GemmDtype::Fp16 => v >= 70,
            GemmDtype::Tf32 | GemmDtype::Bf16 => v >= 80,
            GemmDtype::Fp8 => v >= 89,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmResult {
    pub dtype: GemmDtype,
    pub result: Reading<GemmPoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmPoint {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Median over the timed batches.
    pub tflops: f64,
    pub ms_per_gemm: f64,
    /// GEMMs per timed batch.
    pub repeats: u32,
    /// TFLOPS of each timed batch.
    #[serde(default)]
    pub batches: Vec<f64>,
    /// "cublasLt 130001" / "cublas 130001".
    pub library: String,
    /// "TN": A transposed, B not (column-major), as cuBLASLt wants it for fp8.
    pub layout: String,
    /// Largest error of the sampled outputs, relative to the L2 norm of the products summed.
    pub max_error: f64,
    pub tolerance: f64,
    pub samples: u32,
    pub verified: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dtype_support_by_compute_capability() {
        let cc = |major, minor| ComputeCapability { major, minor };
        assert!(GemmDtype::Fp8.supported_on(cc(8, 9)));
        assert!(GemmDtype::Fp8.supported_on(cc(9, 0)));
        assert!(!GemmDtype::Fp8.supported_on(cc(8, 6)));
        assert!(!GemmDtype::Bf16.supported_on(cc(7, 5)));
        assert!(GemmDtype::Fp16.supported_on(cc(7, 0)));
        assert_eq!(GemmDtype::parse("BF16"), Some(GemmDtype::Bf16));
    }
}
