//! clocks.throttle: the clock event (throttle) reasons, each on its own: as read with the facts,
//! and under load from the samples of the burn (`--full`). This check owns the verdict on
//! throttle reasons under load; stability.burn judges steadiness and correctness.

use crate::checks::common::{fraction, pct, per_gpu_many};
use crate::checks::power::limit::at_default;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, Telemetry, ThrottleReason};
use crate::finding::{Cause, Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "clocks.throttle";

macro_rules! power_cap_draw_at_limit_pct {
    () => {
        90
    };
}
macro_rules! power_bound_share_pct {
    () => {
        50
    };
}
macro_rules! load_sw_thermal_share_warn_pct {
    () => {
        10
    };
}

/// A GPU drawing at least this fraction of its enforced limit is at its limit: the power
/// controller holds the draw a few percent under the limit, and the reading is an average
/// over a short window. gpuaudit's margin. Below it, a set software power cap flag does not
/// describe the reading next to it (the fixtures' V100S shows the flag at 68 W of 250 W).
pub const POWER_CAP_DRAW_AT_LIMIT: f64 = fraction(power_cap_draw_at_limit_pct!());
/// Share of the burn's samples with software thermal slowdown above which it warns (a few
/// samples at the start of a run are the fan catching up); gpuaudit's line.
pub const LOAD_SW_THERMAL_SHARE_WARN: f64 = fraction(load_sw_thermal_share_warn_pct!());
/// A GPU at the software power cap in at least this share of the burn's samples is
/// power-bound: its clocks are where the power limit holds them (see [`power_bound_at_default`]).
pub const POWER_BOUND_SHARE: f64 = fraction(power_bound_share_pct!());

/// Whether a GPU ran the burn power-bound at its default limit: the software power cap in at
/// least [`POWER_BOUND_SHARE`] of the samples, no hardware reason, software thermal slowdown
/// in no more than [`LOAD_SW_THERMAL_SHARE_WARN`] of them, and the enforced limit at the
/// default. Every H100/H200 runs dense GEMM like this: its SM clock settles below the boost
/// clock as the GPU warms (leakage grows with temperature), which is expected, not a sag.
/// For stability.burn, so that a clock that settles under the power limit is not judged a
/// fault there.
pub fn power_bound_at_default(g: &GpuFacts, t: &Telemetry) -> bool {
    let share = |r: ThrottleReason| {
        t.throttle
            .iter()
            .filter(|s| s.reason == r)
            .map(|s| s.samples as f64 / t.samples.max(1) as f64)
            .sum::<f64>()
    };
    let hardware = t
        .throttle
        .iter()
        .any(|s| s.samples > 0 && s.reason.is_hardware_fault());
    at_default(g) == Some(true)
        && !hardware
        && share(ThrottleReason::SwPowerCap) >= POWER_BOUND_SHARE
        && share(ThrottleReason::SwThermalSlowdown) <= LOAD_SW_THERMAL_SHARE_WARN
}

pub const CHECK: Check = Check {
    id: ID,
    title: "Active clock-event (throttle) reasons, each decoded on its own",
    looks_at: "active clock-event (throttle) reasons, idle and under load; hardware slowdown, \
               thermal and power-brake are faults",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The clock event reasons NVML reports as active, each bit on its own: idle, \
             application clocks, software power cap, hardware slowdown, hardware thermal \
             slowdown, hardware power brake, software thermal slowdown, sync boost, display \
             clocks. Read with the facts, and with --full from the samples taken during the \
             burn (stability.burn's load). Hardware slowdown, hardware thermal slowdown and the \
             power brake fail, in any sample; hardware slowdown is the umbrella of the other \
             two, so where one of them is active too it is said with that cause, as one \
             finding. Software thermal slowdown warns (under load: in \
             more than ",
            load_sw_thermal_share_warn_pct!(),
            "% of the samples). The software power cap is information: a GPU under dense \
             load runs at its power limit by design (every H100/H200 does on GEMM), so at its \
             default limit that is expected; a limit below the default is power.limit's \
             finding, and the cap that holds the GPU there is shown under it. Where the flag is set while the GPU draws less than ",
            power_cap_draw_at_limit_pct!(),
            "% of its limit, the flag comes from the power averaged over the driver's last \
             control window and the draw is one sample: a load that just ended, not a cap on \
             that reading."
        ),
        why: "Hardware slowdown, thermal slowdown and power brake mean the GPU protects itself: \
              failing cooling, a power supply asserting the brake, or an external signal. \
              They cut clocks by half or more.",
        verify: "nvidia-smi -q -d PERFORMANCE\n\
                 nvidia-smi --query-gpu=index,clocks_event_reasons.active,power.draw,power.limit --format=csv\n\
                 # drivers before R535 name the field clocks_throttle_reasons.active:\n\
                 nvidia-smi --query-gpu=index,clocks_throttle_reasons.active,power.draw,power.limit --format=csv\n\
                 nvidia-smi dmon -s pucv -c 10   # under load: ten one-second samples",
        fix: "Thermal: check fans, airflow, inlet temperature and `nvidia-smi -q -d TEMPERATURE`. \
              Power brake / hardware slowdown: the chassis or PSU asserts it: a hardware \
              problem for the owner or provider. A power limit below the default: see \
              power.limit.",
    },
    profiles: &[],
    run: throttle,
};

fn throttle(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu_many(ID, facts, policy, |g| {
        let mut out = as_read(g);
        out.extend(under_load(facts, g));
        out
    })
}

/// What the software power cap flag means next to the draw and the limit read with it.
fn power_cap_now(g: &GpuFacts) -> String {
    let draw = g.power.draw_w.value().copied();
    let limit = g.power.limit_w.value().copied().filter(|l| *l > 0.0);
    match (draw, limit) {
        (Some(d), Some(l)) if d >= l * POWER_CAP_DRAW_AT_LIMIT => match at_default(g) {
            Some(false) => format!(
                "the software power cap is active: the GPU draws {d:.0} W of its {l:.0} W limit, which is below its default: the cap costs compute under load (see power.limit)"
            ),
            Some(true) => format!(
                "the software power cap is active: the GPU draws {d:.0} W of its {l:.0} W limit, its default: a GPU under full load runs at its power limit"
            ),
            None => format!(
                "the software power cap is active: the GPU draws {d:.0} W of its {l:.0} W limit (its default not known): a GPU under full load runs at its power limit"
            ),
        },
        (Some(d), Some(l)) => format!(
            "the driver flags the software power cap while the GPU draws {d:.0} W of its {l:.0} W limit ({}): the flag follows the power averaged over the driver's last control window and the draw is one sample, so this is a load that just ended or a burst, not a cap on this reading",
            pct(d, l)
        ),
        _ => "the software power cap is active (the power draw or the limit was not read): normal under full load; with the GPU idle it would mean a very low limit (see power.limit)".to_string(),
    }
}

/// The GPU draws its limit now, and that limit is below its default (power.limit's problem).
fn held_below_default(g: &GpuFacts) -> bool {
    let draw = g.power.draw_w.value().copied();
    let limit = g.power.limit_w.value().copied().filter(|l| *l > 0.0);
    matches!((draw, limit), (Some(d), Some(l)) if d >= l * POWER_CAP_DRAW_AT_LIMIT)
        && at_default(g) == Some(false)
}

/// The reasons active when the facts were read.
fn as_read(g: &GpuFacts) -> Vec<Finding> {
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
    if let Some(w) = g.power.limit_w.value() {
        ev.insert("power_limit_w", w);
    }

    let mut out = Vec::new();
    // NVML's hardware slowdown is the umbrella of the thermal slowdown and the power brake:
    // where one of those is active too, it names the cause, and the slowdown is said with it
    // (one problem, not two).
    let specific = reasons.iter().any(|r| {
        matches!(
            r,
            ThrottleReason::HwThermalSlowdown | ThrottleReason::HwPowerBrakeSlowdown
        )
    });
    let temp = g
        .temperature_c
        .value()
        .map(|t| format!(" ({t:.0} °C)"))
        .unwrap_or_default();
    for r in reasons {
        let (st, what, fix): (Status, String, &str) = match r {
            ThrottleReason::HwSlowdown if specific => continue,
            ThrottleReason::HwThermalSlowdown => (
                Status::Fail,
                format!("hardware thermal slowdown is active: the GPU is too hot{temp} and halves its clocks or more to protect itself"),
                "Check fans, airflow and inlet temperature (`nvidia-smi -q -d TEMPERATURE`); on a cloud instance, report it.",
            ),
            ThrottleReason::HwPowerBrakeSlowdown => (
                Status::Fail,
                "the hardware power brake is active: the power supply or chassis asserts it, and the GPU halves its clocks or more".into(),
                "A power-delivery problem for the owner or provider: report it.",
            ),
            ThrottleReason::HwSlowdown => (
                Status::Fail,
                "hardware slowdown is active: the GPU halves its clocks or more to protect itself (overheating, power brake or an external signal)".into(),
                "Check cooling and power delivery; on a cloud instance, report it to the provider with this output.",
            ),
            ThrottleReason::SwThermalSlowdown => (
                Status::Warn,
                "software thermal slowdown is active: the GPU is above its target temperature".into(),
                "Check cooling; `nvidia-smi -q -d TEMPERATURE` shows the slowdown thresholds.",
            ),
            ThrottleReason::SwPowerCap => (
                Status::Info,
                power_cap_now(g),
                "Look under sustained load: `gpuaudit --full` samples the clock event reasons during its burn; a limit below the default is power.limit's finding.",
            ),
            ThrottleReason::ApplicationsClocksSetting => (
                Status::Info,
                "clocks are held by the application clock setting".into(),
                "See clocks.max.",
            ),
            ThrottleReason::SyncBoost => (
                Status::Info,
                "clocks are synchronised with other GPUs (sync boost)".into(),
                "",
            ),
            ThrottleReason::DisplayClocksSetting => (
                Status::Info,
                "clocks follow the display clock setting".into(),
                "",
            ),
            ThrottleReason::GpuIdle => continue,
        };
        let mut f = Finding::new(ID, st, format!("{}: {what}", g.label())).evidence(ev.clone());
        if !fix.is_empty() {
            f = f.fix(fix);
        }
        // A cap below the default that holds the GPU now is power.limit's problem: this is
        // what it causes (a flag at a low draw is a burst that ended, not the cap).
        if *r == ThrottleReason::SwPowerCap && held_below_default(g) {
            f = f.caused_by(Cause::gpu(crate::checks::power::limit::CHECK.id, g.index));
        }
        out.push(f);
    }
    if out.is_empty() {
        let msg = if reasons.contains(&ThrottleReason::GpuIdle) {
            format!(
                "{}: idle; nothing else limits its clocks (under load: sampled during the burn of `--full`)",
                g.label()
            )
        } else {
            format!("{}: no clock event reason is active", g.label())
        };
        out.push(Finding::pass(ID, msg).evidence(ev));
    }
    out
}

/// The reasons seen in the samples of the burn, where it ran on this GPU.
fn under_load(facts: &Facts, g: &GpuFacts) -> Option<Finding> {
    let burn = facts.measured.burn.value()?;
    let result = burn
        .per_gpu
        .iter()
        .find(|x| x.gpu == g.index)?
        .result
        .value()?;
    let head = format!(
        "{}: under load ({:.0} s burn of {} GEMMs)",
        g.label(),
        burn.seconds,
        burn.dtype.as_str()
    );
    let t: &Telemetry = match &result.telemetry {
        Reading::Value(t) => t,
        Reading::Unavailable(why) => {
            return Some(Finding::skip(
                ID,
                format!("{head}: clock event reasons not sampled: {why}"),
            ))
        }
    };
    let mut ev = Evidence::new()
        .with("samples", t.samples)
        .with("interval_ms", t.interval_ms)
        .with("throttle", &t.throttle);
    if let Some(p) = t.power_w {
        ev.insert("power_w", p);
    }
    if let Some(c) = t.sm_clock_mhz {
        ev.insert("sm_clock_mhz", c);
    }
    if let Some(w) = g.power.limit_w.value() {
        ev.insert("power_limit_w", w);
    }
    if let Some(w) = g.power.default_limit_w.value() {
        ev.insert("default_limit_w", w);
    }

    let mut status = Status::Pass;
    let mut parts: Vec<String> = Vec::new();
    let mut fix: Option<&str> = None;
    // Whether a cap below the default raised the verdict, and whether anything else did.
    let (mut capped, mut other) = (false, false);
    for seen in t.throttle.iter().filter(|s| s.samples > 0) {
        let share = seen.samples as f64 / t.samples.max(1) as f64;
        let in_share = format!("in {} of the {} samples", seen.samples, t.samples);
        if seen.reason.is_hardware_fault() {
            other = true;
            status = Status::Fail;
            parts.push(format!("{} {in_share}", seen.reason.name()));
            fix = Some(
                "Hardware slowdown under load: check airflow, fans, inlet temperature and power \
                 cabling; on a cloud instance report the GPU (serial number) to the provider.",
            );
            continue;
        }
        match seen.reason {
            ThrottleReason::SwThermalSlowdown => {
                if share > LOAD_SW_THERMAL_SHARE_WARN {
                    other = true;
                    status = status.max(Status::Warn);
                    fix.get_or_insert(
                        "Check cooling: the GPU reaches its slowdown temperature under load.",
                    );
                }
                parts.push(format!("software thermal slowdown {in_share}"));
            }
            ThrottleReason::SwPowerCap => {
                let limit = g
                    .power
                    .limit_w
                    .value()
                    .map(|l| format!("{l:.0} W"))
                    .unwrap_or_else(|| "its limit".into());
                let text = match (at_default(g), g.power.default_limit_w.value()) {
                    (Some(false), Some(d)) => {
                        capped = true;
                        status = status.max(Status::Info);
                        format!(
                            "held at its power limit ({limit}, below its default {d:.0} W) {in_share}: the cap costs compute (see power.limit)"
                        )
                    }
                    (Some(false), None) => {
                        capped = true;
                        status = status.max(Status::Info);
                        format!(
                            "held at its power limit ({limit}, below the datasheet's board power) {in_share}: the cap costs compute (see power.limit)"
                        )
                    }
                    (Some(true), _) => format!(
                        "at its power limit ({limit}, its default) {in_share}: dense GEMM is power-bound on this GPU, as expected"
                    ),
                    (None, _) => {
                        other = true;
                        status = status.max(Status::Info);
                        format!(
                            "at its power limit ({limit}; its default not known) {in_share}"
                        )
                    }
                };
                parts.push(text);
            }
            ThrottleReason::GpuIdle => {}
            ThrottleReason::ApplicationsClocksSetting => {
                other = true;
                status = status.max(Status::Info);
                parts.push(format!(
                    "clocks held by the application clock setting {in_share} (see clocks.max)"
                ));
            }
            reason => {
                other = true;
                status = status.max(Status::Info);
                parts.push(format!("{} {in_share}", reason.name()));
            }
        }
    }
    let msg = if parts.is_empty() {
        format!("{head}: no clock event reason limited its clocks")
    } else {
        format!("{head}: {}", parts.join("; "))
    };
    let mut f = Finding::new(ID, status, msg).evidence(ev);
    if let Some(x) = fix {
        f = f.fix(x);
    }
    if capped && !other {
        f = f.caused_by(Cause::gpu(crate::checks::power::limit::CHECK.id, g.index));
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Burn, GemmDtype, OnGpu, ThrottleSeen};
    use crate::testing::measured::burn_gpu;
    use crate::testing::{statuses, Machine};

    fn run(f: &Facts) -> Vec<Finding> {
        (CHECK.run)(f, &Policy::default())
    }

    /// One H200 (700 W limit = default = TDP) with these reasons active and this draw.
    fn h200_reading(reasons: Vec<ThrottleReason>, draw: f64, limit: f64) -> Vec<Finding> {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.throttle_reasons = Reading::Value(reasons);
                g.power.draw_w = Reading::Value(draw);
                g.power.limit_w = Reading::Value(limit);
            })
            .build();
        run(&f)
    }

    #[test]
    fn idle_and_quiet_gpus_pass() {
        let out = run(&Machine::healthy("h200-sxm-141gb", 2).build());
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|f| f.status == Status::Pass));
        assert!(out[0].message.contains("idle; nothing else limits"));
        let out = h200_reading(vec![], 300.0, 700.0);
        assert_eq!(out[0].status, Status::Pass);
        assert!(out[0].message.contains("no clock event reason is active"));
    }

    #[test]
    fn hardware_reasons_fail_and_software_thermal_warns() {
        for r in [
            ThrottleReason::HwSlowdown,
            ThrottleReason::HwThermalSlowdown,
            ThrottleReason::HwPowerBrakeSlowdown,
        ] {
            let out = h200_reading(vec![r], 300.0, 700.0);
            assert_eq!(out[0].status, Status::Fail, "{r:?}");
            assert!(out[0].fix.is_some());
        }
        let out = h200_reading(vec![ThrottleReason::SwThermalSlowdown], 300.0, 700.0);
        assert_eq!(out[0].status, Status::Warn);
        // The slowdown with its cause is one finding that names the cause.
        for (cause, text) in [
            (
                ThrottleReason::HwThermalSlowdown,
                "GPU 0 (00:06.0): hardware thermal slowdown is active: the GPU is too hot (30 °C) and halves its clocks or more to protect itself",
            ),
            (
                ThrottleReason::HwPowerBrakeSlowdown,
                "GPU 0 (00:06.0): the hardware power brake is active: the power supply or chassis asserts it, and the GPU halves its clocks or more",
            ),
        ] {
            let out = h200_reading(vec![ThrottleReason::HwSlowdown, cause], 300.0, 700.0);
            assert_eq!(statuses(&out), vec![Status::Fail], "{out:#?}");
            assert_eq!(out[0].message, text);
        }
        // Other reasons beside it are findings of their own.
        let out = h200_reading(
            vec![
                ThrottleReason::HwSlowdown,
                ThrottleReason::SwThermalSlowdown,
            ],
            300.0,
            700.0,
        );
        assert_eq!(statuses(&out), vec![Status::Fail, Status::Warn]);
        assert!(out[0].message.contains("hardware slowdown is active"));
        for (r, text) in [
            (
                ThrottleReason::ApplicationsClocksSetting,
                "application clock setting",
            ),
            (ThrottleReason::SyncBoost, "sync boost"),
            (ThrottleReason::DisplayClocksSetting, "display clock"),
        ] {
            let out = h200_reading(vec![r], 300.0, 700.0);
            assert_eq!(out[0].status, Status::Info);
            assert!(out[0].message.contains(text), "{}", out[0].message);
        }
    }

    #[test]
    fn the_power_cap_flag_at_a_low_draw_is_a_transient_not_a_cap() {
        // The V100S of the fixtures: the flag at 68 W of 250 W.
        let out = h200_reading(vec![ThrottleReason::SwPowerCap], 68.0, 250.0);
        let x = &out[0];
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message
                .contains("while the GPU draws 68 W of its 250 W limit (27%)"),
            "{}",
            x.message
        );
        assert!(
            x.message.contains("not a cap on this reading"),
            "{}",
            x.message
        );
        assert!(
            !x.message.contains("draws at its power limit"),
            "{}",
            x.message
        );
        assert_eq!(x.evidence.get("power_limit_w").unwrap(), 250.0);
    }

    #[test]
    fn the_draw_threshold_on_both_sides() {
        let at = 700.0 * POWER_CAP_DRAW_AT_LIMIT;
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], at, 700.0)[0];
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("of its 700 W limit, its default: a GPU under full load"),
            "{}",
            x.message
        );
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], at - 1.0, 700.0)[0];
        assert!(
            x.message
                .contains("the driver flags the software power cap while"),
            "{}",
            x.message
        );
    }

    #[test]
    fn the_power_cap_at_a_lowered_limit_points_at_power_limit() {
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], 495.0, 500.0)[0];
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("500 W limit, which is below its default"),
            "{}",
            x.message
        );
        assert!(x.message.contains("see power.limit"));
        // power.limit's problem (500 W of 700 W): this is what it causes.
        assert_eq!(x.caused_by, Some(Cause::gpu("power.limit", 0)));
        // The flag at a low draw under a lowered limit is a burst, not the cap.
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], 100.0, 500.0)[0];
        assert_eq!(x.caused_by, None);
        // At the default limit, nothing to point at.
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], 695.0, 700.0)[0];
        assert_eq!(x.caused_by, None);
        // The limit not read: said so.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.throttle_reasons = Reading::Value(vec![ThrottleReason::SwPowerCap]);
                g.power.limit_w = Reading::unavailable("N/A");
            })
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Info);
        assert!(x.message.contains("was not read"), "{}", x.message);
        // A limit of 0 W is no limit read.
        let x = &h200_reading(vec![ThrottleReason::SwPowerCap], 68.0, 0.0)[0];
        assert!(x.message.contains("was not read"), "{}", x.message);
        // Neither a default nor a datasheet figure: the default is not known.
        let f = Machine::healthy("rtx-3090", 1)
            .gpu(0, |g| {
                g.throttle_reasons = Reading::Value(vec![ThrottleReason::SwPowerCap]);
                g.power.draw_w = Reading::Value(349.0);
                g.power.limit_w = Reading::Value(350.0);
                g.power.default_limit_w = Reading::unavailable("N/A");
            })
            .build();
        let x = &run(&f)[0];
        assert!(
            x.message.contains("(its default not known)"),
            "{}",
            x.message
        );
    }

    #[test]
    fn unread_reasons_skip() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.throttle_reasons = Reading::unavailable("N/A in a vGPU guest")
            })
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("N/A in a vGPU guest"));
    }

    /// The burn on GPU 0 of one H200 at `limit` W, with `seen` of its 300 samples.
    fn burned(limit: f64, seen: Vec<ThrottleSeen>) -> Vec<Finding> {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::Value(limit))
            .measured(|m| {
                m.burn = Reading::Value(Burn {
                    seconds: 60.0,
                    dtype: GemmDtype::Bf16,
                    size: 8192,
                    per_gpu: vec![OnGpu::new(0, Reading::Value(burn_gpu(700.0, "aa", seen)))],
                })
            })
            .build();
        run(&f)
    }

    fn seen(reason: ThrottleReason, samples: u32) -> ThrottleSeen {
        ThrottleSeen { reason, samples }
    }

    fn load(out: &[Finding]) -> &Finding {
        out.iter()
            .find(|f| f.message.contains("under load ("))
            .unwrap_or_else(|| panic!("no finding under load: {out:#?}"))
    }

    #[test]
    fn a_healthy_h200_at_its_default_limit_is_at_its_power_limit_under_gemm_and_passes() {
        let out = burned(700.0, vec![seen(ThrottleReason::SwPowerCap, 280)]);
        let x = load(&out);
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        assert!(
            x.message
                .contains("at its power limit (700 W, its default) in 280 of the 300 samples: dense GEMM is power-bound"),
            "{}",
            x.message
        );
        assert!(
            x.message.contains("60 s burn of bf16 GEMMs"),
            "{}",
            x.message
        );
        // The reading with the facts is a finding of its own, before.
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].status, Status::Pass);
    }

    #[test]
    fn the_power_cap_under_load_below_the_default_is_information_for_power_limit() {
        let x = load(&burned(500.0, vec![seen(ThrottleReason::SwPowerCap, 280)])).clone();
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message.contains("500 W, below its default 700 W"),
            "{}",
            x.message
        );
        assert!(x.message.contains("see power.limit"));
    }

    #[test]
    fn hardware_reasons_under_load_fail_in_any_sample() {
        let x = load(&burned(700.0, vec![seen(ThrottleReason::HwSlowdown, 1)])).clone();
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(
            x.message.contains("hw_slowdown in 1 of the 300 samples"),
            "{}",
            x.message
        );
        let x = load(&burned(700.0, vec![seen(ThrottleReason::HwSlowdown, 0)])).clone();
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        assert!(x
            .message
            .contains("no clock event reason limited its clocks"));
        let x = load(&burned(
            700.0,
            vec![seen(ThrottleReason::HwPowerBrakeSlowdown, 30)],
        ))
        .clone();
        assert_eq!(x.status, Status::Fail);
        assert!(x.fix.is_some());
    }

    #[test]
    fn software_thermal_under_load_warns_above_its_share() {
        // 300 samples: 30 is 10% (not above), 31 is above.
        let at = (300.0 * LOAD_SW_THERMAL_SHARE_WARN) as u32;
        let x = load(&burned(
            700.0,
            vec![seen(ThrottleReason::SwThermalSlowdown, at)],
        ))
        .clone();
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        assert!(x
            .message
            .contains("software thermal slowdown in 30 of the 300 samples"));
        let x = load(&burned(
            700.0,
            vec![seen(ThrottleReason::SwThermalSlowdown, at + 1)],
        ))
        .clone();
        assert_eq!(x.status, Status::Warn, "{}", x.message);
    }

    #[test]
    fn other_reasons_under_load_are_information() {
        let x = load(&burned(
            700.0,
            vec![seen(ThrottleReason::ApplicationsClocksSetting, 300)],
        ))
        .clone();
        assert_eq!(x.status, Status::Info);
        assert!(x.message.contains("see clocks.max"));
        let x = load(&burned(700.0, vec![seen(ThrottleReason::SyncBoost, 300)])).clone();
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message.contains("sync_boost in 300 of the 300"),
            "{}",
            x.message
        );
        let x = load(&burned(700.0, vec![seen(ThrottleReason::GpuIdle, 300)])).clone();
        assert_eq!(x.status, Status::Pass);
    }

    #[test]
    fn without_telemetry_or_a_burn_there_is_no_verdict_under_load() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                let mut b = burn_gpu(700.0, "aa", vec![]);
                b.telemetry = Reading::unavailable("NVML not loaded");
                m.burn = Reading::Value(Burn {
                    seconds: 60.0,
                    dtype: GemmDtype::Bf16,
                    size: 8192,
                    per_gpu: vec![OnGpu::new(0, Reading::Value(b))],
                })
            })
            .build();
        let out = run(&f);
        let x = load(&out);
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("NVML not loaded"));
        // A quick audit (no burn) or a GPU the burn left out: the reading only.
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        assert_eq!(run(&f).len(), 1);
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                m.burn = Reading::Value(Burn {
                    seconds: 60.0,
                    dtype: GemmDtype::Bf16,
                    size: 8192,
                    per_gpu: vec![OnGpu::new(1, Reading::unavailable("busy"))],
                })
            })
            .build();
        assert_eq!(run(&f).len(), 2);
    }

    #[test]
    fn power_bound_at_default_for_stability_burn() {
        let judge = |limit: f64, seen: Vec<ThrottleSeen>| {
            let f = Machine::healthy("h200-sxm-141gb", 1)
                .gpu(0, |g| g.power.limit_w = Reading::Value(limit))
                .build();
            let b = burn_gpu(700.0, "aa", seen);
            let t = b.telemetry.value().cloned().unwrap();
            power_bound_at_default(&f.gpu_list()[0], &t)
        };
        let half = (300.0 * POWER_BOUND_SHARE) as u32;
        assert!(judge(700.0, vec![seen(ThrottleReason::SwPowerCap, half)]));
        assert!(!judge(
            700.0,
            vec![seen(ThrottleReason::SwPowerCap, half - 1)]
        ));
        // Capped below the default: power.limit's finding, not "as designed".
        assert!(!judge(500.0, vec![seen(ThrottleReason::SwPowerCap, 300)]));
        // A hardware reason listed with no sample is no reason.
        assert!(judge(
            700.0,
            vec![
                seen(ThrottleReason::SwPowerCap, 300),
                seen(ThrottleReason::HwSlowdown, 0)
            ]
        ));
        // A hardware reason in any sample, or too much thermal slowdown: not just power.
        assert!(!judge(
            700.0,
            vec![
                seen(ThrottleReason::SwPowerCap, 300),
                seen(ThrottleReason::HwSlowdown, 1)
            ]
        ));
        let thermal = (300.0 * LOAD_SW_THERMAL_SHARE_WARN) as u32;
        assert!(judge(
            700.0,
            vec![
                seen(ThrottleReason::SwPowerCap, 300),
                seen(ThrottleReason::SwThermalSlowdown, thermal)
            ]
        ));
        assert!(!judge(
            700.0,
            vec![
                seen(ThrottleReason::SwPowerCap, 300),
                seen(ThrottleReason::SwThermalSlowdown, thermal + 1)
            ]
        ));
    }

    #[test]
    fn the_explain_text_carries_the_thresholds() {
        for t in [POWER_CAP_DRAW_AT_LIMIT, LOAD_SW_THERMAL_SHARE_WARN] {
            assert!(CHECK.doc.what.contains(&format!("{:.0}%", t * 100.0)));
        }
    }
}
