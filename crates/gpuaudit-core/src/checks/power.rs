//! power.limit, clocks.throttle, clocks.max.

use super::common::{pct, per_gpu, per_gpu_many, spec_of};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, ThrottleReason};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "power.limit",
        title: "Enforced power limit against the default, the maximum and the datasheet TDP",
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
        run: limit,
    },
    Check {
        id: "clocks.throttle",
        title: "Active clock-event (throttle) reasons, each decoded on its own",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The clock event reasons NVML reports as active, each bit on its own: idle, \
                   application clocks, software power cap, hardware slowdown, hardware thermal \
                   slowdown, hardware power brake, software thermal slowdown, sync boost, display \
                   clocks. Read at idle here; under load in stability.burn.",
            why: "Hardware slowdown, thermal slowdown and power brake mean the GPU protects itself: \
                  failing cooling, a power supply asserting the brake, or an external signal. \
                  They cut clocks by half or more.",
            verify: "nvidia-smi -q -d PERFORMANCE\nnvidia-smi --query-gpu=index,clocks_event_reasons.active --format=csv",
            fix: "Thermal: check fans, airflow, inlet temperature and `nvidia-smi -q -d TEMPERATURE`. \
                  Power brake / hardware slowdown: the chassis or PSU asserts it: a hardware \
                  problem for the owner or provider.",
        },
        run: throttle,
    },
    Check {
        id: "clocks.max",
        title: "Maximum and application SM clocks against the datasheet boost clock",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The GPU's maximum SM clock and its application (target) clocks, against the \
                   datasheet's boost clock.",
            why: "Application clocks set below the maximum, or a VBIOS with a lower maximum, slow \
                  every kernel by the same fraction.",
            verify: "nvidia-smi -q -d CLOCK",
            fix: "The owner resets application clocks with `sudo nvidia-smi -i N -rac` (gpuaudit \
                  never does); a lower maximum clock is the VBIOS: ask the provider.",
        },
        run: clocks_max,
    },
];

fn limit(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu("power.limit", facts, policy, limit_one)
}

fn limit_one(g: &GpuFacts) -> Finding {
    const ID: &str = "power.limit";
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
        if lim < def * 0.98 {
            let st = if lim < def * 0.90 {
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
        if lim < floor * 0.95 {
            let st = if lim < floor * 0.85 {
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

fn throttle(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu_many("clocks.throttle", facts, policy, throttle_one)
}

fn throttle_one(g: &GpuFacts) -> Vec<Finding> {
    const ID: &str = "clocks.throttle";
    let reasons = match &g.throttle_reasons {
        Reading::Value(r) => r,
        Reading::Unavailable(why) => {
            return vec![Finding::skip(
                ID,
                format!("{}: clock event reasons not read: {why}", g.label()),
            )]
        }
    };
    let names: Vec<&str> = reasons.iter().map(|r| r.name()).collect();
    let mut ev = Evidence::new().with("active", &names);
    if let Some(t) = g.temperature_c.value() {
        ev.insert("temperature_c", t);
    }
    if let Some(c) = g.clocks.sm_mhz.value() {
        ev.insert("sm_clock_mhz", c);
    }
    if let Some(w) = g.power.draw_w.value() {
        ev.insert("power_draw_w", w);
    }

    let mut out = Vec::new();
    for r in reasons {
        let (st, what, fix): (Status, &str, &str) = match r {
            ThrottleReason::HwSlowdown => (
                Status::Fail,
                "hardware slowdown is active: the GPU halves its clocks or more to protect itself (overheating, power brake or an external signal)",
                "Check cooling and power delivery; on a cloud instance, report it to the provider with this output.",
            ),
            ThrottleReason::HwThermalSlowdown => (
                Status::Fail,
                "hardware thermal slowdown is active: the GPU is too hot",
                "Check fans, airflow and inlet temperature (`nvidia-smi -q -d TEMPERATURE`); on a cloud instance, report it.",
            ),
            ThrottleReason::HwPowerBrakeSlowdown => (
                Status::Fail,
                "the hardware power brake is active: the power supply or chassis asserts it",
                "A power-delivery problem for the owner or provider: report it.",
            ),
            ThrottleReason::SwThermalSlowdown => (
                Status::Warn,
                "software thermal slowdown is active: the GPU is above its target temperature",
                "Check cooling; `nvidia-smi -q -d TEMPERATURE` shows the slowdown thresholds.",
            ),
            ThrottleReason::SwPowerCap => (
                Status::Warn,
                "the software power cap is active: the GPU draws at its power limit",
                "Expected under full load; at idle it means the limit is set very low (see power.limit).",
            ),
            ThrottleReason::ApplicationsClocksSetting => (
                Status::Info,
                "clocks are held by the application clock setting",
                "See clocks.max.",
            ),
            ThrottleReason::SyncBoost => (Status::Info, "clocks are synchronised with other GPUs (sync boost)", ""),
            ThrottleReason::DisplayClocksSetting => (Status::Info, "clocks follow the display clock setting", ""),
            ThrottleReason::GpuIdle => continue,
        };
        let mut f = Finding::new(ID, st, format!("{}: {what}", g.label())).evidence(ev.clone());
        if !fix.is_empty() {
            f = f.fix(fix);
        }
        out.push(f);
    }
    if out.is_empty() {
        let msg = if reasons.contains(&ThrottleReason::GpuIdle) {
            format!(
                "{}: idle; nothing else limits its clocks (judged under load by stability.burn)",
                g.label()
            )
        } else {
            format!("{}: no clock event reason is active", g.label())
        };
        out.push(Finding::pass(ID, msg).evidence(ev));
    }
    out
}

fn clocks_max(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu("clocks.max", facts, policy, clocks_max_one)
}

fn clocks_max_one(g: &GpuFacts) -> Finding {
    const ID: &str = "clocks.max";
    let c = &g.clocks;
    let mut ev = Evidence::new();
    ev.insert_readings(&[
        ("sm_max_mhz", &c.sm_max_mhz),
        ("app_sm_mhz", &c.app_sm_mhz),
        ("default_app_sm_mhz", &c.default_app_sm_mhz),
        ("mem_max_mhz", &c.mem_max_mhz),
    ]);
    let spec = spec_of(g);
    let boost = spec.and_then(|s| s.boost_clock_mhz.map(|b| (s, b)));
    if let Some((_, b)) = boost {
        ev.insert("spec_boost_mhz", b);
    }
    let Some(&max) = c.sm_max_mhz.value() else {
        return Finding::skip(
            ID,
            format!(
                "{}: maximum SM clock not read: {}",
                g.label(),
                c.sm_max_mhz.reason().unwrap_or("?")
            ),
        )
        .evidence(ev);
    };
    if let Some(&app) = c.app_sm_mhz.value() {
        let reference = c.default_app_sm_mhz.value().copied().unwrap_or(max);
        if (app as f64) < reference as f64 * 0.97 {
            return Finding::warn(
                ID,
                format!(
                    "{}: application SM clock set to {app} MHz, below its default {reference} MHz: every kernel runs up to {} slower",
                    g.label(),
                    pct((reference - app) as f64, reference as f64)
                ),
            )
            .evidence(ev)
            .fix(format!("The owner resets it with `sudo nvidia-smi -i {} -rac` (gpuaudit never changes it).", g.index));
        }
    }
    if let Some((s, b)) = boost {
        if (max as f64) < b as f64 * 0.97 {
            return Finding::warn(
                ID,
                format!(
                    "{}: maximum SM clock {max} MHz, below the datasheet's {b} MHz boost for the {}",
                    g.label(),
                    s.name
                ),
            )
            .evidence(ev)
            .fix("A lower maximum comes from the VBIOS or a clock lock: check `nvidia-smi -q -d CLOCK`; ask the provider.");
        }
    }
    let vs = boost
        .map(|(_, b)| format!(" (datasheet boost {b} MHz)"))
        .unwrap_or_default();
    Finding::pass(ID, format!("{}: maximum SM clock {max} MHz{vs}", g.label())).evidence(ev)
}
