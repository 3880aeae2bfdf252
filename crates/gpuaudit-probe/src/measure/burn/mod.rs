//! Sustained load (stability.burn): bf16 GEMMs (the GEMM group's) on every GPU at once,
//! TFLOPS per window, output checksums compared across GPUs; the parent samples NVML.
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
