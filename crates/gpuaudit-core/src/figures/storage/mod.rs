//! The data directories' throughput (storage.throughput): one figure per directory
//! measured (`path`).

pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::facts::{Facts, Measurement};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StorageFigure {
    SeqRead,
    SeqWrite,
    RandReadIops,
}

impl StorageFigure {
    pub const ALL: [StorageFigure; 3] = [
        StorageFigure::SeqRead,
        StorageFigure::SeqWrite,
        StorageFigure::RandReadIops,
    ];

    pub fn spec(self) -> FigureSpec {
        // Storage spreads with the tail of its file system (a shared NFS server, a cache
        // warm or cold): judged on a log scale.
        let long = |s: FigureSpec| FigureSpec {
            spread: super::Spread::LongTailed,
            ..s
        };
        match self {
            StorageFigure::SeqRead => long(FigureSpec::perf(
                "storage_seq_read_bandwidth",
                "data directory, sequential read",
                Unit::MegabytesPerSecond,
            )),
            StorageFigure::SeqWrite => long(FigureSpec::perf(
                "storage_seq_write_bandwidth",
                "data directory, sequential write",
                Unit::MegabytesPerSecond,
            )),
            StorageFigure::RandReadIops => long(FigureSpec::perf(
                "storage_rand_read_iops",
                "data directory, 4 KiB random reads",
                Unit::PerSecond,
            )),
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Some(dirs) = facts.host.throughput.value() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in dirs {
        let Some(r) = d.result.value() else { continue };
        for (figure, value, what) in [
            (
                StorageFigure::SeqRead,
                r.seq_read_mb_s,
                "sequential read, MB/s (10^6 bytes)",
            ),
            (
                StorageFigure::SeqWrite,
                r.seq_write_mb_s,
                "sequential write including the final fsync, MB/s (10^6 bytes)",
            ),
            (
                StorageFigure::RandReadIops,
                r.rand_read_iops,
                "4 KiB random reads at queue depth 1, per second",
            ),
        ] {
            out.push(Measurement {
                path: Some(d.path.clone()),
                size_bytes: Some(r.file_bytes),
                ..measurement(
                    Figure::Storage(figure),
                    value,
                    None,
                    format!(
                        "{what}; {}{}",
                        r.method,
                        if r.direct {
                            ""
                        } else {
                            " (buffered: O_DIRECT refused)"
                        }
                    ),
                )
            });
        }
    }
    out
}
