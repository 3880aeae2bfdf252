//! Context creation (cuda.context-latency): cuInit, the primary context and a first
//! allocation, each sample in a fresh process (`gpuaudit __ctx-probe`, [`run`]), which the
//! parent starts itself: the one group that does not run in the measurement child.
//!
//! `run.rs` is the executor: what the `__ctx-probe` process runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

pub use run::ctx_probe_main;
