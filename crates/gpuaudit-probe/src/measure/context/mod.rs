//! Context creation (cuda.context-latency): cuInit, the primary context and a first
//! allocation, each sample in a fresh process (`gpuaudit __ctx-probe`, [`run`]), which the
//! parent starts itself: the one group that does not run in the measurement child.
//!
//! `plan.rs` is the group's plan: its params, what it schedules and its time estimate, a pure
//! function of the gate (`measure::gate`), which `measure::plan::plan` calls in catalog order.
//! `run.rs` is the executor: what each `__ctx-probe` process runs (the parent starts the
//! plan's `runs` of them, each under its share of the group's limit).

mod plan;
mod run;

pub use plan::ContextParams;
// The plan by the name the composition calls (`context::plan(&gate)`): a function and a
// module of one name live side by side in Rust.
pub(super) use plan::plan;

pub use run::ctx_probe_main;
