//! gpu.driver-binding: the kernel driver bound to each NVIDIA GPU PCI function.

use crate::checks::{Check, CheckDoc, CheckKind};
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
              `sudo update-initramfs -u`, reboot); unbind vfio-pci if the GPU is meant for this \
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
                .fix("Blacklist nouveau (/etc/modprobe.d/blacklist-nouveau.conf: `blacklist nouveau`, `options nouveau modeset=0`), `sudo update-initramfs -u`, reboot, then install/load the NVIDIA driver."),
                Reading::Value(Some(d)) => Finding::fail(
                    ID,
                    format!("{label} is bound to '{d}', not nvidia"),
                )
                .with("driver", d)
                .fix("Unbind it and load the NVIDIA driver (`sudo modprobe nvidia`)."),
                Reading::Value(None) => Finding::fail(
                    ID,
                    format!("{label} has no driver bound: no program can use it"),
                )
                .fix("Load the NVIDIA driver (`sudo modprobe nvidia`) and check `sudo dmesg | grep -i nvrm` for why it did not bind."),
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
