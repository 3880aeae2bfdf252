//! stability.burn: a sustained GEMM load on every GPU at once: steadiness, clocks, throttling,
//! results that agree.

use crate::checks::judge::{
    below_siblings, gpu_facts, group, label, model, per_gpu, percent, spec_of,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{median, Facts, ThrottleReason};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::units::figure;

const ID: &str = "stability.burn";

/// Coefficient of variation of the per-second TFLOPS above which the load is unsteady.
pub const CV_WARN: f64 = 0.05;
/// Last quarter against the first (TFLOPS, SM clock) below which it sagged.
pub const SAG_WARN: f64 = 0.90;
/// Share of the samples with software thermal slowdown above which it warns.
pub const SW_THERMAL_SHARE_WARN: f64 = 0.10;
/// Share of the samples at the software power cap above which the finding notes "held at its
/// power limit".
pub const POWER_CAP_SHARE_NOTE: f64 = 0.5;
/// An enforced power limit within this many watts of the default counts as the default (NVML
/// reports limits in milliwatts; drivers round a default of 700 W to 699.99).
pub const LIMIT_TOLERANCE_W: f64 = 1.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "sustained GEMM load: steadiness, clocks, throttling, result correctness",
    looks_at: "sustained load: TFLOPS steadiness, clocks, power, temperature, throttle reasons, \
               result correctness across GPUs",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "With --full (or `gpuaudit burn`): the same seeded GEMM on every GPU at once \
               for 60 s, TFLOPS per second, NVML sampled 5 times a second (SM clock, power, \
               temperature, each throttle reason on its own). Fails on results that change \
               between identical GEMMs or differ from the other GPUs', or fail a CPU check, \
               and on a GPU below 70% of its siblings; warns on TFLOPS varying more than 5% \
               (coefficient of variation), or TFLOPS or SM clock ending more than 10% below \
               where they started. An SM clock that settles where the default power limit \
               holds it is no sag: every H100 and H200 runs dense GEMM at its power limit. \
               The throttle reasons of the samples are clocks.throttle's to judge; this \
               finding names hardware slowdown, hardware thermal and power-brake \
               throttling, software thermal slowdown in more than 10% of the samples, and \
               the software power cap in more than 50% of the samples at the default limit \
               (or below it, pointing at power.limit).",
        why: "A GPU that passes a short test can still throttle after a minute of real \
              load (cooling, power delivery) or compute wrong results (a failing chip): \
              the first costs hours of training time, the second silently corrupts it.",
        verify: "nvidia-smi dmon -s pucv -c 70 &   # power, utilisation, clocks, violations, each second\n\
                 python3 - <<'EOF'\n\
                 # 60 s of bf16 GEMMs on GPU 0 (gpu-burn does the same on every GPU)\n\
                 import time, torch\n\
                 a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)\n\
                 c = torch.empty_like(a)\n\
                 end = time.time() + 60\n\
                 while time.time() < end:\n\
                 \x20   torch.mm(a, a, out=c)\n\
                 \x20   torch.cuda.synchronize()\n\
                 EOF\n\
                 nvidia-smi -q -d PERFORMANCE   # the clock event reasons seen",
        fix: "Hardware slowdown or thermal throttling: check airflow, fans, inlet \
              temperature and power cabling; on a cloud instance report the GPU (serial \
              number) to the provider. Wrong results: drain the GPU and have it replaced.",
    },
    profiles: &[],
    run: check_burn,
};

/// What being held at the power limit under load means for this GPU. At the default (or, where that is unknown, the datasheet
/// TDP) it is what dense GEMM does on every H100/H200; below it, the owner or provider set a
/// lower limit, which power.limit judges.
fn power_cap_note(facts: &Facts, gpu: u32) -> String {
    let power = gpu_facts(facts, gpu).map(|g| &g.power);
    let limit = power.and_then(|p| p.limit_w.value().copied());
    let default = power
        .and_then(|p| p.default_limit_w.value().copied())
        .or_else(|| spec_of(facts, gpu).and_then(|s| s.tdp_w));
    match (limit, default) {
        (Some(l), Some(d)) if l < d - LIMIT_TOLERANCE_W => format!(
            "held at its power limit of {l:.0} W, below the default {d:.0} W (see power.limit)"
        ),
        (Some(l), Some(_)) => {
            format!("held at its default {l:.0} W power limit, expected under dense GEMM")
        }
        _ => "held at its power limit".into(),
    }
}

fn check_burn(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let b = match group(ID, facts, &facts.measured.burn) {
        Ok(b) => b,
        Err(f) => return f,
    };
    let medians: Vec<(u32, f64)> = b
        .per_gpu
        .iter()
        .filter_map(|g| Some((g.gpu, g.result.value()?.tflops_stats?.median)))
        .collect();
    // The checksum most self-consistent GPUs agree on, per model.
    let checksums: Vec<(u32, String)> = b
        .per_gpu
        .iter()
        .filter_map(|g| {
            let v = g.result.value()?;
            v.self_consistent.then(|| (g.gpu, v.checksum.clone()))
        })
        .collect();
    let odd_one_out = |gpu: u32, sum: &str| -> Option<Vec<u32>> {
        let m = model(facts, gpu);
        let same: Vec<&(u32, String)> = checksums
            .iter()
            .filter(|(g, _)| model(facts, *g) == m)
            .collect();
        if same.len() < 2 {
            return None;
        }
        let agree = same.iter().filter(|(_, s)| s == sum).count();
        let others: Vec<u32> = same
            .iter()
            .filter(|(g, s)| *g != gpu && s != sum)
            .map(|(g, _)| *g)
            .collect();
        // Wrong unless its result is the one most siblings share (with two GPUs that
        // disagree, both are flagged: neither can be trusted).
        let max_other = same
            .iter()
            .filter(|(_, s)| s != sum)
            .map(|(_, s)| same.iter().filter(|(_, t)| t == s).count())
            .max()
            .unwrap_or(0);
        (!others.is_empty() && agree <= max_other).then_some(others)
    };
    per_gpu(ID, policy, &b.per_gpu, |gpu, g| {
        let who = label(facts, gpu);
        let mut status = Status::Pass;
        let mut problems: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        let mut fix: Option<&str> = None;
        let Some(stats) = g.tflops_stats else {
            return Finding::skip(ID, format!("{who}: no full second of load was measured"))
                .gpu(gpu);
        };
        let mut msg = format!(
            "{who}: {} TFLOPS median over {:.0} s of {} GEMMs (min {}, max {})",
            figure(stats.median),
            b.seconds,
            b.dtype.as_str(),
            figure(stats.min),
            figure(stats.max)
        );
        if let Some(cv) = g.tflops_cv {
            if cv > CV_WARN {
                status = status.max(Status::Warn);
                problems.push(format!(
                    "TFLOPS vary by {:.1}% (coefficient of variation; above {} warns)",
                    cv * 100.0,
                    percent(CV_WARN)
                ));
                fix.get_or_insert(
                    "Watch clocks, power and temperature under load (nvidia-smi dmon -s pucv).",
                );
            }
        }
        let q = (g.tflops.len() / 4).max(1);
        if g.tflops.len() >= 4 {
            if let (Some(first), Some(last)) = (
                median(&g.tflops[..q]),
                median(&g.tflops[g.tflops.len() - q..]),
            ) {
                if first > 0.0 && last / first < SAG_WARN {
                    status = status.max(Status::Warn);
                    problems.push(format!(
                        "TFLOPS fell {:.0}% from the first to the last quarter",
                        (1.0 - last / first) * 100.0
                    ));
                    fix.get_or_insert("Check cooling: the GPU slows down as it heats.");
                }
            }
        }
        if let Some(med) = below_siblings(facts, gpu, stats.median, &medians) {
            status = Status::Fail;
            problems.push(format!(
                "{:.0}% below the median of the same GPUs here ({} TFLOPS)",
                (1.0 - stats.median / med) * 100.0,
                figure(med)
            ));
            fix.get_or_insert("Compare this GPU's clocks, power and temperature with the others.");
        }
        match &g.telemetry {
            Reading::Value(t) => {
                // The reasons are clocks.throttle's to judge (its "under load" finding): here
                // they are evidence beside the figures, so that one cause is one finding.
                for seen in &t.throttle {
                    let share = seen.samples as f64 / t.samples.max(1) as f64;
                    if seen.reason.is_hardware_fault()
                        || (seen.reason == ThrottleReason::SwThermalSlowdown
                            && share > SW_THERMAL_SHARE_WARN)
                    {
                        notes.push(format!(
                            "{} in {} of {} samples, see clocks.throttle",
                            seen.reason.name(),
                            seen.samples,
                            t.samples
                        ));
                    } else if seen.reason == ThrottleReason::SwPowerCap
                        && share > POWER_CAP_SHARE_NOTE
                    {
                        notes.push(power_cap_note(facts, gpu));
                    }
                }
                // A GPU held by the software power cap at its default limit settles its SM
                // clock where the limit holds it as it warms: expected, not a sag.
                let power_bound = gpu_facts(facts, gpu).is_some_and(|gf| {
                    crate::checks::clocks::throttle::power_bound_at_default(gf, t)
                });
                if let (Some(first), Some(last)) = (t.sm_clock_first_mhz, t.sm_clock_last_mhz) {
                    if first > 0.0 && last / first < SAG_WARN && !power_bound {
                        status = status.max(Status::Warn);
                        problems.push(format!(
                            "SM clock fell from {first:.0} to {last:.0} MHz during the run"
                        ));
                        fix.get_or_insert("Check cooling and power delivery.");
                    }
                }
                if let Some(c) = t.sm_clock_mhz {
                    notes.push(format!("SM clock {:.0} MHz median", c.median));
                }
                if let Some(p) = t.power_w {
                    notes.push(format!("{:.0} W", p.median));
                }
                if let Some(tc) = t.temperature_c {
                    notes.push(format!("up to {:.0} °C", tc.max));
                }
            }
            Reading::Unavailable(why) => notes.push(format!("no NVML telemetry ({why})")),
        }
        if !g.self_consistent {
            status = Status::Fail;
            problems.push("identical GEMMs gave different results during the run".into());
            fix = Some("The GPU computes inconsistently: drain it and have it replaced.");
        } else if let Some(others) = odd_one_out(gpu, &g.checksum) {
            status = Status::Fail;
            problems.push(format!(
                "its results differ from GPU {}'s on the same inputs",
                others
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            fix = Some("GPUs disagree on identical work: rerun; if it repeats, drain the GPU whose result stands alone and have it replaced.");
        }
        if !g.verified {
            status = Status::Fail;
            problems.push(format!(
                "results wrong against the CPU (error {:.1e}, limit {:.0e})",
                g.max_error, g.tolerance
            ));
            fix = Some("The GPU computes wrong results under load: drain it and have it replaced.");
        }
        if !notes.is_empty() {
            msg.push_str(&format!(" ({})", notes.join(", ")));
        }
        if !problems.is_empty() {
            msg.push_str("; ");
            msg.push_str(&problems.join("; "));
        }
        let mut f = Finding::new(ID, status, msg)
            .gpu(gpu)
            .with("tflops", stats)
            .with("tflops_cv", g.tflops_cv)
            .with("checksum", &g.checksum)
            .with("self_consistent", g.self_consistent)
            .with("max_error", g.max_error)
            .with("telemetry", &g.telemetry);
        if let Some(x) = fix {
            f = f.fix(x);
        }
        f
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::measured::*;
    use crate::testing::Machine;

    #[test]
    fn quick_audit_says_to_run_full() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        f.measured.burn = Reading::unavailable("quick audit: run with --full (or gpuaudit burn)");
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Skip);
        assert!(out[0].message.contains("--full"));
    }

    #[test]
    fn burn_throttling_and_disagreeing_results() {
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        let cap = ThrottleSeen {
            reason: ThrottleReason::SwPowerCap,
            samples: 280,
        };
        let hw = ThrottleSeen {
            reason: ThrottleReason::HwSlowdown,
            samples: 3,
        };
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(burn_gpu(700.0, "aa", vec![cap.clone()]))),
                OnGpu::new(1, Reading::Value(burn_gpu(700.0, "aa", vec![cap, hw]))),
                OnGpu::new(2, Reading::Value(burn_gpu(700.0, "bb", vec![]))),
            ],
        });
        let out = (CHECK.run)(&f, &Policy::default());
        let g0 = out.iter().find(|x| x.gpu == Some(0)).unwrap();
        assert_eq!(g0.status, Status::Pass, "{}", g0.message);
        assert!(
            g0.message.contains("held at its default 700 W power limit"),
            "{}",
            g0.message
        );
        // The hardware reason is clocks.throttle's verdict; here it is named beside the figures.
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Pass, "{}", g1.message);
        assert!(
            g1.message
                .contains("hw_slowdown in 3 of 300 samples, see clocks.throttle"),
            "{}",
            g1.message
        );
        let g2 = out.iter().find(|x| x.gpu == Some(2)).unwrap();
        assert_eq!(g2.status, Status::Fail);
        assert!(
            g2.message.contains("differ from GPU 0, 1"),
            "{}",
            g2.message
        );
    }

    #[test]
    fn burn_unsteady_warns_and_two_disagreeing_gpus_both_fail() {
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|_| {})
            .build();
        let mut shaky = burn_gpu(700.0, "aa", vec![]);
        shaky.tflops = (0..60)
            .map(|i| if i % 2 == 0 { 600.0 } else { 800.0 })
            .collect();
        shaky.tflops_cv = coefficient_of_variation(&shaky.tflops);
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![OnGpu::new(0, Reading::Value(shaky))],
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(out[0].status, Status::Warn, "{}", out[0].message);
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(burn_gpu(700.0, "aa", vec![]))),
                OnGpu::new(1, Reading::Value(burn_gpu(700.0, "bb", vec![]))),
            ],
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert!(out.iter().all(|x| x.status == Status::Fail), "{out:?}");
    }

    fn judged(g: BurnGpu, facts: Facts) -> Finding {
        let mut f = facts;
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![OnGpu::new(0, Reading::Value(g))],
        });
        (CHECK.run)(&f, &Policy::default()).remove(0)
    }

    fn h200() -> Facts {
        Machine::healthy("h200-sxm-141gb", 1)
            .measured(|_| {})
            .build()
    }

    fn seen(reason: ThrottleReason, samples: u32) -> ThrottleSeen {
        ThrottleSeen { reason, samples }
    }

    /// Defect 6: a healthy H200 at its default 700 W limit is held at that limit under dense
    /// GEMM; that is noted, never a warning. Below the default it is info, power.limit's to
    /// judge.
    #[test]
    fn the_power_cap_at_the_default_limit_is_expected() {
        let g = judged(
            burn_gpu(680.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 290)]),
            h200(),
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        assert!(
            g.message
                .contains("held at its default 700 W power limit, expected under dense GEMM"),
            "{}",
            g.message
        );
        // Within the tolerance of the default (NVML's 699.99 W) is the default.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.power.limit_w = Reading::Value(700.0 - LIMIT_TOLERANCE_W + 0.01)
            })
            .measured(|_| {})
            .build();
        let g = judged(
            burn_gpu(680.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 290)]),
            f,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        // A lowered limit: a note pointing at power.limit (clocks.throttle and power.limit
        // judge it).
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::Value(500.0))
            .measured(|_| {})
            .build();
        let g = judged(
            burn_gpu(500.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 290)]),
            f,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        assert!(
            g.message.contains(
                "held at its power limit of 500 W, below the default 700 W (see power.limit)"
            ),
            "{}",
            g.message
        );
        // Limits unread: the datasheet TDP stands for the default; nothing read at all: a note.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.power.default_limit_w = Reading::unavailable("x");
                g.power.limit_w = Reading::Value(600.0);
            })
            .measured(|_| {})
            .build();
        let g = judged(
            burn_gpu(600.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 290)]),
            f,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::unavailable("x"))
            .measured(|_| {})
            .build();
        let g = judged(
            burn_gpu(600.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 290)]),
            f,
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        assert!(
            g.message.contains("(held at its power limit,"),
            "{}",
            g.message
        );
        // In half the samples or fewer: not even a note.
        let g = judged(
            burn_gpu(680.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 150)]),
            h200(),
        );
        assert!(!g.message.contains("power limit"), "{}", g.message);
        let g = judged(
            burn_gpu(680.0, "aa", vec![seen(ThrottleReason::SwPowerCap, 151)]),
            h200(),
        );
        assert!(g.message.contains("power limit"), "{}", g.message);
    }

    /// The throttle reasons are clocks.throttle's verdict: here the faults are named (with the
    /// count) and change nothing, the harmless reasons are not named at all.
    #[test]
    fn throttle_reasons_are_named_for_clocks_throttle() {
        for r in [
            ThrottleReason::HwSlowdown,
            ThrottleReason::HwThermalSlowdown,
            ThrottleReason::HwPowerBrakeSlowdown,
        ] {
            let g = judged(burn_gpu(680.0, "aa", vec![seen(r, 1)]), h200());
            assert_eq!(g.status, Status::Pass, "{}", g.message);
            assert!(
                g.message.contains(&format!(
                    "{} in 1 of 300 samples, see clocks.throttle",
                    r.name()
                )),
                "{}",
                g.message
            );
        }
        for r in [
            ThrottleReason::ApplicationsClocksSetting,
            ThrottleReason::SyncBoost,
            ThrottleReason::DisplayClocksSetting,
            ThrottleReason::GpuIdle,
        ] {
            let g = judged(burn_gpu(680.0, "aa", vec![seen(r, 300)]), h200());
            assert_eq!(g.status, Status::Pass, "{}: {}", r.name(), g.message);
            assert!(!g.message.contains(r.name()), "{}", g.message);
        }
        // Software thermal slowdown is named in more than 10% of the samples.
        let g = judged(
            burn_gpu(
                680.0,
                "aa",
                vec![seen(ThrottleReason::SwThermalSlowdown, 30)],
            ),
            h200(),
        );
        assert!(!g.message.contains("sw_thermal"), "{}", g.message);
        let g = judged(
            burn_gpu(
                680.0,
                "aa",
                vec![seen(ThrottleReason::SwThermalSlowdown, 31)],
            ),
            h200(),
        );
        assert_eq!(g.status, Status::Pass, "{}", g.message);
        assert!(
            g.message
                .contains("in 31 of 300 samples, see clocks.throttle"),
            "{}",
            g.message
        );
    }

    /// An SM clock that settles under the software power cap at the default limit is no sag;
    /// the same fall at a lowered limit, or with a hardware reason, still warns.
    #[test]
    fn a_power_bound_clock_is_no_sag() {
        let sagged = |reasons: Vec<ThrottleSeen>| {
            let mut g = burn_gpu(680.0, "aa", reasons);
            if let Reading::Value(t) = &mut g.telemetry {
                t.sm_clock_last_mhz = Some(1755.0 * 0.85);
            }
            g
        };
        let cap = || seen(ThrottleReason::SwPowerCap, 290);
        assert_eq!(judged(sagged(vec![cap()]), h200()).status, Status::Pass);
        assert_eq!(judged(sagged(vec![]), h200()).status, Status::Warn);
        let hw = seen(ThrottleReason::HwSlowdown, 1);
        assert_eq!(judged(sagged(vec![cap(), hw]), h200()).status, Status::Warn);
        let lowered = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::Value(500.0))
            .measured(|_| {})
            .build();
        assert_eq!(judged(sagged(vec![cap()]), lowered).status, Status::Warn);
    }

    #[test]
    fn steadiness_and_sag_on_both_sides() {
        // Coefficient of variation just under and over 5%.
        for (cv, want) in [
            (CV_WARN - 0.001, Status::Pass),
            (CV_WARN + 0.001, Status::Warn),
        ] {
            let mut g = burn_gpu(680.0, "aa", vec![]);
            g.tflops_cv = Some(cv);
            assert_eq!(judged(g, h200()).status, want, "{cv}");
        }
        // TFLOPS: the last quarter against the first.
        for (last, want) in [(0.91, Status::Pass), (0.89, Status::Warn)] {
            let mut g = burn_gpu(680.0, "aa", vec![]);
            g.tflops = (0..60)
                .map(|i| if i < 45 { 700.0 } else { 700.0 * last })
                .collect();
            g.tflops_cv = None;
            let f = judged(g, h200());
            assert_eq!(f.status, want, "{last}: {}", f.message);
        }
        // SM clock: first quarter against the last.
        for (last, want) in [(1755.0 * 0.91, Status::Pass), (1755.0 * 0.89, Status::Warn)] {
            let mut g = burn_gpu(680.0, "aa", vec![]);
            if let Reading::Value(t) = &mut g.telemetry {
                t.sm_clock_last_mhz = Some(last);
            }
            let f = judged(g, h200());
            assert_eq!(f.status, want, "{last}: {}", f.message);
        }
    }

    #[test]
    fn wrong_or_inconsistent_results_fail() {
        let mut g = burn_gpu(680.0, "aa", vec![]);
        g.self_consistent = false;
        let f = judged(g, h200());
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.message.contains("identical GEMMs gave different results"),
            "{}",
            f.message
        );
        let mut g = burn_gpu(680.0, "aa", vec![]);
        g.verified = false;
        let f = judged(g, h200());
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.message.contains("results wrong against the CPU"),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_slow_sibling_fails() {
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: (0..3)
                .map(|i| {
                    let t = if i == 2 { 475.0 } else { 680.0 };
                    OnGpu::new(i, Reading::Value(burn_gpu(t, "aa", vec![])))
                })
                .collect(),
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(crate::testing::gpu_status(&out, 0), Status::Pass);
        // 475 < 0.70 x 680 = 476.
        assert_eq!(
            crate::testing::gpu_status(&out, 2),
            Status::Fail,
            "{}",
            out[2].message
        );
    }

    #[test]
    fn explain_gives_the_thresholds_the_code_uses() {
        let what = CHECK.doc.what;
        assert!(what.contains(&format!(
            "below {} of its siblings",
            percent(crate::checks::judge::SIBLING_FLOOR)
        )));
        assert!(what.contains(&format!(
            "more than {} of the samples",
            percent(SW_THERMAL_SHARE_WARN)
        )));
        assert!(what.contains(&format!("varying more than {}", percent(CV_WARN))));
        assert!(what.contains(&format!(
            "more than {} below where",
            percent(1.0 - SAG_WARN)
        )));
        assert!(what.contains(&format!(
            "more than {} of the samples at the default",
            percent(POWER_CAP_SHARE_NOTE)
        )));
    }

    #[test]
    fn sag_needs_four_windows() {
        let mut g = burn_gpu(680.0, "aa", vec![]);
        g.tflops = vec![700.0, 700.0, 700.0, 600.0];
        g.tflops_cv = None;
        let f = judged(g.clone(), h200());
        assert_eq!(f.status, Status::Warn, "{}", f.message);
        assert!(
            f.message
                .contains("TFLOPS fell 14% from the first to the last quarter"),
            "{}",
            f.message
        );
        g.tflops = vec![700.0, 700.0, 600.0];
        assert_eq!(judged(g, h200()).status, Status::Pass);
    }

    #[test]
    fn missing_load_or_telemetry_is_said() {
        let mut g = burn_gpu(680.0, "aa", vec![]);
        g.tflops_stats = None;
        let f = judged(g, h200());
        assert_eq!(f.status, Status::Skip);
        assert!(
            f.message.contains("no full second of load"),
            "{}",
            f.message
        );
        let mut g = burn_gpu(680.0, "aa", vec![]);
        g.telemetry = Reading::unavailable("NVML not loaded");
        let f = judged(g, h200());
        assert_eq!(f.status, Status::Pass);
        assert!(
            f.message.contains("(no NVML telemetry (NVML not loaded))"),
            "{}",
            f.message
        );
        let f = judged(burn_gpu(680.0, "aa", vec![]), h200());
        assert!(
            f.message
                .contains("(SM clock 1755 MHz median, 690 W, up to 70 °C)"),
            "{}",
            f.message
        );
    }

    /// Results are compared within a model: another model's different checksum is no fault,
    /// and a GPU that disagreed with itself is left out of the vote.
    #[test]
    fn checksums_are_compared_among_the_same_model() {
        let spec = crate::spec::SpecDb::embedded().by_key("l4").expect("known");
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| {
                g.name = Reading::Value(spec.nvml_names[0].clone());
                g.pci_device_id = Reading::Value(spec.pci_device_ids[0]);
                g.memory.total_mib = Reading::Value(23_034);
            })
            .measured(|_| {})
            .build();
        let mut f2 = f.clone();
        f2.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(burn_gpu(680.0, "aa", vec![]))),
                OnGpu::new(1, Reading::Value(burn_gpu(120.0, "bb", vec![]))),
            ],
        });
        let out = (CHECK.run)(&f2, &Policy::default());
        assert!(out.iter().all(|x| x.status == Status::Pass), "{out:?}");
        // Three H200s: the one that disagreed with itself does not outvote the others.
        let mut f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|_| {})
            .build();
        let mut shaky = burn_gpu(680.0, "bb", vec![]);
        shaky.self_consistent = false;
        f.measured.burn = Reading::Value(Burn {
            seconds: 60.0,
            dtype: GemmDtype::Bf16,
            size: 8192,
            per_gpu: vec![
                OnGpu::new(0, Reading::Value(shaky)),
                OnGpu::new(1, Reading::Value(burn_gpu(680.0, "aa", vec![]))),
                OnGpu::new(2, Reading::Value(burn_gpu(680.0, "aa", vec![]))),
            ],
        });
        let out = (CHECK.run)(&f, &Policy::default());
        assert_eq!(crate::testing::gpu_status(&out, 0), Status::Fail);
        assert_eq!(
            crate::testing::gpu_status(&out, 1),
            Status::Pass,
            "{}",
            out[1].message
        );
        assert_eq!(crate::testing::gpu_status(&out, 2), Status::Pass);
    }
}
