//! Compute throughput.

pub mod gemm;
