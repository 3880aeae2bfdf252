//! CUDA context creation (cuda.context-latency): each run a fresh process.

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::facts::{Facts, Measurement};
use crate::reading::Reading;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContextFigure {
    /// cuInit to the first allocation, median of the runs.
    Create,
    /// ... the slowest run.
    CreateMax,
    /// cuInit alone, median.
    CuInit,
}

impl ContextFigure {
    pub const ALL: [ContextFigure; 3] = [
        ContextFigure::Create,
        ContextFigure::CreateMax,
        ContextFigure::CuInit,
    ];

    pub fn spec(self) -> FigureSpec {
        let ms = Unit::Milliseconds;
        match self {
            ContextFigure::Create => {
                FigureSpec::latency("context_create_ms", "context creation, median", ms)
            }
            ContextFigure::CreateMax => {
                FigureSpec::latency("context_create_ms_max", "context creation, slowest", ms)
            }
            ContextFigure::CuInit => FigureSpec::latency("cuinit_ms", "cuInit, median", ms),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(c) = &facts.measured.context else {
        return Vec::new();
    };
    let how = format!(
        "cuInit + cuDevicePrimaryCtxRetain + cuCtxSetCurrent + first 1 MiB cuMemAlloc, a \
         fresh process each run, {} runs",
        c.runs
    );
    let f = Figure::Context;
    vec![
        measurement(
            f(ContextFigure::Create),
            c.total_ms.median,
            None,
            format!("median; {how}"),
        ),
        measurement(
            f(ContextFigure::CreateMax),
            c.total_ms.max,
            None,
            format!("maximum; {how}"),
        ),
        measurement(
            f(ContextFigure::CuInit),
            c.init_ms.median,
            None,
            format!("cuInit alone, median; {how}"),
        ),
    ]
}
