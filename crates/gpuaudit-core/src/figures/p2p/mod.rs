//! GPU to GPU (p2p.bandwidth): each pair one way and both ways, its latency, and one GPU to
//! all others and back (nvbandwidth's patterns).

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::p2p_expected;
use crate::facts::{Facts, Measurement, PatternKind};
use crate::reading::Reading;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum P2pFigure {
    Bandwidth,
    Latency,
    Bidirectional,
    OneToAll,
    AllToOne,
}

impl P2pFigure {
    pub const ALL: [P2pFigure; 5] = [
        P2pFigure::Bandwidth,
        P2pFigure::Latency,
        P2pFigure::Bidirectional,
        P2pFigure::OneToAll,
        P2pFigure::AllToOne,
    ];

    pub fn spec(self) -> FigureSpec {
        let gb = Unit::GigabytesPerSecond;
        let p = FigureSpec::perf;
        match self {
            P2pFigure::Bandwidth => p("p2p_bandwidth", "GPU→GPU copy (P2P)", gb),
            P2pFigure::Latency => FigureSpec::latency(
                "p2p_latency_us",
                "GPU→GPU 4-byte latency",
                Unit::Microseconds,
            ),
            P2pFigure::Bidirectional => p("p2p_bidir_bandwidth", "GPU↔GPU both ways", gb),
            P2pFigure::OneToAll => p("p2p_one_to_all_bandwidth", "one GPU → all others", gb),
            P2pFigure::AllToOne => p("p2p_all_to_one_bandwidth", "all others → one GPU", gb),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(p) = &facts.measured.p2p else {
        return Vec::new();
    };
    let f = Figure::P2p;
    let mut out = Vec::new();
    for x in &p.pairs {
        let exp = p2p_expected(facts, x.src, x.dst).map(|e| e.0);
        if let Reading::Value(v) = x.gbps {
            out.push(Measurement {
                gpu: Some(x.src),
                peer: Some(x.dst),
                size_bytes: Some(p.size_bytes),
                ..measurement(
                    f(P2pFigure::Bandwidth),
                    v,
                    exp,
                    "cuMemcpyPeerAsync on the source GPU's stream, peer access enabled \
                     where possible, timed with CUDA events; expected: the link's \
                     one-direction rate",
                )
            });
        }
        if let Reading::Value(v) = x.latency_us {
            out.push(Measurement {
                gpu: Some(x.src),
                peer: Some(x.dst),
                size_bytes: Some(4),
                ..measurement(
                    f(P2pFigure::Latency),
                    v,
                    None,
                    "back-to-back 4-byte cuMemcpyPeerAsync, event time per copy",
                )
            });
        }
    }
    for b in &p.bidirectional {
        if let Reading::Value(v) = b.gbps {
            let exp = p2p_expected(facts, b.a, b.b).map(|e| 2.0 * e.0);
            out.push(Measurement {
                gpu: Some(b.a),
                peer: Some(b.b),
                size_bytes: Some(p.size_bytes),
                ..measurement(
                    f(P2pFigure::Bidirectional),
                    v,
                    exp,
                    "copies both ways at once, one stream per GPU, from a common start \
                     event to the later end",
                )
            });
        }
    }
    for t in &p.patterns {
        if let Reading::Value(v) = t.gbps {
            let how = format!(
                "cuMemcpyPeerAsync (copy engines) {} GPUs {} at once, each copy on its own \
                 stream, all bytes over the time from one start event to the last end, \
                 every copy's data verified (nvbandwidth's {}_memcpy_ce); judged against \
                 the pattern's fastest single pair",
                match t.kind {
                    PatternKind::OneToAll => "from this GPU to",
                    PatternKind::AllToOne => "into this GPU from",
                },
                t.peers
                    .iter()
                    .map(|g| g.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                t.kind.label()
            );
            let figure = match t.kind {
                PatternKind::OneToAll => P2pFigure::OneToAll,
                PatternKind::AllToOne => P2pFigure::AllToOne,
            };
            out.push(Measurement {
                gpu: Some(t.gpu),
                size_bytes: Some(t.size_bytes),
                ..measurement(f(figure), v, None, how)
            });
        }
    }
    out
}
