//! What `gpuaudit rehearse` measured: a training-shaped pipeline run end to end on this
//! machine (storage reads, CPU transform, host-to-device copies, a model-shaped sequence of
//! GEMMs, the gradient all-reduce), each stage alone and all of them together.
//!
//! The CPU stages run in gpuaudit itself; the GPU stages and the whole pipeline run in the
//! measurement child (group `rehearse`). Rates are samples per second of the whole machine:
//! with n GPUs a step is n batches.

use crate::figures::common::GpuValue;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// Why a normal audit has no rehearsal.
pub const NOT_REHEARSED: &str = "not rehearsed: run `gpuaudit rehearse`";
/// Why a rehearsal has no PyTorch runs, when none were asked for.
pub const TORCH_NOT_ASKED: &str = "not asked for (--torch)";

/// A stage of the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Reader threads reading samples from the data directory.
    Read,
    /// CPU workers turning samples into tensors (the stand-in for decoding and augmentation).
    Transform,
    /// Read and transform together, into staged batches: the CPU half of the pipeline.
    Loader,
    /// Staged batches copied to the GPU.
    H2d,
    /// The model-shaped GEMMs of one training step (forward and backward).
    GpuStep,
    /// The gradients summed across the GPUs (NCCL).
    AllReduce,
}

impl Stage {
    pub const ALL: [Stage; 6] = [
        Stage::Read,
        Stage::Transform,
        Stage::Loader,
        Stage::H2d,
        Stage::GpuStep,
        Stage::AllReduce,
    ];

    /// The stage's key in the report (`rehearse_read_samples_per_s`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::Transform => "transform",
            Stage::Loader => "loader",
            Stage::H2d => "h2d",
            Stage::GpuStep => "gpu_step",
            Stage::AllReduce => "all_reduce",
        }
    }

    /// In words, for tables and findings.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Read => "storage read",
            Stage::Transform => "CPU transform",
            Stage::Loader => "loader (read + transform)",
            Stage::H2d => "host-to-device copy",
            Stage::GpuStep => "GPU step",
            Stage::AllReduce => "gradient all-reduce",
        }
    }
}

/// What was rehearsed: the sizes of the pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearsalConfig {
    /// Samples per step on each GPU.
    pub batch: u32,
    /// Bytes read per sample (the encoded file: a JPEG of ImageNet is about 110 KB).
    pub sample_bytes: u64,
    /// Bytes per sample after the transform, copied to the GPU (a 3x224x224 float32 image
    /// is 588 KiB).
    pub tensor_bytes: u64,
    /// The model: `depth` layers of `width` x `width` weights applied to `tokens` columns
    /// per sample.
    pub width: u32,
    pub depth: u32,
    pub tokens: u32,
    pub readers: u32,
    pub workers: u32,
    /// Rounds of the transform's mixing function per input byte.
    pub transform_cost: u32,
    /// Batches staged in pinned (page-locked) memory; false: pageable (`--pageable`).
    pub pinned: bool,
    /// `--read-throttle-mbps`: the reads were held to this rate (simulated slow storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_throttle_mb_s: Option<f64>,
    /// `--steps`: the whole pipeline ran this many steps (else as many as its time allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
    /// The time budget of the whole rehearsal, seconds.
    pub seconds: u32,
    /// Logical CPUs this process may run on.
    pub cpus: u32,
}

impl RehearsalConfig {
    /// Weights of the model (one `width` x `width` matrix per layer).
    pub fn params(&self) -> u64 {
        self.depth as u64 * self.width as u64 * self.width as u64
    }

    /// Floating-point operations of one sample's training step: per layer one forward GEMM
    /// and two backward ones (data and weight gradients), each 2·width²·tokens.
    pub fn flops_per_sample(&self) -> f64 {
        6.0 * self.depth as f64 * (self.width as f64).powi(2) * self.tokens as f64
    }
}

/// Where the samples were read from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataSource {
    /// The directory read (the generated dataset's own directory where gpuaudit wrote it).
    pub path: String,
    /// gpuaudit wrote the files (in a temporary directory, removed afterwards).
    pub generated: bool,
    /// Reads may be served from the page cache (a generated dataset in $TMPDIR); false: each
    /// sample is dropped from the cache after it is read, so every epoch reads the storage,
    /// as a dataset larger than memory does.
    pub page_cache: bool,
    pub files: u64,
    pub bytes: u64,
}

/// One stage's throughput, run alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageFigure {
    pub samples_per_s: f64,
    /// Bytes the stage moved per second (read: file bytes; transform: input bytes; copies:
    /// tensor bytes; all-reduce: gradient bytes; GPU step: none).
    pub bytes_per_s: f64,
    pub samples: u64,
    pub seconds: f64,
    /// How it was measured, in a sentence.
    pub method: String,
    /// GPU step: the achieved TFLOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tflops: Option<f64>,
    /// All-reduce: the bus bandwidth (nccl-tests' busbw), GB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busbw_gbps: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageResult {
    pub stage: Stage,
    pub result: Reading<StageFigure>,
}

/// The whole pipeline, every stage at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PipelineFigure {
    pub samples_per_s: f64,
    pub steps: u32,
    pub seconds: f64,
    /// Fraction of the wall time the GPUs computed (CUDA events around each step's GPU work,
    /// summed, over the wall time; the mean of the GPUs).
    pub gpu_busy: f64,
    /// NVML's utilisation sampled during the pipeline, mean percent of the GPUs.
    pub nvml_utilization_pct: Reading<f64>,
    pub method: String,
}

/// What the measurement child measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RehearsalGpu {
    pub gpus: Vec<u32>,
    /// "bf16" (where every GPU has it) or "fp32".
    pub dtype: String,
    pub library: String,
    /// H2D, GPU step and all-reduce alone.
    pub stages: Vec<StageResult>,
    /// The GPU step alone at `reference_batch` (to tell a batch too small for the GPU).
    pub reference: Reading<StageFigure>,
    pub reference_batch: u32,
    /// Milliseconds of one step on each GPU, alone.
    #[serde(default)]
    pub step_ms: Vec<GpuValue>,
    pub pipeline: Reading<PipelineFigure>,
}

/// One model people quote, run for real through PyTorch (`--torch`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchRun {
    /// "resnet50" or "bert-base".
    pub model: String,
    pub batch: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u32>,
    pub gpu: u32,
    pub result: Reading<TorchFigure>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TorchFigure {
    pub samples_per_s: f64,
    pub step_ms: f64,
    pub steps: u32,
    /// "torchvision" / "transformers", or "plain torch.nn" where those are not installed.
    pub built_from: String,
    /// "bf16 autocast", "fp16 autocast", "fp32".
    pub precision: String,
    pub torch_version: String,
    /// NVML's utilisation sampled while the model ran, mean percent.
    pub nvml_utilization_pct: Reading<f64>,
}

/// Everything `gpuaudit rehearse` found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rehearsal {
    pub config: RehearsalConfig,
    pub data: DataSource,
    /// The CPU stages alone: read, transform, loader.
    pub stages: Vec<StageResult>,
    pub gpu: Reading<RehearsalGpu>,
    pub torch: Reading<Vec<TorchRun>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Rehearsal {
    /// A stage's figure, CPU or GPU, or why it is missing.
    pub fn stage(&self, s: Stage) -> Reading<&StageFigure> {
        if let Some(r) = self.stages.iter().find(|r| r.stage == s) {
            return r.result.as_ref();
        }
        match &self.gpu {
            Reading::Value(g) => g
                .stages
                .iter()
                .find(|r| r.stage == s)
                .map(|r| r.result.as_ref())
                .unwrap_or_else(|| Reading::unavailable("not measured")),
            Reading::Unavailable(why) => Reading::Unavailable(why.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn figure(sps: f64) -> StageFigure {
        StageFigure {
            samples_per_s: sps,
            bytes_per_s: sps * 1000.0,
            samples: 100,
            seconds: 1.0,
            method: "test".into(),
            tflops: None,
            busbw_gbps: None,
        }
    }

    #[test]
    fn flops_and_params_follow_the_shape() {
        let c = RehearsalConfig {
            batch: 256,
            sample_bytes: 112 << 10,
            tensor_bytes: 588 << 10,
            width: 2048,
            depth: 16,
            tokens: 128,
            readers: 4,
            workers: 14,
            transform_cost: 4,
            pinned: true,
            read_throttle_mb_s: None,
            steps: None,
            seconds: 45,
            cpus: 16,
        };
        assert_eq!(c.params(), 16 * 2048 * 2048);
        assert_eq!(c.flops_per_sample(), 6.0 * 16.0 * 2048.0 * 2048.0 * 128.0);
    }

    #[test]
    fn stages_are_found_where_they_were_measured() {
        let gpu = RehearsalGpu {
            gpus: vec![0],
            dtype: "bf16".into(),
            library: "cublasLt".into(),
            stages: vec![StageResult {
                stage: Stage::GpuStep,
                result: Reading::Value(figure(5.0)),
            }],
            reference: Reading::unavailable("x"),
            reference_batch: 256,
            step_ms: vec![],
            pipeline: Reading::unavailable("x"),
        };
        let mut r = Rehearsal {
            config: serde_json::from_str(
                r#"{"batch":1,"sample_bytes":1,"tensor_bytes":1,"width":1,"depth":1,"tokens":1,
                    "readers":1,"workers":1,"transform_cost":1,"pinned":true,"seconds":1,"cpus":1}"#,
            )
            .unwrap(),
            data: DataSource {
                path: "/d".into(),
                generated: true,
                page_cache: true,
                files: 1,
                bytes: 1,
            },
            stages: vec![StageResult {
                stage: Stage::Read,
                result: Reading::Value(figure(7.0)),
            }],
            gpu: Reading::Value(gpu),
            torch: Reading::unavailable("not asked"),
            notes: vec![],
        };
        assert_eq!(r.stage(Stage::Read).value().unwrap().samples_per_s, 7.0);
        assert_eq!(r.stage(Stage::GpuStep).value().unwrap().samples_per_s, 5.0);
        assert_eq!(r.stage(Stage::H2d).reason(), Some("not measured"));
        r.gpu = Reading::unavailable("no NVIDIA GPU found");
        assert_eq!(
            r.stage(Stage::GpuStep).reason(),
            Some("no NVIDIA GPU found")
        );
        let back: Rehearsal = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
