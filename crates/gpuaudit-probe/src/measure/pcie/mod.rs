//! Host copies (pcie.bandwidth): pinned and pageable copies both ways over a size
//! sweep, each GPU alone and all at once; with `--full`, both directions at once, copies by
//! the SMs and the host latency.
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
