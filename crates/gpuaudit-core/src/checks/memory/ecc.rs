//! memory.ecc: ECC mode per GPU and pending changes.

use crate::checks::common::per_gpu;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};

const ID: &str = "memory.ecc";

pub const CHECK: Check = Check {
    id: ID,
    title: "ECC enabled (required for --profile hpc), pending changes",
    looks_at: "ECC enabled (required for `--profile hpc`), pending changes",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Whether ECC is on for each GPU's memory, and whether a change waits for a reset.",
        why: "Without ECC a flipped bit silently corrupts a result or a checkpoint; scientific \
              computing needs it. (On GDDR parts ECC costs a little memory and bandwidth.)",
        verify: "nvidia-smi -q -d ECC | grep -A2 'ECC Mode'",
        fix: "The owner enables it with `sudo nvidia-smi -i N -e 1` and a GPU reset or reboot \
              (gpuaudit never changes it); on a cloud instance, ask the provider.",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Hpc,
        effect: "ECC off fails instead of warning: scientific computing needs it.",
    }],
    run: ecc,
};

fn ecc(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, |g| ecc_one(g, policy))
}

fn ecc_one(g: &GpuFacts, policy: &Policy) -> Finding {
    let e = &g.ecc;
    let mut ev = Evidence::new();
    if let Some(c) = e.current.value() {
        ev.insert("current", c);
    }
    if let Some(p) = e.pending.value() {
        ev.insert("pending", p);
    }
    match (e.current.value(), e.pending.value()) {
        (Some(true), Some(false)) => Finding::warn(
            ID,
            format!(
                "{}: ECC is on, but turning off at the next reset",
                g.label()
            ),
        )
        .evidence(ev)
        .fix(format!(
            "Keep it on: `sudo nvidia-smi -i {} -e 1` before the reset.",
            g.index
        )),
        (Some(true), _) => Finding::pass(ID, format!("{}: ECC on", g.label())).evidence(ev),
        (Some(false), pending) => {
            let st = if policy.profile == Profile::Hpc {
                Status::Fail
            } else {
                Status::Warn
            };
            let mut msg = format!("{}: ECC is off: memory bit flips go undetected", g.label());
            if pending == Some(&true) {
                msg.push_str(" (turning on at the next reset)");
            }
            Finding::new(ID, st, msg)
                .evidence(ev)
                .fix(format!("`sudo nvidia-smi -i {} -e 1` and reset/reboot (gpuaudit never changes it); on a cloud instance, ask the provider.", g.index))
        }
        (None, _) => Finding::info(
            ID,
            format!(
                "{}: ECC mode not available ({}): this GPU may have no ECC",
                g.label(),
                e.current.reason().unwrap_or("?")
            ),
        )
        .evidence(ev),
    }
}
