//! cuda.toolkit-compat: each installed CUDA toolkit against what the driver supports.

use crate::checks::cuda::driver::driver_is_old;
use crate::checks::cuda::{bridge, compat_fix, driver_version, Bridge, FORWARD_COMPAT_DOC};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Cause, Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::spec::{cuda_table, DriverSupport};

const ID: &str = "cuda.toolkit-compat";

pub const CHECK: Check = Check {
    id: ID,
    title: "The installed CUDA toolkit against what the driver supports",
    looks_at: "the installed CUDA toolkit (version.json / version.txt / nvcc) against what the \
               driver supports (a forward-compat package counts where the loader reaches it)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Each CUDA toolkit under /usr/local (version.json, version.txt, include/cuda.h, nvcc \
               --version or the libcudart file names, whichever exists) against the driver: at least \
               the toolkit's GA driver (full support), within CUDA minor version compatibility (runs, \
               but no JIT of newer PTX and some features missing), or too old. A toolkit's \
               forward-compatibility package (compat/libcuda.so.*) bridges the gap only when \
               programs load it (LD_LIBRARY_PATH or the cache) and the GPUs are data-center ones; \
               on disk alone it changes nothing but the fix.",
        why: "Programs built with a toolkit newer than the driver fail at start with \"CUDA driver \
              version is insufficient for CUDA runtime version\" or \"the provided PTX was compiled with \
              an unsupported toolchain\".",
        verify: "nvidia-smi | head -4   # the driver's CUDA version\nnvcc --version\n\
                 # every toolkit installed (some images have no version.json: cuda.h says it too)\n\
                 cat /usr/local/cuda*/version.json 2>/dev/null | grep -A2 '\"cuda\"'\n\
                 grep -H 'define CUDA_VERSION' /usr/local/cuda*/include/cuda.h",
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
    // A driver cuda.driver finds too old is the cause of a toolkit too new for it: that
    // finding's fix names the driver this toolkit needs too.
    let old = driver_is_old(facts).then(|| Cause::check(crate::checks::cuda::driver::CHECK.id));
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
            // A forward-compatibility libcuda that programs load changes what the toolkit
            // runs on; one on disk only changes the fix.
            let fwd = match support {
                Some(DriverSupport::Full) | None => Bridge::Nothing,
                _ => bridge(facts, k.cuda, ID),
            };
            match (support, fwd) {
                (Some(DriverSupport::Full), _) => Finding::pass(
                    ID,
                    format!("CUDA {} at {} runs on driver {text}{cap}", k.version, k.path),
                )
                .evidence(ev),
                (Some(_), Bridge::InUse(note)) => Finding::pass(
                    ID,
                    format!("CUDA {} at {} runs on driver {text}{cap}: {note}", k.version, k.path),
                )
                .evidence(ev),
                (Some(_), Bridge::Refused(f)) => f.evidence(ev),
                (Some(DriverSupport::MinorCompat), _) => Finding::warn(
                    ID,
                    format!(
                        "CUDA {} at {} is newer than driver {text}{cap} fully supports: it runs through minor version compatibility, without JIT of newer PTX",
                        k.version, k.path
                    ),
                )
                .evidence(ev)
                .fix(format!("Upgrade the driver to {ga} or newer, or use a toolkit no newer than the driver's CUDA version."))
                .caused_by_opt(old.clone()),
                (Some(DriverSupport::Unsupported), Bridge::OnDisk { dir, gpus_ok }) => Finding::fail(
                    ID,
                    format!(
                        "CUDA {} at {} is too new for driver {text}{cap}, and its forward-compatibility package ({dir}) is on no loader path: its programs fail with \"CUDA driver version is insufficient for CUDA runtime version\"",
                        k.version, k.path
                    ),
                )
                .evidence(ev.with("compat_package", &dir).with("source", FORWARD_COMPAT_DOC))
                .fix(compat_fix(&dir, gpus_ok, driver_cuda.as_ref().unwrap_or(&k.cuda)))
                .caused_by_opt(old.clone()),
                (Some(DriverSupport::Unsupported), _) => Finding::fail(
                    ID,
                    format!(
                        "CUDA {} at {} is too new for driver {text}{cap}: its programs fail with \"CUDA driver version is insufficient for CUDA runtime version\"",
                        k.version, k.path
                    ),
                )
                .evidence(ev)
                .fix(format!("Upgrade the driver to {ga} or newer (or install the cuda-compat package on datacenter GPUs), or use a toolkit no newer than CUDA {}.", driver_cuda.map(|c| c.to_string()).unwrap_or_else(|| "the driver's".into())))
                .caused_by_opt(old.clone()),
                (None, _) => Finding::new(
                    ID,
                    Status::Skip,
                    format!("CUDA {} at {}: the driver's CUDA version is unknown and the toolkit is not in the table", k.version, k.path),
                )
                .evidence(ev),
            }
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{CudaVersion, LibrarySource, Toolkit};
    use crate::testing::{statuses, Machine};

    fn kit(path: &str, v: &str, cuda: CudaVersion, compat: bool) -> Toolkit {
        Toolkit {
            path: path.into(),
            version: v.into(),
            cuda,
            source: "version.json".into(),
            forward_compat: compat,
        }
    }

    /// Driver `version` (supporting CUDA `cuda`), one toolkit.
    fn on(version: &str, cuda: CudaVersion, k: Toolkit) -> Facts {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.driver.version = Reading::Value(version.into());
        f.driver.cuda_version = Reading::Value(cuda);
        f.driver.proc_version = Reading::unavailable("x");
        f.toolkit = Reading::Value(vec![k]);
        f.host.libraries = Reading::Value(vec![]);
        f
    }

    const C122: CudaVersion = CudaVersion::new(12, 2);

    #[test]
    fn a_toolkit_too_new_for_a_driver_cuda_driver_finds_old_is_its_consequence() {
        let k124 = || {
            kit(
                "/usr/local/cuda-12.4",
                "12.4.1",
                CudaVersion::new(12, 4),
                false,
            )
        };
        // Driver 470 (CUDA 11.4) on a Hopper GPU: cuda.driver fails; the toolkit is that.
        let r = toolkit(
            &on("470.256.02", CudaVersion::new(11, 4), k124()),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert_eq!(r[0].caused_by, Some(Cause::check("cuda.driver")));
        // A current driver (CUDA 12.2) that is not new enough for 12.4: minor compatibility,
        // the toolkit's own problem.
        let r = toolkit(&on("535.104.05", C122, k124()), &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert_eq!(r[0].caused_by, None);
        // CUDA 13 on a CUDA 12.9 driver: unsupported, and still its own problem.
        let k130 = kit(
            "/usr/local/cuda-13.0",
            "13.0.88",
            CudaVersion::new(13, 0),
            false,
        );
        let r = toolkit(
            &on("575.57.08", CudaVersion::new(12, 9), k130),
            &Policy::default(),
        );
        assert_eq!(r[0].caused_by, None, "{r:#?}");
    }

    #[test]
    fn toolkit_against_the_driver() {
        let k130 = || {
            kit(
                "/usr/local/cuda-13.0",
                "13.0.88",
                CudaVersion::new(13, 0),
                false,
            )
        };
        // At the GA driver (580.65.06) and just below it.
        let r = toolkit(
            &on("580.65.06", CudaVersion::new(13, 0), k130()),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Pass]);
        let r = toolkit(
            &on("580.65.05", CudaVersion::new(12, 9), k130()),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0].message.contains("minor version compatibility"));
        // Below 580: unsupported.
        let r = toolkit(
            &on("575.57.08", CudaVersion::new(12, 9), k130()),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("insufficient"));
        // A toolkit the table does not know: by the driver's CUDA version.
        let k139 = || {
            kit(
                "/usr/local/cuda-13.9",
                "13.9",
                CudaVersion::new(13, 9),
                false,
            )
        };
        for (cuda, want) in [
            (CudaVersion::new(13, 9), Status::Pass),
            (CudaVersion::new(13, 8), Status::Warn),
            (CudaVersion::new(12, 9), Status::Fail),
        ] {
            let r = toolkit(&on("700.1.1", cuda, k139()), &Policy::default());
            assert_eq!(statuses(&r), vec![want], "{cuda}");
        }
        let mut f = on("700.1.1", C122, k139());
        f.driver.cuda_version = Reading::unavailable("x");
        assert_eq!(
            statuses(&toolkit(&f, &Policy::default())),
            vec![Status::Skip]
        );
        let mut f = on("580.65.06", C122, k130());
        f.driver.version = Reading::unavailable("no driver");
        let r = toolkit(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        assert!(r[0].message.contains("no driver"));
        f.toolkit = Reading::Value(vec![]);
        assert_eq!(
            statuses(&toolkit(&f, &Policy::default())),
            vec![Status::Info]
        );
        f.toolkit = Reading::unavailable("not looked");
        assert_eq!(
            statuses(&toolkit(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

    #[test]
    fn a_compat_package_counts_only_on_the_loader_path() {
        // Seen: CUDA 13.0 with its compat package on a 535 driver, the package on no loader
        // path: warn "ships the forward-compatibility package".
        let k = || {
            kit(
                "/usr/local/cuda-13.0",
                "13.0.88",
                CudaVersion::new(13, 0),
                true,
            )
        };
        let f = on("535.261.03", C122, k());
        let r = toolkit(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(r[0]
            .message
            .contains("(/usr/local/cuda-13.0/compat) is on no loader path"));
        assert!(r[0]
            .fix
            .as_deref()
            .is_some_and(|x| x
                .contains("export LD_LIBRARY_PATH=/usr/local/cuda-13.0/compat:$LD_LIBRARY_PATH")));
        // On the path: it runs.
        let mut f = on("535.261.03", C122, k());
        f.host.libraries = Reading::Value(vec![crate::checks::cuda::copy(
            "libcuda",
            "/usr/local/cuda-13.0/compat/libcuda.so.1",
            "libcuda.so.580.95.05",
            Some("580.95.05"),
            LibrarySource::LdLibraryPath,
        )]);
        let r = toolkit(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass], "{r:#?}");
        assert!(r[0]
            .message
            .contains("through the forward-compatibility libcuda 580.95.05"));
        // On a GeForce card, not even then.
        if let Reading::Value(g) = &mut f.gpus {
            g[0].name = Reading::Value("NVIDIA GeForce RTX 3090".into());
        }
        let r = toolkit(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("error 804"));
    }
}
