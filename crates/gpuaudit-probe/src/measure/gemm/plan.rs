//! The GEMMs' plan: the data types the GPUs and libraries allow, the size, the order.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, GpuOrder, Step};
use crate::measure::sizes::MIB;
use crate::measure::GpuGroup;
use gpuaudit_core::facts::GemmDtype;
use serde::{Deserialize, Serialize};

/// Operand layout of the GEMMs (column-major, as cuBLAS sees them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GemmLayout {
    /// NN (what PyTorch's `a @ b` on row-major tensors becomes), TN for fp8 (cuBLASLt's only
    /// fp8 layout).
    #[default]
    Auto,
    Nn,
    Tn,
}

impl GemmLayout {
    pub fn parse(s: &str) -> Option<GemmLayout> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(GemmLayout::Auto),
            "nn" => Some(GemmLayout::Nn),
            "tn" => Some(GemmLayout::Tn),
            _ => None,
        }
    }

    /// Whether A is transposed for this dtype.
    pub fn a_transposed(self, dtype: GemmDtype) -> bool {
        match self {
            GemmLayout::Tn => true,
            GemmLayout::Nn => dtype == GemmDtype::Fp8,
            GemmLayout::Auto => dtype == GemmDtype::Fp8,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GemmParams {
    pub dtypes: Vec<GemmDtype>,
    /// Square size (sized down in the child where memory is short).
    pub size: u64,
    /// Timed batches per dtype (the best is kept).
    pub batches: u32,
    /// Idle time before each dtype after the first, so that each starts on a GPU that has
    /// cooled a little (a hot GPU at its power limit clocks lower).
    #[serde(default)]
    pub cooldown_ms: u64,
    /// CPU-checked output elements per dtype.
    pub verify_samples: u32,
    pub workspace_bytes: u64,
    pub layout: GemmLayout,
    #[serde(default)]
    pub order: GpuOrder,
    pub budget: Budget,
}

impl GemmParams {
    /// GEMMs per timed batch: enough that one batch takes tens of milliseconds.
    pub fn repeats(&self, dtype: GemmDtype) -> u32 {
        let big = self.size >= 8192;
        match dtype {
            GemmDtype::Fp64 | GemmDtype::Fp32 if big => 5,
            GemmDtype::Fp64 | GemmDtype::Fp32 => 10,
            GemmDtype::Tf32 if big => 10,
            _ => 20,
        }
    }
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<GemmParams> {
    if let Some(why) = gate.closed(GpuGroup::Gemm) {
        return Step::Skip(why);
    }
    let (n, full, libs) = (gate.gpu_count(), gate.full(), gate.libs);
    let order = gate.order();
    let cc_min = gate.gpus.iter().filter_map(|t| t.compute_capability).min();
    let wanted: Vec<GemmDtype> = if full {
        GemmDtype::ALL.to_vec()
    } else {
        // One tensor-core figure: bf16 where the GPU has it, fp16 on Volta/Turing.
        match cc_min {
            Some(cc) if !GemmDtype::Bf16.supported_on(cc) => vec![GemmDtype::Fp16],
            _ => vec![GemmDtype::Bf16],
        }
    };
    // fp8 is kept when any GPU may have it (unknown capability included): the child reports
    // it unsupported per GPU.
    let cc_max = gate.gpus.iter().filter_map(|t| t.compute_capability).max();
    let dtypes: Vec<GemmDtype> = wanted
        .into_iter()
        .filter(|d| cc_max.is_none_or(|cc| d.supported_on(cc)))
        .filter(|d| match d {
            GemmDtype::Fp64 | GemmDtype::Fp32 => libs.cublas.is_none(),
            _ => libs.cublaslt.is_none(),
        })
        .collect();
    if dtypes.is_empty() {
        let why = [libs.cublaslt.as_deref(), libs.cublas.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
        return Step::Skip(if why.is_empty() {
            "no GEMM data type to measure on these GPUs".into()
        } else {
            why
        });
    }
    let size = gate
        .opts
        .gemm_size
        .unwrap_or(if full { 8192 } else { 4096 });
    let cooldown_ms = if full { 1000 } else { 0 };
    let work = if full { 350 } else { 60 };
    let d = dtypes.len() as u64;
    let rests = d.saturating_sub(1) * cooldown_ms;
    let est = match order {
        GpuOrder::OneByOne => n * (400 + work * d + rests),
        // A GPU's rest is the others' turn; only what that leaves short is slept.
        GpuOrder::Interleaved => {
            n * (400 + work * d)
                + d.saturating_sub(1) * cooldown_ms.saturating_sub(n.saturating_sub(1) * work)
        }
        GpuOrder::AllAtOnce => 400 + work * d + rests + 50 * n,
    };
    Step::Run(GemmParams {
        size,
        batches: if full { 3 } else { 2 },
        cooldown_ms,
        verify_samples: if full { 32 } else { 16 },
        workspace_bytes: 32 * MIB,
        layout: gate.opts.gemm_layout.unwrap_or_default(),
        order,
        budget: gate.budget(est),
        dtypes,
    })
}
