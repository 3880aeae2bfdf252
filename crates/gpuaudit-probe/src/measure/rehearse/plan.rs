//! The rehearsal's plan: its request, the libraries for its model, its all-reduce stage.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, Step};
use crate::measure::sizes::MIB;
use crate::measure::GpuGroup;
use crate::rehearse::loader::LoaderConfig;
use gpuaudit_core::facts::{RehearsalConfig, NOT_REHEARSED};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What `gpuaudit rehearse` asks of the measurement child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearseRequest {
    pub config: RehearsalConfig,
    pub loader: LoaderConfig,
    /// The dataset's files, which the child's pipeline reads.
    pub files: Vec<PathBuf>,
    /// Milliseconds for each GPU stage alone.
    pub stage_ms: u64,
    /// Milliseconds for the whole pipeline (unless `config.steps` says how many steps).
    pub pipeline_ms: u64,
}

/// The reference batch of the rehearsal: the GPU step also runs at this batch where the
/// rehearsed batch is smaller, to tell a batch too small for the GPU (256 is the batch per
/// GPU of NVIDIA's ResNet-50 recipes, large enough to fill an H100's SMs with this model).
pub const REHEARSE_REFERENCE_BATCH: u32 = 256;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearseParams {
    pub request: RehearseRequest,
    /// cuBLASLt was found (bf16 on GPUs that have it).
    pub lt: bool,
    /// cuBLAS was found (fp32 elsewhere).
    pub blas: bool,
    /// Why the all-reduce does not run (one GPU, no NCCL); `None`: it runs.
    pub allreduce_skip: Option<String>,
    /// The GPU step at this batch too, where the rehearsed one is smaller.
    pub reference_batch: Option<u32>,
    pub workspace_bytes: u64,
    pub budget: Budget,
}

impl RehearseParams {
    /// Expected time of the child's work: set-up (allocations, fills, cuBLASLt, NCCL), each
    /// stage alone, the reference step, the pipeline.
    pub fn estimate_ms(req: &RehearseRequest, gpus: u64, reference: bool, allreduce: bool) -> u64 {
        let stages = 2 + reference as u64 + allreduce as u64;
        1000 + 300 * gpus + stages * req.stage_ms + req.pipeline_ms
    }
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<RehearseParams> {
    if let Some(why) = gate.closed(GpuGroup::Rehearse) {
        return Step::Skip(why);
    }
    let libs = gate.libs;
    let Some(req) = &gate.opts.rehearse else {
        return Step::Skip(NOT_REHEARSED.into());
    };
    if libs.cublaslt.is_some() && libs.cublas.is_some() {
        return Step::Skip(format!(
            "no GEMM library for the model: {}; {}",
            libs.cublaslt.as_deref().unwrap_or(""),
            libs.cublas.as_deref().unwrap_or("")
        ));
    }
    let n = gate.gpu_count();
    let allreduce_skip = match gate.fewer_than_two() {
        Some(count) => Some(format!("{count} GPU rehearsed: no gradients to all-reduce")),
        None => libs.nccl.clone(),
    };
    let reference_batch =
        (req.config.batch < REHEARSE_REFERENCE_BATCH).then_some(REHEARSE_REFERENCE_BATCH);
    let est =
        RehearseParams::estimate_ms(req, n, reference_batch.is_some(), allreduce_skip.is_none());
    Step::Run(RehearseParams {
        request: req.clone(),
        lt: libs.cublaslt.is_none(),
        blas: libs.cublas.is_none(),
        allreduce_skip,
        reference_batch,
        workspace_bytes: 32 * MIB,
        budget: gate.budget(est),
    })
}
