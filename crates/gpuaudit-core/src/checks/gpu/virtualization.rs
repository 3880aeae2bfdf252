//! gpu.virtualization: bare metal, pass-through, vGPU or MIG, per GPU.

use crate::checks::common::per_gpu_many;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, VirtualizationMode};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "gpu.virtualization";

pub const CHECK: Check = Check {
    id: ID,
    title: "Bare metal, pass-through, vGPU or MIG",
    looks_at: "bare metal, pass-through, vGPU, MIG (NVML virtualization mode, MIG mode, \
               hypervisor CPU flag)",
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
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "MIG enabled on a GPU fails instead of warning: training needs the whole GPU.",
        },
        ProfileEffect {
            profile: Profile::Hpc,
            effect: "MIG enabled on a GPU fails instead of warning: scientific computing needs the whole GPU.",
        },
    ],
    run: virtualization,
};

fn virtualization(facts: &Facts, policy: &Policy) -> Vec<Finding> {
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
