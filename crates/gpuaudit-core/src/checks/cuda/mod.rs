//! The CUDA stack: the driver, the toolkit, the libraries, the framework, the environment, and
//! how long a context takes.

pub mod context_latency;
pub mod driver;
pub mod env;
pub mod framework;
pub mod libraries;
pub mod toolkit_compat;

use crate::facts::{CudaVersion, Facts, LibraryCopy, LibrarySource};
use crate::finding::Finding;
use crate::spec::{cuda_table, DriverVersion};

/// The driver version as reported and parsed, or why there is none (cuda.driver,
/// cuda.toolkit-compat).
pub(crate) fn driver_version(facts: &Facts) -> Result<(String, DriverVersion), String> {
    let v = facts.driver.version.get().map_err(|r| r.to_string())?;
    let parsed =
        DriverVersion::parse(v).ok_or_else(|| format!("driver version '{v}' not understood"))?;
    Ok((v.clone(), parsed))
}

/// One library copy in a line, "path -> file [source] version x" (cuda.libraries, cuda.env).
pub(crate) fn describe(c: &LibraryCopy) -> String {
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
pub(crate) fn is_compat(c: &LibraryCopy) -> bool {
    c.path.contains("/compat/")
}

/// The directories the dynamic loader searches on its own, after LD_LIBRARY_PATH, RUNPATH and
/// /etc/ld.so.cache: glibc's trusted directories (`ld.so --help` lists them), with the
/// multiarch ones Debian-family glibc is built with.
pub const LOADER_DEFAULT_DIRS: &[&str] = &[
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
];

/// Where a copy stands in the loader's search for a program without RUNPATH: 0
/// LD_LIBRARY_PATH, 1 the cache, 2 a default directory; `None`: the loader never finds it by
/// itself (a toolkit or wheel directory, reached only through a RUNPATH or an explicit path).
pub(crate) fn loader_rank(c: &LibraryCopy) -> Option<u8> {
    match c.source {
        LibrarySource::LdLibraryPath => Some(0),
        LibrarySource::LdCache => Some(1),
        LibrarySource::Other => {
            let dir = c.path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
            LOADER_DEFAULT_DIRS.contains(&dir).then_some(2)
        }
        _ => None,
    }
}

/// The copy of `lib` a program without RUNPATH loads: the first the loader reaches
/// (LD_LIBRARY_PATH in its order, then the cache, then the default directories).
pub(crate) fn loaded<'a>(copies: &'a [LibraryCopy], lib: &str) -> Option<&'a LibraryCopy> {
    copies
        .iter()
        .filter(|c| c.library == lib)
        .filter_map(|c| loader_rank(c).map(|r| (r, c)))
        .min_by_key(|(r, _)| *r)
        .map(|(_, c)| c)
}

/// The kernel module's version (/proc/driver/nvidia/version), which libcuda must match; the
/// driver library's (NVML) where the module's line was not read.
pub(crate) fn module_version(facts: &Facts) -> Option<(String, DriverVersion)> {
    let from_proc = facts.driver.proc_version.value().and_then(|line| {
        line.split_whitespace()
            .filter(|w| w.contains('.'))
            .find_map(|w| DriverVersion::parse(w).map(|v| (w.to_string(), v)))
    });
    from_proc.or_else(|| driver_version(facts).ok())
}

/// How a loaded forward-compatibility libcuda stands to the kernel module.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CompatState<'a> {
    /// The libcuda programs load is a compat copy older than the kernel module: every CUDA
    /// program fails with error 803 (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH).
    Older {
        copy: &'a LibraryCopy,
        version: DriverVersion,
        module: String,
    },
    /// A compat copy newer than the module is loaded: forward compatibility in use, for the
    /// CUDA version it names (where the table knows its driver).
    InUse {
        copy: &'a LibraryCopy,
        version: DriverVersion,
        cuda: Option<CudaVersion>,
        module: String,
    },
    /// No compat copy is loaded (none, or one of the module's own version).
    NotLoaded,
}

/// The forward-compatibility libcuda programs load, judged against the kernel module.
pub(crate) fn compat_state(facts: &Facts) -> CompatState<'_> {
    let (Ok(copies), Some((module, mv))) = (facts.host.libraries.get(), module_version(facts))
    else {
        return CompatState::NotLoaded;
    };
    let Some(c) = loaded(copies, "libcuda").filter(|c| is_compat(c)) else {
        return CompatState::NotLoaded;
    };
    let Some(v) = c.version.as_deref().and_then(DriverVersion::parse) else {
        return CompatState::NotLoaded;
    };
    match v.cmp(&mv) {
        std::cmp::Ordering::Less => CompatState::Older {
            copy: c,
            version: v,
            module,
        },
        std::cmp::Ordering::Equal => CompatState::NotLoaded,
        std::cmp::Ordering::Greater => CompatState::InUse {
            copy: c,
            cuda: cuda_table().max_cuda_for_driver(&v),
            version: v,
            module,
        },
    }
}

/// Forward-compatibility packages on disk that no loader path reaches: (the directory to put
/// on LD_LIBRARY_PATH, the CUDA version it brings where known), from the toolkits that ship
/// one and the compat libcuda copies found.
pub(crate) fn compat_on_disk(facts: &Facts) -> Vec<(String, Option<CudaVersion>)> {
    let mut out: Vec<(String, Option<CudaVersion>)> = Vec::new();
    if let Some(kits) = facts.toolkit.value() {
        for k in kits.iter().filter(|k| k.forward_compat) {
            out.push((format!("{}/compat", k.path), Some(k.cuda)));
        }
    }
    if let Some(copies) = facts.host.libraries.value() {
        for c in copies
            .iter()
            .filter(|c| c.library == "libcuda" && is_compat(c) && loader_rank(c).is_none())
        {
            let dir = c.path.rsplit_once('/').map(|(d, _)| d).unwrap_or(&c.path);
            if out.iter().any(|(d, _)| d == dir) {
                continue;
            }
            let cuda = c
                .version
                .as_deref()
                .and_then(DriverVersion::parse)
                .and_then(|v| cuda_table().max_cuda_for_driver(&v));
            out.push((dir.to_string(), cuda));
        }
    }
    out
}

/// Whether the GPUs can use CUDA forward compatibility, which NVIDIA supports on data-center
/// GPUs, select NGC-Ready RTX SKUs and Jetson only
/// (https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html); elsewhere
/// cuInit fails with error 804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CompatGpus {
    /// Data-center GPUs (Tesla, A/H/B/L series...).
    Supported,
    /// Workstation RTX / Quadro cards: only select NGC-Ready SKUs are supported.
    Select(Vec<String>),
    /// GeForce / TITAN cards: not supported.
    Unsupported(Vec<String>),
}

pub(crate) fn compat_gpus(facts: &Facts) -> CompatGpus {
    let names: Vec<String> = facts
        .gpu_list()
        .iter()
        .filter_map(|g| g.name.value().cloned())
        .collect();
    let consumer: Vec<String> = names
        .iter()
        .filter(|n| n.contains("GeForce") || n.contains("TITAN"))
        .cloned()
        .collect();
    if !consumer.is_empty() {
        return CompatGpus::Unsupported(consumer);
    }
    let workstation: Vec<String> = names
        .iter()
        .filter(|n| n.contains("Quadro") || (n.contains("RTX") && !n.contains("Server")))
        .cloned()
        .collect();
    if !workstation.is_empty() {
        return CompatGpus::Select(workstation);
    }
    CompatGpus::Supported
}

/// NVIDIA's forward-compatibility guide, cited by the checks that judge the compat package.
pub const FORWARD_COMPAT_DOC: &str =
    "https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html";

/// Whether CUDA forward compatibility bridges a build for CUDA `needed` on this driver.
pub(crate) enum Bridge {
    /// A compat libcuda for at least `needed` is what programs load: the note says so.
    InUse(String),
    /// A compat libcuda is loaded but cannot serve (too old a CUDA, or a GPU that refuses
    /// forward compatibility): the finding says why.
    Refused(Finding),
    /// A compat package for at least `needed` is on disk, on no loader path; `gpus_ok`: the
    /// GPUs are data-center ones, on which it would work.
    OnDisk { dir: String, gpus_ok: bool },
    /// Nothing to bridge with.
    Nothing,
}

pub(crate) fn bridge(facts: &Facts, needed: CudaVersion, id: &'static str) -> Bridge {
    match compat_state(facts) {
        CompatState::InUse {
            version,
            cuda: Some(c),
            ..
        } if c >= needed => match compat_gpus(facts) {
            CompatGpus::Unsupported(names) => Bridge::Refused(
                Finding::fail(id, format!("CUDA {needed} is reached only through the forward-compatibility libcuda {version}, which {} cannot use: cuInit fails with error 804 (CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)", names.join(", ")))
                    .with("source", FORWARD_COMPAT_DOC)
                    .fix("upgrade the driver to one that supports this CUDA version, and take the compat directory off the loader's path"),
            ),
            _ => Bridge::InUse(format!(
                "CUDA {needed} through the forward-compatibility libcuda {version} (CUDA {c})"
            )),
        },
        _ => {
            let gpus_ok = compat_gpus(facts) == CompatGpus::Supported;
            match compat_on_disk(facts)
                .into_iter()
                .find(|(_, c)| c.is_some_and(|c| c >= needed))
            {
                Some((dir, _)) => Bridge::OnDisk { dir, gpus_ok },
                None => Bridge::Nothing,
            }
        }
    }
}

/// How to put a forward-compatibility package on the loader's path, or, on GPUs that cannot
/// use one, what to do instead.
pub(crate) fn compat_fix(dir: &str, gpus_ok: bool, driver_cuda: &CudaVersion) -> String {
    if gpus_ok {
        format!(
            "put the package on the loader's path: export LD_LIBRARY_PATH={dir}:$LD_LIBRARY_PATH (or install NVIDIA's cuda-compat package, which registers it with ldconfig); forward compatibility works only on data-center GPUs ({FORWARD_COMPAT_DOC}); or upgrade the driver"
        )
    } else {
        format!(
            "upgrade the driver (the forward-compatibility package in {dir} works only on data-center GPUs and select NGC-Ready RTX cards: {FORWARD_COMPAT_DOC}), or use a build for CUDA {}.x",
            driver_cuda.major
        )
    }
}

/// A library copy for a test.
#[cfg(test)]
pub(crate) fn copy(
    lib: &str,
    path: &str,
    file: &str,
    v: Option<&str>,
    s: crate::facts::LibrarySource,
) -> LibraryCopy {
    LibraryCopy {
        library: lib.into(),
        path: path.into(),
        file: file.into(),
        version: v.map(str::to_string),
        source: s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{LibrarySource as S, Toolkit};
    use crate::reading::Reading;
    use crate::testing::Machine;

    fn libcuda(path: &str, v: &str, s: S) -> LibraryCopy {
        copy("libcuda", path, &format!("libcuda.so.{v}"), Some(v), s)
    }

    #[test]
    fn a_copy_in_one_line() {
        let mut c = libcuda(
            "/usr/local/cuda/compat/libcuda.so.1",
            "580.95.05",
            S::Toolkit,
        );
        assert_eq!(
            describe(&c),
            "/usr/local/cuda/compat/libcuda.so.1 -> libcuda.so.580.95.05 [toolkit] version 580.95.05"
        );
        assert!(is_compat(&c));
        c.version = None;
        c.path = "/usr/lib/libcuda.so.1".into();
        assert_eq!(
            describe(&c),
            "/usr/lib/libcuda.so.1 -> libcuda.so.580.95.05 [toolkit]"
        );
        assert!(!is_compat(&c));
    }

    #[test]
    fn loader_order_and_default_dirs() {
        let ldp = libcuda("/opt/a/libcuda.so.1", "1.0", S::LdLibraryPath);
        let cache = libcuda("/usr/lib/x86_64-linux-gnu/libcuda.so.1", "2.0", S::LdCache);
        let default = libcuda("/usr/lib64/libcuda.so.1", "3.0", S::Other);
        let elsewhere = libcuda("/usr/local/nvidia/lib64/libcuda.so.1", "4.0", S::Other);
        let kit = libcuda("/usr/local/cuda/compat/libcuda.so.1", "5.0", S::Toolkit);
        assert_eq!(loader_rank(&ldp), Some(0));
        assert_eq!(loader_rank(&cache), Some(1));
        assert_eq!(loader_rank(&default), Some(2));
        assert_eq!(loader_rank(&elsewhere), None);
        assert_eq!(loader_rank(&kit), None);
        let all = vec![kit.clone(), default.clone(), cache.clone(), ldp.clone()];
        assert_eq!(loaded(&all, "libcuda"), Some(&ldp));
        assert_eq!(loaded(&all[..3], "libcuda"), Some(&cache));
        assert_eq!(loaded(&all[..2], "libcuda"), Some(&default));
        assert_eq!(loaded(&all[..1], "libcuda"), None);
        assert_eq!(loaded(&all, "libnccl"), None);
        // Two LD_LIBRARY_PATH copies: the first directory wins.
        let second = libcuda("/opt/b/libcuda.so.1", "9.0", S::LdLibraryPath);
        assert_eq!(
            loaded(&[ldp.clone(), second.clone()], "libcuda"),
            Some(&ldp)
        );
        assert_eq!(loaded(&[second.clone(), ldp], "libcuda"), Some(&second));
    }

    #[test]
    fn module_version_prefers_the_kernel_module() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        assert_eq!(
            module_version(&f).map(|m| m.0).as_deref(),
            Some("580.159.04")
        );
        f.driver.proc_version = Reading::Value(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar 5 2024".into(),
        );
        assert_eq!(
            module_version(&f).map(|m| m.0).as_deref(),
            Some("550.54.15")
        );
        f.driver.proc_version = Reading::unavailable("no file");
        assert_eq!(
            module_version(&f).map(|m| m.0).as_deref(),
            Some("580.159.04")
        );
        f.driver.version = Reading::unavailable("no driver");
        assert_eq!(module_version(&f), None);
    }

    fn with_libcuda(copies: Vec<LibraryCopy>) -> Facts {
        Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| f.host.libraries = Reading::Value(copies))
            .build()
    }

    #[test]
    fn compat_against_the_module() {
        let driver = libcuda(
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "580.159.04",
            S::LdCache,
        );
        let compat = |v: &str, s: S| libcuda("/usr/local/cuda/compat/libcuda.so.1", v, s);
        // Older than 580.159.04: error 803.
        let f = with_libcuda(vec![compat("580.95.05", S::LdLibraryPath), driver.clone()]);
        assert!(
            matches!(compat_state(&f), CompatState::Older { ref module, .. } if module == "580.159.04")
        );
        // Just older in the last field.
        let f = with_libcuda(vec![compat("580.159.03", S::LdLibraryPath), driver.clone()]);
        assert!(matches!(compat_state(&f), CompatState::Older { .. }));
        // The module's own version: nothing to say.
        let f = with_libcuda(vec![compat("580.159.04", S::LdLibraryPath), driver.clone()]);
        assert_eq!(compat_state(&f), CompatState::NotLoaded);
        // Newer: forward compatibility, with the CUDA version its driver brings.
        let f = with_libcuda(vec![compat("590.44.01", S::LdCache)]);
        assert!(
            matches!(compat_state(&f), CompatState::InUse { cuda: Some(c), .. } if c == CudaVersion::new(13, 1))
        );
        let f = with_libcuda(vec![compat("580.159.05", S::LdLibraryPath)]);
        assert!(matches!(compat_state(&f), CompatState::InUse { .. }));
        // On disk only: not loaded.
        let f = with_libcuda(vec![compat("580.95.05", S::Toolkit), driver.clone()]);
        assert_eq!(compat_state(&f), CompatState::NotLoaded);
        // The loaded copy is the driver's: a compat copy behind it does not count.
        let f = with_libcuda(vec![driver.clone(), compat("580.95.05", S::LdCache)]);
        assert_eq!(compat_state(&f), CompatState::NotLoaded);
        // No version: nothing to judge.
        let mut c = compat("580.95.05", S::LdLibraryPath);
        c.version = None;
        assert_eq!(compat_state(&with_libcuda(vec![c])), CompatState::NotLoaded);
        let mut f = with_libcuda(vec![compat("580.95.05", S::LdLibraryPath)]);
        f.host.libraries = Reading::unavailable("x");
        assert_eq!(compat_state(&f), CompatState::NotLoaded);
    }

    #[test]
    fn compat_packages_on_disk() {
        let mut f = with_libcuda(vec![
            libcuda(
                "/usr/local/cuda-13.0/compat/libcuda.so.1",
                "580.95.05",
                S::Toolkit,
            ),
            libcuda("/opt/x/compat/libcuda.so.1", "590.44.01", S::Toolkit),
            libcuda("/opt/y/compat/libcuda.so.1", "590.44.01", S::LdLibraryPath),
        ]);
        f.toolkit = Reading::Value(vec![Toolkit {
            path: "/usr/local/cuda-13.0".into(),
            version: "13.0.88".into(),
            cuda: CudaVersion::new(13, 0),
            source: "version.json".into(),
            forward_compat: true,
        }]);
        assert_eq!(
            compat_on_disk(&f),
            vec![
                (
                    "/usr/local/cuda-13.0/compat".to_string(),
                    Some(CudaVersion::new(13, 0))
                ),
                ("/opt/x/compat".to_string(), Some(CudaVersion::new(13, 1))),
            ]
        );
        f.toolkit = Reading::unavailable("x");
        f.host.libraries = Reading::unavailable("x");
        assert!(compat_on_disk(&f).is_empty());
    }

    #[test]
    fn which_gpus_take_forward_compatibility() {
        let named = |n: &str| {
            Machine::healthy("h200-sxm-141gb", 2)
                .gpu(1, |g| g.name = Reading::Value(n.into()))
                .build()
        };
        assert_eq!(compat_gpus(&named("NVIDIA H200")), CompatGpus::Supported);
        assert_eq!(
            compat_gpus(&named("NVIDIA RTX PRO 6000 Blackwell Server Edition")),
            CompatGpus::Supported
        );
        assert_eq!(
            compat_gpus(&named("NVIDIA GeForce RTX 4090")),
            CompatGpus::Unsupported(vec!["NVIDIA GeForce RTX 4090".into()])
        );
        assert_eq!(
            compat_gpus(&named("NVIDIA TITAN RTX")),
            CompatGpus::Unsupported(vec!["NVIDIA TITAN RTX".into()])
        );
        assert_eq!(
            compat_gpus(&named("NVIDIA RTX A6000")),
            CompatGpus::Select(vec!["NVIDIA RTX A6000".into()])
        );
        assert_eq!(
            compat_gpus(&named("Quadro P400")),
            CompatGpus::Select(vec!["Quadro P400".into()])
        );
    }

    #[test]
    fn compat_fix_names_the_directory_or_the_driver() {
        let ok = compat_fix(
            "/usr/local/cuda-13.0/compat",
            true,
            &CudaVersion::new(12, 2),
        );
        assert!(ok.contains("LD_LIBRARY_PATH=/usr/local/cuda-13.0/compat:$LD_LIBRARY_PATH"));
        assert!(ok.contains("data-center GPUs") && ok.contains(FORWARD_COMPAT_DOC));
        let no = compat_fix(
            "/usr/local/cuda-13.0/compat",
            false,
            &CudaVersion::new(12, 2),
        );
        assert!(no.starts_with("upgrade the driver") && no.contains("CUDA 12.x"));
        assert!(!no.contains("export"));
    }
}
