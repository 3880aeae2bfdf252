//! The rehearsal's GPU stages (workload.pipeline, `gpuaudit rehearse`): staged
//! host-to-device copies, a model-shaped sequence of GEMMs, the gradient all-reduce, and the
//! whole pipeline fed by the loader (`crate::rehearse::loader`).
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
