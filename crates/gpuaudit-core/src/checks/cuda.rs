//! cuda.driver and cuda.toolkit-compat.

use super::common::spec_of;
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{CudaVersion, Facts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{cuda_table, DriverSupport, DriverVersion};

pub const CHECKS: &[Check] = &[
    Check {
        id: "cuda.driver",
        title: "Driver version, the CUDA version it supports, minimum driver for the GPU's architecture",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The NVIDIA driver version (NVML, nvidia-smi or /proc/driver/nvidia/version), the \
                   newest CUDA version it supports, the kernel module's version against the user-space \
                   library's, and the oldest driver that supports each GPU's architecture (CUDA release \
                   notes).",
            why: "A driver older than the GPU's architecture does not run it at all; a driver whose CUDA \
                  version is older than the framework's build fails with \"CUDA driver version is \
                  insufficient for CUDA runtime version\"; a kernel module and a library of different \
                  versions (an update without reboot) fail with \"Driver/library version mismatch\".",
            verify: "nvidia-smi   (header: Driver Version, CUDA Version)\ncat /proc/driver/nvidia/version",
            fix: "Install a driver of the current production branch for your GPUs (e.g. from the \
                  distribution's nvidia-driver-<branch>-server package or NVIDIA's CUDA repository); \
                  after a driver update, reboot.",
        },
        run: driver,
    },
    Check {
        id: "cuda.toolkit-compat",
        title: "The installed CUDA toolkit against what the driver supports",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Each CUDA toolkit under /usr/local (version.json, version.txt, include/cuda.h, nvcc \
                   --version or the libcudart file names, whichever exists) against the driver: at least \
                   the toolkit's GA driver (full support), within CUDA minor version compatibility (runs, \
                   but no JIT of newer PTX and some features missing), or too old (the forward-compatibility \
                   package noted where it is installed).",
            why: "Programs built with a toolkit newer than the driver fail at start with \"CUDA driver \
                  version is insufficient for CUDA runtime version\" or \"the provided PTX was compiled with \
                  an unsupported toolchain\".",
            verify: "nvidia-smi | head -4   (the driver's CUDA version)\nnvcc --version; cat /usr/local/cuda/version.json",
            fix: "Upgrade the driver to at least the toolkit's GA driver (CUDA release notes, Table 3), or \
                  install a toolkit no newer than the driver's CUDA version; on datacenter GPUs the \
                  cuda-compat package lets a newer toolkit run on an older driver.",
        },
        run: toolkit,
    },
];

fn driver_version(facts: &Facts) -> Result<(String, DriverVersion), String> {
    let v = facts.driver.version.get().map_err(|r| r.to_string())?;
    let parsed =
        DriverVersion::parse(v).ok_or_else(|| format!("driver version '{v}' not understood"))?;
    Ok((v.clone(), parsed))
}

fn driver(facts: &Facts, _: &Policy) -> Vec<Finding> {
    const ID: &str = "cuda.driver";
    let (text, dv) = match driver_version(facts) {
        Ok(v) => v,
        Err(r) => return vec![Finding::skip(ID, format!("driver version not read: {r}"))],
    };
    let mut ev = Evidence::new().with("driver_version", &text);
    let cuda = facts.driver.cuda_version.value().copied();
    if let Some(c) = cuda {
        ev.insert("cuda_version", c.to_string());
    }
    if let Some(p) = facts.driver.proc_version.value() {
        ev.insert("kernel_module", p);
    }
    let mut out = Vec::new();

    // The kernel module and the user-space library must be the same build.
    if let Some(line) = facts.driver.proc_version.value() {
        let module_version = line
            .split_whitespace()
            .find(|w| DriverVersion::parse(w).is_some() && w.contains('.'));
        if let Some(m) = module_version {
            if m != text && facts.driver.query.is_value() {
                out.push(
                    Finding::fail(ID, format!("The kernel module is {m} but the driver library is {text}: \"Driver/library version mismatch\""))
                        .evidence(ev.clone())
                        .fix("Reboot (or unload and reload the nvidia modules) so the module matches the installed driver."),
                );
            }
        }
    }

    // The oldest driver for each GPU's architecture.
    let mut too_old = Vec::new();
    let mut needs: Option<(String, DriverVersion)> = None;
    for g in facts.gpu_list() {
        let Some(spec) = spec_of(g) else { continue };
        let Some(arch) = spec.arch_support() else {
            continue;
        };
        if needs.as_ref().is_none_or(|(_, d)| arch.min_driver > *d) {
            needs = Some((arch.name.clone(), arch.min_driver.clone()));
        }
        if dv < arch.min_driver {
            too_old.push((g.index, arch.name.clone(), arch.min_driver.to_string()));
        }
    }
    if let Some((arch, min)) = &needs {
        ev.insert("architecture", arch);
        ev.insert("min_driver_for_architecture", min.to_string());
    }
    if let Some((_, arch, min)) = too_old.first() {
        out.push(
            Finding::fail(
                ID,
                format!("Driver {text} is older than the first driver for {arch} GPUs ({min}): they cannot run CUDA with it"),
            )
            .evidence(ev.clone())
            .fix(format!("Install a current production driver (at least {min}; for new work the newest production branch)")),
        );
    }
    if let Some(c) = cuda {
        if c < CudaVersion::new(12, 0) {
            out.push(
                Finding::warn(
                    ID,
                    format!("Driver {text} supports CUDA up to {c}: current framework builds (CUDA 12 and 13) need 525.60.13 or newer"),
                )
                .evidence(ev.clone())
                .fix("Upgrade the driver to a current production branch."),
            );
        }
    }
    if out.is_empty() {
        let mut msg = format!("Driver {text}");
        if let Some(c) = cuda {
            msg.push_str(&format!(" supports CUDA up to {c}"));
        }
        if let Some((arch, min)) = needs {
            msg.push_str(&format!("; {arch} GPUs need {min} or newer"));
        }
        out.push(Finding::pass(ID, msg).evidence(ev));
    }
    out
}

fn toolkit(facts: &Facts, _: &Policy) -> Vec<Finding> {
    const ID: &str = "cuda.toolkit-compat";
    let kits = match &facts.toolkit {
        Reading::Value(k) => k,
        Reading::Unavailable(r) => {
            return vec![Finding::skip(
                ID,
                format!("CUDA toolkit not looked for: {r}"),
            )]
        }
    };
    if kits.is_empty() {
        return vec![Finding::info(
            ID,
            "No CUDA toolkit installed (frameworks such as PyTorch bring their own CUDA runtime)",
        )];
    }
    let driver = driver_version(facts);
    let driver_cuda = facts.driver.cuda_version.value().copied();
    let table = cuda_table();
    kits.iter()
        .map(|k| {
            let mut ev = Evidence::new()
                .with("toolkit", &k.version)
                .with("path", &k.path)
                .with("source", &k.source)
                .with("forward_compat_package", k.forward_compat);
            let (text, dv) = match &driver {
                Ok(d) => d,
                Err(r) => {
                    return Finding::skip(ID, format!("CUDA {} at {}: driver version not read ({r})", k.version, k.path)).evidence(ev)
                }
            };
            ev.insert("driver_version", text);
            if let Some(c) = driver_cuda {
                ev.insert("driver_cuda_version", c.to_string());
            }
            let support = table.driver_support(dv, k.cuda).or_else(|| {
                // A toolkit newer than the table: judge by the driver's own CUDA version.
                driver_cuda.map(|c| if c >= k.cuda { DriverSupport::Full } else if c.major == k.cuda.major { DriverSupport::MinorCompat } else { DriverSupport::Unsupported })
            });
            let req = table.toolkit(k.cuda);
            if let Some(r) = req {
                ev.insert("toolkit_ga_min_driver", r.ga_min_driver.to_string());
                ev.insert("minor_compat_min_driver", r.minor_compat_min_driver.to_string());
            }
            let ga = req.map(|r| r.ga_min_driver.to_string()).unwrap_or_else(|| "a newer one".into());
            let cap = driver_cuda.map(|c| format!(" (CUDA {c})")).unwrap_or_default();
            match support {
                Some(DriverSupport::Full) => Finding::pass(
                    ID,
                    format!("CUDA {} at {} runs on driver {text}{cap}", k.version, k.path),
                )
                .evidence(ev),
                Some(DriverSupport::MinorCompat) => Finding::warn(
                    ID,
                    format!(
                        "CUDA {} at {} is newer than driver {text}{cap} fully supports: it runs through minor version compatibility, without JIT of newer PTX",
                        k.version, k.path
                    ),
                )
                .evidence(ev)
                .fix(format!("Upgrade the driver to {ga} or newer, or use a toolkit no newer than the driver's CUDA version.")),
                Some(DriverSupport::Unsupported) if k.forward_compat => Finding::warn(
                    ID,
                    format!(
                        "CUDA {} at {} is too new for driver {text}{cap}; it ships the forward-compatibility package, which works on datacenter GPUs only",
                        k.version, k.path
                    ),
                )
                .evidence(ev)
                .fix(format!("Upgrade the driver to {ga} or newer; until then put the toolkit's compat/ directory first in LD_LIBRARY_PATH.")),
                Some(DriverSupport::Unsupported) => Finding::fail(
                    ID,
                    format!(
                        "CUDA {} at {} is too new for driver {text}{cap}: its programs fail with \"CUDA driver version is insufficient for CUDA runtime version\"",
                        k.version, k.path
                    ),
                )
                .evidence(ev)
                .fix(format!("Upgrade the driver to {ga} or newer (or install the cuda-compat package on datacenter GPUs), or use a toolkit no newer than CUDA {}.", driver_cuda.map(|c| c.to_string()).unwrap_or_else(|| "the driver's".into()))),
                None => Finding::new(
                    ID,
                    Status::Skip,
                    format!("CUDA {} at {}: the driver's CUDA version is unknown and the toolkit is not in the table", k.version, k.path),
                )
                .evidence(ev),
            }
        })
        .collect()
}
