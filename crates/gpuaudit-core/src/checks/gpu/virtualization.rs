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
            Some(VirtualizationMode::None) if hypervisor == Some(true) => Some((
                Status::Pass,
                "not virtualised by the driver: the whole GPU (the CPU says this machine is a VM)"
                    .to_string(),
            )),
            Some(VirtualizationMode::None) => Some((
                Status::Pass,
                "not virtualised: the whole GPU, bare metal".to_string(),
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
                Some((Status::Info, format!("in virtualization mode {s}")))
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
        match (mig, mig_pending) {
            (Some(true), pending) => {
                let st = match policy.profile {
                    Profile::Train | Profile::Hpc => Status::Fail,
                    _ => Status::Warn,
                };
                let off_next = if pending == Some(false) {
                    " (MIG goes off at the next GPU reset: the change is pending)"
                } else {
                    ""
                };
                out.push(
                    Finding::new(
                        ID,
                        st,
                        format!(
                            "{} has MIG enabled: it is split into instances, each with a fraction of the SMs and memory{off_next}",
                            g.label()
                        ),
                    )
                    .evidence(ev.clone())
                    .fix(format!(
                        "If you need the whole GPU: `sudo nvidia-smi -i {} -mig 0` with no process running on it (gpuaudit never changes it); on a cloud instance, ask the provider",
                        g.index
                    )),
                );
            }
            // Both read and different: MIG comes on at the next reset. A pending mode alone
            // (the current one unread) says nothing about a change.
            (Some(false), Some(true)) => out.push(
                Finding::info(
                    ID,
                    format!(
                        "{}: MIG goes on at the next GPU reset (the change is pending)",
                        g.label()
                    ),
                )
                .evidence(ev),
            ),
            _ => {}
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::run_one;
    use crate::testing::{statuses, Machine};

    fn run(facts: &Facts, profile: Profile) -> Vec<Finding> {
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        run_one(&CHECK, facts, &policy)
    }

    fn one(mode: Reading<VirtualizationMode>, hypervisor: Reading<bool>) -> Vec<Finding> {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.virtualization = mode)
            .with(|f| f.machine.hypervisor = hypervisor)
            .build();
        run(&f, Profile::General)
    }

    #[test]
    fn each_mode_has_its_verdict() {
        use VirtualizationMode as V;
        let cases = [
            (V::None, Status::Pass, "GPU 0 (00:06.0) is not virtualised: the whole GPU, bare metal"),
            (V::PassThrough, Status::Pass, "GPU 0 (00:06.0) is passed through whole to this VM"),
            (V::Vgpu, Status::Warn, "GPU 0 (00:06.0) is a vGPU: time-sliced with other VMs, with a fraction of the memory"),
            (V::HostVgpu, Status::Info, "GPU 0 (00:06.0) is the host side of GPU virtualization"),
            (V::HostVsga, Status::Info, "GPU 0 (00:06.0) is the host side of GPU virtualization"),
            (V::Other("SR-IOV".into()), Status::Info, "GPU 0 (00:06.0) is in virtualization mode SR-IOV"),
        ];
        for (mode, status, msg) in cases {
            let out = one(Reading::Value(mode.clone()), Reading::Value(false));
            assert_eq!(statuses(&out), vec![status], "{mode:?}");
            assert_eq!(out[0].message, msg);
            assert_eq!(out[0].fix.is_some(), status == Status::Warn, "{mode:?}");
        }
        let out = one(Reading::Value(V::None), Reading::Value(true));
        assert_eq!(statuses(&out), vec![Status::Pass]);
        assert!(out[0].message.contains("the CPU says this machine is a VM"));
    }

    #[test]
    fn an_unread_mode_says_what_the_cpu_says() {
        for (hv, guess) in [
            (Reading::Value(true), "a VM (CPU hypervisor flag set)"),
            (Reading::Value(false), "likely bare metal"),
            (Reading::unavailable("no cpuinfo"), "machine: unknown"),
        ] {
            let out = one(Reading::unavailable("NVML: not supported"), hv);
            assert_eq!(statuses(&out), vec![Status::Info]);
            assert!(out[0]
                .message
                .contains("virtualization mode not read (NVML: not supported)"));
            assert!(out[0].message.contains(guess), "{}", out[0].message);
        }
    }

    fn mig(current: Reading<bool>, pending: Reading<bool>, profile: Profile) -> Vec<Finding> {
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .gpu(0, |g| {
                g.mig.current = current;
                g.mig.pending = pending;
            })
            .build();
        run(&f, profile)
    }

    #[test]
    fn mig_warns_and_fails_for_training_and_hpc() {
        for (p, st) in [
            (Profile::General, Status::Warn),
            (Profile::Inference, Status::Warn),
            (Profile::Render, Status::Warn),
            (Profile::Train, Status::Fail),
            (Profile::Hpc, Status::Fail),
        ] {
            let out = mig(Reading::Value(true), Reading::Value(true), p);
            assert_eq!(statuses(&out), vec![Status::Pass, st], "{p:?}");
            assert_eq!(
                out[1].message,
                "GPU 0 (00:06.0) has MIG enabled: it is split into instances, each with a fraction of the SMs and memory"
            );
            assert!(out[1]
                .fix
                .as_deref()
                .unwrap()
                .contains("nvidia-smi -i 0 -mig 0"));
        }
        let out = mig(
            Reading::Value(true),
            Reading::Value(false),
            Profile::General,
        );
        assert!(out[1]
            .message
            .ends_with("(MIG goes off at the next GPU reset: the change is pending)"));
    }

    #[test]
    fn a_pending_mig_change_needs_both_modes_read() {
        let out = mig(
            Reading::Value(false),
            Reading::Value(true),
            Profile::General,
        );
        assert_eq!(statuses(&out), vec![Status::Pass, Status::Info]);
        assert_eq!(
            out[1].message,
            "GPU 0 (00:06.0): MIG goes on at the next GPU reset (the change is pending)"
        );
        for (cur, pend) in [
            (Reading::Value(false), Reading::Value(false)),
            (
                Reading::unavailable("N/A (no MIG on this GPU)"),
                Reading::Value(false),
            ),
            (Reading::unavailable("N/A"), Reading::Value(true)),
            (Reading::Value(false), Reading::unavailable("N/A")),
        ] {
            let out = mig(cur, pend, Profile::Train);
            assert_eq!(statuses(&out), vec![Status::Pass]);
        }
    }
}
