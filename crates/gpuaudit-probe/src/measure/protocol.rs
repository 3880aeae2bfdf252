//! What the measurement child writes on stdout: one JSON object per line.
//!
//! Anything else on stdout (a library printing, `NCCL_DEBUG=INFO`) is not an error: the
//! parent keeps the last such lines for the finding if the child dies.

use super::plan::Plan;
use crate::measure::GpuGroup;
use gpuaudit_core::facts::GemmResult;
use gpuaudit_core::facts::{
    AllReduce, Burn, CudaDevice, MemoryBandwidth, OnGpu, P2pMatrix, PcieBandwidth, RehearsalGpu,
    SkippedGpu,
};
use gpuaudit_core::Reading;
use serde::{Deserialize, Serialize};

/// What the parent sends on the child's stdin.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChildRequest {
    pub plan: Plan,
    /// The groups this child runs, in order.
    pub groups: Vec<GpuGroup>,
}

/// A group's result, typed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "group", content = "result", rename_all = "snake_case")]
pub enum GroupResult {
    Pcie(Reading<PcieBandwidth>),
    Memory(Reading<Vec<OnGpu<MemoryBandwidth>>>),
    Gemm(Reading<Vec<OnGpu<Vec<GemmResult>>>>),
    P2p(Reading<P2pMatrix>),
    Nccl(Reading<AllReduce>),
    Burn(Reading<Burn>),
    /// Boxed: far larger than the other results.
    Rehearse(Box<Reading<RehearsalGpu>>),
}

/// The rehearse group's progress messages during the whole pipeline start with this: the
/// NVML samples taken then are the pipeline's utilisation.
pub const PIPELINE_PROGRESS: &str = "whole pipeline";

impl GroupResult {
    pub fn group(&self) -> GpuGroup {
        match self {
            GroupResult::Pcie(_) => GpuGroup::Pcie,
            GroupResult::Memory(_) => GpuGroup::Memory,
            GroupResult::Gemm(_) => GpuGroup::Gemm,
            GroupResult::P2p(_) => GpuGroup::P2p,
            GroupResult::Nccl(_) => GpuGroup::Nccl,
            GroupResult::Burn(_) => GpuGroup::Burn,
            GroupResult::Rehearse(_) => GpuGroup::Rehearse,
        }
    }

    /// The same group, not measured, with the reason.
    pub fn unavailable(group: GpuGroup, reason: &str) -> Option<GroupResult> {
        let r = reason.to_string();
        Some(match group {
            GpuGroup::Context => return None,
            GpuGroup::Pcie => GroupResult::Pcie(Reading::Unavailable(r)),
            GpuGroup::Memory => GroupResult::Memory(Reading::Unavailable(r)),
            GpuGroup::Gemm => GroupResult::Gemm(Reading::Unavailable(r)),
            GpuGroup::P2p => GroupResult::P2p(Reading::Unavailable(r)),
            GpuGroup::Nccl => GroupResult::Nccl(Reading::Unavailable(r)),
            GpuGroup::Burn => GroupResult::Burn(Reading::Unavailable(r)),
            GpuGroup::Rehearse => GroupResult::Rehearse(Box::new(Reading::Unavailable(r))),
        })
    }
}

/// One line of the child's stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ChildMsg {
    /// The child started and initialised CUDA.
    Hello {
        pid: u32,
        /// cuDriverGetVersion (13000 = CUDA 13.0).
        driver_version: Option<u32>,
    },
    /// The GPUs as CUDA sees them, and those it could not use.
    Devices {
        devices: Vec<CudaDevice>,
        unavailable: Vec<SkippedGpu>,
    },
    /// A group starts (its time limit starts now).
    Start { group: GpuGroup },
    /// Within the running group, `fraction` (0..1) is done.
    Progress {
        group: GpuGroup,
        fraction: f64,
        message: String,
    },
    /// A group finished.
    Result(GroupResult),
    /// A remark for the log (stderr with --verbose).
    Log { message: String },
    /// Everything asked for ran.
    Done,
}

impl ChildMsg {
    pub fn to_line(&self) -> String {
        // Serialising these types cannot fail (no maps with non-string keys); fall back to a
        // log line that the parent ignores rather than panic in the child.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!(r#"{{"type":"log","message":"unserialisable: {e}"}}"#))
    }

    /// A line of the child's stdout, or `None` when it is not one of ours.
    pub fn parse(line: &str) -> Option<ChildMsg> {
        let t = line.trim();
        if !t.starts_with('{') {
            return None;
        }
        serde_json::from_str(t).ok()
    }
}

/// One context-creation sample, printed by `__ctx-probe` as one JSON line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CtxSample {
    pub init_ms: f64,
    pub context_ms: f64,
    pub alloc_ms: f64,
    pub total_ms: f64,
    /// cuDeviceGetCount after cuInit.
    pub devices: u32,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CtxProbeLine {
    CtxSample(CtxSample),
    CtxError { stage: String, error: String },
}

impl CtxProbeLine {
    pub fn parse(out: &str) -> Option<CtxProbeLine> {
        out.lines()
            .rev()
            .find_map(|l| serde_json::from_str(l.trim()).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::facts::Verify;

    #[test]
    fn messages_round_trip() {
        let msgs = vec![
            ChildMsg::Hello {
                pid: 7,
                driver_version: Some(13000),
            },
            ChildMsg::Start {
                group: GpuGroup::Gemm,
            },
            ChildMsg::Progress {
                group: GpuGroup::Gemm,
                fraction: 0.5,
                message: "bf16 on GPU 0".into(),
            },
            ChildMsg::Result(GroupResult::Nccl(Reading::unavailable(
                "ncclCommInitAll: x",
            ))),
            ChildMsg::Result(GroupResult::Rehearse(Box::new(Reading::Value(
                gpuaudit_core::facts::RehearsalGpu {
                    gpus: vec![0],
                    dtype: "bf16".into(),
                    library: "cublasLt 130000".into(),
                    stages: vec![],
                    reference: Reading::unavailable("the batch is 256"),
                    reference_batch: 256,
                    step_ms: vec![],
                    pipeline: Reading::unavailable("the loader failed: x"),
                },
            )))),
            ChildMsg::Result(GroupResult::Pcie(Reading::Value(PcieBandwidth {
                per_gpu: vec![OnGpu::new(
                    0,
                    Reading::Value(gpuaudit_core::facts::PcieGpu {
                        points: vec![],
                        link_under_load: Reading::unavailable("not sampled"),
                        verify: vec![],
                        bidirectional: Reading::Value(gpuaudit_core::facts::BidirectionalCopy {
                            size_bytes: 256 << 20,
                            h2d_gbps: 52.5,
                            d2h_gbps: 50.25,
                            total_gbps: 102.75,
                        }),
                        sm_copy: Reading::Value(gpuaudit_core::facts::SmHostCopy {
                            size_bytes: 256 << 20,
                            h2d_gbps: 50.5,
                            d2h_gbps: 48.0,
                            kernel: "copy 528x512".into(),
                        }),
                        latency: Reading::unavailable(
                            "the latency chase ended on the wrong element",
                        ),
                    }),
                )],
                all_at_once: Reading::unavailable("one GPU: nothing to run at once"),
            }))),
            ChildMsg::Result(GroupResult::Memory(Reading::Value(vec![OnGpu::new(
                0,
                Reading::Value(MemoryBandwidth {
                    buffer_bytes: 4 << 30,
                    copy_gbps: Some(4290.0),
                    memcpy_gbps: None,
                    read_gbps: Some(4470.0),
                    write_gbps: None,
                    triad_gbps: Some(4386.0),
                    add_gbps: Some(4380.0),
                    sweep: vec![gpuaudit_core::facts::KernelPoint {
                        kernel: "add_flat".into(),
                        blocks: 1 << 20,
                        threads: 256,
                        gbps: 4380.0,
                        verified: true,
                    }],
                    verify: vec![],
                    note: None,
                }),
            )]))),
            ChildMsg::Result(GroupResult::P2p(Reading::Value(P2pMatrix {
                gpus: vec![0, 1],
                size_bytes: 1 << 30,
                pairs: vec![],
                bidirectional: vec![],
                patterns: vec![gpuaudit_core::facts::P2pPattern {
                    kind: gpuaudit_core::facts::PatternKind::AllToOne,
                    gpu: 1,
                    peers: vec![0],
                    size_bytes: 1 << 30,
                    gbps: Reading::unavailable(
                        "copied data differs: GPU 0 -> GPU 1: 3 words differ",
                    ),
                    verify: Some(Verify {
                        what: "all_to_one GPU 1 1 GiB".into(),
                        ok: false,
                        detail: Some("GPU 0 -> GPU 1: 3 words differ".into()),
                    }),
                }],
            }))),
            ChildMsg::Done,
        ];
        for m in msgs {
            let line = m.to_line();
            assert!(!line.contains('\n'));
            assert_eq!(ChildMsg::parse(&line), Some(m));
        }
    }

    #[test]
    fn a_pattern_line_has_its_kind_in_snake_case() {
        let p = gpuaudit_core::facts::P2pPattern {
            kind: gpuaudit_core::facts::PatternKind::OneToAll,
            gpu: 0,
            peers: vec![1, 2],
            size_bytes: 1 << 30,
            gbps: Reading::Value(780.5),
            verify: None,
        };
        let j = serde_json::to_string(&p).unwrap();
        assert!(j.contains(r#""kind":"one_to_all""#), "{j}");
        assert!(j.contains(r#""gbps":780.5"#), "{j}");
        // A matrix of an older child (no patterns) still parses.
        let old = r#"{"gpus":[0,1],"size_bytes":1,"pairs":[]}"#;
        let m: P2pMatrix = serde_json::from_str(old).unwrap();
        assert!(m.patterns.is_empty() && m.bidirectional.is_empty());
    }

    #[test]
    fn foreign_lines_are_not_messages() {
        assert_eq!(ChildMsg::parse("NCCL INFO Bootstrap : Using eth0"), None);
        assert_eq!(ChildMsg::parse("{\"not\":\"ours\"}"), None);
        assert_eq!(ChildMsg::parse(""), None);
    }

    #[test]
    fn result_line_shape() {
        let line = ChildMsg::Result(GroupResult::P2p(Reading::unavailable("one GPU"))).to_line();
        assert_eq!(
            line,
            r#"{"type":"result","group":"p2p","result":{"unavailable":"one GPU"}}"#
        );
    }

    #[test]
    fn ctx_probe_lines() {
        let ok = CtxProbeLine::CtxSample(CtxSample {
            init_ms: 320.0,
            context_ms: 90.0,
            alloc_ms: 1.5,
            total_ms: 412.0,
            devices: 2,
        });
        let text = format!("noise\n{}\n", serde_json::to_string(&ok).unwrap());
        assert_eq!(CtxProbeLine::parse(&text), Some(ok));
        let err = r#"{"type":"ctx_error","stage":"cuInit","error":"CUDA_ERROR_NO_DEVICE"}"#;
        assert!(matches!(
            CtxProbeLine::parse(err),
            Some(CtxProbeLine::CtxError { .. })
        ));
    }
}
