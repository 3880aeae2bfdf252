//! cuda.driver: the driver version, the CUDA version it supports, the kernel module against the
//! library, and the oldest driver for each GPU's architecture.

use crate::checks::common::spec_of;
use crate::checks::cuda::driver_version;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{CudaVersion, Facts, VirtualizationMode};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;
use crate::spec::{cuda_table, DriverVersion};

const ID: &str = "cuda.driver";

/// A driver whose CUDA version is older than this cannot run current framework builds
/// (PyTorch ships CUDA 12 and 13 wheels); CUDA 12.0 came with driver 525.60.13.
pub const CURRENT_FRAMEWORKS_CUDA: CudaVersion = CudaVersion::new(12, 0);

pub const CHECK: Check = Check {
    id: ID,
    title: "Driver version, the CUDA version it supports, minimum driver for the GPU's architecture",
    looks_at: "driver version, the CUDA version it supports, minimum driver for the GPU's \
               architecture",
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
        )));
    } else if age.below_current {
        out.push(
            Finding::warn(
                ID,
                format!(
                    "Driver {text} {}: {frameworks}",
                    age.supports.as_deref().unwrap_or("supports an old CUDA"),
                ),
            )
            .evidence(ev.clone())
            .fix(upgrade_fix(facts, &dv, None, true)),
        );
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
}

fn age(facts: &Facts, dv: &DriverVersion, cuda: Option<CudaVersion>) -> Age {
    let mut needs: Option<(String, DriverVersion)> = None;
    let mut too_old = None;
    for g in facts.gpu_list() {
        let Some(spec) = spec_of(g) else { continue };
        let Some(arch) = spec.arch_support() else {
            continue;
        };
        if needs.as_ref().is_none_or(|(_, d)| arch.min_driver > *d) {
            needs = Some((arch.name.clone(), arch.min_driver.clone()));
        }
        if *dv < arch.min_driver && too_old.is_none() {
            too_old = Some((arch.name.clone(), arch.min_driver.clone()));
        }
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
    // The highest first, then the others in the order found.
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
    let Some(top) = needs.iter().map(|(v, _)| v.clone()).max() else {
        return format!("Upgrade the driver to a current production branch.{vgpu_note}");
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
        "Install a current production driver, at least {top} ({}); for new work the newest production branch.{vgpu_note}",
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
        let fix = driver(&v, &Policy::default())[0].fix.clone().unwrap_or_default();
        assert!(fix.ends_with("ask the provider for a vGPU release with that driver."), "{fix}");
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
}
