//! cuda.libraries: where the CUDA libraries resolve, their versions against the driver and
//! each other, and duplicates.

use crate::checks::common::{gpu_count, plural};
use crate::checks::cuda::{
    compat_gpus, compat_state, describe, is_compat, loaded, loader_rank, CompatGpus, CompatState,
    FORWARD_COMPAT_DOC,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, LibraryCopy, LibrarySource};
use crate::finding::{Finding, Status};
use crate::parse::host::cudaenv::parse_driver_capabilities;
use crate::parse::host::libs::{cmp_versions, version_prefix, LIBRARIES};
use crate::policy::Policy;

const ID: &str = "cuda.libraries";

pub const CHECK: Check = Check {
    id: ID,
    title: "Where the CUDA libraries resolve, their versions, and duplicates",
    looks_at: "where libcuda, libcudart, libcublas, libnccl, libnvrtc resolve (ld cache, \
               LD_LIBRARY_PATH, Python wheels); several different NCCL/cuBLAS versions on one \
               machine",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Every copy of libcuda, libnvidia-ml, libcudart, libcublas, libcublasLt, libnvrtc, \
               libnccl and libcudnn on the machine: the directories of LD_LIBRARY_PATH, the \
               loader's cache (/etc/ld.so.cache), CUDA toolkit directories, conda \
               environments, and the NVIDIA wheels and framework directories of Python \
               environments (site-packages/nvidia/*, torch/lib). For each, the file it \
               resolves to and its version (from the file name, or from the wheel's \
               metadata). Only the copies the loader reaches by itself count as the driver's \
               (LD_LIBRARY_PATH, /etc/ld.so.cache, the default directories): a libcuda \
               elsewhere (a toolkit's compat/ directory) serves no program. A \
               forward-compatibility libcuda that programs load is held against the kernel \
               module: older is error 803, newer is forward compatibility, which NVIDIA \
               supports on data-center GPUs only. In a container, NVIDIA_DRIVER_CAPABILITIES \
               without 'compute' explains a missing libcuda.",
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
    profiles: &[],
    run: run_libraries,
};

fn run_libraries(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let copies = match facts.host.libraries.get() {
        Ok(c) => c,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not list the CUDA libraries: {r}"),
            )]
        }
    };
    let gpus = gpu_count(facts).unwrap_or(0);
    let mut out = Vec::new();
    if loaded(copies, "libcuda").is_none() {
        out.push(no_libcuda(facts, copies, gpus));
    }
    match compat_state(facts) {
        CompatState::Older {
            copy,
            version,
            module,
        } => out.push(
            Finding::fail(
                ID,
                format!(
                    "programs load the forward-compatibility libcuda {version} ({}), older than the kernel module {module}: every CUDA program fails with error 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 'system has unsupported display driver / cuda driver combination'); a compat package is meant only for a driver older than it",
                    copy.path
                ),
            )
            .with("copy", describe(copy))
            .with("kernel_module", &module)
            .with("source", FORWARD_COMPAT_DOC)
            .fix(format!(
                "take {} off the loader's path ({}); the driver's own libcuda then serves: forward compatibility is for running a newer CUDA on an older driver, never the other way round",
                copy.path.rsplit_once('/').map(|(d, _)| d).unwrap_or(&copy.path),
                if copy.source == LibrarySource::LdLibraryPath {
                    "remove it from LD_LIBRARY_PATH"
                } else {
                    "remove its /etc/ld.so.conf.d entry and run ldconfig"
                }
            )),
        ),
        CompatState::InUse {
            copy,
            version,
            cuda,
            module,
        } => {
            let what = format!(
                "programs load the forward-compatibility libcuda {version}{} over the kernel module {module}",
                cuda.map(|c| format!(" (CUDA {c})")).unwrap_or_default()
            );
            let f = match compat_gpus(facts) {
                CompatGpus::Supported => Finding::info(ID, format!("{what}: forward compatibility in use, as meant on data-center GPUs")),
                CompatGpus::Select(names) => Finding::warn(ID, format!("{what}, on {}: forward compatibility works only on select NGC-Ready RTX cards; elsewhere cuInit fails with error 804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)", names.join(", ")))
                    .fix("if CUDA fails with error 804, take the compat directory off the loader's path and upgrade the driver instead"),
                CompatGpus::Unsupported(names) => Finding::fail(ID, format!("{what}, on {}: forward compatibility is not supported on GeForce cards; cuInit fails with error 804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)", names.join(", ")))
                    .fix("take the compat directory off the loader's path and upgrade the driver to one that supports the CUDA version needed"),
            };
            out.push(
                f.with("copy", describe(copy))
                    .with("kernel_module", &module)
                    .with("source", FORWARD_COMPAT_DOC),
            );
        }
        CompatState::NotLoaded => {}
    }

    let driver = facts.driver.version.value();
    for lib in ["libcuda", "libnvidia-ml"] {
        let Some(driver) = driver else { break };
        let mismatched: Vec<&LibraryCopy> = copies
            .iter()
            .filter(|c| c.library == lib && loader_rank(c).is_some() && !is_compat(c))
            .filter(|c| c.version.as_deref().is_some_and(|v| v != driver))
            .collect();
        if mismatched.is_empty() {
            continue;
        }
        let first = loaded(copies, lib);
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
            Finding::fail(ID, msg)
        } else {
            Finding::warn(ID, msg)
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
            let first =
                loaded(copies, lib).filter(|f| f.version.as_deref().map(major_of) == Some(major));
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
                Finding::warn(ID, msg)
            } else {
                Finding::info(ID, msg)
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
                ID,
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
                            ID,
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
            // The driver's libraries count only where the loader finds them; the others are
            // also loaded through a framework's RUNPATH (wheels, torch/lib).
            let f = loaded(copies, lib).or_else(|| {
                copies
                    .iter()
                    .find(|c| c.library == *lib && !DRIVER_LIBRARIES.contains(lib))
            });
            Some(match f {
                Some(f) => format!(
                    "{lib} {}",
                    f.version.as_deref().unwrap_or("(version unknown)")
                ),
                None if copies.iter().any(|c| c.library == *lib) => {
                    format!("{lib} on no loader path")
                }
                None => return None,
            })
        })
        .collect();
    let status = if out.iter().any(|f| f.status >= Status::Warn) {
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
        Finding::new(ID, status, msg)
            .with("copies", copies.iter().map(describe).collect::<Vec<_>>()),
    );
    out
}

/// "2.21.5" -> "2": the soname's number.
fn major_of(v: &str) -> &str {
    v.split('.').next().unwrap_or(v)
}

/// The libraries the driver installs: only the loader's copies of these count.
const DRIVER_LIBRARIES: &[&str] = &["libcuda", "libnvidia-ml"];

/// No libcuda the loader can reach: why, and what to do (in a container, the capabilities it
/// was started with decide whether the toolkit mounted the driver's libcuda).
fn no_libcuda(facts: &Facts, copies: &[LibraryCopy], gpus: usize) -> Finding {
    if gpus == 0 {
        return Finding::info(ID, "libcuda was not found (no NVIDIA GPU here either)")
            .with("searched", copies.len());
    }
    let stranded: Vec<&LibraryCopy> = copies.iter().filter(|c| c.library == "libcuda").collect();
    let mut msg = format!(
        "no libcuda (the driver's user-space library) on the loader's path (LD_LIBRARY_PATH, /etc/ld.so.cache, the default directories): no CUDA program can run on the {}",
        plural(gpus, "GPU", "GPUs")
    );
    if !stranded.is_empty() {
        msg.push_str(&format!(
            "; on disk but reachable by no loader path: {}",
            stranded
                .iter()
                .map(|c| format!(
                    "{} ({}{})",
                    c.path,
                    c.version.as_deref().unwrap_or("version unknown"),
                    if is_compat(c) { ", a forward-compatibility copy, which stands in for the driver only beside it" } else { "" }
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let inside = facts.host.container.inside.value().cloned().flatten();
    let env = facts.host.env.value();
    let caps_value = env.and_then(|e| e.get("NVIDIA_DRIVER_CAPABILITIES"));
    let caps = parse_driver_capabilities(caps_value);
    let fix = match (&inside, caps.has("compute")) {
        (Some(_), false) => {
            msg.push_str(&format!(
                "; the container was started with NVIDIA_DRIVER_CAPABILITIES={}, without 'compute', so the container toolkit mounted no CUDA library",
                caps_value.unwrap_or("")
            ));
            "restart the container with the compute capability: `docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility ...` (or =all); in Kubernetes, set NVIDIA_DRIVER_CAPABILITIES=compute,utility in the pod spec"
        }
        (Some(_), true) => "start the container through the NVIDIA container toolkit (`--gpus all`, `--runtime=nvidia` or a CDI device such as `--device nvidia.com/gpu=all`) so the host's libcuda is mounted; never copy libcuda into an image",
        (None, _) => "install the driver's user-space package of the same version as the kernel module (e.g. libnvidia-compute-BRANCH on Ubuntu, BRANCH the driver's, e.g. 570), or run `sudo ldconfig` if the library is installed in a directory the cache does not list",
    };
    Finding::fail(ID, msg)
        .with("searched", copies.len())
        .with(
            "libcuda_copies",
            stranded.iter().map(|c| describe(c)).collect::<Vec<_>>(),
        )
        .with("NVIDIA_DRIVER_CAPABILITIES", caps_value)
        .with("container", &inside)
        .fix(fix)
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::cuda::copy;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    #[test]
    fn libraries_skip_and_missing_libcuda() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        f.host.libraries = Reading::Value(vec![]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0].message.contains("libcuda"));
    }

    #[test]
    fn libraries_two_nccl_versions_and_shadowing() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
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
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
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
        // Not a compat copy: the driver mismatch, not forward compatibility.
        assert!(r[0].message.starts_with(
            "libcuda 550.54.15 is on the loader's path but the kernel module is 580.159.04"
        ));
        assert!(!r
            .iter()
            .any(|x| x.message.contains("forward-compatibility")));
        assert_eq!(
            r[0].evidence.get("copies").map(|v| v.to_string()),
            Some(r#"["/opt/old/libcuda.so.1 -> libcuda.so.550.54.15 [LD_LIBRARY_PATH] version 550.54.15"]"#.to_string())
        );
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
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
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

    fn env(vars: &[(&str, &str)]) -> Reading<crate::facts::EnvFacts> {
        Reading::Value(crate::facts::EnvFacts {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    fn compat_copy(v: &str, s: LibrarySource) -> LibraryCopy {
        copy(
            "libcuda",
            "/usr/local/cuda/compat/libcuda.so.1",
            &format!("libcuda.so.{v}"),
            Some(v),
            s,
        )
    }

    fn driver_copy() -> LibraryCopy {
        copy(
            "libcuda",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "libcuda.so.580.159.04",
            Some("580.159.04"),
            LibrarySource::LdCache,
        )
    }

    #[test]
    fn a_libcuda_no_loader_path_reaches_does_not_count() {
        // Seen: a container started with NVIDIA_DRIVER_CAPABILITIES=utility, only the
        // toolkit's compat copy on disk; reported as "libcuda 580.95.05", exit 0.
        let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
        f.host.libraries = Reading::Value(vec![
            compat_copy("580.95.05", LibrarySource::Toolkit),
            copy(
                "libnvidia-ml",
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                "libnvidia-ml.so.580.159.04",
                Some("580.159.04"),
                LibrarySource::LdCache,
            ),
        ]);
        f.host.container.inside = Reading::Value(Some("docker".into()));
        f.host.env = env(&[("NVIDIA_DRIVER_CAPABILITIES", "utility")]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("no libcuda"), "{}", r[0].message);
        assert!(r[0].message.contains(
            "/usr/local/cuda/compat/libcuda.so.1 (580.95.05, a forward-compatibility copy"
        ));
        assert!(r[0].message.contains("NVIDIA_DRIVER_CAPABILITIES=utility"));
        assert!(r[0].fix.as_deref().is_some_and(
            |x| x.contains("--gpus all -e NVIDIA_DRIVER_CAPABILITIES=compute,utility")
        ));
        let last = r.last().unwrap();
        assert!(
            last.message.contains("libcuda on no loader path"),
            "{}",
            last.message
        );
        assert!(!last.message.contains("libcuda 580.95.05"));
        // With compute granted, the container was not started through the toolkit.
        f.host.env = env(&[("NVIDIA_DRIVER_CAPABILITIES", "compute,utility")]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(!r[0].message.contains("NVIDIA_DRIVER_CAPABILITIES"));
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("--runtime=nvidia")));
        // On a host: the driver's user-space package.
        f.host.container.inside = Reading::Value(None);
        let r = run_libraries(&f, &Policy::default());
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("libnvidia-compute")));
        // In a default directory without a cache entry, the loader finds it.
        f.host.libraries = Reading::Value(vec![copy(
            "libcuda",
            "/usr/lib64/libcuda.so.1",
            "libcuda.so.580.159.04",
            Some("580.159.04"),
            LibrarySource::Other,
        )]);
        assert_eq!(
            statuses(&run_libraries(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // Elsewhere, it does not.
        f.host.libraries = Reading::Value(vec![copy(
            "libcuda",
            "/usr/local/nvidia/lib64/libcuda.so.1",
            "libcuda.so.580.159.04",
            Some("580.159.04"),
            LibrarySource::Other,
        )]);
        assert_eq!(
            run_libraries(&f, &Policy::default())[0].status,
            Status::Fail
        );
    }

    #[test]
    fn an_older_compat_libcuda_that_programs_load_fails() {
        // Seen: LD_LIBRARY_PATH=/usr/local/cuda/compat with 580.95.05 on a 580.159.04 module:
        // every CUDA program fails with 803, and this check said nothing.
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.libraries = Reading::Value(vec![
            compat_copy("580.95.05", LibrarySource::LdLibraryPath),
            driver_copy(),
        ]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail, "{r:#?}");
        assert!(r[0].message.contains("error 803"));
        assert!(r[0]
            .message
            .contains("older than the kernel module 580.159.04"));
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("remove it from LD_LIBRARY_PATH")));
        // Through the cache (an ld.so.conf.d entry).
        f.host.libraries = Reading::Value(vec![compat_copy("580.95.05", LibrarySource::LdCache)]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("ld.so.conf.d")));
        // The module's own version in a compat directory: fine.
        f.host.libraries = Reading::Value(vec![compat_copy(
            "580.159.04",
            LibrarySource::LdLibraryPath,
        )]);
        assert_eq!(
            statuses(&run_libraries(&f, &Policy::default())),
            vec![Status::Pass]
        );
    }

    #[test]
    fn a_newer_compat_libcuda_is_forward_compatibility() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.libraries = Reading::Value(vec![
            compat_copy("590.44.01", LibrarySource::LdLibraryPath),
            driver_copy(),
        ]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("forward compatibility in use"));
        assert!(r[0].message.contains("(CUDA 13.1)"));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.name = Reading::Value("NVIDIA GeForce RTX 4090".into())
            })
            .with(|f| {
                f.host.libraries =
                    Reading::Value(vec![compat_copy("590.44.01", LibrarySource::LdLibraryPath)])
            })
            .build();
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Fail);
        assert!(r[0].message.contains("error 804"));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.name = Reading::Value("NVIDIA RTX A6000".into()))
            .with(|f| {
                f.host.libraries =
                    Reading::Value(vec![compat_copy("590.44.01", LibrarySource::LdLibraryPath)])
            })
            .build();
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Warn);
        assert!(r[0].message.contains("select NGC-Ready RTX"));
    }

    #[test]
    fn no_gpu_no_libcuda_is_info() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.gpus = Reading::Value(vec![]);
        f.pci_gpus = Reading::Value(vec![]);
        f.host.libraries = Reading::Value(vec![]);
        let r = run_libraries(&f, &Policy::default());
        assert_eq!(r[0].status, Status::Info);
        assert_eq!(r[1].message, "no CUDA library found");
    }
}
