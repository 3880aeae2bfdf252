//! cuda.driver: the driver version, the CUDA version it supports, the kernel module against the
//! library, and the oldest driver and the last driver branch for each GPU's architecture.

use crate::checks::common::spec_of;
use crate::checks::cuda::driver_version;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{CudaVersion, Facts, VirtualizationMode};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;
use crate::spec::{cuda_table, ArchSupport, DriverVersion};

const ID: &str = "cuda.driver";

/// A driver whose CUDA version is older than this cannot run current framework builds
/// (PyTorch ships CUDA 12 and 13 wheels); CUDA 12.0 came with driver 525.60.13.
pub const CURRENT_FRAMEWORKS_CUDA: CudaVersion = CudaVersion::new(12, 0);

pub const CHECK: Check = Check {
    id: ID,
    title: "Driver version, the CUDA version it supports, first and last driver for the GPU's architecture",
    looks_at: "driver version, the CUDA version it supports, first and last driver for the GPU's \
               architecture",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The NVIDIA driver version (NVML, nvidia-smi or /proc/driver/nvidia/version), the \
               newest CUDA version it supports, the kernel module's version against the user-space \
               library's, the oldest driver that supports each GPU's architecture (CUDA release \
               notes), and, for an architecture NVIDIA has retired, the last driver branch that \
               supports it (NVIDIA's architecture matrix: Kepler R470; Maxwell, Pascal, Volta \
               R580).",
        why: "A driver older than the GPU's architecture, or of a branch after the last one that \
              supports it, does not run it at all; a driver whose CUDA \
              version is older than the framework's build fails with \"CUDA driver version is \
              insufficient for CUDA runtime version\"; a kernel module and a library of different \
              versions (an update without reboot) fail with \"Driver/library version mismatch\".",
        verify: "nvidia-smi | head -4   # the header: Driver Version, CUDA Version\ncat /proc/driver/nvidia/version",
        fix: "Install a driver of the current production branch for your GPUs (e.g. from the \
              distribution's nvidia-driver-<branch>-server package or NVIDIA's CUDA repository); \
              after a driver update, reboot.",
    },
    profiles: &[],
    run: driver,
};

fn driver(facts: &Facts, _: &Policy) -> Vec<Finding> {
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

    // The oldest driver for each GPU's architecture.
    let age = age(facts, &dv, cuda);
    if let Some((arch, min)) = &age.needs {
        ev.insert("architecture", arch);
        ev.insert("min_driver_for_architecture", min.to_string());
    }
    if let Some((arch, last)) = age.capped {
        ev.insert("last_branch_architecture", &arch.name);
        ev.insert("last_driver_branch_for_architecture", format!("R{last}"));
    }
    let table = cuda_table();
    let current_driver = table
        .toolkit(CURRENT_FRAMEWORKS_CUDA)
        .map(|t| t.ga_min_driver.to_string())
        .unwrap_or_else(|| "a newer one".into());
    let frameworks = format!(
        "current framework builds (CUDA {} and newer) need {current_driver} or newer",
        CURRENT_FRAMEWORKS_CUDA.major
    );
    // The driver too old for the GPUs, and too old for current frameworks, is one cause:
    // one finding, whose fix names the driver every need here is met by.
    if let Some((arch, min)) = &age.too_old {
        let mut msg = format!(
            "Driver {text} is older than the first driver for {arch} GPUs ({min}): they cannot run CUDA with it"
        );
        if age.below_current {
            msg.push_str(&format!(
                "; it {}, and {frameworks}",
                age.supports.as_deref().unwrap_or("supports an old CUDA")
            ));
        }
        out.push(Finding::fail(ID, msg).evidence(ev.clone()).fix(upgrade_fix(
            facts,
            &dv,
            Some((arch, min)),
            age.below_current,
            age.capped,
        )));
    }
    // A branch after the last of some GPU's architecture does not drive it.
    if let (true, Some((arch, last))) = (age.too_new, age.capped) {
        let arch = &arch.name;
        out.push(
            Finding::fail(
                ID,
                format!("Driver {text} is of a branch after R{last}, the last that supports {arch} GPUs: it does not drive them"),
            )
            .evidence(ev.clone())
            .fix(format!("Install a driver of the R{last} branch (its latest release), the last NVIDIA made for {arch} GPUs; newer branches do not support them")),
        );
    }
    let current = table
        .toolkit(CURRENT_FRAMEWORKS_CUDA)
        .map(|t| &t.ga_min_driver);
    // A GPU whose last branch predates current frameworks' driver cannot get there by a
    // driver upgrade: that upgrade would leave it without a driver.
    let stuck = age
        .capped
        .filter(|(arch, _)| current.is_some_and(|d| arch.after_last_branch(d)));
    if age.too_old.is_none() && age.below_current && !age.too_new {
        let supports = age.supports.as_deref().unwrap_or("supports an old CUDA");
        out.push(match stuck {
            Some((arch, last)) => {
                let arch = &arch.name;
                Finding::warn(
                    ID,
                    format!(
                        "Driver {text} {supports}: {frameworks}, a branch after R{last}, the last that supports {arch} GPUs: they cannot run current frameworks"
                    ),
                )
                .evidence(ev.clone())
                .fix(format!("Keep the R{last} driver and use framework builds for the CUDA it supports, or move the work to GPUs that current drivers support; upgrading the driver past R{last} leaves {arch} GPUs without a driver."))
            }
            None => Finding::warn(ID, format!("Driver {text} {supports}: {frameworks}"))
                .evidence(ev.clone())
                .fix(upgrade_fix(facts, &dv, None, true, age.capped)),
        });
    }

    // The kernel module and the user-space library must be the same build (after the
    // version's finding: the checks that an old driver explains name that one).
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
    let (needs, supports) = (age.needs, age.supports);
    if out.is_empty() {
        let mut msg = format!("Driver {text}");
        if let Some(s) = &supports {
            msg.push_str(&format!(" {s}"));
        }
        if let Some((arch, min)) = needs {
            msg.push_str(&format!("; {arch} GPUs need {min} or newer"));
        }
        out.push(Finding::pass(ID, msg).evidence(ev));
    }
    out
}
/// How old the driver is for this machine: what cuda.driver judges, and what the checks it
/// explains (a toolkit or a framework too new for it) ask.
struct Age {
    /// The newest architecture minimum of the GPUs: (architecture, its first driver).
    needs: Option<(String, DriverVersion)>,
    /// The first GPU's architecture the driver is older than, with its minimum.
    too_old: Option<(String, DriverVersion)>,
    /// "supports CUDA up to 11.4", as the driver says or the release notes' table does.
    supports: Option<String>,
    /// Its CUDA is older than current framework builds need.
    below_current: bool,
    /// The architecture with the earliest last branch among the GPUs, with that branch: no
    /// driver of a later branch drives them all, and where one is left undriven, this is it.
    capped: Option<(&'static ArchSupport, u32)>,
    /// The driver's branch comes after the last of some GPU's architecture.
    too_new: bool,
}

fn age(facts: &Facts, dv: &DriverVersion, cuda: Option<CudaVersion>) -> Age {
    let mut needs: Option<(String, DriverVersion)> = None;
    let mut too_old = None;
    let mut capped: Option<(&'static ArchSupport, u32)> = None;
    let mut too_new = false;
    for g in facts.gpu_list() {
        let Some(spec) = spec_of(g) else { continue };
        let Some(arch) = spec.arch_support() else {
            continue;
        };
        if needs.as_ref().is_none_or(|(_, d)| arch.min_driver > *d) {
            needs = Some((arch.name.clone(), arch.min_driver.clone()));
        }
        if let Some(last) = arch.last_branch {
            if capped.is_none_or(|(_, b)| last < b) {
                capped = Some((arch, last));
            }
        }
        if *dv < arch.min_driver && too_old.is_none() {
            too_old = Some((arch.name.clone(), arch.min_driver.clone()));
        }
        too_new |= arch.after_last_branch(dv);
    }
    // The CUDA version the driver supports: as it reports it, or where it does not (drivers
    // before R410 have no such field), from the release notes' table.
    let table = cuda_table();
    let supports = match cuda {
        Some(c) => Some(format!("supports CUDA up to {c}")),
        None => match table.max_cuda_for_driver(dv) {
            Some(c) => Some(format!("supports CUDA up to {c} (by the release notes' table; the driver did not say)")),
            None => table.toolkits.first().map(|t| {
                format!(
                    "is older than the first driver of CUDA {} ({}), so it supports an older CUDA (the driver did not say which)",
                    t.version, t.ga_min_driver
                )
            }),
        },
    };
    let below_current = match cuda {
        Some(c) => c < CURRENT_FRAMEWORKS_CUDA,
        None => table
            .max_cuda_for_driver(dv)
            .is_none_or(|c| c < CURRENT_FRAMEWORKS_CUDA),
    };
    Age {
        needs,
        too_old,
        supports,
        below_current,
        capped,
        too_new,
    }
}

/// Whether cuda.driver reports the driver as too old (for the GPUs' architecture, or for
/// current framework builds): then a toolkit or framework too new for it is that problem's
/// consequence, and names it.
pub fn driver_is_old(facts: &Facts) -> bool {
    let Ok((_, dv)) = driver_version(facts) else {
        return false;
    };
    let a = age(facts, &dv, facts.driver.cuda_version.value().copied());
    a.too_old.is_some() || a.below_current
}

/// "Install a current production driver, at least 550.54.14 (the CUDA 12.4 toolkit at
/// /usr/local/cuda-12.4 needs it; Hopper GPUs need 520.61.05; current framework builds
/// 525.60.13) ...": the one driver every need of this machine is met by.
fn upgrade_fix(
    facts: &Facts,
    dv: &DriverVersion,
    arch: Option<(&String, &DriverVersion)>,
    frameworks: bool,
    capped: Option<(&'static ArchSupport, u32)>,
) -> String {
    let table = cuda_table();
    let mut needs: Vec<(DriverVersion, String)> = Vec::new();
    if let Some((a, min)) = arch {
        needs.push((min.clone(), format!("{a} GPUs need {min}")));
    }
    if frameworks {
        if let Some(t) = table.toolkit(CURRENT_FRAMEWORKS_CUDA) {
            needs.push((
                t.ga_min_driver.clone(),
                format!(
                    "CUDA {} frameworks need {}",
                    CURRENT_FRAMEWORKS_CUDA.major, t.ga_min_driver
                ),
            ));
        }
    }
    for k in facts.toolkit.value().into_iter().flatten() {
        if let Some(t) = table.toolkit(k.cuda) {
            if t.ga_min_driver > *dv {
                needs.push((
                    t.ga_min_driver.clone(),
                    format!(
                        "the CUDA {} toolkit at {} needs {}",
                        k.version, k.path, t.ga_min_driver
                    ),
                ));
            }
        }
    }
    // A need past the last branch of a GPU's architecture cannot be met without leaving that
    // GPU undriven: said apart, not asked for.
    let mut beyond: Vec<String> = Vec::new();
    if let Some((a, last)) = capped {
        needs.retain(|(v, why)| {
            let keep = !a.after_last_branch(v);
            if !keep {
                beyond.push(format!(
                    "{why}, a branch after R{last}, the last that supports {} GPUs: keep that need off this machine",
                    a.name
                ));
            }
            keep
        });
    }
    let beyond_note = if beyond.is_empty() {
        String::new()
    } else {
        format!(" Not within reach: {}.", beyond.join("; "))
    };
    // In a vGPU guest the driver is not the tenant's to choose: it must be the guest driver
    // of the vGPU software release the host runs.
    let vgpu = facts
        .gpu_list()
        .iter()
        .any(|g| g.virtualization.value() == Some(&VirtualizationMode::Vgpu));
    let vgpu_note = if vgpu {
        " In this vGPU guest the driver must be the guest driver of the vGPU software release the host runs: ask the provider for a vGPU release with that driver."
    } else {
        ""
    };
    // The highest first, then the others in the order found.
    let Some(top) = needs.iter().map(|(v, _)| v.clone()).max() else {
        return format!(
            "Upgrade the driver to a current production branch.{beyond_note}{vgpu_note}"
        );
    };
    let mut why: Vec<&str> = needs
        .iter()
        .filter(|(v, _)| *v == top)
        .map(|(_, w)| w.as_str())
        .collect();
    why.extend(
        needs
            .iter()
            .filter(|(v, _)| *v != top)
            .map(|(_, w)| w.as_str()),
    );
    format!(
        "Install a current production driver, at least {top} ({}); for new work the newest production branch.{beyond_note}{vgpu_note}",
        why.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    #[test]
    fn driver_versions() {
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let r = driver(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(
            r[0].message
                .contains("supports CUDA up to 13.0; Hopper GPUs need"),
            "{}",
            r[0].message
        );
        // Module and library of different versions (an update without reboot).
        let mut g = f.clone();
        g.driver.version = Reading::Value("580.159.05".into());
        let r = driver(&g, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("Driver/library version mismatch"));
        // ... unless the library did not answer (nothing to compare).
        g.driver.query = Reading::unavailable("NVML failed");
        assert_eq!(
            statuses(&driver(&g, &Policy::default())),
            vec![Status::Pass]
        );
        // A driver older than the architecture's first.
        // No CUDA version reported (drivers before R410): from the table, or older than it.
        let mut n = f.clone();
        n.driver.cuda_version = Reading::unavailable("not in the XML");
        let r = driver(&n, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(
            r[0].message
                .contains("supports CUDA up to 13.0 (by the release notes' table"),
            "{}",
            r[0].message
        );
        n.driver.version = Reading::Value("520.61.05".into());
        n.driver.proc_version = Reading::unavailable("x");
        let r = driver(&n, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0].message.contains("up to 11.8 (by the release notes"));
        assert!(r[0]
            .message
            .contains("(CUDA 12 and newer) need 525.60.13 or newer"));
        n.driver.version = Reading::Value("525.60.13".into());
        assert_eq!(
            statuses(&driver(&n, &Policy::default())),
            vec![Status::Pass]
        );
        // R375 (CUDA 8.0): seen passing as "Driver 375.66" with no judgment.
        let mut old = n.clone();
        old.gpus = Reading::Value(vec![]);
        old.driver.version = Reading::Value("375.66".into());
        let r = driver(&old, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0]
            .message
            .contains("older than the first driver of CUDA 11.0 (450.51.05)"));
        let mut h = f.clone();
        h.driver.version = Reading::Value("515.105.01".into());
        h.driver.proc_version = Reading::unavailable("x");
        h.driver.cuda_version = Reading::Value(CudaVersion::new(11, 7));
        // No toolkit here (the healthy machine's CUDA 13 would need more: below).
        h.toolkit = Reading::Value(vec![]);
        let r = driver(&h, &Policy::default());
        // Too old for Hopper and for current frameworks: one cause, one finding, whose fix
        // names the driver both need.
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert_eq!(
            r[0].message,
            "Driver 515.105.01 is older than the first driver for Hopper GPUs (520.61.05): they cannot run CUDA with it; it supports CUDA up to 11.7, and current framework builds (CUDA 12 and newer) need 525.60.13 or newer"
        );
        assert_eq!(
            r[0].fix.as_deref(),
            Some("Install a current production driver, at least 525.60.13 (CUDA 12 frameworks need 525.60.13; Hopper GPUs need 520.61.05); for new work the newest production branch.")
        );
        assert!(driver_is_old(&h));
        assert!(!driver_is_old(&f));
        // Too old for Hopper only (its CUDA is current): the architecture alone.
        let mut a = f.clone();
        a.driver.version = Reading::Value("515.105.01".into());
        a.driver.proc_version = Reading::unavailable("x");
        a.toolkit = Reading::Value(vec![]);
        let r = driver(&a, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(
            r[0].message.ends_with("they cannot run CUDA with it"),
            "{}",
            r[0].message
        );
        assert_eq!(
            r[0].fix.as_deref(),
            Some("Install a current production driver, at least 520.61.05 (Hopper GPUs need 520.61.05); for new work the newest production branch.")
        );
        // A toolkit that needs more than either: its need leads the fix.
        let mut t = h.clone();
        t.toolkit = Reading::Value(vec![crate::facts::Toolkit {
            path: "/usr/local/cuda-12.4".into(),
            version: "12.4.1".into(),
            cuda: CudaVersion::new(12, 4),
            source: "version.json".into(),
            forward_compat: false,
        }]);
        let fix = driver(&t, &Policy::default())[0]
            .fix
            .clone()
            .unwrap_or_default();
        assert!(
            fix.starts_with("Install a current production driver, at least 550.54.14 (the CUDA 12.4.1 toolkit at /usr/local/cuda-12.4 needs 550.54.14; "),
            "{fix}"
        );
        // The version first, then the mismatch: the checks an old driver explains name the
        // first problem of cuda.driver.
        let mut m = h.clone();
        m.driver.proc_version =
            Reading::Value("NVRM version: NVIDIA UNIX x86_64 Kernel Module  515.105.02".into());
        let r = driver(&m, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail, Status::Fail], "{r:#?}");
        assert!(r[0].message.contains("older than the first driver"));
        assert!(r[1].message.contains("mismatch"));
        // A vGPU guest: the provider's vGPU release decides the driver.
        let mut v = a.clone();
        v.driver.cuda_version = Reading::Value(CudaVersion::new(11, 6));
        v.driver.version = Reading::Value("525.60.13".into());
        v.gpus = Reading::Value(
            v.gpu_list()
                .iter()
                .cloned()
                .map(|mut g| {
                    g.virtualization = Reading::Value(VirtualizationMode::Vgpu);
                    g
                })
                .collect(),
        );
        let fix = driver(&v, &Policy::default())[0]
            .fix
            .clone()
            .unwrap_or_default();
        assert!(
            fix.ends_with("ask the provider for a vGPU release with that driver."),
            "{fix}"
        );
        // No driver version read: nothing is old.
        let mut u = f.clone();
        u.driver.version = Reading::unavailable("no driver");
        assert!(!driver_is_old(&u));
        // CUDA 12.0 is the line for current frameworks: at it, pass; below, warn.
        let mut c = f.clone();
        c.driver.cuda_version = Reading::Value(CURRENT_FRAMEWORKS_CUDA);
        assert_eq!(
            statuses(&driver(&c, &Policy::default())),
            vec![Status::Pass]
        );
        c.driver.cuda_version = Reading::Value(CudaVersion::new(11, 8));
        assert_eq!(
            statuses(&driver(&c, &Policy::default())),
            vec![Status::Warn]
        );
        let mut u = f.clone();
        u.driver.version = Reading::unavailable("no driver");
        assert_eq!(
            statuses(&driver(&u, &Policy::default())),
            vec![Status::Skip]
        );
        u.driver.version = Reading::Value("banana".into());
        let r = driver(&u, &Policy::default());
        assert!(r[0].message.contains("not understood"));
    }

    /// A machine of `key` GPUs on driver `version` (CUDA `cuda`), the module matching.
    fn on_driver(key: &str, version: &str, cuda: CudaVersion) -> Facts {
        let mut f = Machine::healthy(key, 1).build();
        f.driver.version = Reading::Value(version.into());
        f.driver.proc_version = Reading::Value(format!(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Release Build"
        ));
        f.driver.cuda_version = Reading::Value(cuda);
        f
    }

    #[test]
    fn a_driver_after_the_last_branch_of_the_gpus_architecture_fails() {
        // Kepler (GRID K520) ends with R470: any later branch does not drive it.
        for (version, cuda) in [
            ("495.29.05", CudaVersion::new(11, 5)),
            ("535.104.05", CudaVersion::new(12, 2)),
            ("580.159.04", CudaVersion::new(13, 0)),
        ] {
            let r = driver(&on_driver("grid-k520", version, cuda), &Policy::default());
            assert_eq!(statuses(&r), vec![Status::Fail], "{version}: {r:#?}");
            assert_eq!(
                r[0].message,
                format!("Driver {version} is of a branch after R470, the last that supports Kepler GPUs: it does not drive them")
            );
            assert!(
                r[0].fix.as_deref().unwrap().contains("R470 branch"),
                "{r:#?}"
            );
            assert_eq!(
                r[0].evidence
                    .get("last_driver_branch_for_architecture")
                    .unwrap(),
                "R470"
            );
            assert_eq!(
                r[0].evidence.get("last_branch_architecture").unwrap(),
                "Kepler"
            );
        }
        // Pascal and Volta end with R580: 580 drives them, 590 does not.
        for key in ["gtx-1060-6gb", "p100-pcie-16gb", "v100-sxm2-32gb"] {
            let ok = driver(
                &on_driver(key, "580.159.04", CudaVersion::new(13, 0)),
                &Policy::default(),
            );
            assert_eq!(statuses(&ok), vec![Status::Pass], "{key}: {ok:#?}");
            let r = driver(
                &on_driver(key, "590.44.01", CudaVersion::new(13, 1)),
                &Policy::default(),
            );
            assert_eq!(statuses(&r), vec![Status::Fail], "{key}: {r:#?}");
            assert!(r[0].message.contains("after R580"), "{}", r[0].message);
        }
        // Turing and newer have no last branch.
        let r = driver(
            &on_driver("gtx-1650-super", "595.71.05", CudaVersion::new(13, 2)),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Pass], "{r:#?}");
        assert!(r[0]
            .evidence
            .get("last_driver_branch_for_architecture")
            .is_none());
    }

    #[test]
    fn a_kepler_gpu_on_its_last_branch_is_told_it_cannot_reach_current_frameworks() {
        // R470 drives the K520 but supports CUDA 11.4 only; "upgrade the driver" would leave
        // the GPU without one.
        let r = driver(
            &on_driver("grid-k520", "470.256.02", CudaVersion::new(11, 4)),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert_eq!(
            r[0].message,
            "Driver 470.256.02 supports CUDA up to 11.4: current framework builds (CUDA 12 and newer) need 525.60.13 or newer, a branch after R470, the last that supports Kepler GPUs: they cannot run current frameworks"
        );
        let fix = r[0].fix.as_deref().unwrap();
        assert!(fix.starts_with("Keep the R470 driver"), "{fix}");
        assert!(!fix.contains("Upgrade the driver"), "{fix}");
        // The same old driver on a Volta GPU (last branch R580, after 525): upgrade it.
        let r = driver(
            &on_driver("v100-pcie-32gb", "470.256.02", CudaVersion::new(11, 4)),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(
            r[0].message.ends_with("need 525.60.13 or newer"),
            "{}",
            r[0].message
        );
        // Within Volta's last branch: the CUDA 13 toolkit's 580.65.06 and frameworks' 525.60.13.
        assert_eq!(
            r[0].fix.as_deref(),
            Some("Install a current production driver, at least 580.65.06 (the CUDA 13.0.88 toolkit at /usr/local/cuda needs 580.65.06; CUDA 12 frameworks need 525.60.13); for new work the newest production branch.")
        );
        // A toolkit whose driver is past the architecture's last branch is not asked for.
        let mut far = on_driver("v100-pcie-32gb", "470.256.02", CudaVersion::new(11, 4));
        far.toolkit = Reading::Value(vec![crate::facts::Toolkit {
            path: "/usr/local/cuda-13.2".into(),
            version: "13.2".into(),
            cuda: CudaVersion::new(13, 2),
            source: "version.json".into(),
            forward_compat: false,
        }]);
        if cuda_table()
            .toolkit(CudaVersion::new(13, 2))
            .is_some_and(|t| t.ga_min_driver.branch() > 580)
        {
            let fix = driver(&far, &Policy::default())[0]
                .fix
                .clone()
                .unwrap_or_default();
            assert!(
                fix.starts_with("Install a current production driver, at least 525.60.13"),
                "{fix}"
            );
            assert!(
                fix.contains(
                    "Not within reach: the CUDA 13.2 toolkit at /usr/local/cuda-13.2 needs"
                ),
                "{fix}"
            );
        }
        // Older than Kepler's first driver (R295): too old, whatever the CUDA.
        let mut old = on_driver("grid-k520", "285.05.33", CudaVersion::new(11, 4));
        old.driver.cuda_version = Reading::unavailable("not in the XML");
        let r = driver(&old, &Policy::default());
        // Too old for Kepler and for current frameworks: one finding.
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(r[0]
            .message
            .contains("older than the first driver for Kepler GPUs (295)"));
    }

    /// `first`'s GPU 0 and `second`'s GPU 0 in one machine, on `first`'s driver.
    fn two_models(first: &str, second: &str, version: &str, cuda: CudaVersion) -> Facts {
        let mut f = on_driver(first, version, cuda);
        let mut g = Machine::healthy(second, 1).build().gpu_list()[0].clone();
        g.index = 1;
        if let Reading::Value(gpus) = &mut f.gpus {
            gpus.push(g);
        }
        f
    }

    #[test]
    fn the_evidence_names_the_newest_first_driver_and_the_earliest_last_branch() {
        let ev = |first: &str, second: &str, key: &str| {
            let f = two_models(first, second, "580.159.04", CudaVersion::new(13, 0));
            let r = driver(&f, &Policy::default());
            r[0].evidence
                .get(key)
                .and_then(|v| v.as_str().map(String::from))
        };
        // The newest first driver: Volta's 384.81 over Kepler's 295, whatever the order.
        for (a, b) in [
            ("grid-k520", "v100-pcie-32gb"),
            ("v100-pcie-32gb", "grid-k520"),
        ] {
            assert_eq!(
                ev(a, b, "architecture").as_deref(),
                Some("Volta"),
                "{a} {b}"
            );
            assert_eq!(
                ev(a, b, "min_driver_for_architecture").as_deref(),
                Some("384.81")
            );
        }
        // Ada and Hopper share their first driver (520.61.05): the first GPU's is named.
        assert_eq!(
            ev("l40s", "h100-sxm5-80gb", "architecture").as_deref(),
            Some("Ada Lovelace")
        );
        assert_eq!(
            ev("h100-sxm5-80gb", "l40s", "architecture").as_deref(),
            Some("Hopper")
        );
        // Pascal and Volta share their last branch (R580): the first GPU's is named.
        assert_eq!(
            ev(
                "p100-pcie-16gb",
                "v100-pcie-32gb",
                "last_branch_architecture"
            )
            .as_deref(),
            Some("Pascal")
        );
        assert_eq!(
            ev(
                "v100-pcie-32gb",
                "p100-pcie-16gb",
                "last_branch_architecture"
            )
            .as_deref(),
            Some("Volta")
        );
        // A Turing GPU has no last branch: it does not replace a Volta's.
        assert_eq!(
            ev(
                "v100-pcie-32gb",
                "t4",
                "last_driver_branch_for_architecture"
            )
            .as_deref(),
            Some("R580")
        );
        assert_eq!(
            ev(
                "t4",
                "v100-pcie-32gb",
                "last_driver_branch_for_architecture"
            )
            .as_deref(),
            Some("R580")
        );
    }

    #[test]
    fn a_module_that_matches_the_library_is_no_mismatch_whatever_nvml_said() {
        let mut f = on_driver("t4", "580.159.04", CudaVersion::new(13, 0));
        f.driver.query = Reading::unavailable("NVML failed");
        let r = driver(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass], "{r:#?}");
        // The module's version is the first word that is a version, not the first dotted
        // word ("(gcc 12.3.0)" before it is no version).
        let mut g = on_driver("t4", "580.159.04", CudaVersion::new(13, 0));
        g.driver.proc_version = Reading::Value(
            "NVRM version: NVIDIA UNIX Open Kernel Module (gcc 12.3.0) for x86_64  580.159.04  Release Build".into(),
        );
        let r = driver(&g, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass], "{r:#?}");
    }

    #[test]
    fn gpus_of_two_architectures_are_capped_by_the_earlier_last_branch() {
        // A Volta GPU listed first on R590: the Kepler GPU's R470 is the branch to name (R470
        // drives both), not R580.
        let r = driver(
            &two_models(
                "v100-pcie-32gb",
                "grid-k520",
                "590.44.01",
                CudaVersion::new(13, 1),
            ),
            &Policy::default(),
        );
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert_eq!(
            r[0].message,
            "Driver 590.44.01 is of a branch after R470, the last that supports Kepler GPUs: it does not drive them"
        );
        let mut f = on_driver("v100-pcie-32gb", "535.104.05", CudaVersion::new(12, 2));
        let kepler = Machine::healthy("grid-k520", 1).build();
        let mut k = kepler.gpu_list()[0].clone();
        k.index = 1;
        if let Reading::Value(gpus) = &mut f.gpus {
            gpus.push(k);
        }
        let r = driver(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail], "{r:#?}");
        assert!(r[0].message.contains("after R470"), "{}", r[0].message);
        assert_eq!(
            r[0].evidence
                .get("last_driver_branch_for_architecture")
                .unwrap(),
            "R470"
        );
        // And in the other order.
        let mut g = on_driver("grid-k520", "535.104.05", CudaVersion::new(12, 2));
        let mut v = Machine::healthy("v100-pcie-32gb", 1).build().gpu_list()[0].clone();
        v.index = 1;
        if let Reading::Value(gpus) = &mut g.gpus {
            gpus.push(v);
        }
        let r = driver(&g, &Policy::default());
        assert_eq!(
            r[0].evidence
                .get("last_driver_branch_for_architecture")
                .unwrap(),
            "R470"
        );
    }
}
