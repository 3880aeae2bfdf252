//! `gpuaudit rehearse`: a training-shaped pipeline run end to end on this machine.
//!
//! [`run`] prepares the dataset (the files of `--data-dir`, or a dataset written into a
//! private temporary directory that [`crate::cleanup`] removes on any exit), measures the CPU
//! stages alone here (storage reads, the transform, both together: [`loader`]), then the GPU
//! stages alone and the whole pipeline in the measurement child (group `rehearse`, with its
//! own time limit: a hang or a crash costs the GPU figures, not the rehearsal), and with
//! `--torch` a short real training run of ResNet-50 and BERT-base through PyTorch
//! ([`torch`]). The judgement is `workload.pipeline`'s, in gpuaudit-core.

pub mod dataset;
pub mod limits;
pub mod loader;
pub mod torch;

use crate::measure::{self, Progress, RehearseRequest};
use gpuaudit_core::facts::{
    Facts, MeasuredFacts, Rehearsal, RehearsalConfig, Stage, StageFigure, StageResult,
};
use gpuaudit_core::Reading;
use loader::LoaderConfig;
use std::path::PathBuf;
use std::time::Duration;

/// Shares of `--seconds` each part of the rehearsal is given: the CPU stages alone here, each
/// GPU stage alone (H2D, the step, the step at the reference batch, the all-reduce: at most
/// four), and the whole pipeline. Together 0.85: the rest is the dataset, the child's start
/// (cuInit, contexts, cuBLASLt, NCCL) and the model's set-up.
pub const READ_SHARE: f64 = 0.08;
pub const TRANSFORM_SHARE: f64 = 0.08;
pub const LOADER_SHARE: f64 = 0.10;
pub const GPU_STAGE_SHARE: f64 = 0.06;
pub const PIPELINE_SHARE: f64 = 0.35;
/// Staged batches of the loader alone (the pipeline in the child has its own).
const LOADER_BUFFERS: usize = limits::LOADER_BUFFERS as usize;
/// Timed seconds of each `--torch` model.
pub const TORCH_SECONDS: u32 = 8;

/// The largest `--sample-kb` and `--tensor-kb` (256 MiB) and `--dataset-mb` (64 GiB).
pub const MAX_SAMPLE_KB: u64 = 256 << 10;
pub const MAX_TENSOR_KB: u64 = 256 << 10;
pub const MAX_DATASET_MB: u64 = 64 << 10;

/// The sentence of a flag out of its range.
pub fn out_of_range(flag: &str, v: u64, lo: u64, hi: u64) -> String {
    format!("{flag} {v}: must be between {lo} and {hi}")
}

/// What `gpuaudit rehearse` was asked.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub data_dir: Option<PathBuf>,
    pub batch: u32,
    pub sample_bytes: u64,
    pub tensor_bytes: u64,
    pub width: u32,
    pub depth: u32,
    pub tokens: u32,
    pub readers: u32,
    pub workers: u32,
    pub transform_cost: u32,
    pub pinned: bool,
    pub read_throttle_mb_s: Option<f64>,
    pub steps: Option<u32>,
    pub seconds: u32,
    pub dataset_bytes: u64,
    pub gpus: Option<Vec<u32>>,
    pub force: bool,
    pub torch: bool,
}

/// Logical CPUs this process may run on.
pub fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

impl Options {
    /// The defaults: a batch of 256 images of 112 KiB (an ImageNet JPEG is about 110 KB)
    /// decoded into 3x224x224 float32 tensors (588 KiB); a model of 16 layers of 2048 x 2048
    /// on 128 tokens a sample (67 M weights, 51.5 GFLOP a sample for a training step, about
    /// a ViT-B/16's); 4 readers and a worker on every CPU but two; 40 s in all.
    pub fn defaults(cpus: u32) -> Options {
        Options {
            data_dir: None,
            batch: 256,
            sample_bytes: 112 << 10,
            tensor_bytes: 588 << 10,
            width: 2048,
            depth: 16,
            tokens: 128,
            readers: 4.min(cpus.max(1)),
            workers: cpus.saturating_sub(2).max(1),
            transform_cost: 4,
            pinned: true,
            read_throttle_mb_s: None,
            steps: None,
            seconds: 40,
            dataset_bytes: 256 << 20,
            gpus: None,
            force: false,
            torch: false,
        }
    }

    /// Sizes that cannot be rehearsed, as one sentence naming the flag.
    pub fn validate(&self) -> Result<(), String> {
        let range = |flag: &str, v: u64, lo: u64, hi: u64| -> Result<(), String> {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(out_of_range(flag, v, lo, hi))
            }
        };
        range("--batch", self.batch as u64, 1, 65_536)?;
        range("--sample-kb", self.sample_bytes >> 10, 1, MAX_SAMPLE_KB)?;
        range("--tensor-kb", self.tensor_bytes >> 10, 1, MAX_TENSOR_KB)?;
        range("--width", self.width as u64, 64, 65_536)?;
        if self.width % 8 != 0 {
            return Err(format!(
                "--width {}: must be a multiple of 8 (tensor cores work on tiles of 8)",
                self.width
            ));
        }
        range("--depth", self.depth as u64, 1, 1024)?;
        range("--tokens", self.tokens as u64, 1, 65_536)?;
        range("--readers", self.readers as u64, 1, 256)?;
        range("--workers", self.workers as u64, 1, 1024)?;
        range("--transform-cost", self.transform_cost as u64, 1, 1000)?;
        range("--seconds", self.seconds as u64, 5, 600)?;
        range("--dataset-mb", self.dataset_bytes >> 20, 1, MAX_DATASET_MB)?;
        if let Some(s) = self.steps {
            range("--steps", s as u64, 1, 1_000_000)?;
        }
        if let Some(t) = self.read_throttle_mb_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!("--read-throttle-mbps {t}: must be above 0"));
            }
        }
        Ok(())
    }

    pub fn config(&self) -> RehearsalConfig {
        RehearsalConfig {
            batch: self.batch,
            sample_bytes: self.sample_bytes,
            tensor_bytes: self.tensor_bytes,
            width: self.width,
            depth: self.depth,
            tokens: self.tokens,
            readers: self.readers,
            workers: self.workers,
            transform_cost: self.transform_cost,
            pinned: self.pinned,
            read_throttle_mb_s: self.read_throttle_mb_s,
            steps: self.steps,
            seconds: self.seconds,
            cpus: cpus(),
        }
    }

    fn share(&self, f: f64) -> Duration {
        Duration::from_secs_f64(self.seconds as f64 * f)
    }

    fn loader(&self, drop_cache: bool) -> LoaderConfig {
        LoaderConfig {
            sample_bytes: self.sample_bytes,
            tensor_bytes: self.tensor_bytes,
            batch: self.batch,
            readers: self.readers,
            workers: self.workers,
            transform_cost: self.transform_cost,
            read_throttle_bytes_per_s: self.read_throttle_mb_s.map(|t| (t * 1e6) as u64),
            drop_cache,
        }
    }

    /// What the measurement child is asked (its share of the time).
    pub fn request(&self, loader: LoaderConfig, files: Vec<PathBuf>) -> RehearseRequest {
        RehearseRequest {
            config: self.config(),
            loader,
            files,
            stage_ms: self.share(GPU_STAGE_SHARE).as_millis() as u64,
            pipeline_ms: self.share(PIPELINE_SHARE).as_millis() as u64,
        }
    }
}

/// Why a rehearsal did not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The flags' products are past what the machine allows ([`limits`]): refused before
    /// anything was allocated or written.
    #[error(transparent)]
    Limit(#[from] limits::LimitError),
    /// Anything else: a size out of range, a data directory that cannot be read, no room
    /// for the dataset (one sentence naming the flag or the file).
    #[error("{0}")]
    Other(String),
}

impl From<String> for Error {
    fn from(s: String) -> Error {
        Error::Other(s)
    }
}

/// Everything checked before a rehearsal allocates or creates anything: each size in its
/// range, the data directory readable, the products within the machine's bounds. The plan
/// of the dataset comes back.
pub fn check(opts: &Options) -> Result<dataset::Plan, Error> {
    opts.validate()?;
    let plan = dataset::plan(
        opts.data_dir.as_deref(),
        opts.sample_bytes,
        opts.dataset_bytes,
    )?;
    limits::check(opts, &limits::Machine::read(plan.writes_to()))?;
    Ok(plan)
}

fn stage(stage: Stage, r: Result<StageFigure, String>) -> StageResult {
    StageResult {
        stage,
        result: r.into(),
    }
}

/// Rehearses the pipeline on the GPUs of `facts`. `Err`: it could not run at all (a data
/// directory that cannot be read, no room for a dataset, sizes out of range, products past
/// the machine's bounds: [`check`], before anything is made); otherwise every stage that
/// could not be measured says why in the result.
pub fn run(
    facts: &Facts,
    opts: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<MeasuredFacts, Error> {
    let plan = check(opts)?;
    let total_ms = opts.seconds as u64 * 1000;
    let mut at = 0u64;
    let mut step = |progress: &mut dyn FnMut(&Progress), msg: &str, share: f64| {
        progress(&Progress {
            message: msg.into(),
            done_ms: at.min(total_ms),
            total_ms,
        });
        at += (share * total_ms as f64) as u64;
    };
    step(progress, "writing the dataset", 0.0);
    let prepared = dataset::create(plan)?;
    let cfg = opts.loader(prepared.drop_cache);
    let ds = &prepared.dataset;
    step(progress, "storage reads alone", READ_SHARE);
    let read = loader::measure_read(ds, &cfg, opts.share(READ_SHARE));
    step(progress, "CPU transform alone", TRANSFORM_SHARE);
    let transform = loader::measure_transform(ds, &cfg, opts.share(TRANSFORM_SHARE));
    step(progress, "reads and transform together", LOADER_SHARE);
    let load = loader::measure_loader(ds, &cfg, opts.share(LOADER_SHARE), LOADER_BUFFERS);
    let stages = vec![
        stage(Stage::Read, read),
        stage(Stage::Transform, transform),
        stage(Stage::Loader, load),
    ];

    let mut mopts = measure::Options::rehearse(opts.request(cfg, ds.files.clone()));
    mopts.gpus = opts.gpus.clone();
    mopts.force = opts.force;
    let (mut m, gpu) = measure::run_with_rehearsal(facts, &mopts, progress);

    let torch = if !opts.torch {
        Reading::unavailable(gpuaudit_core::facts::TORCH_NOT_ASKED)
    } else {
        let first = gpu
            .value()
            .and_then(|g| g.gpus.first().copied())
            .or_else(|| opts.gpus.as_ref().and_then(|g| g.first().copied()))
            .or_else(|| facts.gpu_list().first().map(|g| g.index));
        match first {
            None => Reading::unavailable("no NVIDIA GPU found"),
            Some(g) => torch::run(facts, g, TORCH_SECONDS, |msg| {
                progress(&Progress {
                    message: msg.into(),
                    done_ms: total_ms,
                    total_ms,
                })
            }),
        }
    };
    m.rehearsal = Reading::Value(Rehearsal {
        config: opts.config(),
        data: prepared.source.clone(),
        stages,
        gpu,
        torch,
        notes: Vec::new(),
    });
    // The generated dataset goes now, not at exit.
    drop(prepared);
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::facts::Origin;

    fn small() -> Options {
        Options {
            batch: 4,
            sample_bytes: 16 << 10,
            tensor_bytes: 16 << 10,
            readers: 2,
            workers: 1,
            transform_cost: 1,
            seconds: 5,
            dataset_bytes: 1 << 20,
            ..Options::defaults(2)
        }
    }

    #[test]
    fn defaults_fit_the_machine_and_validate() {
        let d = Options::defaults(16);
        assert_eq!((d.readers, d.workers), (4, 14));
        let one = Options::defaults(1);
        assert_eq!((one.readers, one.workers), (1, 1));
        assert!(d.validate().is_ok());
        assert_eq!(
            d.config().flops_per_sample(),
            6.0 * 16.0 * 2048.0 * 2048.0 * 128.0
        );
        let bad = Options {
            width: 1004,
            ..d.clone()
        };
        assert!(bad.validate().unwrap_err().contains("multiple of 8"));
        let bad = Options {
            seconds: 4,
            ..d.clone()
        };
        assert_eq!(
            bad.validate().unwrap_err(),
            "--seconds 4: must be between 5 and 600"
        );
        let bad = Options {
            read_throttle_mb_s: Some(0.0),
            ..d.clone()
        };
        assert!(bad.validate().is_err());
        let bad = Options {
            steps: Some(0),
            ..d
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn the_shares_fit_the_time_budget() {
        let gpu_stages = 4.0 * GPU_STAGE_SHARE;
        let total = READ_SHARE + TRANSFORM_SHARE + LOADER_SHARE + gpu_stages + PIPELINE_SHARE;
        assert!((total - 0.85).abs() < 1e-9, "{total}");
        let r = Options::defaults(16).request(small().loader(false), vec![]);
        assert_eq!((r.stage_ms, r.pipeline_ms), (2400, 14_000));
        // The child's estimate on 8 GPUs stays within the default 40 s with the CPU stages.
        let est = measure::plan::RehearseParams::estimate_ms(&r, 8, true, true);
        assert!(est + 10_400 < 40_000 + 5_000, "{est}");
    }

    #[test]
    fn without_a_gpu_the_cpu_stages_run_and_the_gpu_stages_say_why() {
        let facts = Facts::empty(Origin::Live, "test");
        let tmp = tempfile::tempdir().unwrap();
        let opts = Options {
            data_dir: Some(tmp.path().to_path_buf()),
            ..small()
        };
        let mut seen = Vec::new();
        let m = run(&facts, &opts, &mut |p| seen.push(p.message.clone())).unwrap();
        let r = m.rehearsal.value().unwrap();
        for s in [Stage::Read, Stage::Transform, Stage::Loader] {
            let f = r.stage(s).into_value().unwrap_or_else(|| panic!("{s:?}"));
            assert!(f.samples_per_s > 0.0, "{s:?}");
        }
        assert_eq!(r.gpu.reason(), Some("no NVIDIA GPU found"));
        assert!(r.data.generated && !r.data.page_cache);
        assert!(seen.iter().any(|m| m == "storage reads alone"));
        // The dataset written into the data directory is gone.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        assert_eq!(
            r.torch.reason(),
            Some(gpuaudit_core::facts::TORCH_NOT_ASKED)
        );
    }

    #[test]
    fn a_throttled_data_directory_shows_in_the_stage_figures() {
        // Planted slow storage: 1 MB/s against a transform that runs far faster.
        let facts = Facts::empty(Origin::Live, "test");
        let opts = Options {
            read_throttle_mb_s: Some(1.0),
            ..small()
        };
        let m = run(&facts, &opts, &mut |_| {}).unwrap();
        let r = m.rehearsal.value().unwrap();
        let read = r.stage(Stage::Read).into_value().unwrap();
        let loader = r.stage(Stage::Loader).into_value().unwrap();
        let transform = r.stage(Stage::Transform).into_value().unwrap();
        assert!(read.bytes_per_s < 2.5e6, "{}", read.bytes_per_s);
        assert!(
            loader.samples_per_s < 1.3 * read.samples_per_s,
            "{loader:?}"
        );
        assert!(transform.samples_per_s > 3.0 * read.samples_per_s);
        assert!(
            r.data.page_cache,
            "a generated dataset in $TMPDIR reads from the cache"
        );
    }

    #[test]
    fn products_past_the_bounds_are_refused_before_anything_is_written() {
        let facts = Facts::empty(Origin::Live, "test");
        let tmp = tempfile::tempdir().unwrap();
        // Each flag within its range; 256 staged tensors of 256 MiB, twice, are not.
        let opts = Options {
            data_dir: Some(tmp.path().to_path_buf()),
            batch: 256,
            tensor_bytes: 256 << 20,
            ..small()
        };
        assert!(opts.validate().is_ok());
        let e = run(&facts, &opts, &mut |_| panic!("nothing may start")).unwrap_err();
        assert!(matches!(e, Error::Limit(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("--batch 256 × --tensor-kb 262144 × 2 staged batches"),
            "{e}"
        );
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_panic_unwinding_out_of_the_rehearsal_removes_its_dataset() {
        let facts = Facts::empty(Origin::Live, "test");
        let tmp = tempfile::tempdir().unwrap();
        let opts = Options {
            data_dir: Some(tmp.path().to_path_buf()),
            ..small()
        };
        let seen = std::panic::catch_unwind(|| {
            let _ = run(&facts, &opts, &mut |p| {
                if p.message == "storage reads alone" {
                    // The dataset is written by now.
                    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
                    panic!("planted");
                }
            });
        });
        assert!(seen.is_err());
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_bad_data_directory_is_an_error() {
        let facts = Facts::empty(Origin::Live, "test");
        let opts = Options {
            data_dir: Some("/nonexistent/gpuaudit".into()),
            ..small()
        };
        assert!(run(&facts, &opts, &mut |_| {})
            .unwrap_err()
            .to_string()
            .starts_with("--data-dir /nonexistent/gpuaudit"));
    }
}
