//! The loopback TCP round trip (net.loopback): the host's network stack alone.

pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::facts::{Facts, Measurement};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LoopbackFigure {
    RoundTrip,
    RoundTripP99,
}

impl LoopbackFigure {
    pub const ALL: [LoopbackFigure; 2] = [LoopbackFigure::RoundTrip, LoopbackFigure::RoundTripP99];

    pub fn spec(self) -> FigureSpec {
        match self {
            LoopbackFigure::RoundTrip => FigureSpec::latency(
                "loopback_round_trip_us",
                "loopback TCP round trip, median",
                Unit::Microseconds,
            ),
            LoopbackFigure::RoundTripP99 => FigureSpec::latency(
                "loopback_round_trip_us_p99",
                "loopback TCP round trip, p99",
                Unit::Microseconds,
            ),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Some(r) = facts.host.loopback.value() else {
        return Vec::new();
    };
    let how = |what: &str| format!("{what} of {} round trips; {}", r.round_trips, r.method);
    vec![
        measurement(
            Figure::Loopback(LoopbackFigure::RoundTrip),
            r.median_us,
            None,
            how("median"),
        ),
        measurement(
            Figure::Loopback(LoopbackFigure::RoundTripP99),
            r.p99_us,
            None,
            how("99th percentile"),
        ),
    ]
}
