//! GEMM throughput (compute.gemm): cuBLASLt and cuBLAS per data type, random data,
//! outputs checked against an f64 CPU reference. Its GEMM and handles are the burn's and the
//! rehearsal's too (`run::{Gemm, Handles, ...}`).
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
