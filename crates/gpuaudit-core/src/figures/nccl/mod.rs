//! The all-reduce across the machine's GPUs (nccl.allreduce).

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::allreduce_expected;
use crate::facts::{Facts, Measurement};
use crate::reading::Reading;
use crate::units::MIB;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NcclFigure {
    /// Bus bandwidth at the largest message, and at 1 MiB (`size_bytes` tells them apart).
    AllreduceBusbw,
    /// The 1 MiB all-reduce's time.
    AllreduceLatency,
}

impl NcclFigure {
    pub const ALL: [NcclFigure; 2] = [NcclFigure::AllreduceBusbw, NcclFigure::AllreduceLatency];

    pub fn spec(self) -> FigureSpec {
        match self {
            NcclFigure::AllreduceBusbw => FigureSpec::perf(
                "allreduce_busbw",
                "all-reduce bus bandwidth, {size}",
                Unit::GigabytesPerSecond,
            ),
            NcclFigure::AllreduceLatency => FigureSpec::latency(
                "allreduce_latency_us",
                "all-reduce time, {size}",
                Unit::Microseconds,
            ),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(a) = &facts.measured.nccl else {
        return Vec::new();
    };
    let expected = allreduce_expected(facts, &a.gpus).map(|e| e.0);
    let how = format!(
        "NCCL{} all-reduce, float32 sum, out of place, {} GPUs in one process, slowest \
         GPU's event time; busbw = algbw x 2(n-1)/n (nccl-tests)",
        a.nccl_version
            .as_ref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        a.gpus.len()
    );
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for (i, pt) in [a.largest(), a.at(MIB)].into_iter().enumerate() {
        let Some(pt) = pt else { continue };
        if seen.contains(&pt.size_bytes) {
            continue;
        }
        seen.push(pt.size_bytes);
        // The topology's figure is what large messages reach (nccl.allreduce judges
        // those); a 1 MiB all-reduce is bound by latency, so it has no expectation.
        let exp = if i == 0 { expected } else { None };
        out.push(Measurement {
            size_bytes: Some(pt.size_bytes),
            ..measurement(
                Figure::Nccl(NcclFigure::AllreduceBusbw),
                pt.busbw_gbps,
                exp,
                how.clone(),
            )
        });
    }
    if let Some(pt) = a.at(MIB) {
        out.push(Measurement {
            size_bytes: Some(MIB),
            ..measurement(
                Figure::Nccl(NcclFigure::AllreduceLatency),
                pt.time_us,
                None,
                how,
            )
        });
    }
    out
}
