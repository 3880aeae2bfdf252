//! gpu.driver-binding: the kernel driver bound to each NVIDIA GPU PCI function.

use crate::checks::{causes, Check, CheckDoc, CheckKind};
use crate::facts::{short_bus_id, Facts};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "gpu.driver-binding";

pub const CHECK: Check = Check {
    id: ID,
    title: "Each NVIDIA GPU PCI function is bound to the nvidia driver",
    looks_at: "each NVIDIA GPU PCI function is bound to `nvidia` (not vfio-pci, nouveau, or \
               nothing)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The kernel driver bound to each NVIDIA GPU PCI function (the `driver` link in \
               /sys/bus/pci/devices/<id>/).",
        why: "A GPU bound to vfio-pci is reserved for a VM, one bound to nouveau cannot run CUDA, \
              and one bound to nothing is invisible to every program.",
        verify: "lspci -d 10de: -k\nreadlink /sys/bus/pci/devices/*/driver",
        fix: "Blacklist nouveau (`echo blacklist nouveau | sudo tee /etc/modprobe.d/blacklist-nouveau.conf`, \
              `sudo update-initramfs -u` on Debian and Ubuntu or `sudo dracut -f` on the RHEL \
              family, reboot); unbind vfio-pci if the GPU is meant for this \
              host (remove it from vfio-pci.ids in the kernel command line); then `sudo modprobe nvidia`.",
    },
    profiles: &[],
    run: driver_binding,
};

fn driver_binding(facts: &Facts, _: &Policy) -> Vec<Finding> {
    let pci = match &facts.pci_gpus {
        Reading::Unavailable(r) => {
            return vec![Finding::skip(ID, format!("PCI functions not read: {r}"))]
        }
        Reading::Value(p) if p.is_empty() => {
            return vec![Finding::skip(ID, "no NVIDIA GPU on the PCI bus")]
        }
        Reading::Value(p) => p,
    };
    pci.iter()
        .map(|f| {
            let gpu = facts
                .gpu_list()
                .iter()
                .find(|g| g.pci_bus_id.eq_ignore_ascii_case(&f.bus_id))
                .map(|g| g.index);
            let ev = Evidence::new()
                .with("pci_bus_id", &f.bus_id)
                .with("pci_device_id", format!("0x{:04x}", f.device));
            let label = short_bus_id(&f.bus_id);
            let finding = match &f.driver {
                Reading::Value(Some(d)) if d == "nvidia" => {
                    Finding::pass(ID, format!("{label} is bound to the nvidia driver")).with("driver", d)
                }
                Reading::Value(Some(d)) if d == "vfio-pci" => Finding::fail(
                    ID,
                    format!("{label} is bound to vfio-pci: reserved for a VM, CUDA cannot use it here"),
                )
                .with("driver", d)
                .fix("If the GPU is meant for this host, remove it from vfio-pci (kernel command line `vfio-pci.ids=`, /etc/modprobe.d) and load nvidia."),
                Reading::Value(Some(d)) if d == "nouveau" => Finding::fail(
                    ID,
                    format!("{label} is bound to nouveau, the open-source driver: no CUDA"),
                )
                .with("driver", d)
                .fix("Blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf: `blacklist nouveau`, `options nouveau modeset=0`), `sudo update-initramfs -u` (Debian, Ubuntu) or `sudo dracut -f` (RHEL family), reboot, then install/load the NVIDIA driver."),
                Reading::Value(Some(d)) => Finding::fail(
                    ID,
                    format!("{label} is bound to '{d}', not nvidia"),
                )
                .with("driver", d)
                .fix("Unbind it and load the NVIDIA driver (`sudo modprobe nvidia`)."),
                // The nvidia module is not loaded (kernel.modules): that is why.
                Reading::Value(None) => match causes::nvidia_module_missing(facts) {
                    Some(c) => Finding::fail(
                        ID,
                        format!("{label} has no driver bound (the nvidia module is not loaded): no program can use it"),
                    )
                    .caused_by(c)
                    .fix("Load the NVIDIA driver (`sudo modprobe nvidia`; kernel.modules)."),
                    None => Finding::fail(
                        ID,
                        format!("{label} has no driver bound: no program can use it"),
                    )
                    .fix("Load the NVIDIA driver (`sudo modprobe nvidia`) and check `sudo dmesg | grep -i nvrm` for why it did not bind."),
                },
                Reading::Unavailable(r) => {
                    Finding::skip(ID, format!("{label}: driver binding not read: {r}"))
                }
            };
            let finding = finding.evidence(ev);
            match gpu {
                Some(i) => finding.gpu(i),
                None => finding,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::run_one;
    use crate::finding::Status;
    use crate::testing::{statuses, Machine};

    fn bound(driver: Reading<Option<String>>) -> Vec<Finding> {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(1, |p| p.driver = driver)
            .build();
        run_one(&CHECK, &f, &Policy::default())
    }

    #[test]
    fn each_binding_has_its_verdict() {
        let name = |d: &str| Reading::Value(Some(d.to_string()));
        let cases = [
            (
                name("nvidia"),
                Status::Pass,
                "00:07.0 is bound to the nvidia driver",
            ),
            (
                name("vfio-pci"),
                Status::Fail,
                "00:07.0 is bound to vfio-pci: reserved for a VM, CUDA cannot use it here",
            ),
            (
                name("nouveau"),
                Status::Fail,
                "00:07.0 is bound to nouveau, the open-source driver: no CUDA",
            ),
            (
                name("pci-stub"),
                Status::Fail,
                "00:07.0 is bound to 'pci-stub', not nvidia",
            ),
            (
                Reading::Value(None),
                Status::Fail,
                "00:07.0 has no driver bound: no program can use it",
            ),
            (
                Reading::unavailable("permission denied"),
                Status::Skip,
                "00:07.0: driver binding not read: permission denied",
            ),
        ];
        for (driver, status, msg) in cases {
            let out = bound(driver);
            assert_eq!(statuses(&out), vec![Status::Pass, status], "{msg}");
            assert_eq!(out[1].message, msg);
            assert_eq!(out[1].gpu, Some(1));
            assert_eq!(out[1].fix.is_some(), status == Status::Fail, "{msg}");
            assert_eq!(out[1].evidence.get("pci_device_id").unwrap(), "0x2335");
        }
    }

    #[test]
    fn a_function_the_driver_does_not_list_has_no_gpu_index() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(g) = &mut f.gpus {
                    g.truncate(1);
                }
            })
            .pci(1, |p| p.driver = Reading::Value(None))
            .build();
        let out = run_one(&CHECK, &f, &Policy::default());
        assert_eq!(out[0].gpu, Some(0));
        assert_eq!(out[1].gpu, None);
        assert_eq!(out[1].status, Status::Fail);
    }

    #[test]
    fn no_driver_bound_because_the_module_is_not_loaded_names_kernel_modules() {
        use crate::facts::KernelModule;
        use crate::finding::Cause;
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(1, |p| p.driver = Reading::Value(None))
            .build();
        f.modules = Reading::Value(vec![KernelModule {
            name: "ext4".into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: String::new(),
        }]);
        let out = run_one(&CHECK, &f, &Policy::default());
        assert_eq!(
            out[1].message,
            "00:07.0 has no driver bound (the nvidia module is not loaded): no program can use it"
        );
        assert_eq!(out[1].caused_by, Some(Cause::check("kernel.modules")));
        assert_eq!(out[0].caused_by, None, "bound to nvidia");
        // With the module loaded, nothing explains it here.
        let out = bound(Reading::Value(None));
        assert_eq!(out[1].caused_by, None);
    }

    #[test]
    fn no_pci_functions_skip_with_the_reason() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build();
        let out = run_one(&CHECK, &f, &Policy::default());
        assert_eq!(statuses(&out), vec![Status::Skip]);
        assert_eq!(out[0].message, "PCI functions not read: no sysfs");
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| f.pci_gpus = Reading::Value(vec![]))
            .build();
        let out = run_one(&CHECK, &f, &Policy::default());
        assert_eq!(out[0].message, "no NVIDIA GPU on the PCI bus");
    }
}
