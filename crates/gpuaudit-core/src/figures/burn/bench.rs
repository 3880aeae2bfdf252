//! The group's tables in `gpuaudit bench`. The burn: per GPU, its TFLOPS, clocks, power, temperature and throttle reasons.

use super::super::bench::{f, not_measured, s, Table};
use super::result::*;
use super::BurnFigure;
use crate::reading::Reading;

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<Burn>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(b) => {
            let mut rows = vec![vec![
                s("GPU"),
                format!("{} median", BurnFigure::Tflops.spec().unit.display()),
                s("min"),
                s("max"),
                s("CV"),
                format!("SM {}", BurnFigure::SmClock.spec().unit.display()),
                s(BurnFigure::Power.spec().unit.display()),
                format!("max {}", BurnFigure::Temperature.spec().unit.display()),
                s("throttle reasons seen"),
                s("checksum"),
                s("verified"),
            ]];
            for g in &b.per_gpu {
                match &g.result {
                    Reading::Value(v) => {
                        let tel = v.telemetry.value();
                        rows.push(vec![
                            g.gpu.to_string(),
                            f(v.tflops_stats.map(|x| x.median)),
                            f(v.tflops_stats.map(|x| x.min)),
                            f(v.tflops_stats.map(|x| x.max)),
                            v.tflops_cv
                                .map(|c| format!("{:.1}%", c * 100.0))
                                .unwrap_or_else(|| s("-")),
                            f(tel.and_then(|t| t.sm_clock_mhz).map(|x| x.median)),
                            f(tel.and_then(|t| t.power_w).map(|x| x.median)),
                            f(tel.and_then(|t| t.temperature_c).map(|x| x.max)),
                            tel.map(|t| {
                                t.throttle
                                    .iter()
                                    .map(|x| format!("{} ({})", x.reason.name(), x.samples))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_else(|| s("-")),
                            v.checksum.clone(),
                            if v.verified && v.self_consistent {
                                s("yes")
                            } else {
                                s("NO")
                            },
                        ]);
                    }
                    Reading::Unavailable(r) => rows.push(vec![g.gpu.to_string(), r.clone()]),
                }
            }
            t.push((
                format!("Burn: {} GEMMs for {:.0} s", b.dtype.as_str(), b.seconds),
                rows,
            ));
        }
        Reading::Unavailable(r) => t.push(not_measured("Burn", r)),
    }
    t
}
