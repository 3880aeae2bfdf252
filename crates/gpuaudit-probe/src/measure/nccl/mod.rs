//! All-reduce (nccl.allreduce): NCCL in one process over all the GPUs measured, a size
//! sweep, the sum verified. Its communicators are the rehearsal's too.
//!
//! `run.rs` is the executor: what the measurement child runs from the plan's params (no
//! planning, no time limits: those are the plan's).

pub(super) mod run;

// The executor by the name the child's dispatch calls (`pcie::run(ctx, params)`); a
// function and a module of one name live side by side in Rust.
pub(super) use run::run;
