//! workload.pipeline: which stage of a training-shaped pipeline starves the GPU
//! (`gpuaudit rehearse`).
//!
//! The decision is [`diagnose`], a pure function of the rehearsal's stage figures (and of the
//! mount table, for where the data lives): the pipeline can go no faster than its slowest
//! stage, so the stage with the lowest rate alone is named, with the figures that prove it
//! and the fix that follows.

use crate::checks::common::storage_of;
use crate::checks::judge::spec_of;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, Rehearsal, Stage, StageFigure, TorchFigure, TorchRun, TORCH_NOT_ASKED};
use crate::finding::{Finding, Status};
use crate::parse::host::mounts::{parse_size, FsClass};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};
use crate::units::{bytes, figure};

const ID: &str = "workload.pipeline";

/// The host side keeps the GPU busy when every host stage runs at least this fraction of the
/// GPU's rate: a 10% shortfall is within what a short rehearsal measures and what a loader's
/// prefetch absorbs.
pub const GPU_BOUND_FRACTION: f64 = 0.9;
/// Below this busy fraction the GPU idles more than it works: half of what is paid for.
pub const STARVED_FAIL_BUSY: f64 = 0.5;
/// Reading and transforming together below this fraction of the slower of the two alone: the
/// threads compete for the CPUs (or memory bandwidth) instead of the slower stage capping.
pub const CONTENTION_FRACTION: f64 = 0.8;
/// The gradient all-reduce taking more than this share of each step's GPU time is the
/// bottleneck of a GPU-bound pipeline (without overlap with the backward pass, a third of
/// the step spent waiting for the other GPUs is a third of the machine idle).
pub const ALLREDUCE_SHARE_MAX: f64 = 1.0 / 3.0;
/// A GPU step below this fraction of the per-sample rate at the reference batch: the batch
/// is too small for the GPU (launch overhead and idle SMs, not arithmetic, set the pace).
pub const SMALL_BATCH_EFFICIENCY: f64 = 0.5;
/// The whole pipeline below this fraction of its slowest stage alone: the stages slow each
/// other down (shared CPUs, memory bandwidth, PCIe), which the message says.
pub const PIPELINE_SHORTFALL: f64 = 0.8;
/// /dev/shm below this (host.shm's "small" limit) is named in the fix for a CPU-bound loader:
/// DataLoader worker processes hand their batches over through it.
pub const SHM_SMALL_BYTES: u64 = crate::checks::host::shm::SMALL_BYTES;

pub const CHECK: Check = Check {
    id: ID,
    title: "Rehearsed training pipeline: which stage starves the GPU (gpuaudit rehearse)",
    looks_at: "a training-shaped pipeline run end to end (`gpuaudit rehearse`): storage reads, \
               CPU transform, host-to-device copies, model GEMMs, gradient all-reduce, each \
               alone and together; the stage that caps the GPU",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "`gpuaudit rehearse` runs a pipeline shaped like a training loop: reader threads \
               read samples from the data directory (--data-dir, or a dataset it generates), \
               CPU workers transform them (a per-byte cost standing in for decoding and \
               augmentation), batches are staged in pinned memory (pageable with --pageable) \
               and copied to the GPU asynchronously, the GPU runs a model-shaped sequence of \
               GEMMs (forward and backward, bf16 where the GPU has it), and with several GPUs \
               the gradients are all-reduced with NCCL. Each stage runs alone, then all \
               together; the GPU busy fraction comes from CUDA events around the GPU work \
               (and NVML's utilisation sampled meanwhile). The check names the stage with the \
               lowest rate: the pipeline can go no faster. With the GPU the slowest, it also \
               checks that the batch is large enough to use the GPU and that the all-reduce \
               does not dominate the step. In a normal audit it is skip until rehearse runs.",
        why: "\"Why is my GPU at 20%?\" is the question the datasheet and the micro-benchmarks \
              do not answer: an H100 fed from NFS at 400 MB/s, by four CPU workers, through \
              pageable copies or with a batch of 2 works a fraction of the time, and every \
              idle second is paid for.",
        verify: "nvidia-smi dmon -s u          # GPU utilisation while your job runs\n\
                 py-spy dump --pid PID         # where the training process waits\n\
                 ps -o pid,nlwp,pcpu,cmd --ppid PID   # its DataLoader workers and their CPU use\n\
                 fio --name=r --directory=DATA --rw=read --bs=1M --size=2G --direct=1   # storage alone",
        fix: "Storage: cache the dataset on local NVMe, read with more threads, pack small \
              files into shards. CPU transform: more DataLoader workers (num_workers), decode \
              on the GPU (DALI), give a container a bigger /dev/shm (--shm-size or \
              --ipc=host). Copies: pinned memory (pin_memory=True), non_blocking copies. \
              Small batch: a larger batch per GPU or CUDA graphs. All-reduce: overlap with \
              the backward pass (DDP buckets), a faster link (nvlink.status, \
              nccl.allreduce).",
    },
    profiles: &[],
    run: run_pipeline,
};

/// What caps the pipeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bottleneck {
    /// Storage reads are the slowest stage.
    Storage,
    /// The CPU transform is.
    Transform,
    /// Read and transform together are well below either alone: the threads compete.
    Contention,
    /// Host-to-device copies are.
    HostCopy,
    /// The GPUs are the slowest, and the all-reduce takes much of each step.
    AllReduce,
    /// The GPU is the slowest, and the batch is too small to use it.
    SmallBatch,
    /// The GPU is the slowest and works efficiently: as it should be.
    Gpu,
}

impl Bottleneck {
    pub fn key(self) -> &'static str {
        match self {
            Bottleneck::Storage => "storage",
            Bottleneck::Transform => "transform",
            Bottleneck::Contention => "cpu-contention",
            Bottleneck::HostCopy => "host-copy",
            Bottleneck::AllReduce => "all-reduce",
            Bottleneck::SmallBatch => "small-batch",
            Bottleneck::Gpu => "gpu",
        }
    }
}

/// The decision: what caps the pipeline, how busy that leaves the GPU, and what to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    pub bottleneck: Bottleneck,
    pub status: Status,
    /// The GPU busy fraction: measured over the whole pipeline where it ran, else what the
    /// slowest stage allows (its rate over the GPU's).
    pub gpu_busy: f64,
    pub busy_measured: bool,
    /// The samples per second the slowest stage allows.
    pub cap_samples_per_s: f64,
    /// The GPUs' rate alone (step and all-reduce), samples per second.
    pub gpu_samples_per_s: f64,
    pub message: String,
    pub fix: Option<String>,
}

/// "1,600" for rates of a thousand and more, three digits below.
pub fn rate(v: f64) -> String {
    if v < 1000.0 {
        return figure(v);
    }
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(f: f64) -> String {
    format!("{:.0}%", (f * 100.0).max(0.0))
}

fn mb_s(bytes_per_s: f64) -> String {
    format!("{} MB/s", figure(bytes_per_s / 1e6))
}

/// The CPU figures, for a finding that cannot judge without the GPU's.
fn cpu_summary(r: &Rehearsal) -> String {
    let parts: Vec<String> = [Stage::Read, Stage::Transform, Stage::Loader]
        .into_iter()
        .filter_map(|s| {
            r.stage(s)
                .value()
                .map(|f| format!("{} {} samples/s", s.label(), rate(f.samples_per_s)))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("; the CPU stages alone: {}", parts.join(", "))
    }
}

/// Where the data lives, in words: "nfs4 at /mnt/data".
fn data_place(facts: &Facts, r: &Rehearsal) -> String {
    let d = &r.data;
    if d.generated && d.page_cache {
        return format!("the page cache ({}, generated by gpuaudit)", d.path);
    }
    match storage_of(facts, &d.path) {
        Some((m, _)) => format!("{} at {}", m.fstype, m.target),
        None => d.path.clone(),
    }
}

/// The fix for slow storage, from the kind of file system the data lives on.
fn storage_fix(facts: &Facts, r: &Rehearsal) -> String {
    let remote = storage_of(facts, &r.data.path)
        .is_some_and(|(_, c)| matches!(c, FsClass::Network | FsClass::Fuse | FsClass::HostShare));
    let mut fix = if remote {
        "cache the dataset on local NVMe before training (a network or FUSE file system \
         rarely keeps a GPU fed); meanwhile read with more threads in parallel"
            .to_string()
    } else {
        "put the dataset on a faster disk (local NVMe), or read with more threads in parallel"
            .to_string()
    };
    fix.push_str(&format!(
        " (--readers, {} now; DataLoader num_workers); pack small files into shards \
         (WebDataset, TFRecord) so each read is large",
        r.config.readers
    ));
    fix
}

/// The size of /dev/shm, where the mount table says it.
fn shm_bytes(facts: &Facts) -> Option<u64> {
    let mounts = facts.host.mounts.value()?;
    let m = mounts.iter().rev().find(|m| m.target == "/dev/shm")?;
    m.option("size").and_then(parse_size)
}

fn transform_fix(facts: &Facts, r: &Rehearsal, gpu_rate: f64, per_worker: f64) -> String {
    let c = &r.config;
    // No sample transformed in its time: no count of workers can be told.
    let need = (per_worker > 0.0).then(|| (gpu_rate / per_worker).ceil() as u64);
    let mut fix = match need {
        Some(n) => format!(
            "more loader workers: about {n} would keep up ({} now, {} CPUs here)",
            c.workers, c.cpus
        ),
        None => format!(
            "more loader workers ({} now, {} CPUs here); the transform finished no sample in \
             its time",
            c.workers, c.cpus
        ),
    };
    if need.is_none_or(|n| n >= c.cpus as u64) {
        fix.push_str(
            "; that is more than the CPUs here: decode and augment on the GPU (NVIDIA DALI, \
             torchvision.io.decode_jpeg on cuda), pre-process the dataset once, or use a \
             machine with more CPUs per GPU",
        );
    }
    if let Some(shm) = shm_bytes(facts).filter(|b| *b < SHM_SMALL_BYTES) {
        fix.push_str(&format!(
            "; DataLoader worker processes hand batches over through /dev/shm, {} here: give \
             the container more (docker run --shm-size=16g, or --ipc=host)",
            bytes(shm)
        ));
    }
    fix
}

/// Which stage caps the pipeline, with the figures that prove it and the fix. `Err`: why it
/// cannot be said (the GPU stages did not run), with the CPU figures that were measured.
pub fn diagnose(facts: &Facts, r: &Rehearsal) -> Result<Diagnosis, String> {
    let gpu = r
        .gpu
        .get()
        .map_err(|why| format!("the GPU stages could not run: {why}{}", cpu_summary(r)))?;
    let step = r
        .stage(Stage::GpuStep)
        .get()
        .map_err(|why| {
            format!(
                "the GPU step could not be measured: {why}{}",
                cpu_summary(r)
            )
        })
        .map(|f| (*f).clone())?;
    let allreduce = r.stage(Stage::AllReduce).into_value().cloned();
    let t_step = 1.0 / step.samples_per_s.max(f64::MIN_POSITIVE);
    let t_ar = allreduce
        .as_ref()
        .map_or(0.0, |a| 1.0 / a.samples_per_s.max(f64::MIN_POSITIVE));
    // The step and the all-reduce take turns on the GPUs.
    let gpu_rate = 1.0 / (t_step + t_ar);
    let host: Vec<(Stage, StageFigure)> =
        [Stage::Read, Stage::Transform, Stage::Loader, Stage::H2d]
            .into_iter()
            .filter_map(|s| r.stage(s).into_value().map(|f| (s, f.clone())))
            .collect();
    let slowest = host
        .iter()
        .min_by(|a, b| a.1.samples_per_s.total_cmp(&b.1.samples_per_s))
        .cloned();
    let pipeline = gpu.pipeline.value();
    let busy_of = |predicted: f64| -> (f64, bool) {
        match pipeline {
            Some(p) => (p.gpu_busy, true),
            None => (predicted.min(1.0), false),
        }
    };
    let gpu_alone = format!(
        "the GPU step alone runs {} samples/s",
        rate(step.samples_per_s)
    );

    let mut d = match slowest {
        Some((stage, f)) if f.samples_per_s < GPU_BOUND_FRACTION * gpu_rate => {
            let cap = f.samples_per_s;
            let (busy, measured) = busy_of(cap / gpu_rate);
            let busy_text = if measured {
                format!("GPU busy {}", pct(busy))
            } else {
                format!("GPU busy about {} (predicted)", pct(busy))
            };
            let read = r.stage(Stage::Read).value().map(|f| f.samples_per_s);
            let trans = r.stage(Stage::Transform).value().map(|f| f.samples_per_s);
            // The loader's figure is read and transform at once: below the slower of the two
            // alone by more than noise, they compete; otherwise the slower one is the cause.
            let (stage, f) = match (stage, read, trans) {
                (Stage::Loader, Some(rd), Some(tr)) if cap >= CONTENTION_FRACTION * rd.min(tr) => {
                    let s = if rd <= tr {
                        Stage::Read
                    } else {
                        Stage::Transform
                    };
                    let fig = r.stage(s).into_value().cloned().unwrap_or(f);
                    (s, fig)
                }
                other => (other.0, f),
            };
            let status = if busy < STARVED_FAIL_BUSY {
                Status::Fail
            } else {
                Status::Warn
            };
            let c = &r.config;
            let (bottleneck, message, fix) = match stage {
                Stage::Read => {
                    let throttled = c
                        .read_throttle_mb_s
                        .map(|t| format!(" (held to {} MB/s by --read-throttle-mbps)", figure(t)))
                        .unwrap_or_default();
                    (
                        Bottleneck::Storage,
                        format!(
                            "{busy_text}: storage reads {}{throttled} from {} cap the pipeline \
                             at {} samples/s; {gpu_alone}",
                            mb_s(f.bytes_per_s),
                            data_place(facts, r),
                            rate(cap)
                        ),
                        storage_fix(facts, r),
                    )
                }
                Stage::Transform => {
                    let per_worker = f.samples_per_s / c.workers.max(1) as f64;
                    (
                        Bottleneck::Transform,
                        format!(
                            "{busy_text}: the CPU transform runs {} samples/s with {} \
                             worker{} ({} samples/s each) and caps the pipeline; {gpu_alone}",
                            rate(f.samples_per_s),
                            c.workers,
                            if c.workers == 1 { "" } else { "s" },
                            rate(per_worker)
                        ),
                        transform_fix(facts, r, gpu_rate, per_worker),
                    )
                }
                Stage::Loader => (
                    Bottleneck::Contention,
                    format!(
                        "{busy_text}: reading and transforming together deliver {} samples/s, \
                         below either alone (reads {}, transform {} samples/s): {} readers \
                         and {} workers compete for {} CPUs; {gpu_alone}",
                        rate(cap),
                        read.map(rate).unwrap_or_default(),
                        trans.map(rate).unwrap_or_default(),
                        c.readers,
                        c.workers,
                        c.cpus
                    ),
                    "keep readers plus workers at or below the CPU count, and run the loader \
                     on the CPUs of the GPU's NUMA node (numactl --cpunodebind)"
                        .to_string(),
                ),
                _ => {
                    let kind = if c.pinned { "pinned" } else { "pageable" };
                    (
                        Bottleneck::HostCopy,
                        format!(
                            "{busy_text}: host-to-device copies from {kind} memory run {} \
                             GB/s, {} samples/s of {} each, and cap the pipeline; {gpu_alone}",
                            figure(f.bytes_per_s / 1e9),
                            rate(f.samples_per_s),
                            bytes(c.tensor_bytes)
                        ),
                        if c.pinned {
                            "the link itself is slow: see pcie.link and pcie.bandwidth; send \
                             fewer bytes per sample (uint8 images, normalised on the GPU)"
                                .to_string()
                        } else {
                            "stage batches in pinned memory (DataLoader pin_memory=True, \
                             .to(device, non_blocking=True)): pageable copies go through a \
                             bounce buffer and do not overlap with compute"
                                .to_string()
                        },
                    )
                }
            };
            Diagnosis {
                bottleneck,
                status,
                gpu_busy: busy,
                busy_measured: measured,
                cap_samples_per_s: cap,
                gpu_samples_per_s: gpu_rate,
                message,
                fix: Some(fix),
            }
        }
        _ => {
            let (busy, measured) = busy_of(1.0);
            let busy_text = if measured {
                format!("GPU busy {}", pct(busy))
            } else {
                "the GPU is the slowest stage".to_string()
            };
            let share = t_ar / (t_step + t_ar);
            let reference = gpu.reference.value();
            let efficiency = reference
                .filter(|_| r.config.batch < gpu.reference_batch)
                .map(|x| step.samples_per_s / x.samples_per_s.max(f64::MIN_POSITIVE));
            let tflops = step
                .tflops
                .map(|t| format!(", {} TFLOPS {}", figure(t), gpu.dtype))
                .unwrap_or_default();
            if let (Some(ar), true) = (&allreduce, share > ALLREDUCE_SHARE_MAX) {
                let busbw = ar
                    .busbw_gbps
                    .map(|b| format!(" at {} GB/s bus bandwidth", figure(b)))
                    .unwrap_or_default();
                Diagnosis {
                    bottleneck: Bottleneck::AllReduce,
                    status: Status::Warn,
                    gpu_busy: busy,
                    busy_measured: measured,
                    cap_samples_per_s: gpu_rate,
                    gpu_samples_per_s: gpu_rate,
                    message: format!(
                        "{busy_text}, but the gradient all-reduce over {} GPUs takes {} of \
                         each step ({} of gradients{busbw}): the GPUs run {} samples/s \
                         together, {} without it",
                        gpu.gpus.len(),
                        pct(share),
                        bytes(r.config.params() * 4),
                        rate(gpu_rate),
                        rate(step.samples_per_s)
                    ),
                    fix: Some(
                        "overlap the all-reduce with the backward pass (DDP gradient buckets), \
                         use a larger batch per GPU (fewer syncs per sample), and check the \
                         link between the GPUs (nvlink.status, nccl.allreduce)"
                            .into(),
                    ),
                }
            } else if let (Some(eff), Some(x)) = (efficiency, reference) {
                if eff < SMALL_BATCH_EFFICIENCY {
                    Diagnosis {
                        bottleneck: Bottleneck::SmallBatch,
                        status: Status::Warn,
                        gpu_busy: busy,
                        busy_measured: measured,
                        cap_samples_per_s: gpu_rate,
                        gpu_samples_per_s: gpu_rate,
                        message: format!(
                            "{busy_text}, but batch {} is too small for it: the step runs {} \
                             samples/s{tflops}, {} of the {} samples/s it runs at batch {}; \
                             kernel launches and idle SMs, not arithmetic, set the pace",
                            r.config.batch,
                            rate(step.samples_per_s),
                            pct(eff),
                            rate(x.samples_per_s),
                            gpu.reference_batch
                        ),
                        fix: Some(
                            "a larger batch per GPU (gradient accumulation where memory is \
                             short does not help: each micro-batch is as small), or CUDA \
                             graphs / torch.compile to cut the launch overhead"
                                .into(),
                        ),
                    }
                } else {
                    healthy(r, &step, gpu_rate, busy, measured, &busy_text, &tflops)
                }
            } else {
                healthy(r, &step, gpu_rate, busy, measured, &busy_text, &tflops)
            }
        }
    };
    // Another stage caps the pipeline, but the batch would starve the GPU too: say both, or
    // the fix of the first only brings the second to light (seen on an H200 at batch 1: the
    // loader named, the step at 19% of its batch-256 rate unsaid).
    if d.bottleneck != Bottleneck::SmallBatch {
        if let Some(x) = gpu
            .reference
            .value()
            .filter(|_| r.config.batch < gpu.reference_batch)
        {
            let eff = step.samples_per_s / x.samples_per_s.max(f64::MIN_POSITIVE);
            if eff < SMALL_BATCH_EFFICIENCY {
                d.message.push_str(&format!(
                    "; batch {} is also too small for the GPU: its step alone runs {} of the \
                     {} samples/s it runs at batch {}",
                    r.config.batch,
                    pct(eff),
                    rate(x.samples_per_s),
                    gpu.reference_batch
                ));
            }
        }
    }
    if let Some(p) = pipeline {
        let slowest_cap = d.cap_samples_per_s.min(gpu_rate);
        if p.samples_per_s < PIPELINE_SHORTFALL * slowest_cap {
            d.message.push_str(&format!(
                "; the whole pipeline ran only {} samples/s, below its slowest stage alone: \
                 the stages slow each other down (shared CPUs, memory bandwidth or PCIe)",
                rate(p.samples_per_s)
            ));
        } else {
            d.message.push_str(&format!(
                "; the whole pipeline ran {} samples/s",
                rate(p.samples_per_s)
            ));
        }
    }
    Ok(d)
}

fn healthy(
    r: &Rehearsal,
    step: &StageFigure,
    gpu_rate: f64,
    busy: f64,
    measured: bool,
    busy_text: &str,
    tflops: &str,
) -> Diagnosis {
    let feeds = [Stage::Loader, Stage::H2d]
        .into_iter()
        .filter_map(|s| {
            r.stage(s)
                .value()
                .map(|f| format!("{} {}", s.label(), rate(f.samples_per_s)))
        })
        .collect::<Vec<_>>()
        .join(", ");
    Diagnosis {
        bottleneck: Bottleneck::Gpu,
        status: Status::Pass,
        gpu_busy: busy,
        busy_measured: measured,
        cap_samples_per_s: gpu_rate,
        gpu_samples_per_s: gpu_rate,
        message: format!(
            "{busy_text}: the GPU is the bottleneck, as it should be; the step runs {} \
             samples/s{tflops}, and the host keeps up ({feeds} samples/s)",
            rate(step.samples_per_s)
        ),
        fix: None,
    }
}

fn run_pipeline(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let r = match facts.measured.rehearsal.get() {
        Ok(r) => r,
        Err(why) => return vec![Finding::skip(ID, why)],
    };
    let mut out = Vec::new();
    match diagnose(facts, r) {
        Ok(d) => {
            let mut f = Finding::new(ID, d.status, d.message)
                .with("bottleneck", d.bottleneck.key())
                .with("gpu_busy", round3(d.gpu_busy))
                .with("gpu_busy_measured", d.busy_measured)
                .with("cap_samples_per_s", round1(d.cap_samples_per_s))
                .with("gpu_samples_per_s", round1(d.gpu_samples_per_s));
            for s in Stage::ALL {
                if let Some(v) = r.stage(s).value() {
                    f = f.with(
                        &format!("{}_samples_per_s", s.key()),
                        round1(v.samples_per_s),
                    );
                }
            }
            if let Some(fix) = d.fix {
                f = f.fix(fix);
            }
            out.push(f);
        }
        Err(why) => out.push(Finding::skip(ID, why)),
    }
    match &r.torch {
        Reading::Value(runs) => {
            for t in runs {
                out.push(torch_finding(facts, t));
            }
        }
        Reading::Unavailable(why) if why != TORCH_NOT_ASKED => {
            out.push(Finding::skip(ID, format!("PyTorch models not run: {why}")))
        }
        Reading::Unavailable(_) => {}
    }
    out
}

// ------------------------------------------------------------------ --torch

/// A published training throughput on one GPU, what the expectations are scaled from.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    /// The spec database key of the GPU it was measured on.
    pub gpu_key: &'static str,
    pub samples_per_s: f64,
    /// Training FLOPs per sample of the model it was measured with.
    pub flops_per_sample: f64,
    pub source: &'static str,
}

/// ResNet-50 v1.5 training FLOPs per 224x224 image: 4.1 GMACs forward (8.2 GFLOP), backward
/// twice the forward.
pub const RESNET50_TRAIN_FLOPS: f64 = 3.0 * 8.2e9;

/// Training FLOPs per sequence of a BERT encoder: 12·d² weights per layer (attention 4d²,
/// feed-forward 8d²), 2 FLOPs per weight and token, plus the attention matmuls (4·s²·d per
/// layer), forward and backward (3x).
pub fn bert_train_flops(layers: f64, d: f64, seq: f64) -> f64 {
    3.0 * layers * (2.0 * 12.0 * d * d * seq + 4.0 * seq * seq * d)
}

/// NVIDIA's ResNet-50 v1.5 for PyTorch, 1x A100 80GB (DGX A100), mixed precision, batch 256:
/// 2470 img/s.
pub const RESNET50_REFERENCE: Reference = Reference {
    gpu_key: "a100-sxm4-80gb",
    samples_per_s: 2470.0,
    flops_per_sample: RESNET50_TRAIN_FLOPS,
    source: "NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md \
             (training performance, 1x A100 80GB, mixed precision: 2470 img/s)",
};

/// NVIDIA's BERT for PyTorch, BERT-large pre-training at sequence 128, 1x V100 32GB (DGX-1),
/// mixed precision, batch 64: 171.52 sequences/s; BERT-base expectations are scaled from it
/// by the ratio of training FLOPs per sequence.
pub const BERT_REFERENCE: Reference = Reference {
    gpu_key: "v100-sxm2-32gb",
    samples_per_s: 171.52,
    flops_per_sample: 3.0
        * 24.0
        * (2.0 * 12.0 * 1024.0 * 1024.0 * 128.0 + 4.0 * 128.0 * 128.0 * 1024.0),
    source: "NVIDIA DeepLearningExamples, PyTorch/LanguageModeling/BERT/README.md (pre-training, \
             1x V100 32GB, mixed precision, batch 64, sequence 128: 171.52 sequences/s)",
};

/// The expected samples per second of a model on `spec`: the reference figure times the
/// ratio of the references' FLOPs per sample to this model's, times the smaller of the two
/// datasheet ratios (dense fp16 tensor TFLOPS, memory bandwidth) of this GPU to the
/// reference GPU: a model runs no faster than the resource that scaled least allows. A
/// first-order estimate, and an upper one for small batches.
pub fn expected_samples_per_s(
    reference: &Reference,
    flops_per_sample: f64,
    spec: &GpuSpec,
) -> Option<(f64, String)> {
    let base = SpecDb::embedded().by_key(reference.gpu_key)?;
    let tf = spec.tflops.fp16? / base.tflops.fp16?;
    let bw = spec.memory_bandwidth_gbps? / base.memory_bandwidth_gbps?;
    let scale = tf.min(bw);
    let expected = reference.samples_per_s * reference.flops_per_sample / flops_per_sample * scale;
    let how = format!(
        "{} samples/s on the {} ({}), scaled by {:.2} (the smaller of the dense fp16 tensor \
         TFLOPS ratio {:.2} and the memory bandwidth ratio {:.2} of the datasheets){}",
        reference.samples_per_s,
        base.name,
        reference.source,
        scale,
        tf,
        bw,
        if (reference.flops_per_sample - flops_per_sample).abs() > 1.0 {
            format!(
                " and by the FLOPs per sample ({:.1} GFLOP against {:.1})",
                reference.flops_per_sample / 1e9,
                flops_per_sample / 1e9
            )
        } else {
            String::new()
        }
    );
    Some((expected, how))
}

/// The reference and FLOPs per sample of a model the torch script runs.
pub fn torch_model(model: &str, sequence: Option<u32>) -> Option<(&'static str, Reference, f64)> {
    match model {
        "resnet50" => Some((
            "ResNet-50 training",
            RESNET50_REFERENCE,
            RESNET50_TRAIN_FLOPS,
        )),
        "bert-base" => Some((
            "BERT-base fine-tuning",
            BERT_REFERENCE,
            bert_train_flops(12.0, 768.0, sequence.unwrap_or(128) as f64),
        )),
        _ => None,
    }
}

fn torch_finding(facts: &Facts, t: &TorchRun) -> Finding {
    let (title, reference, flops) = match torch_model(&t.model, t.sequence) {
        Some(m) => m,
        None => {
            return Finding::skip(
                ID,
                format!("unknown model '{}' from the torch script", t.model),
            )
        }
    };
    let what = format!(
        "{title} (batch {}{}) on GPU {}",
        t.batch,
        t.sequence
            .map(|s| format!(", sequence {s}"))
            .unwrap_or_default(),
        t.gpu
    );
    let f: &TorchFigure = match &t.result {
        Reading::Value(f) => f,
        Reading::Unavailable(why) => {
            return Finding::skip(ID, format!("{what}: not run: {why}")).with("model", &t.model)
        }
    };
    let util = f
        .nvml_utilization_pct
        .value()
        .map(|u| format!(", GPU utilisation {u:.0}%"))
        .unwrap_or_default();
    let mut msg = format!(
        "{what}, PyTorch {} ({}, {}): {} samples/s ({} ms a step){util}",
        f.torch_version,
        f.built_from,
        f.precision,
        rate(f.samples_per_s),
        figure(f.step_ms)
    );
    let mut finding = Finding::info(ID, String::new())
        .with("model", &t.model)
        .with("samples_per_s", round1(f.samples_per_s))
        .with("built_from", &f.built_from);
    if let Some((exp, how)) =
        spec_of(facts, t.gpu).and_then(|s| expected_samples_per_s(&reference, flops, s))
    {
        msg.push_str(&format!(
            "; about {} expected from the datasheet ({} of it)",
            rate(exp),
            pct(f.samples_per_s / exp)
        ));
        finding = finding
            .with("expected_samples_per_s", round1(exp))
            .with("expected_method", how);
    }
    finding.message = msg;
    finding
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{DataSource, PipelineFigure, RehearsalConfig, RehearsalGpu, StageResult};
    use crate::figures::measurements;
    use crate::testing::Machine;

    const SAMPLE: f64 = 112.0 * 1024.0;
    const TENSOR: f64 = 588.0 * 1024.0;

    fn fig(sps: f64, bytes_per_sample: f64) -> StageFigure {
        StageFigure {
            samples_per_s: sps,
            bytes_per_s: sps * bytes_per_sample,
            samples: 1000,
            seconds: 2.0,
            method: "test".into(),
            tflops: None,
            busbw_gbps: None,
        }
    }

    fn config() -> RehearsalConfig {
        RehearsalConfig {
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
        }
    }

    fn st(stage: Stage, f: StageFigure) -> StageResult {
        StageResult {
            stage,
            result: Reading::Value(f),
        }
    }

    /// A healthy rehearsal on one GPU: the GPU step (10,000 samples/s) is the slowest stage,
    /// every host stage runs well above it, the batch is the reference batch, the whole
    /// pipeline kept the GPU 97% busy.
    fn rehearsal() -> Rehearsal {
        let mut step = fig(10_000.0, 0.0);
        step.tflops = Some(515.0);
        Rehearsal {
            config: config(),
            data: DataSource {
                path: "/mnt/data/imagenet".into(),
                generated: false,
                page_cache: false,
                files: 1000,
                bytes: 1 << 30,
            },
            stages: vec![
                st(Stage::Read, fig(40_000.0, SAMPLE)),
                st(Stage::Transform, fig(28_000.0, SAMPLE)),
                st(Stage::Loader, fig(27_000.0, SAMPLE)),
            ],
            gpu: Reading::Value(RehearsalGpu {
                gpus: vec![0],
                dtype: "bf16".into(),
                library: "cublasLt".into(),
                stages: vec![
                    st(Stage::H2d, fig(90_000.0, TENSOR)),
                    st(Stage::GpuStep, step),
                ],
                reference: Reading::unavailable("the batch is the reference batch"),
                reference_batch: 256,
                step_ms: vec![],
                pipeline: Reading::Value(pipeline(9_700.0, 0.97)),
            }),
            torch: Reading::unavailable("not asked for (--torch)"),
            notes: vec![],
        }
    }

    fn pipeline(sps: f64, busy: f64) -> PipelineFigure {
        PipelineFigure {
            samples_per_s: sps,
            steps: 200,
            seconds: 5.0,
            gpu_busy: busy,
            nvml_utilization_pct: Reading::Value(busy * 100.0),
            method: "test".into(),
        }
    }

    const MOUNTS: &str = "/dev/nvme0n1p1 / ext4 rw 0 0\n\
                          nas:/export /mnt/data nfs4 rw,vers=4.1,rsize=1048576,wsize=1048576,hard,proto=tcp 0 0\n\
                          shm /dev/shm tmpfs rw,size=65536k 0 0\n";

    fn facts(r: &Rehearsal) -> Facts {
        let r = r.clone();
        Machine::healthy("h200-sxm-141gb", 1)
            .mounts(MOUNTS)
            .measured(|m| m.rehearsal = Reading::Value(r))
            .build()
    }

    fn judge(r: &Rehearsal) -> Diagnosis {
        diagnose(&facts(r), r).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Sets a stage's samples per second (bytes per second follow).
    fn set(r: &mut Rehearsal, s: Stage, sps: f64) {
        let mut all: Vec<&mut StageResult> = r.stages.iter_mut().collect();
        if let Reading::Value(g) = &mut r.gpu {
            all.extend(g.stages.iter_mut());
        }
        for x in all.into_iter().filter(|x| x.stage == s) {
            if let Reading::Value(f) = &mut x.result {
                let per = f.bytes_per_s / f.samples_per_s.max(1e-9);
                f.samples_per_s = sps;
                f.bytes_per_s = sps * per;
            }
        }
    }

    fn gpu_mut(r: &mut Rehearsal) -> &mut RehearsalGpu {
        match &mut r.gpu {
            Reading::Value(g) => g,
            Reading::Unavailable(_) => panic!("no GPU part"),
        }
    }

    fn set_busy(r: &mut Rehearsal, busy: f64) {
        gpu_mut(r).pipeline = Reading::Value(pipeline(10_000.0 * busy, busy));
    }

    #[test]
    fn a_gpu_bound_pipeline_passes() {
        let d = judge(&rehearsal());
        assert_eq!((d.bottleneck, d.status), (Bottleneck::Gpu, Status::Pass));
        assert!(d.busy_measured);
        assert_eq!(
            d.message,
            "GPU busy 97%: the GPU is the bottleneck, as it should be; the step runs 10,000 \
             samples/s, 515 TFLOPS bf16, and the host keeps up (loader (read + transform) \
             27,000, host-to-device copy 90,000 samples/s); the whole pipeline ran 9,700 \
             samples/s"
        );
        assert_eq!(d.fix, None);
    }

    #[test]
    fn a_slow_data_directory_is_named_with_its_file_system() {
        // 410 MB/s from NFS: 3,575 samples of 112 KiB a second.
        let mut r = rehearsal();
        let sps = 410e6 / SAMPLE;
        set(&mut r, Stage::Read, sps);
        set(&mut r, Stage::Loader, sps * 0.99);
        set_busy(&mut r, 0.31);
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::Storage, Status::Fail)
        );
        assert!(
            d.message.starts_with(
                "GPU busy 31%: storage reads 410 MB/s from nfs4 at /mnt/data cap the \
                 pipeline at 3,539 samples/s; the GPU step alone runs 10,000 samples/s"
            ),
            "{}",
            d.message
        );
        let fix = d.fix.unwrap();
        assert!(fix.starts_with("cache the dataset on local NVMe"), "{fix}");
        assert!(fix.contains("--readers, 4 now"), "{fix}");
        // On a local disk the fix is a faster disk, and a throttle is said.
        r.data.path = "/data".into();
        r.config.read_throttle_mb_s = Some(200.0);
        let d = judge(&r);
        assert!(d
            .message
            .contains("(held to 200 MB/s by --read-throttle-mbps) from ext4 at /"));
        assert!(d
            .fix
            .unwrap()
            .starts_with("put the dataset on a faster disk"));
    }

    #[test]
    fn one_worker_names_the_transform_and_how_many_would_do() {
        let mut r = rehearsal();
        r.config.workers = 1;
        set(&mut r, Stage::Transform, 2_000.0);
        set(&mut r, Stage::Loader, 1_950.0);
        set_busy(&mut r, 0.19);
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::Transform, Status::Fail)
        );
        assert!(
            d.message.starts_with(
                "GPU busy 19%: the CPU transform runs 2,000 samples/s with 1 worker (2,000 \
                 samples/s each) and caps the pipeline"
            ),
            "{}",
            d.message
        );
        let fix = d.fix.unwrap();
        assert!(
            fix.starts_with("more loader workers: about 5 would keep up (1 now, 16 CPUs here)"),
            "{fix}"
        );
        assert!(!fix.contains("more than the CPUs"), "{fix}");
        assert!(fix.contains("/dev/shm, 64 MiB here"), "{fix}");
        // Workers already on every CPU: more of them is not enough.
        r.config.workers = 16;
        set(&mut r, Stage::Transform, 8_000.0);
        set(&mut r, Stage::Loader, 7_900.0);
        let fix = judge(&r).fix.unwrap();
        assert!(
            fix.starts_with("more loader workers: about 20 would keep up"),
            "{fix}"
        );
        assert!(
            fix.contains("more than the CPUs here: decode and augment on the GPU"),
            "{fix}"
        );
    }

    #[test]
    fn a_transform_that_finished_nothing_gets_no_worker_count() {
        let mut r = rehearsal();
        set(&mut r, Stage::Transform, 0.0);
        set(&mut r, Stage::Loader, 0.0);
        let d = judge(&r);
        assert_eq!(d.bottleneck, Bottleneck::Transform);
        let fix = d.fix.unwrap();
        assert!(
            fix.starts_with(
                "more loader workers (14 now, 16 CPUs here); the transform finished no sample"
            ),
            "{fix}"
        );
        assert!(fix.contains("more than the CPUs here"), "{fix}");
        // Fifteen workers' worth on 16 CPUs is not "more than the CPUs"; sixteen is.
        r.config.workers = 1;
        set(&mut r, Stage::Transform, 10_000.0 / 15.0);
        set(&mut r, Stage::Loader, 10_000.0 / 15.0);
        let fix = judge(&r).fix.unwrap();
        assert!(
            fix.starts_with("more loader workers: about 15 would keep up"),
            "{fix}"
        );
        assert!(!fix.contains("more than the CPUs"), "{fix}");
        set(&mut r, Stage::Transform, 10_000.0 / 16.0);
        set(&mut r, Stage::Loader, 10_000.0 / 16.0);
        let fix = judge(&r).fix.unwrap();
        assert!(
            fix.starts_with("more loader workers: about 16 would keep up"),
            "{fix}"
        );
        assert!(fix.contains("more than the CPUs"), "{fix}");
    }

    #[test]
    fn a_big_shm_is_not_named() {
        let mut r = rehearsal();
        set(&mut r, Stage::Transform, 2_000.0);
        set(&mut r, Stage::Loader, 1_950.0);
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .mounts("/dev/nvme0n1p1 / ext4 rw 0 0\nshm /dev/shm tmpfs rw,size=1g 0 0\n")
            .build();
        let fix = diagnose(&f, &r).unwrap().fix.unwrap();
        assert!(!fix.contains("/dev/shm"), "{fix}");
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .mounts("/dev/nvme0n1p1 / ext4 rw 0 0\nshm /dev/shm tmpfs rw,size=1023m 0 0\n")
            .build();
        assert!(diagnose(&f, &r)
            .unwrap()
            .fix
            .unwrap()
            .contains("/dev/shm, 1023 MiB here"));
    }

    #[test]
    fn pageable_staging_names_the_copies_and_pinned_memory() {
        let mut r = rehearsal();
        r.config.pinned = false;
        set(&mut r, Stage::H2d, 33_000.0 / 5.0);
        set_busy(&mut r, 0.6);
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::HostCopy, Status::Warn)
        );
        assert!(
            d.message.starts_with(
                "GPU busy 60%: host-to-device copies from pageable memory run 3.97 GB/s, \
                 6,600 samples/s of 588 KiB each, and cap the pipeline"
            ),
            "{}",
            d.message
        );
        assert!(d.fix.unwrap().starts_with("stage batches in pinned memory"));
        r.config.pinned = true;
        assert!(judge(&r).fix.unwrap().contains("pcie.link"));
    }

    #[test]
    fn a_tiny_batch_is_named_when_the_gpu_is_the_slowest() {
        let mut r = rehearsal();
        r.config.batch = 2;
        gpu_mut(&mut r).reference = Reading::Value(fig(10_000.0, 0.0));
        set(&mut r, Stage::GpuStep, 2_000.0);
        gpu_mut(&mut r).pipeline = Reading::Value(pipeline(1_950.0, 0.98));
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::SmallBatch, Status::Warn)
        );
        assert!(
            d.message.starts_with(
                "GPU busy 98%, but batch 2 is too small for it: the step runs 2,000 \
                 samples/s, 515 TFLOPS bf16, 20% of the 10,000 samples/s it runs at batch 256"
            ),
            "{}",
            d.message
        );
        assert!(d.fix.unwrap().starts_with("a larger batch per GPU"));
        // At the threshold and above, the batch is large enough.
        set(&mut r, Stage::GpuStep, 5_000.0);
        assert_eq!(judge(&r).bottleneck, Bottleneck::Gpu);
        set(&mut r, Stage::GpuStep, 4_990.0);
        assert_eq!(judge(&r).bottleneck, Bottleneck::SmallBatch);
        // The reference batch itself is never too small.
        r.config.batch = 256;
        assert_eq!(judge(&r).bottleneck, Bottleneck::Gpu);
    }

    /// A loader that caps a pipeline whose batch is also too small: the loader is named, and
    /// the batch after it (both sides of SMALL_BATCH_EFFICIENCY).
    #[test]
    fn a_tiny_batch_behind_another_bottleneck_is_said_too() {
        let mut r = rehearsal();
        r.config.batch = 1;
        gpu_mut(&mut r).reference = Reading::Value(fig(14_500.0, 0.0));
        set(&mut r, Stage::GpuStep, 2_800.0);
        set(&mut r, Stage::Loader, 1_900.0);
        gpu_mut(&mut r).pipeline = Reading::Value(pipeline(1_850.0, 0.65));
        let d = judge(&r);
        assert_ne!(d.bottleneck, Bottleneck::SmallBatch);
        assert!(
            d.message.contains(
                "; batch 1 is also too small for the GPU: its step alone runs 19% of the \
                 14,500 samples/s it runs at batch 256"
            ),
            "{}",
            d.message
        );
        set(&mut r, Stage::GpuStep, 7_250.0);
        assert!(!judge(&r).message.contains("also too small"));
        set(&mut r, Stage::GpuStep, 7_240.0);
        assert!(judge(&r).message.contains("also too small"));
        r.config.batch = 256;
        assert!(!judge(&r).message.contains("also too small"));
    }

    #[test]
    fn the_host_keeps_up_at_ninety_percent_of_the_gpu() {
        let mut r = rehearsal();
        gpu_mut(&mut r).pipeline = Reading::unavailable("the pipeline did not run");
        set(&mut r, Stage::Transform, 9_000.0);
        set(&mut r, Stage::Loader, 9_000.0);
        let d = judge(&r);
        assert_eq!((d.bottleneck, d.status), (Bottleneck::Gpu, Status::Pass));
        assert!(!d.busy_measured);
        assert!(
            d.message.starts_with("the GPU is the slowest stage: "),
            "{}",
            d.message
        );
        set(&mut r, Stage::Loader, 8_990.0);
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::Transform, Status::Warn)
        );
        // Predicted from the stage figures: 8,990 / 10,000.
        assert!(!d.busy_measured);
        assert!((d.gpu_busy - 0.899).abs() < 1e-9);
        assert!(d
            .message
            .starts_with("GPU busy about 90% (predicted): the CPU transform"));
    }

    #[test]
    fn half_busy_is_a_warning_less_is_a_failure() {
        let mut r = rehearsal();
        set(&mut r, Stage::Read, 5_000.0);
        set(&mut r, Stage::Loader, 5_000.0);
        set_busy(&mut r, 0.5);
        assert_eq!(judge(&r).status, Status::Warn);
        set_busy(&mut r, 0.499);
        assert_eq!(judge(&r).status, Status::Fail);
        // Without the pipeline, the prediction decides: 5,000 / 10,000 is half.
        gpu_mut(&mut r).pipeline = Reading::unavailable("x");
        assert_eq!(judge(&r).status, Status::Warn);
        set(&mut r, Stage::Loader, 4_990.0);
        assert_eq!(judge(&r).status, Status::Fail);
    }

    #[test]
    fn readers_and_workers_competing_is_told_from_a_slow_stage() {
        let mut r = rehearsal();
        set(&mut r, Stage::GpuStep, 30_000.0);
        // Loader below 80% of the slower stage alone (transform, 28,000): contention.
        set(&mut r, Stage::Loader, 0.79 * 28_000.0);
        let d = judge(&r);
        assert_eq!(d.bottleneck, Bottleneck::Contention);
        assert!(
            d.message.contains(
                "reading and transforming together deliver 22,120 samples/s, below either \
                 alone (reads 40,000, transform 28,000 samples/s): 4 readers and 14 workers \
                 compete for 16 CPUs"
            ),
            "{}",
            d.message
        );
        // At 80%, the slower stage is the cause.
        set(&mut r, Stage::Loader, 0.8 * 28_000.0);
        assert_eq!(judge(&r).bottleneck, Bottleneck::Transform);
        // And the slower one is read where read is slower.
        set(&mut r, Stage::Read, 25_000.0);
        set(&mut r, Stage::Loader, 24_000.0);
        assert_eq!(judge(&r).bottleneck, Bottleneck::Storage);
    }

    #[test]
    fn an_allreduce_over_a_third_of_the_step_is_named() {
        let mut r = rehearsal();
        gpu_mut(&mut r).gpus = vec![0, 1];
        let mut ar = fig(20_000.0, 0.0);
        ar.busbw_gbps = Some(35.0);
        gpu_mut(&mut r).stages.push(st(Stage::AllReduce, ar));
        // Step 1e-4 s a sample, all-reduce 5e-5: exactly a third.
        let d = judge(&r);
        assert_eq!(d.bottleneck, Bottleneck::Gpu);
        assert!((d.gpu_samples_per_s - 6_666.67).abs() < 0.01);
        set(&mut r, Stage::AllReduce, 19_900.0);
        let d = judge(&r);
        assert_eq!(
            (d.bottleneck, d.status),
            (Bottleneck::AllReduce, Status::Warn)
        );
        assert!(
            d.message.starts_with(
                "GPU busy 97%, but the gradient all-reduce over 2 GPUs takes 33% of each \
                 step (256 MiB of gradients at 35.0 GB/s bus bandwidth): the GPUs run 6,656 \
                 samples/s together, 10,000 without it"
            ),
            "{}",
            d.message
        );
        assert!(d.fix.unwrap().contains("nccl.allreduce"));
    }

    #[test]
    fn a_pipeline_well_below_its_slowest_stage_is_said() {
        let mut r = rehearsal();
        gpu_mut(&mut r).pipeline = Reading::Value(pipeline(8_000.0, 0.8));
        assert!(judge(&r)
            .message
            .ends_with("; the whole pipeline ran 8,000 samples/s"));
        gpu_mut(&mut r).pipeline = Reading::Value(pipeline(7_990.0, 0.8));
        assert!(judge(&r)
            .message
            .contains("ran only 7,990 samples/s, below its slowest stage alone"));
    }

    #[test]
    fn without_the_gpu_stages_the_cpu_figures_are_told() {
        let mut r = rehearsal();
        r.gpu = Reading::unavailable("no NVIDIA GPU found");
        let f = facts(&r);
        let out = run_pipeline(&f, &Policy::default());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Skip);
        assert_eq!(
            out[0].message,
            "the GPU stages could not run: no NVIDIA GPU found; the CPU stages alone: storage \
             read 40,000 samples/s, CPU transform 28,000 samples/s, loader (read + transform) \
             27,000 samples/s"
        );
        // The GPU part ran but its step failed.
        let mut r = rehearsal();
        gpu_mut(&mut r).stages = vec![StageResult {
            stage: Stage::GpuStep,
            result: Reading::unavailable("cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (15)"),
        }];
        let e = diagnose(&facts(&r), &r).unwrap_err();
        assert!(
            e.starts_with("the GPU step could not be measured: cublasLtMatmul"),
            "{e}"
        );
    }

    #[test]
    fn a_normal_audit_says_to_run_rehearse() {
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let out = run_pipeline(&f, &Policy::default());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Skip);
        assert_eq!(out[0].message, crate::facts::NOT_REHEARSED);
        assert!(measurements(&f).is_empty());
    }

    #[test]
    fn the_finding_carries_every_stage() {
        let f = facts(&rehearsal());
        let out = run_pipeline(&f, &Policy::default());
        let e = &out[0].evidence;
        assert_eq!(e.get("bottleneck").unwrap(), "gpu");
        assert_eq!(e.get("read_samples_per_s").unwrap(), 40_000.0);
        assert_eq!(e.get("gpu_step_samples_per_s").unwrap(), 10_000.0);
        assert_eq!(e.get("gpu_busy").unwrap(), 0.97);
        assert!(e.get("all_reduce_samples_per_s").is_none());
    }

    #[test]
    fn rates_are_written_with_thousands_separators() {
        assert_eq!(rate(1_600.0), "1,600");
        assert_eq!(rate(1_234_567.4), "1,234,567");
        assert_eq!(rate(999.4), "999");
        assert_eq!(rate(57.64), "57.6");
        assert_eq!(rate(100_000.0), "100,000");
    }

    #[test]
    fn expectations_scale_the_references_by_the_datasheet() {
        let db = SpecDb::embedded();
        // On the reference GPU itself, the reference figure.
        let a100 = db.by_key("a100-sxm4-80gb").unwrap();
        let (e, how) =
            expected_samples_per_s(&RESNET50_REFERENCE, RESNET50_TRAIN_FLOPS, a100).unwrap();
        assert!((e - 2470.0).abs() < 1e-6, "{e}");
        assert!(how.contains("scaled by 1.00"), "{how}");
        // An H200: the bandwidth ratio (4800/2039) is below the TFLOPS ratio (989/312).
        let h200 = db.by_key("h200-sxm-141gb").unwrap();
        let (e, how) =
            expected_samples_per_s(&RESNET50_REFERENCE, RESNET50_TRAIN_FLOPS, h200).unwrap();
        let bw = h200.memory_bandwidth_gbps.unwrap() / a100.memory_bandwidth_gbps.unwrap();
        let tf = h200.tflops.fp16.unwrap() / a100.tflops.fp16.unwrap();
        assert!(bw < tf);
        assert!((e - 2470.0 * bw).abs() < 1e-6, "{e}");
        assert!(how.contains("NVIDIA DeepLearningExamples"), "{how}");
        // BERT-base from BERT-large by FLOPs per sequence: about 3.5 times as many.
        let v100 = db.by_key("v100-sxm2-32gb").unwrap();
        let base = bert_train_flops(12.0, 768.0, 128.0);
        let (e, how) = expected_samples_per_s(&BERT_REFERENCE, base, v100).unwrap();
        let ratio = BERT_REFERENCE.flops_per_sample / base;
        assert!((3.4..3.6).contains(&ratio), "{ratio}");
        assert!((e - 171.52 * ratio).abs() < 1e-6);
        assert!(
            how.contains("by the FLOPs per sample (236.8 GFLOP against 67.0)"),
            "{how}"
        );
        assert!(
            how.starts_with("171.52 samples/s on the NVIDIA Tesla V100 SXM2 32GB"),
            "{how}"
        );
        assert_eq!(
            bert_train_flops(24.0, 1024.0, 128.0),
            BERT_REFERENCE.flops_per_sample
        );
    }

    #[test]
    fn torch_runs_are_reported_beside_their_expectation() {
        let mut r = rehearsal();
        let run = |model: &str, seq: Option<u32>, result| TorchRun {
            model: model.into(),
            batch: if seq.is_some() { 16 } else { 64 },
            sequence: seq,
            gpu: 0,
            result,
        };
        let good = Reading::Value(TorchFigure {
            samples_per_s: 2_900.0,
            step_ms: 22.1,
            steps: 30,
            built_from: "torchvision".into(),
            precision: "bf16 autocast".into(),
            torch_version: "2.11.0".into(),
            nvml_utilization_pct: Reading::Value(96.0),
        });
        r.torch = Reading::Value(vec![
            run("resnet50", None, good),
            run(
                "bert-base",
                Some(128),
                Reading::unavailable("timed out after 60 s"),
            ),
            run("gpt9", None, Reading::unavailable("x")),
        ]);
        let f = facts(&r);
        let out = run_pipeline(&f, &Policy::default());
        assert_eq!(out.len(), 4);
        assert_eq!(out[1].status, Status::Info);
        assert!(
            out[1].message.starts_with(
                "ResNet-50 training (batch 64) on GPU 0, PyTorch 2.11.0 (torchvision, bf16 \
                 autocast): 2,900 samples/s (22.1 ms a step), GPU utilisation 96%; about 5,815 \
                 expected from the datasheet (50% of it)"
            ),
            "{}",
            out[1].message
        );
        assert_eq!(out[2].status, Status::Skip);
        assert!(out[2]
            .message
            .contains("sequence 128) on GPU 0: not run: timed out"));
        assert!(out[3].message.contains("unknown model 'gpt9'"));
        // Asked for, but PyTorch is not there: said; not asked for: nothing.
        r.torch = Reading::unavailable("PyTorch is not installed in any Python environment found");
        let out = run_pipeline(&facts(&r), &Policy::default());
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[1].message,
            "PyTorch models not run: PyTorch is not installed in any Python environment found"
        );
        r.torch = Reading::unavailable(TORCH_NOT_ASKED);
        assert_eq!(run_pipeline(&facts(&r), &Policy::default()).len(), 1);
        let m = measurements(&f);
        let t = m
            .iter()
            .find(|m| m.name == "torch_resnet50_samples_per_s")
            .unwrap();
        assert!(
            (t.ratio.unwrap() - 2_900.0 / 5_814.6).abs() < 0.001,
            "{:?}",
            t.ratio
        );
    }

    #[test]
    fn the_report_carries_each_stage_for_the_chart() {
        let f = facts(&rehearsal());
        let names: Vec<String> = measurements(&f).into_iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            vec![
                "rehearse_read_samples_per_s",
                "rehearse_transform_samples_per_s",
                "rehearse_loader_samples_per_s",
                "rehearse_h2d_samples_per_s",
                "rehearse_gpu_step_samples_per_s",
                "rehearse_gpu_step_tflops",
                "rehearse_pipeline_samples_per_s",
                "rehearse_gpu_busy_pct",
                "rehearse_nvml_utilization_pct",
            ]
        );
    }
}
