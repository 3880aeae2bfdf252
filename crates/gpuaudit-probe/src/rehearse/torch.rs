//! `gpuaudit rehearse --torch`: a short real training run of ResNet-50 (batch 64) and
//! BERT-base (batch 16, sequence 128) through the installed PyTorch, on synthetic data, from
//! the script embedded here (`torch_step.py`), each model in a process of its own under a
//! time limit (the process runner: its own process group, killed at the limit and on a
//! signal). NVML's utilisation is sampled while the timed steps run.

use crate::nvml::{self, Watcher};
use crate::process::{describe_status, Cmd, Event, Running};
use gpuaudit_core::facts::{Facts, TorchFigure, TorchRun};
use gpuaudit_core::Reading;
use serde::Deserialize;
use std::time::{Duration, Instant};

/// The script, embedded at build time.
pub const SCRIPT: &str = include_str!("torch_step.py");

/// The models and their batch (and sequence) sizes, as people quote them.
pub const MODELS: [(&str, u32, Option<u32>); 2] =
    [("resnet50", 64, None), ("bert-base", 16, Some(128))];

/// Importing torch takes seconds (3-4 s on the H200 machines), building a model and cuDNN's
/// autotuning more: each model gets this much beyond its timed seconds before it is killed.
pub const STARTUP_ALLOWANCE: Duration = Duration::from_secs(90);

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line {
    Timing,
    Result {
        samples_per_s: f64,
        step_ms: f64,
        steps: u32,
        built_from: String,
        precision: String,
        torch_version: String,
    },
    Error {
        error: String,
    },
}

/// The interpreter of the first Python environment with a CUDA build of PyTorch.
pub fn interpreter(facts: &Facts) -> Result<String, String> {
    let envs = facts
        .host
        .python
        .get()
        .map_err(|r| format!("no Python environment with PyTorch was read: {r}"))?;
    if envs.is_empty() {
        return Err("PyTorch is not installed in any Python environment found".into());
    }
    envs.iter()
        .filter(|e| e.torch.cuda.is_some())
        .find_map(|e| e.interpreter.clone())
        .ok_or_else(|| {
            "no Python environment has a CUDA build of PyTorch with an interpreter".into()
        })
}

/// Runs one model on `gpu` (NVML index; CUDA sees only it, in PCI order).
pub fn run_model(
    python: &str,
    model: &str,
    batch: u32,
    sequence: Option<u32>,
    seconds: u32,
    gpu: u32,
    watch: bool,
) -> Reading<TorchFigure> {
    let cmd = Cmd::new(python)
        .arg("-c")
        .arg(SCRIPT)
        .args([
            model.to_string(),
            batch.to_string(),
            sequence.unwrap_or(128).to_string(),
            seconds.to_string(),
        ])
        .env("CUDA_VISIBLE_DEVICES", Some(gpu.to_string()))
        .env("CUDA_DEVICE_ORDER", Some("PCI_BUS_ID"))
        .env("NCCL_NVLS_ENABLE", Some("0"))
        .env("PYTHONDONTWRITEBYTECODE", Some("1"))
        .env("CUDA_LAUNCH_BLOCKING", None::<&str>);
    let limit = STARTUP_ALLOWANCE + Duration::from_secs(seconds as u64 * 2);
    let mut watcher = if watch {
        Watcher::start(&[gpu], nvml::TIMEOUT).ok().map(|w| w.0)
    } else {
        None
    };
    let mut child = match Running::spawn(&cmd, 1 << 20, 4 << 10) {
        Ok(c) => c,
        Err(e) => return Reading::unavailable(format!("could not start {python}: {e}")),
    };
    let deadline = Instant::now() + limit;
    let mut util: Vec<f64> = Vec::new();
    let mut timing = false;
    let mut answer: Option<Result<TorchFigure, String>> = None;
    let mut tail: Vec<String> = Vec::new();
    let ended = loop {
        let slice = (Instant::now() + Duration::from_millis(100)).min(deadline);
        match child.next(slice) {
            Event::Stdout(l) => match serde_json::from_slice::<Line>(&l) {
                Ok(Line::Timing) => {
                    timing = true;
                    if let Some(w) = watcher.as_mut() {
                        w.set_interval(200);
                    }
                }
                Ok(Line::Result {
                    samples_per_s,
                    step_ms,
                    steps,
                    built_from,
                    precision,
                    torch_version,
                }) => {
                    timing = false;
                    if let Some(w) = watcher.as_mut() {
                        w.set_interval(0);
                    }
                    answer = Some(Ok(TorchFigure {
                        samples_per_s,
                        step_ms,
                        steps,
                        built_from,
                        precision,
                        torch_version,
                        nvml_utilization_pct: Reading::unavailable("NVML not sampled"),
                    }));
                }
                Ok(Line::Error { error }) => answer = Some(Err(error)),
                Err(_) => {}
            },
            Event::Stderr(l) => {
                let l = String::from_utf8_lossy(&l).trim().to_string();
                if !l.is_empty() {
                    if tail.len() == 3 {
                        tail.remove(0);
                    }
                    tail.push(l.chars().take(300).collect());
                }
            }
            Event::Exited(st) => break Ok(st),
            Event::Deadline if Instant::now() >= deadline => {
                child.kill();
                break Err(());
            }
            Event::Deadline => {}
        }
        if timing {
            if let Some(w) = watcher.as_mut() {
                for s in w.samples_until(Instant::now() + Duration::from_millis(20)) {
                    if let Some(u) = s.util_pct {
                        util.push(u as f64);
                    }
                }
            }
        }
    };
    if let Some(w) = watcher {
        w.stop();
    }
    match (answer, ended) {
        (Some(Ok(mut f)), _) => {
            f.nvml_utilization_pct = if util.is_empty() {
                Reading::unavailable("no NVML utilisation sample taken while the model ran")
            } else {
                Reading::Value(util.iter().sum::<f64>() / util.len() as f64)
            };
            Reading::Value(f)
        }
        (Some(Err(e)), _) => Reading::Unavailable(e),
        (None, Err(())) => Reading::unavailable(format!(
            "did not finish within {} s and was killed",
            limit.as_secs()
        )),
        (None, Ok(st)) => Reading::unavailable(format!(
            "the Python process {}{}",
            describe_status(&st),
            if tail.is_empty() {
                String::new()
            } else {
                format!("; its last output: {}", tail.join(" | "))
            }
        )),
    }
}

/// Every model of [`MODELS`] on `gpu`, `seconds` of timed steps each.
pub fn run(
    facts: &Facts,
    gpu: u32,
    seconds: u32,
    mut progress: impl FnMut(&str),
) -> Reading<Vec<TorchRun>> {
    let python = match interpreter(facts) {
        Ok(p) => p,
        Err(e) => return Reading::Unavailable(e),
    };
    let watch = facts.gpu_list().iter().all(|g| g.source == "nvml") && !facts.gpu_list().is_empty();
    Reading::Value(
        MODELS
            .iter()
            .map(|&(model, batch, sequence)| {
                progress(&format!("PyTorch: {model} on GPU {gpu}"));
                TorchRun {
                    model: model.into(),
                    batch,
                    sequence,
                    gpu,
                    result: run_model(&python, model, batch, sequence, seconds, gpu, watch),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in interpreter: a shell script that answers as the torch script would.
    fn fake(dir: &std::path::Path, body: &str) -> String {
        let p = dir.join("python3");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }

    #[test]
    fn the_script_is_embedded_and_answers_in_json_lines() {
        assert!(SCRIPT.contains("def plain_resnet50"));
        assert!(SCRIPT.contains("nn.TransformerEncoderLayer"));
        let d = tempfile::tempdir().unwrap();
        let py = fake(
            d.path(),
            r#"[ "$1" = "-c" ] || exit 3
echo 'chatter'
echo '{"type": "timing"}'
echo '{"type": "result", "model": "resnet50", "samples_per_s": 2900.5, "step_ms": 22.1, "steps": 40, "built_from": "torchvision", "precision": "bf16 autocast", "torch_version": "2.11.0"}'"#,
        );
        let r = run_model(&py, "resnet50", 64, None, 1, 0, false)
            .into_value()
            .unwrap();
        assert_eq!(r.samples_per_s, 2900.5);
        assert_eq!(r.built_from, "torchvision");
        assert!(r.nvml_utilization_pct.reason().is_some());
    }

    #[test]
    fn errors_crashes_and_hangs_are_reasons() {
        let d = tempfile::tempdir().unwrap();
        let py = fake(
            d.path(),
            r#"echo '{"type": "error", "error": "import torch: No module named torch"}'"#,
        );
        assert_eq!(
            run_model(&py, "resnet50", 64, None, 1, 0, false).reason(),
            Some("import torch: No module named torch")
        );
        let py = fake(d.path(), "echo 'Traceback: boom' >&2; exit 1");
        let why = run_model(&py, "bert-base", 16, Some(128), 1, 0, false);
        let why = why.reason().unwrap();
        assert!(
            why.contains("exited with status 1") && why.contains("Traceback: boom"),
            "{why}"
        );
        assert!(
            run_model("/nonexistent/python3", "resnet50", 64, None, 1, 0, false)
                .reason()
                .unwrap()
                .starts_with("could not start")
        );
    }

    #[test]
    fn without_pytorch_it_says_so() {
        let f = Facts::empty(gpuaudit_core::facts::Origin::Live, "test");
        assert!(interpreter(&f)
            .unwrap_err()
            .starts_with("no Python environment"));
        let mut f = f;
        f.host.python = Reading::Value(vec![]);
        assert_eq!(
            interpreter(&f).unwrap_err(),
            "PyTorch is not installed in any Python environment found"
        );
        assert!(run(&f, 0, 1, |_| {}).reason().is_some());
    }
}
