//! memory.ecc: ECC mode per GPU and pending changes.

use crate::checks::common::{name_of, per_gpu};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};

const ID: &str = "memory.ecc";

/// Words of a reported name that make a workstation or consumer card, whose ECC ships off
/// (optional on RTX workstation boards, absent on GeForce): ECC off there is the factory
/// setting, not someone's change. Data-center boards (A100, H100, L4, L40S, T4, ...) ship
/// with ECC on. A "Server Edition" RTX board is a data-center board.
pub const WORKSTATION_NAME_WORDS: &[&str] = &["geforce", "titan", "quadro", "rtx"];

pub const CHECK: Check = Check {
    id: ID,
    title: "ECC enabled (required for --profile hpc), pending changes",
    looks_at: "ECC enabled (required for `--profile hpc`), pending changes",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Whether ECC is on for each GPU's memory, and whether a change waits for a reset. \
               ECC off on a data-center GPU (which ships with it on) warns; on a workstation or \
               consumer card (GeForce, TITAN, Quadro, RTX, whose ECC ships off) it is \
               information. ECC on but turning off at the next reset warns.",
        why: "Without ECC a flipped bit silently corrupts a result or a checkpoint; scientific \
              computing needs it. (On GDDR parts ECC costs a little memory and bandwidth.)",
        verify: "nvidia-smi -q -d ECC | grep -A2 'ECC Mode'",
        fix: "The owner enables it with `sudo nvidia-smi -i N -e 1` and a GPU reset or reboot \
              (gpuaudit never changes it); on a cloud instance, ask the provider.",
    },
    profiles: &[ProfileEffect {
        profile: Profile::Hpc,
        effect: "ECC off fails instead of warning (or informing, on a workstation card), and so does ECC turning off at the next reset: scientific computing needs it; an ECC mode that cannot be read warns.",
    }],
    run: ecc,
};

fn ecc(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, |g| ecc_one(g, policy))
}

/// A workstation or consumer card by its reported name (see [`WORKSTATION_NAME_WORDS`]).
fn workstation_card(g: &GpuFacts) -> bool {
    let name = name_of(g).to_ascii_lowercase();
    let words: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().any(|w| WORKSTATION_NAME_WORDS.contains(w)) && !words.contains(&"server")
}

fn ecc_one(g: &GpuFacts, policy: &Policy) -> Finding {
    let hpc = policy.profile == Profile::Hpc;
    let e = &g.ecc;
    let mut ev = Evidence::new();
    if let Some(c) = e.current.value() {
        ev.insert("current", c);
    }
    if let Some(p) = e.pending.value() {
        ev.insert("pending", p);
    }
    let fix_on = format!(
        "`sudo nvidia-smi -i {} -e 1` and reset/reboot (gpuaudit never changes it); on a cloud instance, ask the provider.",
        g.index
    );
    match (e.current.value(), e.pending.value()) {
        (Some(true), Some(false)) => Finding::new(
            ID,
            if hpc { Status::Fail } else { Status::Warn },
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
            let workstation = workstation_card(g);
            ev.insert("ships_with_ecc_off", workstation);
            let st = match (hpc, workstation) {
                (true, _) => Status::Fail,
                (false, true) => Status::Info,
                (false, false) => Status::Warn,
            };
            let mut msg = format!("{}: ECC is off: memory bit flips go undetected", g.label());
            if workstation {
                msg.push_str(" (the factory setting of this workstation card)");
            }
            if pending == Some(&true) {
                msg.push_str("; turning on at the next reset");
            }
            if hpc {
                msg.push_str("; --profile hpc requires it");
            }
            Finding::new(ID, st, msg).evidence(ev).fix(fix_on)
        }
        (None, _) => Finding::new(
            ID,
            if hpc { Status::Warn } else { Status::Info },
            format!(
                "{}: ECC mode not available ({}): this GPU may have no ECC{}",
                g.label(),
                e.current.reason().unwrap_or("not reported"),
                if hpc {
                    "; --profile hpc requires it and it cannot be confirmed"
                } else {
                    ""
                }
            ),
        )
        .evidence(ev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;
    use crate::testing::Machine;

    fn run(f: &Facts, profile: Profile) -> Finding {
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        (CHECK.run)(f, &policy).remove(0)
    }

    fn with(key: &str, current: Reading<bool>, pending: Reading<bool>) -> Facts {
        Machine::healthy(key, 1)
            .gpu(0, |g| {
                g.ecc.current = current;
                g.ecc.pending = pending;
            })
            .build()
    }

    #[test]
    fn ecc_on_passes_in_every_profile() {
        for p in Profile::ALL {
            let f = with("h200-sxm-141gb", Reading::Value(true), Reading::Value(true));
            assert_eq!(run(&f, p).status, Status::Pass, "{p}");
        }
    }

    #[test]
    fn ecc_off_on_a_data_center_gpu_warns_and_fails_for_hpc() {
        let f = with(
            "h200-sxm-141gb",
            Reading::Value(false),
            Reading::Value(false),
        );
        for p in [
            Profile::General,
            Profile::Train,
            Profile::Inference,
            Profile::Render,
        ] {
            assert_eq!(run(&f, p).status, Status::Warn, "{p}");
        }
        let x = run(&f, Profile::Hpc);
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message.contains("--profile hpc requires it"),
            "{}",
            x.message
        );
        assert!(x.fix.as_deref().unwrap_or("").contains("-i 0 -e 1"));
    }

    #[test]
    fn ecc_off_on_a_workstation_card_is_its_factory_setting_and_fails_for_hpc() {
        for name in [
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            "NVIDIA RTX 4000 SFF Ada Generation",
            "NVIDIA GeForce RTX 4090",
            "Quadro RTX 8000",
        ] {
            let f = Machine::healthy("l40s", 1)
                .gpu(0, |g| {
                    g.name = Reading::Value(name.into());
                    g.ecc.current = Reading::Value(false);
                    g.ecc.pending = Reading::Value(false);
                })
                .build();
            let x = run(&f, Profile::General);
            assert_eq!(x.status, Status::Info, "{name}: {}", x.message);
            assert!(x.message.contains("factory setting"), "{}", x.message);
            assert_eq!(run(&f, Profile::Hpc).status, Status::Fail, "{name}");
        }
        // A server edition is a data-center board.
        let f = Machine::healthy("l40s", 1)
            .gpu(0, |g| {
                g.name = Reading::Value("NVIDIA RTX PRO 6000 Blackwell Server Edition".into());
                g.ecc.current = Reading::Value(false);
            })
            .build();
        assert_eq!(run(&f, Profile::General).status, Status::Warn);
    }

    #[test]
    fn a_pending_change_is_said_and_judged() {
        let f = with(
            "h200-sxm-141gb",
            Reading::Value(true),
            Reading::Value(false),
        );
        let x = run(&f, Profile::General);
        assert_eq!(x.status, Status::Warn);
        assert!(x.message.contains("turning off at the next reset"));
        assert_eq!(run(&f, Profile::Hpc).status, Status::Fail);
        let f = with(
            "h200-sxm-141gb",
            Reading::Value(false),
            Reading::Value(true),
        );
        let x = run(&f, Profile::General);
        assert_eq!(x.status, Status::Warn);
        assert!(
            x.message.contains("turning on at the next reset"),
            "{}",
            x.message
        );
        // Pending not read: ECC on passes.
        let f = with(
            "h200-sxm-141gb",
            Reading::Value(true),
            Reading::unavailable("N/A"),
        );
        assert_eq!(run(&f, Profile::Hpc).status, Status::Pass);
    }

    #[test]
    fn an_unreadable_mode_is_information_and_warns_for_hpc() {
        let f = with(
            "rtx-2080",
            Reading::unavailable("N/A"),
            Reading::unavailable("N/A"),
        );
        let x = run(&f, Profile::General);
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message.contains("ECC mode not available (N/A)"),
            "{}",
            x.message
        );
        let x = run(&f, Profile::Hpc);
        assert_eq!(x.status, Status::Warn);
        assert!(x.message.contains("cannot be confirmed"));
    }
}
