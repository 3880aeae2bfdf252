//! cuda.toolkit-compat: each installed CUDA toolkit against what the driver supports.

use crate::checks::cuda::driver_version;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{cuda_table, DriverSupport};

const ID: &str = "cuda.toolkit-compat";

pub const CHECK: Check = Check {
    id: ID,
    title: "The installed CUDA toolkit against what the driver supports",
    looks_at: "the installed CUDA toolkit (version.json / version.txt / nvcc) against what the \
               driver supports (forward-compat package noted)",
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
    profiles: &[],
    run: toolkit,
};

fn toolkit(facts: &Facts, _: &Policy) -> Vec<Finding> {
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
