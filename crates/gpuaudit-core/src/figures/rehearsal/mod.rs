//! The training-pipeline rehearsal (workload.pipeline, `gpuaudit rehearse`): each stage's
//! rate alone, the whole pipeline's, how busy it kept the GPU, and the PyTorch runs.

pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::spec_of;
use crate::checks::workload::pipeline::{expected_samples_per_s, torch_model};
use crate::facts::{Facts, Measurement, Stage};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RehearsalFigure {
    /// One stage alone, samples per second (`rehearse_<stage>_samples_per_s`).
    Stage(Stage),
    /// The GPU step's GEMMs alone, TFLOPS (`dtype`).
    GpuStepTflops,
    /// The GPU step alone at the reference batch.
    GpuStepReference,
    /// Every stage together.
    Pipeline,
    /// CUDA events' busy share of the pipeline's wall time.
    GpuBusy,
    /// NVML's utilisation meanwhile.
    NvmlUtilization,
    /// A PyTorch training run on synthetic data.
    Torch(TorchModel),
}

/// The models the torch script runs (`checks::workload::pipeline::torch_model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TorchModel {
    Resnet50,
    BertBase,
}

impl TorchModel {
    pub const ALL: [TorchModel; 2] = [TorchModel::Resnet50, TorchModel::BertBase];

    /// The script's name of the model.
    pub fn key(self) -> &'static str {
        match self {
            TorchModel::Resnet50 => "resnet50",
            TorchModel::BertBase => "bert-base",
        }
    }
}

impl RehearsalFigure {
    pub const ALL: [RehearsalFigure; 13] = [
        RehearsalFigure::Stage(Stage::Read),
        RehearsalFigure::Stage(Stage::Transform),
        RehearsalFigure::Stage(Stage::Loader),
        RehearsalFigure::Stage(Stage::H2d),
        RehearsalFigure::Stage(Stage::GpuStep),
        RehearsalFigure::Stage(Stage::AllReduce),
        RehearsalFigure::GpuStepTflops,
        RehearsalFigure::GpuStepReference,
        RehearsalFigure::Pipeline,
        RehearsalFigure::GpuBusy,
        RehearsalFigure::NvmlUtilization,
        RehearsalFigure::Torch(TorchModel::Resnet50),
        RehearsalFigure::Torch(TorchModel::BertBase),
    ];

    pub fn spec(self) -> FigureSpec {
        let sps = Unit::SamplesPerSecond;
        let p = FigureSpec::perf;
        match self {
            RehearsalFigure::Stage(s) => match s {
                Stage::Read => p("rehearse_read_samples_per_s", "storage read", sps),
                Stage::Transform => p("rehearse_transform_samples_per_s", "CPU transform", sps),
                Stage::Loader => p(
                    "rehearse_loader_samples_per_s",
                    "loader (read + transform)",
                    sps,
                ),
                Stage::H2d => p("rehearse_h2d_samples_per_s", "host-to-device copy", sps),
                Stage::GpuStep => p("rehearse_gpu_step_samples_per_s", "GPU step", sps),
                Stage::AllReduce => p(
                    "rehearse_all_reduce_samples_per_s",
                    "gradient all-reduce",
                    sps,
                ),
            },
            RehearsalFigure::GpuStepTflops => p(
                "rehearse_gpu_step_tflops",
                "GPU step {dtype}, alone",
                Unit::Teraflops,
            ),
            RehearsalFigure::GpuStepReference => p(
                "rehearse_gpu_step_reference_samples_per_s",
                "GPU step at the reference batch",
                sps,
            ),
            RehearsalFigure::Pipeline => {
                p("rehearse_pipeline_samples_per_s", "whole pipeline", sps)
            }
            RehearsalFigure::GpuBusy => p(
                "rehearse_gpu_busy_pct",
                "GPU busy in the pipeline",
                Unit::Percent,
            ),
            RehearsalFigure::NvmlUtilization => p(
                "rehearse_nvml_utilization_pct",
                "NVML utilisation in the pipeline",
                Unit::Percent,
            ),
            RehearsalFigure::Torch(TorchModel::Resnet50) => p(
                "torch_resnet50_samples_per_s",
                "PyTorch ResNet-50 training",
                sps,
            ),
            RehearsalFigure::Torch(TorchModel::BertBase) => p(
                "torch_bert_base_samples_per_s",
                "PyTorch BERT-base fine-tuning",
                sps,
            ),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Some(r) = facts.measured.rehearsal.value() else {
        return Vec::new();
    };
    let f = Figure::Rehearsal;
    let mut out = Vec::new();
    for s in Stage::ALL {
        if let Some(x) = r.stage(s).value() {
            out.push(measurement(
                f(RehearsalFigure::Stage(s)),
                x.samples_per_s,
                None,
                format!("{}, alone: {}", s.label(), x.method),
            ));
        }
    }
    if let Some(g) = r.gpu.value() {
        if let Some(x) = r.stage(Stage::GpuStep).value() {
            if let Some(t) = x.tflops {
                out.push(Measurement {
                    dtype: Some(g.dtype.clone()),
                    ..measurement(
                        f(RehearsalFigure::GpuStepTflops),
                        t,
                        None,
                        format!("the model's GEMMs at batch {}, alone", r.config.batch),
                    )
                });
            }
        }
        if let Some(x) = g.reference.value() {
            out.push(measurement(
                f(RehearsalFigure::GpuStepReference),
                x.samples_per_s,
                None,
                format!(
                    "GPU step alone at batch {}: {}",
                    g.reference_batch, x.method
                ),
            ));
        }
        if let Some(p) = g.pipeline.value() {
            out.push(measurement(
                f(RehearsalFigure::Pipeline),
                p.samples_per_s,
                None,
                p.method.clone(),
            ));
            out.push(measurement(
                f(RehearsalFigure::GpuBusy),
                p.gpu_busy * 100.0,
                None,
                "CUDA events around each step's GPU work, summed, over the pipeline's wall \
                 time (mean of the GPUs)",
            ));
            if let Some(u) = p.nvml_utilization_pct.value() {
                out.push(measurement(
                    f(RehearsalFigure::NvmlUtilization),
                    *u,
                    None,
                    "NVML utilisation sampled every 200 ms during the pipeline, mean of the GPUs",
                ));
            }
        }
    }
    if let Some(runs) = r.torch.value() {
        for t in runs {
            let Some(model) = TorchModel::ALL.into_iter().find(|m| m.key() == t.model) else {
                continue;
            };
            let (Some(x), Some((_, reference, flops))) =
                (t.result.value(), torch_model(&t.model, t.sequence))
            else {
                continue;
            };
            let exp =
                spec_of(facts, t.gpu).and_then(|s| expected_samples_per_s(&reference, flops, s));
            out.push(Measurement {
                gpu: Some(t.gpu),
                ..measurement(
                    f(RehearsalFigure::Torch(model)),
                    x.samples_per_s,
                    exp.as_ref().map(|e| e.0),
                    format!(
                        "PyTorch {} training steps on synthetic data, batch {}, {}, {}; \
                         expected: {}",
                        x.torch_version,
                        t.batch,
                        x.precision,
                        x.built_from,
                        exp.map(|e| e.1)
                            .unwrap_or_else(|| "no datasheet figure".into())
                    ),
                )
            });
        }
    }
    out
}
