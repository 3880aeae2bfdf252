//! The all-reduce's plan: the message sizes over every GPU measured.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, Step};
use crate::measure::sizes::{sweep, GIB, MIB};
use crate::measure::GpuGroup;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NcclParams {
    pub sizes: Vec<u64>,
    pub warmup: u32,
    pub budget: Budget,
}

impl NcclParams {
    /// Timed iterations at a size (nccl-tests style: more for small messages).
    pub fn iterations(&self, size: u64) -> u32 {
        if size >= 1 << 30 {
            10
        } else if size >= 64 << 20 {
            20
        } else {
            50
        }
    }
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<NcclParams> {
    if let Some(why) = gate.closed(GpuGroup::Nccl) {
        return Step::Skip(why);
    }
    if let Some(count) = gate.fewer_than_two() {
        return Step::Skip(format!("{count} GPU measured: an all-reduce needs two"));
    }
    if let Some(why) = &gate.libs.nccl {
        return Step::Skip(why.clone());
    }
    let (n, full) = (gate.gpu_count(), gate.full());
    let sizes = if full {
        sweep(8, GIB, 4, &[MIB, GIB])
    } else {
        vec![8, MIB, 256 * MIB]
    };
    let est = 800 + 100 * n + sizes.len() as u64 * if full { 120 } else { 80 };
    Step::Run(NcclParams {
        sizes,
        warmup: 5,
        budget: gate.budget(est),
    })
}
