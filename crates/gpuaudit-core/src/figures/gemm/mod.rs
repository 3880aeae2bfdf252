//! Dense GEMM throughput per dtype (compute.gemm).

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::{gemm_expected, spec_of};
use crate::facts::{Facts, Measurement};
use crate::reading::Reading;
use crate::spec::Attainable;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GemmFigure {
    /// One per dtype (`dtype`).
    Tflops,
}

impl GemmFigure {
    pub const ALL: [GemmFigure; 1] = [GemmFigure::Tflops];

    pub fn spec(self) -> FigureSpec {
        match self {
            GemmFigure::Tflops => FigureSpec::perf("gemm_tflops", "GEMM {dtype}", Unit::Teraflops),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(gemm) = &facts.measured.gemm else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in gemm {
        let Some(rs) = g.result.value() else { continue };
        let spec = spec_of(facts, g.gpu);
        for r in rs {
            let Some(p) = r.result.value() else { continue };
            let attainable = spec.and_then(|s| Attainable::embedded().gemm(s, r.dtype, p.m));
            let judged = match attainable {
                Some(a) => format!(
                    "judged against the {:.0}% of it healthy GPUs of this model reach at \
                     {}x{}x{} ({})",
                    a.fraction * 100.0,
                    a.size,
                    a.size,
                    a.size,
                    a.source
                ),
                None => "no attainable figure known for this model at this size: judged \
                         against the generic floor of the peak"
                    .to_string(),
            };
            let how = format!(
                "{}x{}x{} {} GEMM ({} layout) on random data via {}, best of {} batches of {} \
                 back-to-back GEMMs timed with events, output checked against the CPU; \
                 expected: the datasheet's dense peak; {judged}",
                p.m,
                p.n,
                p.k,
                r.dtype.as_str(),
                p.layout,
                p.library,
                p.batches.len(),
                p.repeats
            );
            let exp = spec.and_then(|s| gemm_expected(s, r.dtype));
            out.push(Measurement {
                gpu: Some(g.gpu),
                dtype: Some(r.dtype.as_str().into()),
                attainable: exp.zip(attainable).map(|(e, a)| e * a.fraction),
                ..measurement(Figure::Gemm(GemmFigure::Tflops), p.tflops, exp, how)
            });
        }
    }
    out
}
