//! The rehearsal's GPU stages (workload.pipeline, `gpuaudit rehearse`): staged
//! host-to-device copies, a model-shaped sequence of GEMMs, the gradient all-reduce, and the
//! whole pipeline fed by the loader (`crate::rehearse::loader`).
//!
//! `plan.rs` is the group's plan: its params, what it schedules and its time estimate, a pure
//! function of the gate (`measure::gate`), which `measure::plan::plan` calls in catalog order.
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

mod plan;
pub(super) mod run;

pub use plan::{RehearseParams, RehearseRequest, REHEARSE_REFERENCE_BATCH};
// The plan and the executor by the names the composition and the child's dispatch call
// (`rehearse::plan(&gate)`, `rehearse::run(ctx, params)`): a function and a module of one name live
// side by side in Rust.
pub(super) use plan::plan;
pub(super) use run::run;
