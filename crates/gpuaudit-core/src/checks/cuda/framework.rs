//! cuda.framework: each PyTorch installation's CUDA version and compiled architectures against
//! the driver and the GPUs.

use crate::checks::common::gpu_count;
use crate::checks::cuda::driver::driver_is_old;
use crate::checks::cuda::{bridge, compat_fix, loaded, Bridge, FORWARD_COMPAT_DOC};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, PythonEnv};
use crate::finding::{Cause, Finding, Status};
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
               GPU's compute capability, and the cuDNN and NCCL versions it carries; a build \
               for a newer CUDA than the driver's counts as runnable only through a \
               forward-compatibility libcuda that the loader reaches, and no build runs \
               without a libcuda on the loader's path. Asked \
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
    // Every CUDA build loads the driver's libcuda; without one the loader reaches, torch sees
    // no GPU (torch.cuda.is_available() is False).
    if gpus > 0
        && facts
            .host
            .libraries
            .value()
            .is_some_and(|l| loaded(l, "libcuda").is_none())
    {
        out.push(base(Finding::fail(ID, format!("{name} cannot reach the GPUs: no libcuda is on the loader's path, so torch.cuda.is_available() is False (cuda.libraries says why)")))
            .fix("see cuda.libraries: the driver's libcuda must be on the loader's path (in a container: started with the compute capability)"));
    }
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
        (Some(tc), Some(dc)) if tc > *dc => {
            let bridge = bridge(facts, tc, ID);
            // A driver cuda.driver finds too old is the cause: its fix (a current driver)
            // is the one to follow.
            let old =
                driver_is_old(facts).then(|| Cause::check(crate::checks::cuda::driver::CHECK.id));
            match bridge {
                Bridge::InUse(note) => cuda_note = note,
                Bridge::Refused(f) => out.push(base(f).with("driver_cuda", dc.to_string())),
                Bridge::OnDisk { dir, gpus_ok } if tc.major > dc.major => {
                    out.push(
                        base(Finding::fail(ID, format!("{name} is built for CUDA {tc} but the driver supports up to CUDA {dc}, and the forward-compatibility package in {dir} is on no loader path: torch.cuda.is_available() is False as the machine stands ('The NVIDIA driver on your system is too old')")))
                            .with("driver_cuda", dc.to_string())
                            .with("compat_package", &dir)
                            .with("source", FORWARD_COMPAT_DOC)
                            .fix(compat_fix(&dir, gpus_ok, dc))
                            .caused_by_opt(old),
                    );
                }
                _ if tc.major > dc.major => {
                    out.push(base(Finding::fail(ID, format!("{name} is built for CUDA {tc} but the driver supports up to CUDA {dc}: torch.cuda.is_available() is False ('The NVIDIA driver on your system is too old')")))
                        .with("driver_cuda", dc.to_string())
                        .fix(format!(
                            "install a PyTorch built for CUDA {}.x (e.g. --index-url https://download.pytorch.org/whl/cu{}{}) or upgrade the driver",
                            dc.major, dc.major, if dc.major == 12 { "6" } else { "0" }
                        ))
                        .caused_by_opt(old));
                }
                _ => {
                    out.push(base(Finding::warn(
                        ID,
                        format!("{name} is built for CUDA {tc}, newer than the {dc} the driver supports: it runs through minor-version compatibility, but kernels that need JIT compilation (PTX) fail with 'the provided PTX was compiled with an unsupported toolchain'"),
                    ))
                    .with("driver_cuda", dc.to_string())
                    .fix(format!("upgrade the driver to one that supports CUDA {tc}, or install a PyTorch built for CUDA {dc} or older"))
                    .caused_by_opt(old));
                }
            }
        }
        (Some(tc), Some(dc)) => cuda_note = format!("CUDA {tc} within the driver's {dc}"),
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
    fn a_framework_too_new_for_a_driver_cuda_driver_finds_old_is_its_consequence() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.driver.version = Reading::Value("470.256.02".into());
        f.driver.proc_version = Reading::unavailable("x");
        f.driver.cuda_version = Reading::Value(CudaVersion::new(11, 4));
        f.host.libraries = Reading::unavailable("not looked at");
        let arch = vec!["sm_90".to_string()];
        for (cuda, status) in [("12.4", Status::Fail), ("11.8", Status::Warn)] {
            f.host.python =
                Reading::Value(vec![torch_env(Some(cuda), Reading::Value(arch.clone()))]);
            let r = run_framework(&f, &Policy::default());
            assert_eq!(r[0].status, status, "{r:#?}");
            assert_eq!(r[0].caused_by, Some(Cause::check("cuda.driver")), "{cuda}");
        }
        // A current driver (CUDA 12.2) with a cu130 build: the framework's own problem.
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.driver.cuda_version = Reading::Value(CudaVersion::new(12, 2));
        f.host.python = Reading::Value(vec![torch_env(Some("13.0"), Reading::Value(arch))]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert_eq!(r[0].caused_by, None);
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

    fn cu130_on_535() -> Facts {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.driver.version = Reading::Value("535.261.03".into());
        f.driver.cuda_version = Reading::Value(CudaVersion::new(12, 2));
        f.driver.proc_version = Reading::unavailable("x");
        f.toolkit = Reading::Value(vec![crate::facts::Toolkit {
            path: "/usr/local/cuda-13.0".into(),
            version: "13.0.88".into(),
            cuda: CudaVersion::new(13, 0),
            source: "version.json".into(),
            forward_compat: true,
        }]);
        f.host.libraries = Reading::Value(vec![driver_libcuda()]);
        f.host.python = Reading::Value(vec![torch_env(
            Some("13.0"),
            Reading::Value(vec!["sm_90".to_string()]),
        )]);
        f
    }

    fn driver_libcuda() -> crate::facts::LibraryCopy {
        crate::checks::cuda::copy(
            "libcuda",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "libcuda.so.535.261.03",
            Some("535.261.03"),
            crate::facts::LibrarySource::LdCache,
        )
    }

    fn compat_loaded(v: &str) -> crate::facts::LibraryCopy {
        crate::checks::cuda::copy(
            "libcuda",
            "/usr/local/cuda-13.0/compat/libcuda.so.1",
            &format!("libcuda.so.{v}"),
            Some(v),
            crate::facts::LibrarySource::LdLibraryPath,
        )
    }

    #[test]
    fn a_compat_package_off_the_loader_path_bridges_nothing() {
        // Seen: warn "only the forward-compatibility package can bridge that" while
        // torch.cuda.is_available() was False.
        let f = cu130_on_535();
        let r = run_framework(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("on no loader path"));
        assert!(r[0].message.contains("is_available() is False"));
        let fix = r[0].fix.as_deref().unwrap_or_default();
        assert!(
            fix.contains("export LD_LIBRARY_PATH=/usr/local/cuda-13.0/compat:$LD_LIBRARY_PATH"),
            "{fix}"
        );
        assert!(fix.contains("cuda-compat") && fix.contains("data-center GPUs"));
        // On a GeForce card the package would not work: the fix says upgrade.
        let mut g = cu130_on_535();
        if let Reading::Value(gpus) = &mut g.gpus {
            gpus[0].name = Reading::Value("NVIDIA GeForce RTX 4090".into());
        }
        let r = run_framework(&g, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.starts_with("upgrade the driver")));
        // A package for an older CUDA than torch needs does not count.
        let mut h = cu130_on_535();
        if let Reading::Value(k) = &mut h.toolkit {
            k[0].cuda = CudaVersion::new(12, 8);
        }
        let r = run_framework(&h, &Policy::default());
        assert!(r[0].message.contains("too old") && !r[0].message.contains("loader path"));
    }

    #[test]
    fn a_compat_package_on_the_loader_path_bridges() {
        let mut f = cu130_on_535();
        f.host.libraries = Reading::Value(vec![compat_loaded("580.95.05")]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass], "{r:#?}");
        assert!(r[0]
            .message
            .contains("CUDA 13.0 through the forward-compatibility libcuda 580.95.05"));
        // ... but not for a newer CUDA than it brings.
        f.host.python = Reading::Value(vec![torch_env(
            Some("13.1"),
            Reading::Value(vec!["sm_90".into()]),
        )]);
        if let Reading::Value(k) = &mut f.toolkit {
            k.clear();
        }
        assert_eq!(
            run_framework(&f, &Policy::default())[0].status,
            Status::Fail
        );
        // On a GeForce card it cannot.
        let mut g = cu130_on_535();
        g.host.libraries = Reading::Value(vec![compat_loaded("580.95.05")]);
        if let Reading::Value(gpus) = &mut g.gpus {
            gpus[0].name = Reading::Value("NVIDIA GeForce RTX 4090".into());
        }
        let r = run_framework(&g, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0].message.contains("error 804"));
        // A minor version ahead (12.4 on 12.2), bridged too.
        let mut m = cu130_on_535();
        m.host.libraries = Reading::Value(vec![compat_loaded("580.95.05")]);
        m.host.python = Reading::Value(vec![torch_env(
            Some("12.4"),
            Reading::Value(vec!["sm_90".into()]),
        )]);
        assert_eq!(
            statuses(&run_framework(&m, &Policy::default())),
            vec![Status::Pass]
        );
        // Without it: minor version compatibility, a warning.
        m.host.libraries = Reading::Value(vec![driver_libcuda()]);
        assert_eq!(
            run_framework(&m, &Policy::default())[0].status,
            Status::Warn
        );
    }

    #[test]
    fn no_libcuda_means_no_gpu_for_torch() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.python = Reading::Value(vec![torch_env(
            Some("13.0"),
            Reading::Value(vec!["sm_90".into()]),
        )]);
        f.host.libraries = Reading::Value(vec![]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(r[0].message.contains("torch.cuda.is_available() is False"));
        // Not read: not judged.
        f.host.libraries = Reading::unavailable("x");
        assert_eq!(
            statuses(&run_framework(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // No GPU: nothing to reach.
        f.host.libraries = Reading::Value(vec![]);
        f.gpus = Reading::Value(vec![]);
        f.pci_gpus = Reading::Value(vec![]);
        assert_eq!(
            statuses(&run_framework(&f, &Policy::default())),
            vec![Status::Pass]
        );
    }

    #[test]
    fn rocm_builds_interpreter_errors_and_unknown_versions() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let mut e = torch_env(Some("12.4"), Reading::Value(vec!["sm_90".into()]));
        e.torch.hip = Some("6.2".into());
        f.host.python = Reading::Value(vec![e.clone()]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("ROCm"));
        let mut e = torch_env(Some("12.4"), Reading::Value(vec!["sm_90".into()]));
        e.torch.interpreter_error = Some("timed out after 30 s".into());
        f.host.python = Reading::Value(vec![e.clone()]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
        e.torch.interpreter_error = Some("ImportError: libcudnn.so.9".into());
        f.host.python = Reading::Value(vec![e]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn]);
        let e = torch_env(Some("twelve"), Reading::Value(vec!["sm_90".into()]));
        f.host.python = Reading::Value(vec![e]);
        let r = run_framework(&f, &Policy::default());
        assert!(r[0].message.contains("not a version gpuaudit understands"));
        let e = torch_env(
            Some("12.4"),
            Reading::Value(vec!["sm_80".into(), "compute_80".into()]),
        );
        f.host.python = Reading::Value(vec![e]);
        let r = run_framework(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("only PTX"));
        f.driver.cuda_version = Reading::unavailable("nvml");
        let e = torch_env(Some("12.4"), Reading::Value(vec![]));
        f.host.python = Reading::Value(vec![e]);
        let r = run_framework(&f, &Policy::default());
        assert!(r[0]
            .message
            .contains("driver's CUDA version is unknown (nvml)"));
        assert!(r[0].message.contains("none reported"));
        f.host.python = Reading::unavailable("x");
        assert_eq!(
            statuses(&run_framework(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }
}
