//! Which GPUs the machine has and how they are attached: gpu.present, gpu.identity,
//! gpu.uniform, gpu.virtualization, gpu.driver-binding.

use super::common::{name_of, no_gpu_reason, per_gpu_many, selected, spec_of};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{short_bus_id, Facts, GpuFacts, VirtualizationMode};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use crate::spec::SpecDb;
use std::collections::BTreeSet;

pub const CHECKS: &[Check] = &[
    Check {
        id: "gpu.present",
        title: "NVIDIA GPUs exist on the PCI bus and the driver answers for each",
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
        run: present,
    },
    Check {
        id: "gpu.identity",
        title: "GPU model, memory and SM count match the datasheet and what was ordered (--expect)",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Identifies each GPU in the spec database (by PCI device id, then name and memory \
                   size) and compares its memory and SM count with the datasheet; with --expect \
                   MODEL[:COUNT] (e.g. h100-sxm5-80gb:8, a100:2, h200) also the model and the number \
                   of GPUs with what was ordered.",
            why: "An A30 delivered as an A100, a 40 GB card for an 80 GB one, 4 GPUs for 8, or a \
                  vGPU/MIG slice that shows a fraction of the memory: all run, all cost you, none \
                  is visible without looking.",
            verify: "nvidia-smi --query-gpu=index,name,pci.device_id,memory.total --format=csv\n\
                     nvidia-smi -q | grep -i -e 'Product Name' -e 'FB Memory' -A3",
            fix: "Ask the provider for the model and count you ordered; keep this report as evidence.",
        },
        run: identity,
    },
    Check {
        id: "gpu.uniform",
        title: "All GPUs are the same model, memory size and VBIOS",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Compares model, PCI device id, memory size and VBIOS version across the GPUs.",
            why: "Data-parallel training runs at the pace of the slowest GPU, and mixed VBIOS \
                  versions have different clock and power tables: the machine behaves like its \
                  weakest card.",
            verify: "nvidia-smi --query-gpu=index,name,memory.total,vbios_version --format=csv",
            fix: "Ask the provider for matching GPUs, or a VBIOS update so all cards run the same \
                  version.",
        },
        run: uniform,
    },
    Check {
        id: "gpu.virtualization",
        title: "Bare metal, pass-through, vGPU or MIG",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "NVML's virtualization mode per GPU (none, pass-through, vGPU), MIG mode, and the \
                   CPU's hypervisor flag.",
            why: "Pass-through gives the whole GPU to the VM. A vGPU is time-sliced with other VMs \
                  and sees a fraction of the memory; a MIG instance has a fraction of the SMs and \
                  memory. Both are sold as \"a GPU\".",
            verify: "nvidia-smi -q | grep -i -A3 -e virtualization -e 'MIG Mode'\n\
                     grep -c hypervisor /proc/cpuinfo",
            fix: "If you paid for a whole GPU, ask the provider for pass-through or bare metal. MIG \
                  is turned off by the owner with `sudo nvidia-smi -i N -mig 0` (needs no running \
                  processes; gpuaudit never does it).",
        },
        run: virtualization,
    },
    Check {
        id: "gpu.driver-binding",
        title: "Each NVIDIA GPU PCI function is bound to the nvidia driver",
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
        run: driver_binding,
    },
];

fn present(facts: &Facts, _: &Policy) -> Vec<Finding> {
    const ID: &str = "gpu.present";
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

fn identity(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "gpu.identity";
    let db = SpecDb::embedded();
    let mut out = Vec::new();

    let ordered = policy.expect.as_ref();
    let allowed: Option<Vec<&str>> = ordered.map(|e| {
        db.matching(&e.model)
            .iter()
            .map(|s| s.key.as_str())
            .collect()
    });

    // What was ordered against what is there: the count is about the machine.
    if let Some(e) = ordered {
        if let Some(count) = e.count {
            let have = facts.gpu_list().len() as u32;
            let f = if have == count {
                Finding::pass(ID, format!("{have} GPUs, as ordered ({})", e.model))
            } else {
                Finding::fail(
                    ID,
                    format!("{have} GPU(s) found, {count} ordered ({}:{count})", e.model),
                )
                .fix("Ask the provider for the missing GPUs; check `nvidia-smi -L` and `lspci -d 10de:` first.")
            };
            out.push(f.with("found", have).with("ordered", count));
        }
    }

    for g in selected(facts, policy) {
        let found = identity_of(g, ordered.map(|e| e.model.as_str()), allowed.as_deref());
        out.extend(found.into_iter().map(|f| f.gpu(g.index)));
    }
    if out.is_empty() {
        out.push(Finding::skip(ID, no_gpu_reason(facts)));
    }
    out
}

fn identity_of(g: &GpuFacts, ordered: Option<&str>, allowed: Option<&[&str]>) -> Vec<Finding> {
    const ID: &str = "gpu.identity";
    let name = name_of(g);
    let mut ev = Evidence::new().with("name", &name);
    if let Some(id) = g.pci_device_id.value() {
        ev.insert("pci_device_id", format!("0x{id:04x}"));
    }
    if let Some(m) = g.memory.total_mib.value() {
        ev.insert("memory_total_mib", m);
    }
    if let Some(s) = g.sm_count.value() {
        ev.insert("sm_count", s);
    }
    ev.insert("source", &g.source);

    let Some(spec) = spec_of(g) else {
        let msg = format!(
            "{} is a {name} that the spec database does not know: nothing to compare with",
            g.label()
        );
        let f = match ordered {
            Some(o) => Finding::warn(ID, format!("{msg}; cannot confirm it is the ordered {o}")),
            None => Finding::info(ID, msg),
        };
        return vec![f.evidence(ev)];
    };
    ev.insert("spec", &spec.key);

    let mut problems: Vec<(Status, String)> = Vec::new();
    if let (Some(o), Some(allowed)) = (ordered, allowed) {
        if !allowed.contains(&spec.key.as_str()) {
            problems.push((
                Status::Fail,
                format!("it is a {}, not the ordered {o}", spec.name),
            ));
        }
    }
    if let (Some(&mib), Some(spec_gb)) = (g.memory.total_mib.value(), spec.memory_gb) {
        ev.insert("spec_memory_gb", spec_gb);
        // Drivers show a little less than the label (reserved memory; GDDR parts with ECC on
        // give up 1/16): outside the spec's tolerance it is another part or a slice.
        if spec.memory_matches(mib) == Some(false) {
            problems.push((
                Status::Fail,
                format!(
                    "it shows {:.1} GiB of memory, the datasheet says {spec_gb} GB: another variant, a vGPU or a MIG slice",
                    mib as f64 / 1024.0
                ),
            ));
        }
    }
    if let (Some(&sms), Some(spec_sms)) = (g.sm_count.value(), spec.sm_count) {
        ev.insert("spec_sm_count", spec_sms);
        if sms != spec_sms {
            problems.push((
                Status::Fail,
                format!("it has {sms} SMs, the datasheet says {spec_sms}"),
            ));
        }
    }

    if problems.is_empty() {
        let mut msg = format!("{} is an {}", g.label(), spec.name);
        if let Some(o) = ordered {
            msg.push_str(&format!(", as ordered ({o})"));
        }
        if let Some(r) = g.sm_count.reason() {
            ev.insert("sm_count_unavailable", r);
        }
        return vec![Finding::pass(ID, msg).evidence(ev)];
    }
    let worst = problems
        .iter()
        .map(|p| p.0)
        .max_by_key(|s| s.severity())
        .unwrap_or(Status::Warn);
    let text = problems
        .into_iter()
        .map(|p| p.1)
        .collect::<Vec<_>>()
        .join("; ");
    vec![Finding::new(ID, worst, format!("{} ({name}): {text}", g.label()))
        .evidence(ev)
        .fix("Ask the provider for the model and memory size you ordered; keep this report as evidence.")]
}

fn uniform(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "gpu.uniform";
    let gpus: Vec<&GpuFacts> = selected(facts, policy).collect();
    if gpus.is_empty() {
        return vec![Finding::skip(ID, no_gpu_reason(facts))];
    }
    if gpus.len() == 1 {
        return vec![Finding::pass(ID, "One GPU: nothing to compare")];
    }
    let distinct = |f: &dyn Fn(&GpuFacts) -> String| -> BTreeSet<String> {
        gpus.iter().map(|g| f(g)).collect()
    };
    let show = |r: &Reading<String>| r.value().cloned().unwrap_or_else(|| "?".into());
    let names = distinct(&|g| show(&g.name));
    let ids = distinct(&|g| {
        g.pci_device_id
            .value()
            .map(|i| format!("0x{i:04x}"))
            .unwrap_or_else(|| "?".into())
    });
    let mems = distinct(&|g| {
        g.memory
            .total_mib
            .value()
            .map(|m| m.to_string())
            .unwrap_or_else(|| "?".into())
    });
    let vbios = distinct(&|g| show(&g.vbios).to_ascii_lowercase());

    let ev = Evidence::new()
        .with("gpus", gpus.len())
        .with("models", &names)
        .with("pci_device_ids", &ids)
        .with("memory_total_mib", &mems)
        .with("vbios", &vbios);
    if names.len() > 1 || ids.len() > 1 || mems.len() > 1 {
        let status = if policy.profile == Profile::Train {
            Status::Fail
        } else {
            Status::Warn
        };
        return vec![Finding::new(
            ID,
            status,
            format!(
                "The GPUs differ: {} model(s) ({}), {} memory size(s): multi-GPU work runs at the pace of the weakest",
                names.len(),
                names.iter().cloned().collect::<Vec<_>>().join(", "),
                mems.len()
            ),
        )
        .evidence(ev)
        .fix("Ask the provider for matching GPUs.")];
    }
    if vbios.len() > 1 {
        return vec![Finding::warn(
            ID,
            format!(
                "{} identical GPUs, but {} VBIOS versions ({}): clock and power tables may differ",
                gpus.len(),
                vbios.len(),
                vbios.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
        .evidence(ev)
        .fix("Ask the provider to bring all GPUs to the same VBIOS version.")];
    }
    vec![Finding::pass(
        ID,
        format!(
            "All {} GPUs are {} with the same memory and VBIOS",
            gpus.len(),
            names.iter().next().cloned().unwrap_or_default()
        ),
    )
    .evidence(ev)]
}

fn virtualization(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "gpu.virtualization";
    let hypervisor = facts.machine.hypervisor.value().copied();
    per_gpu_many(ID, facts, policy, |g| {
        let mut ev = Evidence::new();
        if let Some(h) = hypervisor {
            ev.insert("cpu_hypervisor_flag", h);
        }
        match &g.virtualization {
            Reading::Value(v) => ev.insert("virtualization_mode", v),
            Reading::Unavailable(r) => ev.insert("virtualization_mode_unavailable", r),
        }
        let mig = g.mig.current.value().copied();
        let mig_pending = g.mig.pending.value().copied();
        if let Some(m) = mig {
            ev.insert("mig_current", m);
        }
        if let Some(m) = mig_pending {
            ev.insert("mig_pending", m);
        }

        let mut out = Vec::new();
        let mode_msg = match g.virtualization.value() {
            Some(VirtualizationMode::None) => Some((
                Status::Pass,
                "bare metal (no GPU virtualization)".to_string(),
            )),
            Some(VirtualizationMode::PassThrough) => {
                Some((Status::Pass, "passed through whole to this VM".to_string()))
            }
            Some(VirtualizationMode::Vgpu) => Some((
                Status::Warn,
                "a vGPU: time-sliced with other VMs, with a fraction of the memory".to_string(),
            )),
            Some(VirtualizationMode::HostVgpu) | Some(VirtualizationMode::HostVsga) => Some((
                Status::Info,
                "the host side of GPU virtualization".to_string(),
            )),
            Some(VirtualizationMode::Other(s)) => {
                Some((Status::Info, format!("virtualization mode {s}")))
            }
            None => None,
        };
        match mode_msg {
            Some((st, m)) => {
                let mut f =
                    Finding::new(ID, st, format!("{} is {m}", g.label())).evidence(ev.clone());
                if st == Status::Warn {
                    f = f.fix("If you paid for a whole GPU, ask the provider for pass-through or bare metal.");
                }
                out.push(f);
            }
            None => {
                let guess = match hypervisor {
                    Some(true) => "a VM (CPU hypervisor flag set)",
                    Some(false) => "no hypervisor flag on the CPU (likely bare metal)",
                    None => "unknown",
                };
                out.push(
                    Finding::info(
                        ID,
                        format!(
                            "{}: virtualization mode not read ({}); machine: {guess}",
                            g.label(),
                            g.virtualization.reason().unwrap_or("?")
                        ),
                    )
                    .evidence(ev.clone()),
                );
            }
        }
        if mig == Some(true) {
            let st = match policy.profile {
                Profile::Train | Profile::Hpc => Status::Fail,
                _ => Status::Warn,
            };
            out.push(
                Finding::new(
                    ID,
                    st,
                    format!(
                        "{} has MIG enabled: it is split into instances, each with a fraction of the SMs and memory",
                        g.label()
                    ),
                )
                .evidence(ev.clone())
                .fix(format!(
                    "If you need the whole GPU: `sudo nvidia-smi -i {} -mig 0` with no process running on it (gpuaudit never changes it); on a cloud instance, ask the provider",
                    g.index
                )),
            );
        } else if mig_pending.is_some() && mig_pending != mig {
            out.push(
                Finding::info(
                    ID,
                    format!(
                        "{}: a MIG mode change is pending until the GPU is reset",
                        g.label()
                    ),
                )
                .evidence(ev),
            );
        }
        out
    })
}

fn driver_binding(facts: &Facts, _: &Policy) -> Vec<Finding> {
    const ID: &str = "gpu.driver-binding";
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
