//! stability.burn: a sustained GEMM load on every GPU at once: steadiness, clocks, throttling,
//! results that agree.

use crate::checks::judge::{below_siblings, group, label, model, per_gpu};
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

pub const CHECK: Check = Check {
    id: ID,
    title: "sustained GEMM load: steadiness, clocks, throttling, result correctness",
    looks_at: "sustained load: TFLOPS steadiness, clocks, power, temperature, throttle reasons, \
               result correctness across GPUs",
    kind: CheckKind::Measured,
    doc: CheckDoc {
        what: "With --full (or `gpuaudit burn`): the same seeded GEMM on every GPU at once \
               for 60 s, TFLOPS per second, NVML sampled 5 times a second (SM clock, power, \
               temperature, each throttle reason on its own). Fails on hardware slowdown, \
               hardware thermal or power-brake throttling, on results that change between \
               identical GEMMs or differ from the other GPUs', or fail a CPU check, and on \
               a GPU below 70% of its siblings; warns on software thermal slowdown, TFLOPS \
               varying more than 5% (coefficient of variation), or TFLOPS or SM clock \
               ending more than 10% below where they started.",
        why: "A GPU that passes a short test can still throttle after a minute of real \
              load (cooling, power delivery) or compute wrong results (a failing chip): \
              the first costs hours of training time, the second silently corrupts it.",
        verify: "Run a long GEMM loop (or gpu-burn) while watching `nvidia-smi dmon -s pucv` \
                 and `nvidia-smi -q -d PERFORMANCE` (clock event reasons).",
        fix: "Hardware slowdown or thermal throttling: check airflow, fans, inlet \
              temperature and power cabling; on a cloud instance report the GPU (serial \
              number) to the provider. Wrong results: drain the GPU and have it replaced.",
    },
    profiles: &[],
    run: check_burn,
};

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
                    "TFLOPS vary by {:.1}% (coefficient of variation)",
                    cv * 100.0
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
                for seen in &t.throttle {
                    let share = seen.samples as f64 / t.samples.max(1) as f64;
                    if seen.reason.is_hardware_fault() {
                        status = Status::Fail;
                        problems.push(format!(
                            "{} in {:.0}% of the samples",
                            seen.reason.name(),
                            share * 100.0
                        ));
                        fix = Some(
                            "Hardware slowdown under load: check airflow, fans, inlet \
                             temperature and power cabling; on a cloud instance report the GPU \
                             (serial number) to the provider.",
                        );
                    } else if seen.reason == ThrottleReason::SwThermalSlowdown
                        && share > SW_THERMAL_SHARE_WARN
                    {
                        status = status.max(Status::Warn);
                        problems.push(format!(
                            "software thermal slowdown in {:.0}% of the samples",
                            share * 100.0
                        ));
                        fix.get_or_insert(
                            "Check cooling: the GPU reaches its slowdown temperature under load.",
                        );
                    } else if seen.reason == ThrottleReason::SwPowerCap
                        && share > POWER_CAP_SHARE_NOTE
                    {
                        notes.push("held at its power limit".into());
                    }
                }
                if let (Some(first), Some(last)) = (t.sm_clock_first_mhz, t.sm_clock_last_mhz) {
                    if first > 0.0 && last / first < SAG_WARN {
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
                    notes.push(format!("up to {:.0} C", tc.max));
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
            g0.message.contains("held at its power limit"),
            "{}",
            g0.message
        );
        let g1 = out.iter().find(|x| x.gpu == Some(1)).unwrap();
        assert_eq!(g1.status, Status::Fail);
        assert!(g1.message.contains("hw_slowdown"), "{}", g1.message);
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
}
