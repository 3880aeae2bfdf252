//! power.limit: the enforced power limit against the GPU's default and the datasheet.

use crate::checks::common::{pct, per_gpu, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;

const ID: &str = "power.limit";

/// The enforced limit against the GPU's own default limit. Below this fraction someone
/// lowered it (the owner or the provider); the 2% left is gpuaudit's margin for how the watts
/// are rounded, not an NVIDIA figure.
pub const BELOW_DEFAULT_WARN: f64 = 0.98;
/// Below this fraction of the default the cap costs sustained compute enough to fail
/// (gpuaudit's line; the explain text: a GPU capped at 70% of its TDP loses 10-30%).
pub const BELOW_DEFAULT_FAIL: f64 = 0.90;
/// The enforced limit against the datasheet's board power (the lowest configuration of a
/// configurable part): the board's default itself set low. gpuaudit's margins.
pub const BELOW_DATASHEET_WARN: f64 = 0.95;
pub const BELOW_DATASHEET_FAIL: f64 = 0.85;

pub const CHECK: Check = Check {
    id: ID,
    title: "Enforced power limit against the default, the maximum and the datasheet TDP",
    looks_at: "enforced power limit against default, maximum and the datasheet TDP",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The power limit the GPU enforces, against its default and maximum limit and the \
               datasheet's board power (TDP).",
        why: "Providers cap power to fit more GPUs in a rack: a GPU capped at 70% of its TDP \
              loses 10-30% of its compute under sustained load, with nothing on the spec sheet \
              to show it.",
        verify: "nvidia-smi -q -d POWER\nnvidia-smi --query-gpu=index,power.limit,power.default_limit,power.max_limit --format=csv",
        fix: "The owner restores the default with `sudo nvidia-smi -i N -pl <default W>` \
              (gpuaudit never does); on a cloud instance the cap is the provider's: ask for \
              an uncapped host or a lower price.",
    },
    profiles: &[],
    run: limit,
};

fn limit(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, limit_one)
}

fn limit_one(g: &GpuFacts) -> Finding {
    let p = &g.power;
    let mut ev = Evidence::new();
    ev.insert_readings(&[
        ("limit_w", &p.limit_w),
        ("default_limit_w", &p.default_limit_w),
        ("min_limit_w", &p.min_limit_w),
        ("max_limit_w", &p.max_limit_w),
    ]);
    let spec = spec_of(g);
    if let Some(tdp) = spec.and_then(|s| s.tdp_w) {
        ev.insert("spec_tdp_w", tdp);
    }
    let Some(&lim) = p.limit_w.value() else {
        return Finding::skip(
            ID,
            format!(
                "{}: power limit not read: {}",
                g.label(),
                p.limit_w.reason().unwrap_or("?")
            ),
        )
        .evidence(ev);
    };
    let fix_cap = format!(
        "The owner restores it with `sudo nvidia-smi -i {} -pl <default W>` (gpuaudit never changes it); on a cloud instance, ask the provider for an uncapped host.",
        g.index
    );

    if let Some(&def) = p.default_limit_w.value() {
        if lim < def * BELOW_DEFAULT_WARN {
            let st = if lim < def * BELOW_DEFAULT_FAIL {
                Status::Fail
            } else {
                Status::Warn
            };
            return Finding::new(
                ID,
                st,
                format!(
                    "{} is capped at {lim:.0} W, {} of its default {def:.0} W: sustained compute runs slower",
                    g.label(),
                    pct(lim, def)
                ),
            )
            .evidence(ev)
            .fix(fix_cap);
        }
    }
    if let Some((s, floor)) = spec.and_then(|s| Some((s, s.tdp_min_w.or(s.tdp_w)?))) {
        if lim < floor * BELOW_DATASHEET_WARN {
            let st = if lim < floor * BELOW_DATASHEET_FAIL {
                Status::Fail
            } else {
                Status::Warn
            };
            return Finding::new(
                ID,
                st,
                format!(
                    "{} enforces {lim:.0} W, {} of the datasheet's {floor:.0} W for the {}: the board's default is set low",
                    g.label(),
                    pct(lim, floor),
                    s.name
                ),
            )
            .evidence(ev)
            .fix(fix_cap);
        }
    }
    let of = match (p.default_limit_w.value(), spec) {
        (Some(d), _) => format!("its default {d:.0} W"),
        (None, Some(s)) => match s.tdp_w {
            Some(tdp) => format!("the datasheet's {tdp:.0} W"),
            None => "no datasheet power figure to compare with".into(),
        },
        _ => "nothing known to compare with".into(),
    };
    Finding::pass(ID, format!("{} power limit {lim:.0} W ({of})", g.label())).evidence(ev)
}
