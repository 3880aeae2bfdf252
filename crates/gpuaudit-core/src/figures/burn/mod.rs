//! The sustained load (stability.burn): TFLOPS over time and NVML's readings meanwhile.

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Better, Figure, FigureSpec, Unit};
use crate::checks::judge::{gemm_expected, spec_of};
use crate::facts::{Facts, Measurement};
use crate::reading::Reading;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BurnFigure {
    /// Median TFLOPS over the windows (`dtype`).
    Tflops,
    /// Their coefficient of variation.
    TflopsCv,
    SmClock,
    Power,
    Temperature,
}

impl BurnFigure {
    pub const ALL: [BurnFigure; 5] = [
        BurnFigure::Tflops,
        BurnFigure::TflopsCv,
        BurnFigure::SmClock,
        BurnFigure::Power,
        BurnFigure::Temperature,
    ];

    pub fn spec(self) -> FigureSpec {
        match self {
            BurnFigure::Tflops => {
                FigureSpec::perf("burn_tflops", "burn {dtype}, median", Unit::Teraflops)
            }
            BurnFigure::TflopsCv => {
                FigureSpec::latency("burn_tflops_cv", "burn steadiness (CV)", Unit::Ratio)
            }
            // A lower clock under the same load is a throttle: a performance figure.
            BurnFigure::SmClock => FigureSpec::perf(
                "burn_sm_clock_mhz",
                "burn SM clock, median",
                Unit::Megahertz,
            ),
            BurnFigure::Power => FigureSpec::condition(
                "burn_power_w",
                "burn power, median",
                Unit::Watts,
                Better::Neither,
            ),
            BurnFigure::Temperature => FigureSpec::condition(
                "burn_temperature_c",
                "burn temperature, hottest",
                Unit::Celsius,
                Better::Lower,
            ),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(b) = &facts.measured.burn else {
        return Vec::new();
    };
    let f = Figure::Burn;
    let mut out = Vec::new();
    for g in &b.per_gpu {
        let Some(v) = g.result.value() else { continue };
        let gpu = Some(g.gpu);
        let how = format!(
            "{}x{} {} GEMM on every GPU at once for {:.0} s, TFLOPS per ~1 s window",
            b.size,
            b.size,
            b.dtype.as_str(),
            b.seconds
        );
        let spec = spec_of(facts, g.gpu);
        if let Some(s) = v.tflops_stats {
            let exp = spec.and_then(|sp| gemm_expected(sp, b.dtype));
            out.push(Measurement {
                gpu,
                dtype: Some(b.dtype.as_str().into()),
                // No attainable value: a GEMM's (data/attainable.toml) is a short run's, and a
                // healthy GPU's sustained burn reads well below it (the H200's 69% of the
                // datasheet against its GEMM's 82%), so it would hold every burn short.
                ..measurement(
                    f(BurnFigure::Tflops),
                    s.median,
                    exp,
                    format!("median; {how}"),
                )
            });
        }
        if let Some(cv) = v.tflops_cv {
            out.push(Measurement {
                gpu,
                ..measurement(
                    f(BurnFigure::TflopsCv),
                    cv,
                    None,
                    format!("coefficient of variation; {how}"),
                )
            });
        }
        if let Reading::Value(t) = &v.telemetry {
            let nv = format!("NVML every {} ms during the burn", t.interval_ms);
            if let Some(c) = t.sm_clock_mhz {
                let exp = spec.and_then(|s| s.boost_clock_mhz).map(f64::from);
                out.push(Measurement {
                    gpu,
                    ..measurement(
                        f(BurnFigure::SmClock),
                        c.median,
                        exp,
                        format!("median; {nv}; expected: the datasheet boost clock"),
                    )
                });
            }
            if let Some(p) = t.power_w {
                let exp = spec.and_then(|s| s.tdp_w);
                out.push(Measurement {
                    gpu,
                    ..measurement(
                        f(BurnFigure::Power),
                        p.median,
                        exp,
                        format!("median; {nv}; expected: the datasheet TDP"),
                    )
                });
            }
            if let Some(c) = t.temperature_c {
                out.push(Measurement {
                    gpu,
                    ..measurement(
                        f(BurnFigure::Temperature),
                        c.max,
                        None,
                        format!("maximum; {nv}"),
                    )
                });
            }
        }
    }
    out
}
