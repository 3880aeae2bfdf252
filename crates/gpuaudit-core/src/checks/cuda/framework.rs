//! cuda.framework: each PyTorch installation's CUDA version and compiled architectures against
//! the driver and the GPUs.

use crate::checks::common::gpu_count;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, PythonEnv};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::{coverage, Coverage};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "cuda.framework";

pub const CHECK: Check = Check {
    id: ID,
    title: "PyTorch's CUDA version and compiled architectures against the driver and GPUs",
    looks_at: "PyTorch (if installed): its CUDA version against the driver, its compiled \
               architectures against the GPU's compute capability (\"no kernel image is \
               available\")",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Each PyTorch installation found (system, user, virtualenvs, conda): its \
               version, the CUDA version it was built with against the newest CUDA the \
               driver supports, the GPU architectures it was compiled for against each \
               GPU's compute capability, and the cuDNN and NCCL versions it carries. Asked \
               from the environment's interpreter with a time limit where possible, read \
               from torch/version.py and the wheels otherwise.",
        why: "A PyTorch built for a newer CUDA major than the driver supports cannot use the \
              GPU at all ('The NVIDIA driver on your system is too old'); one built without \
              the GPU's architecture fails at the first kernel with 'no kernel image is \
              available for execution on the device' (an old wheel on an H100/H200, a new \
              one on a P100); one that only has PTX for it JIT-compiles every kernel at \
              start-up (minutes) and misses the architecture's features. A CPU-only build \
              silently runs everything on the CPU.",
        verify: "python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list())'\n\
                 nvidia-smi --query-gpu=name,compute_cap --format=csv\n\
                 nvidia-smi | head -4   # 'CUDA Version' is the newest the driver supports",
        fix: "Install the wheel that matches the driver and the GPUs, e.g. \
              `pip install torch --index-url https://download.pytorch.org/whl/cu128` for \
              Blackwell, cu126/cu124 for Hopper and older; or upgrade the driver. Building \
              from source: set TORCH_CUDA_ARCH_LIST to include every GPU's capability.",
    },
    profiles: &[],
    run: run_framework,
};

fn run_framework(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let envs = match facts.host.python.get() {
        Ok(e) => e,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not look for PyTorch: {r}"),
            )]
        }
    };
    if envs.is_empty() {
        return vec![Finding::info(
            ID,
            "no PyTorch installation found in the Python environments searched".to_string(),
        )];
    }
    let gpus = gpu_count(facts).unwrap_or(0);
    let mut out = Vec::new();
    for env in envs {
        out.extend(judge_torch(facts, policy, env, gpus));
    }
    out
}

fn judge_torch(facts: &Facts, policy: &Policy, env: &PythonEnv, gpus: usize) -> Vec<Finding> {
    let t = &env.torch;
    let mut out = Vec::new();
    let name = format!("torch {} in {}", t.version, env.site_packages);
    let base = |f: Finding| {
        f.with("site_packages", &env.site_packages)
            .with("interpreter", &env.interpreter)
            .with("torch", &t.version)
            .with("torch_cuda", &t.cuda)
            .with("source", &t.source)
    };
    if let Some(hip) = &t.hip {
        let f = if gpus > 0 {
            Finding::fail(ID, format!("{name} is a ROCm (HIP {hip}) build: it cannot use NVIDIA GPUs"))
                .fix("install a CUDA build of PyTorch (pip install torch --index-url https://download.pytorch.org/whl/cu126)")
        } else {
            Finding::info(ID, format!("{name} is a ROCm (HIP {hip}) build"))
        };
        out.push(base(f));
        return out;
    }
    let Some(cuda) = &t.cuda else {
        let f = if gpus > 0 {
            Finding::fail(ID, format!("{name} is a CPU-only build: everything it runs stays on the CPU, the GPUs sit idle"))
                .fix("install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu126 (pick the CUDA version the driver supports)")
        } else {
            Finding::info(ID, format!("{name} is a CPU-only build"))
        };
        out.push(base(f));
        return out;
    };
    if let Some(err) = &t.interpreter_error {
        let f = if err.contains("timed out") {
            Finding::info(ID, format!("asking the interpreter about {name} gave no answer ({err}); read the installed files instead"))
        } else {
            Finding::warn(ID, format!("`import torch` fails in {}: {err}", env.interpreter.as_deref().unwrap_or(&env.site_packages)))
                .fix("run the interpreter by hand to see the full error; a missing libcudnn/libnccl usually means an incomplete install (pip install --force-reinstall torch) or an LD_LIBRARY_PATH that hides the wheels")
        };
        out.push(base(f));
    }

    // CUDA version against the driver.
    let mut cuda_note = String::new();
    match (
        crate::facts::CudaVersion::parse(cuda),
        facts.driver.cuda_version.value(),
    ) {
        (Some(tc), Some(dc)) => {
            if tc.major > dc.major {
                let compat = facts
                    .toolkit
                    .value()
                    .is_some_and(|tks| tks.iter().any(|tk| tk.forward_compat && tk.cuda >= tc));
                let f = if compat {
                    Finding::warn(ID, format!("{name} needs CUDA {tc}; the driver supports up to {dc}; only the forward-compatibility package can bridge that (data-center GPUs only)"))
                } else {
                    Finding::fail(ID, format!("{name} is built for CUDA {tc} but the driver supports up to CUDA {dc}: torch.cuda.is_available() is False ('The NVIDIA driver on your system is too old')"))
                };
                out.push(base(f).with("driver_cuda", dc.to_string()).fix(format!(
                    "install a PyTorch built for CUDA {}.x (e.g. --index-url https://download.pytorch.org/whl/cu{}{}) or upgrade the driver",
                    dc.major, dc.major, if dc.major == 12 { "6" } else { "0" }
                )));
            } else if tc > *dc {
                out.push(base(Finding::warn(
                    ID,
                    format!("{name} is built for CUDA {tc}, newer than the {dc} the driver supports: it runs through minor-version compatibility, but kernels that need JIT compilation (PTX) fail with 'the provided PTX was compiled with an unsupported toolchain'"),
                ))
                .with("driver_cuda", dc.to_string())
                .fix(format!("upgrade the driver to one that supports CUDA {tc}, or install a PyTorch built for CUDA {dc} or older")));
            } else {
                cuda_note = format!("CUDA {tc} within the driver's {dc}");
            }
        }
        (None, _) => cuda_note = format!("CUDA '{cuda}' (not a version gpuaudit understands)"),
        (_, None) => {
            cuda_note = format!(
                "CUDA {cuda}; the driver's CUDA version is unknown ({})",
                facts.driver.cuda_version.reason().unwrap_or("not read")
            )
        }
    }

    // Compiled architectures against each GPU.
    let mut covered = Vec::new();
    let arch_note = match &t.arch_list {
        Reading::Value(list) if !list.is_empty() => {
            for g in facts.gpu_list().iter().filter(|g| policy.selects(g.index)) {
                let Some(cc) = g.compute_capability.value() else {
                    continue;
                };
                match coverage(list, cc.major, cc.minor) {
                    Coverage::Sass(a) => covered.push(format!("GPU {} ({a})", g.index)),
                    Coverage::PtxOnly(a) => out.push(
                        base(Finding::warn(
                            ID,
                            format!("{name} has no machine code for {} (compute capability {cc}), only PTX ({a}): every kernel is JIT-compiled at first use (minutes of start-up, cached in ~/.nv/ComputeCache) and misses sm_{}{} features", g.label(), cc.major, cc.minor),
                        ))
                        .gpu(g.index)
                        .with("arch_list", list)
                        .fix("install a PyTorch build that lists this architecture (torch.cuda.get_arch_list())"),
                    ),
                    Coverage::None => out.push(
                        base(Finding::fail(
                            ID,
                            format!("{name} was compiled for {} but not for {} (compute capability {cc}): CUDA kernels fail with 'no kernel image is available for execution on the device'", list.join(" "), g.label()),
                        ))
                        .gpu(g.index)
                        .with("arch_list", list)
                        .fix(format!("install a PyTorch build that includes sm_{}{} (for Hopper: any CUDA 12 wheel of torch 2.x; for Blackwell: cu128 wheels of torch 2.7 or newer)", cc.major, cc.minor)),
                    ),
                }
            }
            format!("compiled for {}", list.join(" "))
        }
        Reading::Value(_) => "compiled architectures: none reported".into(),
        Reading::Unavailable(r) => format!("compiled architectures unknown ({r})"),
    };

    let worst = out.iter().map(|f| f.status).max();
    if worst.is_none_or(|s| s < Status::Warn) {
        let mut msg = format!("{name}: {cuda_note}; {arch_note}");
        if !covered.is_empty() {
            msg.push_str(&format!("; runs natively on {}", covered.join(", ")));
        }
        out.push(
            base(Finding::pass(ID, msg))
                .with("cudnn", reading_str(&t.cudnn))
                .with("nccl", reading_str(&t.nccl))
                .with("nvidia_wheels", &env.nvidia_wheels),
        );
    }
    out
}

fn reading_str(r: &Reading<String>) -> String {
    match r {
        Reading::Value(v) => v.clone(),
        Reading::Unavailable(why) => format!("unknown ({why})"),
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{CudaVersion, TorchInstall};
    use crate::testing::{statuses, Machine};

    fn torch_env(cuda: Option<&str>, arch: Reading<Vec<String>>) -> PythonEnv {
        PythonEnv {
            site_packages: "/opt/venv/lib/python3.12/site-packages".into(),
            kind: "venv".into(),
            interpreter: Some("/opt/venv/bin/python".into()),
            torch: TorchInstall {
                version: "1.13.1+cu117".into(),
                cuda: cuda.map(str::to_string),
                hip: None,
                arch_list: arch,
                cudnn: Reading::Value("8.5.0".into()),
                nccl: Reading::Value("2.14.3".into()),
                source: "interpreter".into(),
                interpreter_error: None,
            },
            nvidia_wheels: vec![],
        }
    }

    #[test]
    fn framework_without_sm90_fails_per_gpu() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        let arch = crate::parse::host::cudaenv::parse_arch_flags(
            "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86",
        );
        f.host.python = Reading::Value(vec![torch_env(Some("11.7"), Reading::Value(arch))]);
        let r = run_framework(&f, &Policy::default());
        let fails: Vec<&Finding> = r.iter().filter(|x| x.status == Status::Fail).collect();
        assert_eq!(fails.len(), 2, "{r:#?}");
        assert_eq!(fails[0].gpu, Some(0));
        assert!(fails[0].message.contains("no kernel image"));
        // --gpus 1 judges GPU 1 only.
        let p = Policy {
            gpus: Some(vec![1]),
            ..Policy::default()
        };
        let r = run_framework(&f, &p);
        assert_eq!(r.iter().filter(|x| x.status == Status::Fail).count(), 1);
    }

    #[test]
    fn framework_cuda_too_new_cpu_build_and_pass() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.driver.cuda_version = Reading::Value(CudaVersion::new(12, 2));
        let arch = vec!["sm_90".to_string()];
        f.host.python = Reading::Value(vec![torch_env(Some("13.0"), Reading::Value(arch.clone()))]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0].message.contains("too old"));
        f.host.python = Reading::Value(vec![torch_env(Some("12.4"), Reading::Value(arch.clone()))]);
        assert_eq!(
            run_framework(&f, &Policy::default())[0].status,
            Status::Warn
        );
        f.host.python = Reading::Value(vec![torch_env(None, Reading::Value(vec![]))]);
        assert!(run_framework(&f, &Policy::default())[0]
            .message
            .contains("CPU-only"));
        f.driver.cuda_version = Reading::Value(CudaVersion::new(13, 0));
        f.host.python = Reading::Value(vec![torch_env(
            Some("12.4"),
            Reading::unavailable("interpreter not asked"),
        )]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(r[0].message.contains("unknown (interpreter not asked)"));
        f.host.python = Reading::Value(vec![]);
        assert_eq!(
            run_framework(&f, &Policy::default())[0].status,
            Status::Info
        );
    }
}
