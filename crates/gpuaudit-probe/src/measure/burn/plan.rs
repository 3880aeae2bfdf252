//! The burn's plan: its length and its GEMM (the GEMM group's, bf16 at 8192).

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, Step};
use crate::measure::gemm::GemmLayout;
use crate::measure::sizes::MIB;
use crate::measure::GpuGroup;
use gpuaudit_core::facts::GemmDtype;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BurnParams {
    pub seconds: u32,
    /// Preferred dtype; the child falls back to fp16, then fp32, on GPUs without it.
    pub dtype: GemmDtype,
    pub size: u64,
    pub verify_samples: u32,
    pub workspace_bytes: u64,
    pub layout: GemmLayout,
    pub budget: Budget,
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<BurnParams> {
    if let Some(why) = gate.closed(GpuGroup::Burn) {
        return Step::Skip(why);
    }
    if !gate.full() {
        return Step::Skip("quick audit: run with --full (or gpuaudit burn)".into());
    }
    if let Some(why) = &gate.libs.cublaslt {
        return Step::Skip(why.clone());
    }
    let seconds = gate.opts.burn_seconds.clamp(1, 24 * 3600);
    let est = seconds as u64 * 1000 + 1500;
    Step::Run(BurnParams {
        seconds,
        dtype: GemmDtype::Bf16,
        size: gate.opts.gemm_size.unwrap_or(8192),
        verify_samples: 16,
        workspace_bytes: 32 * MIB,
        layout: gate.opts.gemm_layout.unwrap_or_default(),
        budget: gate.budget_within(est, seconds as u64 + 90),
    })
}
