//! The CUDA software stack: cuda.libraries, cuda.framework, cuda.env.

use super::hostcommon::{gpu_count, plural};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, LibraryCopy, LibrarySource, PythonEnv};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::{
    coverage, is_set, parse_torch_arch_list, parse_visible_devices, specs_as_arch_list, Coverage,
    DeviceRef, VisibleDevices,
};
use crate::parse::host::libs::{cmp_versions, version_prefix, LIBRARIES};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "cuda.libraries",
        title: "Where the CUDA libraries resolve, their versions, and duplicates",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Every copy of libcuda, libnvidia-ml, libcudart, libcublas, libcublasLt, libnvrtc, \
                   libnccl and libcudnn on the machine: the directories of LD_LIBRARY_PATH, the \
                   loader's cache (/etc/ld.so.cache), CUDA toolkit directories, conda \
                   environments, and the NVIDIA wheels and framework directories of Python \
                   environments (site-packages/nvidia/*, torch/lib). For each, the file it \
                   resolves to and its version (from the file name, or from the wheel's \
                   metadata).",
            why: "A program loads the first copy the loader finds: LD_LIBRARY_PATH first, then the \
                  RUNPATH of the library asking, then the cache. When two versions of NCCL or \
                  cuBLAS live on one machine, which one a process gets depends on how it was \
                  started: the classic 'NCCL version mismatch' between ranks, 'undefined \
                  symbol' errors when libcublas and libcublasLt come from different releases, \
                  or a job that is slow on one node only. A libcuda or libnvidia-ml whose \
                  version differs from the loaded kernel module fails outright ('driver/library \
                  version mismatch', 'CUDA driver version is insufficient').",
            verify: "ldconfig -p | grep -E 'libcuda|libnccl|libcublas|libcudart|libnvrtc|libcudnn|libnvidia-ml'\n\
                     echo $LD_LIBRARY_PATH | tr : '\\n' | xargs -I{} sh -c 'ls -l {}/libnccl* {}/libcuda* 2>/dev/null'\n\
                     pip list 2>/dev/null | grep -i nvidia\n\
                     python -c 'import torch; print(torch.cuda.nccl.version())'\n\
                     cat /proc/driver/nvidia/version   # the kernel module's version, which libcuda must match",
            fix: "Keep one copy of each library per environment: remove stale copies from \
                  LD_LIBRARY_PATH (or unset it) so the framework uses the wheels it was built \
                  with; for libcuda / libnvidia-ml, reinstall the driver's user-space package of \
                  the same version as the kernel module (or reboot after a driver upgrade) and \
                  never copy libcuda into an image.",
        },
        run: run_libraries,
    },
    Check {
        id: "cuda.framework",
        title: "PyTorch's CUDA version and compiled architectures against the driver and GPUs",
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
        run: run_framework,
    },
    Check {
        id: "cuda.env",
        title: "Environment variables that change CUDA, NCCL and the loader",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The environment gpuaudit runs in: CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER, \
                   CUDA_MODULE_LOADING, CUDA_LAUNCH_BLOCKING, CUDA_CACHE_DISABLE, NCCL_P2P_DISABLE, \
                   NCCL_IB_DISABLE, NCCL_SHM_DISABLE, NCCL_DEBUG, TORCH_CUDA_ARCH_LIST against the \
                   GPUs, and LD_LIBRARY_PATH / LD_PRELOAD entries that shadow the driver's \
                   libraries or make the loader search the current directory.",
            why: "These variables are inherited by every job started from the same shell, \
                  profile or container image, and they are invisible in the code: \
                  CUDA_VISIBLE_DEVICES hides GPUs you pay for, CUDA_LAUNCH_BLOCKING=1 \
                  serialises every kernel launch, NCCL_P2P_DISABLE=1 sends GPU-to-GPU traffic \
                  through host memory instead of NVLink, NCCL_IB_DISABLE=1 sends multi-node \
                  traffic over TCP, and a libcuda on LD_LIBRARY_PATH that does not match the \
                  kernel module breaks CUDA initialisation.",
            verify: "env | grep -E '^(CUDA_|NCCL_|LD_LIBRARY_PATH|LD_PRELOAD|TORCH_CUDA_ARCH_LIST)'\n\
                     grep -rE 'CUDA_|NCCL_|LD_LIBRARY_PATH' ~/.bashrc ~/.profile /etc/environment /etc/profile.d 2>/dev/null",
            fix: "Unset the variable (or remove it from ~/.bashrc, /etc/environment, the image's \
                  ENV, the job script); set it per job only where it is meant, e.g. \
                  `CUDA_VISIBLE_DEVICES=0 python train.py`.",
        },
        run: run_env,
    },
];

const ID_LIBS: &str = "cuda.libraries";
const ID_FW: &str = "cuda.framework";
const ID_ENV: &str = "cuda.env";

/// Loader order: LD_LIBRARY_PATH, the cache, then the rest (which a program reaches only
/// through its RUNPATH or an explicit path).
fn source_rank(s: &LibrarySource) -> u8 {
    match s {
        LibrarySource::LdLibraryPath => 0,
        LibrarySource::LdCache => 1,
        _ => 2,
    }
}

fn describe(c: &LibraryCopy) -> String {
    format!(
        "{} -> {} [{}]{}",
        c.path,
        c.file,
        c.source.label(),
        c.version
            .as_deref()
            .map(|v| format!(" version {v}"))
            .unwrap_or_default()
    )
}

/// Whether this copy belongs to a CUDA forward-compatibility package (its libcuda is meant
/// to differ from the kernel module's version).
fn is_compat(c: &LibraryCopy) -> bool {
    c.path.contains("/compat/")
}

fn run_libraries(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let copies = match facts.host.libraries.get() {
        Ok(c) => c,
        Err(r) => {
            return vec![Finding::skip(
                ID_LIBS,
                format!("could not list the CUDA libraries: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts).unwrap_or(0);
    let mut out = Vec::new();
    let has = |lib: &str| copies.iter().any(|c| c.library == lib);
    if !has("libcuda") {
        let f = if gpus > 0 {
            Finding::fail(
                ID_LIBS,
                format!(
                    "libcuda (the driver's user-space library) was not found, so no CUDA program can run on the {}",
                    plural(gpus, "GPU", "GPUs")),
            )
            .fix("install the driver's user-space package of the same version as the kernel module (e.g. libnvidia-compute-<branch> on Ubuntu); in a container, start it with the NVIDIA container toolkit (--gpus all / --runtime=nvidia / a CDI device) so the host's libcuda is mounted")
        } else {
            Finding::info(ID_LIBS, "libcuda was not found (no NVIDIA GPU here either)")
        };
        out.push(f.with("searched", copies.len()));
    }

    let driver = facts.driver.version.value();
    for lib in ["libcuda", "libnvidia-ml"] {
        let Some(driver) = driver else { break };
        let mismatched: Vec<&LibraryCopy> = copies
            .iter()
            .filter(|c| c.library == lib && source_rank(&c.source) <= 1 && !is_compat(c))
            .filter(|c| c.version.as_deref().is_some_and(|v| v != driver))
            .collect();
        if mismatched.is_empty() {
            continue;
        }
        let first = first_resolved(copies, lib);
        let first_bad = first.is_some_and(|f| mismatched.contains(&f));
        let what = if lib == "libcuda" {
            "CUDA initialisation fails ('CUDA driver version is insufficient' or error 803, 'system has unsupported display driver / cuda driver combination')"
        } else {
            "NVML and nvidia-smi fail with 'Failed to initialize NVML: Driver/library version mismatch'"
        };
        let msg = format!(
            "{lib} {} is on the loader's path but the kernel module is {driver}{}: {what}",
            mismatched
                .iter()
                .filter_map(|c| c.version.as_deref())
                .collect::<Vec<_>>()
                .join(", "),
            if first_bad {
                " and it is the copy programs load"
            } else {
                ""
            }
        );
        let f = if first_bad {
            Finding::fail(ID_LIBS, msg)
        } else {
            Finding::warn(ID_LIBS, msg)
        };
        out.push(
            f.with("driver_version", driver)
                .with("copies", mismatched.iter().map(|c| describe(c)).collect::<Vec<_>>())
                .fix(format!("remove the stale {lib} copies listed (or the LD_LIBRARY_PATH entry that holds them); after a driver upgrade, reboot (or reload the nvidia modules) so the kernel module and the user-space libraries match")),
        );
    }

    // Several versions of the same library under one soname (libnccl.so.2 2.18.1 and 2.21.5):
    // which one a process gets depends on how it was started. Different majors have different
    // sonames (libcublas.so.11, libcublas.so.13) and cannot be confused by the loader.
    for lib in LIBRARIES
        .iter()
        .filter(|l| !matches!(**l, "libcuda" | "libnvidia-ml"))
    {
        let mut majors: Vec<&str> = copies
            .iter()
            .filter(|c| c.library == *lib)
            .filter_map(|c| c.version.as_deref().map(major_of))
            .collect();
        majors.sort_by(|a, b| cmp_versions(a, b));
        majors.dedup();
        for major in majors {
            let of: Vec<&LibraryCopy> = copies
                .iter()
                .filter(|c| c.library == *lib && c.version.as_deref().map(major_of) == Some(major))
                .collect();
            let mut versions: Vec<&str> = of.iter().filter_map(|c| c.version.as_deref()).collect();
            versions.sort_by(|a, b| cmp_versions(a, b));
            versions.dedup();
            if versions.len() < 2 {
                continue;
            }
            let severe = matches!(*lib, "libnccl" | "libcublas" | "libcublasLt" | "libcudnn");
            let first = first_resolved(copies, lib)
                .filter(|f| f.version.as_deref().map(major_of) == Some(major));
            let msg = format!(
                "{} versions of {lib}.so.{major} on this machine ({}){}: which one a process loads depends on LD_LIBRARY_PATH and on the framework's RUNPATH{}",
                versions.len(),
                versions.join(", "),
                first
                    .map(|f| format!("; a program without RUNPATH gets {}", f.version.as_deref().unwrap_or(&f.file)))
                    .unwrap_or_default(),
                if *lib == "libnccl" {
                    ", the usual cause of 'NCCL version mismatch' between ranks"
                } else {
                    ""
                }
            );
            let f = if severe {
                Finding::warn(ID_LIBS, msg)
            } else {
                Finding::info(ID_LIBS, msg)
            };
            out.push(
                f.with("library", *lib)
                    .with("versions", &versions)
                    .with("copies", of.iter().map(|c| describe(c)).collect::<Vec<_>>())
                    .fix(format!("keep one {lib} per environment: drop the LD_LIBRARY_PATH entries or packages that bring the others (each Python environment should use its own wheels)")),
            );
        }
    }

    // LD_LIBRARY_PATH shadows a wheel that a framework was installed with.
    for lib in ["libnccl", "libcublas", "libcudnn"] {
        let ldp: Vec<&LibraryCopy> = copies
            .iter()
            .filter(|c| c.library == lib && c.source == LibrarySource::LdLibraryPath)
            .collect();
        let wheels: Vec<&LibraryCopy> = copies
            .iter()
            .filter(|c| c.library == lib && matches!(c.source, LibrarySource::Wheel { .. }))
            .collect();
        let (Some(l), false) = (ldp.first(), wheels.is_empty()) else {
            continue;
        };
        let differs: Vec<&&LibraryCopy> = wheels
            .iter()
            .filter(|w| matches!((&w.version, &l.version), (Some(a), Some(b)) if a != b && major_of(a) == major_of(b)))
            .collect();
        if differs.is_empty() {
            continue;
        }
        out.push(
            Finding::warn(
                ID_LIBS,
                format!(
                    "LD_LIBRARY_PATH puts {lib} {} ahead of the {} the Python wheels installed ({}): the loader searches LD_LIBRARY_PATH before a framework's RUNPATH, so the framework runs with a library it was not built with",
                    l.version.as_deref().unwrap_or("?"),
                    lib,
                    differs.iter().filter_map(|w| w.version.as_deref()).collect::<Vec<_>>().join(", ")
                ),
            )
            .with("ld_library_path_copy", describe(l))
            .with("wheel_copies", differs.iter().map(|c| describe(c)).collect::<Vec<_>>())
            .fix("unset LD_LIBRARY_PATH (or remove that directory from it) before starting Python"),
        );
    }

    // libcublas and libcublasLt of one directory must come from one release.
    let dir = |p: &str| {
        p.rsplit_once('/')
            .map(|(d, _)| d.to_string())
            .unwrap_or_default()
    };
    for b in copies.iter().filter(|c| c.library == "libcublas") {
        let Some(bv) = &b.version else { continue };
        for lt in copies
            .iter()
            .filter(|c| c.library == "libcublasLt" && dir(&c.path) == dir(&b.path))
        {
            if let Some(lv) = &lt.version {
                if version_prefix(lv, 3) != version_prefix(bv, 3) {
                    out.push(
                        Finding::warn(
                            ID_LIBS,
                            format!("libcublas {bv} and libcublasLt {lv} in {} come from different releases: expect 'undefined symbol' errors or wrong results", dir(&b.path)),
                        )
                        .with("libcublas", describe(b))
                        .with("libcublasLt", describe(lt))
                        .fix("install libcublas and libcublasLt from the same package (they ship together)"),
                    );
                }
            }
        }
    }

    let summary: Vec<String> = LIBRARIES
        .iter()
        .filter_map(|lib| {
            let f = first_resolved(copies, lib)
                .or_else(|| copies.iter().find(|c| c.library == *lib))?;
            Some(format!(
                "{lib} {}",
                f.version.as_deref().unwrap_or("(version unknown)")
            ))
        })
        .collect();
    let status = if out
        .iter()
        .any(|f| f.status >= Status::Warn && f.status != Status::Skip)
    {
        Status::Info
    } else {
        Status::Pass
    };
    let msg = if copies.is_empty() {
        "no CUDA library found".to_string()
    } else if status == Status::Pass {
        format!("one version of each CUDA library: {}", summary.join(", "))
    } else {
        format!("CUDA libraries found: {}", summary.join(", "))
    };
    out.push(
        Finding::new(ID_LIBS, status, msg)
            .with("copies", copies.iter().map(describe).collect::<Vec<_>>()),
    );
    out
}

/// "2.21.5" -> "2": the soname's number.
fn major_of(v: &str) -> &str {
    v.split('.').next().unwrap_or(v)
}

/// The copy a program without RUNPATH loads: LD_LIBRARY_PATH, then the cache; `.so.N` names
/// first (that is what programs link against).
fn first_resolved<'a>(copies: &'a [LibraryCopy], lib: &str) -> Option<&'a LibraryCopy> {
    copies
        .iter()
        .filter(|c| c.library == lib && source_rank(&c.source) <= 1)
        .min_by_key(|c| source_rank(&c.source))
}

fn run_framework(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let envs = match facts.host.python.get() {
        Ok(e) => e,
        Err(r) => {
            return vec![Finding::skip(
                ID_FW,
                format!("could not look for PyTorch: {r}"),
            )]
        }
    };
    if envs.is_empty() {
        return vec![Finding::info(
            ID_FW,
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
            Finding::fail(ID_FW, format!("{name} is a ROCm (HIP {hip}) build: it cannot use NVIDIA GPUs"))
                .fix("install a CUDA build of PyTorch (pip install torch --index-url https://download.pytorch.org/whl/cu126)")
        } else {
            Finding::info(ID_FW, format!("{name} is a ROCm (HIP {hip}) build"))
        };
        out.push(base(f));
        return out;
    }
    let Some(cuda) = &t.cuda else {
        let f = if gpus > 0 {
            Finding::fail(ID_FW, format!("{name} is a CPU-only build: everything it runs stays on the CPU, the GPUs sit idle"))
                .fix("install a CUDA build: pip install torch --index-url https://download.pytorch.org/whl/cu126 (pick the CUDA version the driver supports)")
        } else {
            Finding::info(ID_FW, format!("{name} is a CPU-only build"))
        };
        out.push(base(f));
        return out;
    };
    if let Some(err) = &t.interpreter_error {
        let f = if err.contains("timed out") {
            Finding::info(ID_FW, format!("asking the interpreter about {name} gave no answer ({err}); read the installed files instead"))
        } else {
            Finding::warn(ID_FW, format!("`import torch` fails in {}: {err}", env.interpreter.as_deref().unwrap_or(&env.site_packages)))
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
                    Finding::warn(ID_FW, format!("{name} needs CUDA {tc}; the driver supports up to {dc}; only the forward-compatibility package can bridge that (data-center GPUs only)"))
                } else {
                    Finding::fail(ID_FW, format!("{name} is built for CUDA {tc} but the driver supports up to CUDA {dc}: torch.cuda.is_available() is False ('The NVIDIA driver on your system is too old')"))
                };
                out.push(base(f).with("driver_cuda", dc.to_string()).fix(format!(
                    "install a PyTorch built for CUDA {}.x (e.g. --index-url https://download.pytorch.org/whl/cu{}{}) or upgrade the driver",
                    dc.major, dc.major, if dc.major == 12 { "6" } else { "0" }
                )));
            } else if tc > *dc {
                out.push(base(Finding::warn(
                    ID_FW,
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
                            ID_FW,
                            format!("{name} has no machine code for {} (compute capability {cc}), only PTX ({a}): every kernel is JIT-compiled at first use (minutes of start-up, cached in ~/.nv/ComputeCache) and misses sm_{}{} features", g.label(), cc.major, cc.minor),
                        ))
                        .gpu(g.index)
                        .with("arch_list", list)
                        .fix("install a PyTorch build that lists this architecture (torch.cuda.get_arch_list())"),
                    ),
                    Coverage::None => out.push(
                        base(Finding::fail(
                            ID_FW,
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

    let worst = out.iter().map(|f| f.status).max_by_key(|s| s.severity());
    if worst.is_none_or(|s| s.severity() < Status::Warn.severity()) {
        let mut msg = format!("{name}: {cuda_note}; {arch_note}");
        if !covered.is_empty() {
            msg.push_str(&format!("; runs natively on {}", covered.join(", ")));
        }
        out.push(
            base(Finding::pass(ID_FW, msg))
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

fn run_env(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let env = match facts.host.env.get() {
        Ok(e) => e,
        Err(r) => {
            return vec![Finding::skip(
                ID_ENV,
                format!("could not read the environment: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts);
    let multi = gpus.is_some_and(|n| n > 1);
    let train = policy.profile == Profile::Train;
    let mut out = Vec::new();

    if let Some(v) = env.get("CUDA_VISIBLE_DEVICES") {
        let VisibleDevices::List { visible, ignored } =
            parse_visible_devices(v, gpus.and_then(|n| u32::try_from(n).ok()));
        // UUIDs that match no GPU of the driver's list hide that entry (CUDA stops there).
        let uuids: Vec<String> = facts
            .gpu_list()
            .iter()
            .filter_map(|g| g.uuid.value().cloned())
            .collect();
        let mut visible_ok = 0usize;
        let mut unknown = Vec::new();
        for d in &visible {
            match d {
                DeviceRef::Uuid(u)
                    if !uuids.is_empty() && !uuids.iter().any(|x| x.starts_with(u.as_str())) =>
                {
                    unknown.push(u.clone())
                }
                _ => visible_ok += 1,
            }
        }
        let f = match gpus {
            Some(n) if visible_ok == 0 && n > 0 => Some(Finding::fail(
                ID_ENV,
                format!("CUDA_VISIBLE_DEVICES='{v}' hides every GPU: CUDA programs started from this environment see no device ('no CUDA-capable device is detected')"),
            )),
            Some(n) if visible_ok < n && unknown.is_empty() && ignored.is_empty() => Some(Finding::warn(
                ID_ENV,
                format!("CUDA_VISIBLE_DEVICES='{v}' shows {} of the {n} GPUs: the others stay idle for every program started from this environment", visible_ok),
            )),
            _ if !ignored.is_empty() || !unknown.is_empty() => Some(Finding::warn(
                ID_ENV,
                format!(
                    "CUDA_VISIBLE_DEVICES='{v}' has entries CUDA cannot use ({}); CUDA stops at the first one, so only {} visible",
                    ignored.iter().chain(unknown.iter()).cloned().collect::<Vec<_>>().join(", "),
                    plural(visible_ok, "GPU is", "GPUs are")
                ),
            )),
            _ => None,
        };
        if let Some(f) = f {
            out.push(
                f.with("CUDA_VISIBLE_DEVICES", v)
                    .with("gpus", gpus)
                    .fix("unset CUDA_VISIBLE_DEVICES (or set it per job: CUDA_VISIBLE_DEVICES=0,1 python ...); find where it is set with: grep -r CUDA_VISIBLE_DEVICES ~/.bashrc ~/.profile /etc/environment /etc/profile.d"),
            );
        }
        if env.get("CUDA_DEVICE_ORDER") != Some("PCI_BUS_ID")
            && visible.iter().any(|d| matches!(d, DeviceRef::Index(_)))
            && !uniform_gpus(facts)
        {
            out.push(
                Finding::info(ID_ENV, "CUDA_VISIBLE_DEVICES uses indices but CUDA_DEVICE_ORDER is not PCI_BUS_ID: with different GPU models, CUDA numbers the fastest first, not as nvidia-smi does")
                    .fix("export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
            );
        }
    }

    let flag = |name: &str| env.get(name).filter(|v| is_set(v));
    if let Some(v) = flag("CUDA_LAUNCH_BLOCKING") {
        out.push(
            Finding::warn(ID_ENV, format!("CUDA_LAUNCH_BLOCKING={v}: every kernel launch waits for the previous kernel to finish; a debugging switch that makes real workloads several times slower"))
                .with("CUDA_LAUNCH_BLOCKING", v)
                .fix("unset CUDA_LAUNCH_BLOCKING"),
        );
    }
    if let Some(v) = flag("CUDA_CACHE_DISABLE") {
        out.push(
            Finding::warn(ID_ENV, format!("CUDA_CACHE_DISABLE={v}: PTX kernels are JIT-compiled again in every process instead of being cached"))
                .with("CUDA_CACHE_DISABLE", v)
                .fix("unset CUDA_CACHE_DISABLE"),
        );
    }
    if let Some(v) = env.get("CUDA_MODULE_LOADING") {
        if v.eq_ignore_ascii_case("EAGER") {
            out.push(
                Finding::info(ID_ENV, "CUDA_MODULE_LOADING=EAGER: every kernel of every CUDA library is loaded at start-up (seconds of start and hundreds of MiB of GPU memory per process; LAZY is the default since CUDA 12.2)")
                    .with("CUDA_MODULE_LOADING", v)
                    .fix("unset CUDA_MODULE_LOADING (or set it to LAZY)"),
            );
        }
    }
    if let Some(v) = flag("NCCL_P2P_DISABLE") {
        let msg = format!("NCCL_P2P_DISABLE={v}: NCCL does not use NVLink or PCIe peer-to-peer between GPUs; collectives go through host memory, several times slower");
        let f = if multi && train {
            Finding::fail(ID_ENV, msg)
        } else if multi {
            Finding::warn(ID_ENV, msg)
        } else {
            Finding::info(ID_ENV, msg)
        };
        out.push(f.with("NCCL_P2P_DISABLE", v).fix("unset NCCL_P2P_DISABLE; if it was set to work around a hang, check IOMMU/ACS settings (nvidia-smi topo -p2p r) instead"));
    }
    if let Some(v) = flag("NCCL_SHM_DISABLE") {
        let msg = format!("NCCL_SHM_DISABLE={v}: NCCL cannot use shared memory between processes; where P2P is not possible, traffic falls back to sockets");
        let f = if multi {
            Finding::warn(ID_ENV, msg)
        } else {
            Finding::info(ID_ENV, msg)
        };
        out.push(f.with("NCCL_SHM_DISABLE", v).fix("unset NCCL_SHM_DISABLE; if it was set because of 'unable to allocate shared memory', enlarge /dev/shm instead (see host.shm)"));
    }
    if let Some(v) = flag("NCCL_IB_DISABLE") {
        let rdma = facts
            .host
            .fabric
            .rdma
            .value()
            .is_some_and(|p| !p.is_empty());
        let msg = format!(
            "NCCL_IB_DISABLE={v}: NCCL will not use InfiniBand/RoCE{}; traffic between nodes goes over TCP sockets",
            if rdma { " although this machine has RDMA devices" } else { "" }
        );
        let f = match (rdma, train) {
            (true, true) => Finding::fail(ID_ENV, msg),
            (true, false) => Finding::warn(ID_ENV, msg),
            _ => Finding::info(ID_ENV, msg),
        };
        out.push(f.with("NCCL_IB_DISABLE", v).fix("unset NCCL_IB_DISABLE"));
    }
    if let Some(v) = env.get("NCCL_DEBUG") {
        let trace = v.eq_ignore_ascii_case("TRACE");
        let msg = format!(
            "NCCL_DEBUG={v}: NCCL logs {}",
            if trace {
                "every call; that slows collectives down"
            } else {
                "its set-up to stderr"
            }
        );
        let f = if trace {
            Finding::warn(ID_ENV, msg)
        } else {
            Finding::info(ID_ENV, msg)
        };
        out.push(
            f.with("NCCL_DEBUG", v)
                .fix("unset NCCL_DEBUG outside of debugging"),
        );
    }
    let forced: Vec<(String, String)> = [
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_P2P_LEVEL",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_SOCKET_IFNAME",
        "NCCL_IB_HCA",
    ]
    .iter()
    .filter_map(|k| env.get(k).map(|v| (k.to_string(), v.to_string())))
    .collect();
    if !forced.is_empty() {
        out.push(
            Finding::info(
                ID_ENV,
                format!(
                    "NCCL tuning is forced: {}; right for one cluster, wrong on another",
                    forced
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
            )
            .with("variables", &forced),
        );
    }

    if let Some(v) = env.get("TORCH_CUDA_ARCH_LIST") {
        let (specs, bad) = parse_torch_arch_list(v);
        let list = specs_as_arch_list(&specs);
        if !bad.is_empty() {
            out.push(
                Finding::warn(
                    ID_ENV,
                    format!(
                        "TORCH_CUDA_ARCH_LIST='{v}' has entries PyTorch does not understand: {}",
                        bad.join(", ")
                    ),
                )
                .fix("write capabilities as major.minor, separated by ';' (e.g. '8.0;9.0+PTX')"),
            );
        }
        for g in facts.gpu_list().iter().filter(|g| policy.selects(g.index)) {
            let Some(cc) = g.compute_capability.value() else {
                continue;
            };
            if coverage(&list, cc.major, cc.minor) == Coverage::None {
                out.push(
                    Finding::warn(ID_ENV, format!("TORCH_CUDA_ARCH_LIST='{v}' leaves out {} (compute capability {cc}): CUDA extensions built here fail on it with 'no kernel image is available'", g.label()))
                        .gpu(g.index)
                        .with("TORCH_CUDA_ARCH_LIST", v)
                        .fix(format!("add {}.{} to TORCH_CUDA_ARCH_LIST (or unset it to build for the GPUs present)", cc.major, cc.minor)),
                );
            }
        }
    }

    if let Some(v) = env.get("LD_LIBRARY_PATH") {
        let entries: Vec<&str> = v.split(':').collect();
        if entries.iter().any(|e| e.is_empty()) {
            out.push(
                Finding::warn(ID_ENV, format!("LD_LIBRARY_PATH='{v}' has an empty entry: the loader then searches the current directory, so whatever directory a job starts in can replace its libraries"))
                    .fix("remove the empty entry (a leading, trailing or doubled ':'), e.g. export LD_LIBRARY_PATH=${LD_LIBRARY_PATH%:}"),
            );
        }
        if let Some(rel) = entries
            .iter()
            .find(|e| !e.is_empty() && !e.starts_with('/'))
        {
            out.push(
                Finding::warn(ID_ENV, format!("LD_LIBRARY_PATH has a relative entry '{rel}': it depends on the directory a job starts in"))
                    .fix("use absolute paths in LD_LIBRARY_PATH"),
            );
        }
        if let (Ok(copies), Some(driver)) =
            (facts.host.libraries.get(), facts.driver.version.value())
        {
            let shadow: Vec<&LibraryCopy> = copies
                .iter()
                .filter(|c| {
                    c.source == LibrarySource::LdLibraryPath
                        && matches!(c.library.as_str(), "libcuda" | "libnvidia-ml")
                })
                .filter(|c| !is_compat(c) && c.version.as_deref().is_some_and(|cv| cv != driver))
                .collect();
            if !shadow.is_empty() {
                out.push(
                    Finding::fail(ID_ENV, format!("LD_LIBRARY_PATH shadows the driver's libraries with another version ({}); the kernel module is {driver}", shadow.iter().map(|c| format!("{} {}", c.library, c.version.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(", ")))
                        .with("copies", shadow.iter().map(|c| describe(c)).collect::<Vec<_>>())
                        .fix("remove that directory from LD_LIBRARY_PATH; libcuda and libnvidia-ml must come from the installed driver"),
                );
            }
        }
    }
    if let Some(v) = env.get("LD_PRELOAD") {
        let cuda = v
            .split([':', ' '])
            .filter(|e| {
                e.rsplit('/')
                    .next()
                    .and_then(crate::parse::host::libs::library_of)
                    .is_some()
            })
            .collect::<Vec<_>>();
        let f = if cuda.is_empty() {
            Finding::info(
                ID_ENV,
                format!("LD_PRELOAD='{v}' is loaded into every process"),
            )
        } else {
            Finding::warn(ID_ENV, format!("LD_PRELOAD forces CUDA libraries into every process ({}): they win over the ones each program was built with", cuda.join(", ")))
                .fix("unset LD_PRELOAD")
        };
        out.push(f.with("LD_PRELOAD", v));
    }
    if let Some(v) = env.get("PYTORCH_CUDA_ALLOC_CONF") {
        out.push(
            Finding::info(
                ID_ENV,
                format!("PYTORCH_CUDA_ALLOC_CONF='{v}' changes PyTorch's GPU memory allocator"),
            )
            .with("PYTORCH_CUDA_ALLOC_CONF", v),
        );
    }

    if out
        .iter()
        .all(|f| f.status.severity() < Status::Warn.severity())
    {
        let set: Vec<String> = env
            .vars
            .iter()
            .filter(|(k, _)| {
                k.starts_with("CUDA_")
                    || k.starts_with("NCCL_")
                    || k.starts_with("LD_")
                    || k == "TORCH_CUDA_ARCH_LIST"
            })
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push(
            Finding::pass(
                ID_ENV,
                if set.is_empty() {
                    "no variable that changes CUDA, NCCL or the loader is set".to_string()
                } else {
                    format!("nothing harmful among {}", set.join(" "))
                },
            )
            .with("variables", &set),
        );
    }
    out
}

fn uniform_gpus(facts: &Facts) -> bool {
    let names: Vec<&String> = facts
        .gpu_list()
        .iter()
        .filter_map(|g| g.name.value())
        .collect();
    names.windows(2).all(|w| w[0] == w[1])
}

#[cfg(test)]
mod tests {
    use super::super::hostcommon::facts_with_gpus;
    use super::*;
    use crate::facts::{CudaVersion, EnvFacts, TorchInstall};

    fn copy(lib: &str, path: &str, file: &str, v: Option<&str>, s: LibrarySource) -> LibraryCopy {
        LibraryCopy {
            library: lib.into(),
            path: path.into(),
            file: file.into(),
            version: v.map(str::to_string),
            source: s,
        }
    }

    fn statuses(f: &[Finding]) -> Vec<Status> {
        f.iter().map(|f| f.status).collect()
    }

    #[test]
    fn libraries_skip_and_missing_libcuda() {
        let mut f = facts_with_gpus(2, (9, 0));
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        f.host.libraries = Reading::Value(vec![]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0].message.contains("libcuda"));
    }

    #[test]
    fn libraries_two_nccl_versions_and_shadowing() {
        let mut f = facts_with_gpus(2, (9, 0));
        f.host.libraries = Reading::Value(vec![
            copy(
                "libcuda",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                "libcuda.so.580.159.04",
                Some("580.159.04"),
                LibrarySource::LdCache,
            ),
            copy(
                "libnccl",
                "/opt/nccl/lib/libnccl.so.2",
                "libnccl.so.2.18.1",
                Some("2.18.1"),
                LibrarySource::LdLibraryPath,
            ),
            copy(
                "libnccl",
                "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                "libnccl.so.2",
                Some("2.21.5"),
                LibrarySource::Wheel {
                    package: "nvidia-nccl-cu12".into(),
                },
            ),
        ]);
        let r = run_libraries(&f, &Policy::default());
        let warns: Vec<&Finding> = r.iter().filter(|x| x.status == Status::Warn).collect();
        assert_eq!(warns.len(), 2, "{r:#?}");
        assert!(warns[0]
            .message
            .contains("libnccl.so.2 on this machine (2.18.1, 2.21.5)"));
        assert!(warns[0].message.contains("NCCL version mismatch"));
        assert!(warns[1].message.contains("LD_LIBRARY_PATH"));
        assert_eq!(r.last().unwrap().status, Status::Info);
    }

    #[test]
    fn libraries_libcuda_mismatch_fails_and_clean_passes() {
        let mut f = facts_with_gpus(1, (9, 0));
        f.host.libraries = Reading::Value(vec![
            copy(
                "libcuda",
                "/opt/old/libcuda.so.1",
                "libcuda.so.550.54.15",
                Some("550.54.15"),
                LibrarySource::LdLibraryPath,
            ),
            copy(
                "libcuda",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                "libcuda.so.580.159.04",
                Some("580.159.04"),
                LibrarySource::LdCache,
            ),
            copy(
                "libcuda",
                "/usr/local/cuda/compat/libcuda.so.1",
                "libcuda.so.590.1.1",
                Some("590.1.1"),
                LibrarySource::Toolkit,
            ),
        ]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("550.54.15"));
        f.host.libraries = Reading::Value(vec![copy(
            "libcuda",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "libcuda.so.580.159.04",
            Some("580.159.04"),
            LibrarySource::LdCache,
        )]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(r[0].message.contains("libcuda 580.159.04"));
    }

    #[test]
    fn cublas_lt_mismatch() {
        let mut f = facts_with_gpus(1, (9, 0));
        f.host.libraries = Reading::Value(vec![
            copy(
                "libcuda",
                "/usr/lib/libcuda.so.1",
                "libcuda.so.580.159.04",
                Some("580.159.04"),
                LibrarySource::LdCache,
            ),
            copy(
                "libcublas",
                "/usr/local/cuda/lib64/libcublas.so.12",
                "libcublas.so.12.4.5.8",
                Some("12.4.5.8"),
                LibrarySource::LdCache,
            ),
            copy(
                "libcublasLt",
                "/usr/local/cuda/lib64/libcublasLt.so.12",
                "libcublasLt.so.12.1.3.1",
                Some("12.1.3.1"),
                LibrarySource::LdCache,
            ),
        ]);
        let r = run_libraries(&f, &Policy::default());
        assert!(
            r.iter()
                .any(|x| x.status == Status::Warn && x.message.contains("different releases")),
            "{r:#?}"
        );
    }

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
        let mut f = facts_with_gpus(2, (9, 0));
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
        let mut f = facts_with_gpus(1, (9, 0));
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

    fn env(vars: &[(&str, &str)]) -> Reading<EnvFacts> {
        Reading::Value(EnvFacts {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    #[test]
    fn env_visible_devices_hides_gpu() {
        let mut f = facts_with_gpus(2, (9, 0));
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "0")]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Warn);
        assert!(r[0].message.contains("1 of the 2"));
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Fail);
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "0,7,1")]);
        let r = run_env(&f, &Policy::default());
        assert!(r[0].message.contains("stops at the first"), "{r:#?}");
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "GPU-0aaa,GPU-1")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Pass);
        f.host.env = env(&[("CUDA_VISIBLE_DEVICES", "GPU-zzz")]);
        assert_eq!(run_env(&f, &Policy::default())[0].status, Status::Fail);
    }

    #[test]
    fn env_switches_and_paths() {
        let mut f = facts_with_gpus(2, (9, 0));
        f.host.env = env(&[
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("NCCL_P2P_DISABLE", "1"),
            ("TORCH_CUDA_ARCH_LIST", "7.0;8.0+PTX"),
            ("LD_LIBRARY_PATH", "/usr/local/cuda/lib64:"),
        ]);
        let p = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_env(&f, &p);
        let s = statuses(&r);
        assert!(s.contains(&Status::Fail), "{r:#?}");
        assert!(r.iter().any(|x| x.message.contains("CUDA_LAUNCH_BLOCKING")));
        assert!(r.iter().any(|x| x.message.contains("empty entry")));
        // 8.0+PTX covers 9.0 through PTX: no arch warning.
        assert!(!r.iter().any(|x| x.message.contains("leaves out")));
        f.host.env = env(&[("TORCH_CUDA_ARCH_LIST", "7.0;8.0")]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(
            r.iter()
                .filter(|x| x.message.contains("leaves out"))
                .count(),
            2
        );
        f.host.env = env(&[("HOME", "/root")]);
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Pass]
        );
        f.host.env = Reading::unavailable("x");
        assert_eq!(
            statuses(&run_env(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

    #[test]
    fn env_ld_library_path_shadows_libcuda() {
        let mut f = facts_with_gpus(1, (9, 0));
        f.host.env = env(&[("LD_LIBRARY_PATH", "/opt/old")]);
        f.host.libraries = Reading::Value(vec![copy(
            "libcuda",
            "/opt/old/libcuda.so.1",
            "libcuda.so.535.1.1",
            Some("535.1.1"),
            LibrarySource::LdLibraryPath,
        )]);
        let r = run_env(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
    }
}
