//! GPU-to-GPU copies (p2p.bandwidth): every ordered pair one way and both ways at once,
//! the 4-byte latency, and with `--full` the one-to-all and all-to-one patterns.
//!
//! `plan.rs` is the group's plan: its params, what it schedules and its time estimate, a pure
//! function of the gate (`measure::gate`), which `measure::plan::plan` calls in catalog order.
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

mod plan;
pub(super) mod run;

pub use plan::{ordered_pairs, p2p_copies, pattern_copies, unordered_pairs, P2pParams};
// The plan and the executor by the names the composition and the child's dispatch call
// (`p2p::plan(&gate)`, `p2p::run(ctx, params)`): a function and a module of one name live
// side by side in Rust.
pub(super) use plan::plan;
pub(super) use run::run;
