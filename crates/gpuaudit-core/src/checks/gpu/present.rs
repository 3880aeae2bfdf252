//! gpu.present: the NVIDIA GPUs on the PCI bus against the GPUs the driver answers for.

use crate::checks::common::no_gpu_reason;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{short_bus_id, Facts};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;
use crate::reading::Reading;
use std::collections::BTreeSet;

const ID: &str = "gpu.present";

pub const CHECK: Check = Check {
    id: ID,
    title: "NVIDIA GPUs exist on the PCI bus and the driver answers for each",
    looks_at: "NVIDIA PCI functions exist and the driver answers (NVML / nvidia-smi); \"couldn't \
               communicate with the driver\" diagnosed",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Lists the NVIDIA display/3D PCI functions in sysfs and the GPUs the driver \
               enumerates (NVML, or nvidia-smi in a snapshot), and compares the two.",
        why: "A GPU on the bus that the driver does not list cannot run anything: it fell off \
              the bus (XID 79), the driver failed to initialise it, or it is excluded. When \
              the driver does not answer at all, no CUDA program runs on the machine.",
        verify: "lspci -d 10de: -nn\nnvidia-smi -L\ncat /proc/driver/nvidia/gpus/*/information",
        fix: "\"couldn't communicate with the NVIDIA driver\": load the module (`sudo modprobe \
              nvidia`), or reinstall the driver for the running kernel (DKMS did not build it). \
              A GPU missing from `nvidia-smi -L`: look for XID errors in `sudo dmesg`, reset or \
              power-cycle the machine; on a cloud instance, ask for another host.",
    },
    profiles: &[],
    run: present,
};

fn present(facts: &Facts, _: &Policy) -> Vec<Finding> {
    let pci = facts.pci_gpus.value();
    let drv = facts.gpus.value();
    let mut ev = Evidence::new();
    if let Some(p) = pci {
        ev.insert(
            "pci_functions",
            p.iter().map(|f| f.bus_id.as_str()).collect::<Vec<_>>(),
        );
    } else if let Some(r) = facts.pci_gpus.reason() {
        ev.insert("pci_functions_unavailable", r);
    }
    match &facts.driver.query {
        Reading::Value(src) => ev.insert("driver_query", src),
        Reading::Unavailable(r) => ev.insert("driver_query_error", r),
    }

    match (pci, drv) {
        (Some(p), None) if p.is_empty() => {
            vec![Finding::fail(ID, "No NVIDIA GPU found: no NVIDIA GPU on the PCI bus and no driver answers")
                .evidence(ev)
                .fix("If this machine should have GPUs, the instance type or the VM's device assignment \
                      lacks them: check the order, then `lspci -d 10de:`.")]
        }
        (Some(p), None) => {
            let reason = facts.driver.query.reason().unwrap_or("no answer");
            let mut fix = String::from(
                "Check `lsmod | grep nvidia`; load the driver with `sudo modprobe nvidia`, or \
                 reinstall it for the running kernel (`uname -r`).",
            );
            if reason.contains("version mismatch") {
                fix = "The loaded kernel module and the user-space driver libraries differ \
                       (driver updated without reboot): reboot, or unload and reload the nvidia \
                       modules."
                    .into();
            }
            vec![Finding::fail(
                ID,
                format!(
                    "{} NVIDIA GPU(s) on the PCI bus, but the driver does not answer: {reason}",
                    p.len()
                ),
            )
            .evidence(ev)
            .fix(fix)]
        }
        (_, Some(g)) if g.is_empty() => {
            vec![Finding::fail(
                ID,
                "No NVIDIA GPU found: the driver answers but lists no GPU",
            )
            .evidence(ev)
            .fix("Look for XID errors (`sudo dmesg | grep -i xid`) and check `lspci -d 10de:`.")]
        }
        (None, None) => {
            vec![
                Finding::fail(ID, format!("No NVIDIA GPU found: {}", no_gpu_reason(facts)))
                    .evidence(ev),
            ]
        }
        (pci, Some(g)) => {
            ev.insert("driver_gpus", g.len());
            let listed: BTreeSet<String> = g
                .iter()
                .map(|x| x.pci_bus_id.to_ascii_lowercase())
                .collect();
            let missing: Vec<&str> = pci
                .map(|p| {
                    p.iter()
                        .filter(|f| !listed.contains(&f.bus_id.to_ascii_lowercase()))
                        .map(|f| f.bus_id.as_str())
                        .collect()
                })
                .unwrap_or_default();
            if !missing.is_empty() {
                return vec![Finding::fail(
                    ID,
                    format!(
                        "{} GPU(s) on the PCI bus are not listed by the driver ({}): fallen off the bus, failed to initialise, or excluded",
                        missing.len(),
                        missing.iter().map(|m| short_bus_id(m)).collect::<Vec<_>>().join(", ")
                    ),
                )
                .evidence(ev.with("missing", &missing))
                .fix("Look for XID 79 / 119 errors in `sudo dmesg`; reset the GPU or power-cycle the machine; on a cloud instance, ask for another host.")];
            }
            vec![Finding::pass(
                ID,
                format!(
                    "{} NVIDIA GPU(s) found; the driver answers for each",
                    g.len()
                ),
            )
            .evidence(ev)]
        }
    }
}
