//! clocks.throttle: the clock event (throttle) reasons active when read, each on its own.

use crate::checks::common::per_gpu_many;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, ThrottleReason};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "clocks.throttle";

pub const CHECK: Check = Check {
    id: ID,
    title: "Active clock-event (throttle) reasons, each decoded on its own",
    looks_at: "active clock-event (throttle) reasons, idle and under load; hardware slowdown, \
               thermal and power-brake are faults",
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
    profiles: &[],
    run: throttle,
};

fn throttle(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu_many(ID, facts, policy, throttle_one)
}

fn throttle_one(g: &GpuFacts) -> Vec<Finding> {
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
