//! Context creation's plan: how many fresh processes, fitted to a time budget.

use crate::measure::budget::{cuinit_ms, Budget};
use crate::measure::gate::{Gate, Step};
use crate::measure::GpuGroup;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextParams {
    pub runs: u32,
    pub budget: Budget,
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<ContextParams> {
    if let Some(why) = gate.closed(GpuGroup::Context) {
        return Step::Skip(why);
    }
    // Each probe is a fresh process that pays cuInit over every GPU of the machine (plus
    // ~110 ms for the context and first allocation, ~50 ms to start): 0.5 s a probe on 2
    // GPUs, ~1.8 s on 8. The runs are fitted to a time budget (quick 2.5 s, full 10 s), never
    // fewer than a median needs.
    let per_run = cuinit_ms(gate.targets.len() as u64) + 160;
    let (most, least, budget_ms) = if gate.full() {
        (10, 5, 10_000)
    } else {
        (5, 3, 2_500)
    };
    let fitted = (budget_ms / per_run).clamp(least, most) as u32;
    let runs = gate.opts.ctx_runs.unwrap_or(fitted).clamp(1, 100);
    Step::Run(ContextParams {
        runs,
        budget: gate.budget(runs as u64 * per_run),
    })
}
