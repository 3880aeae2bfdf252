//! GPU-to-GPU copies (p2p.bandwidth): every ordered pair one way and both ways at once,
//! the 4-byte latency, and with `--full` the one-to-all and all-to-one patterns.
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
