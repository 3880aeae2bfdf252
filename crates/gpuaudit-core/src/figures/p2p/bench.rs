//! The group's tables in `gpuaudit bench`. GPU <-> GPU: the matrices of bandwidth, both ways, latency and peer access, and the one-to-all patterns.

use super::super::bench::{cell, not_measured, s, Table};
use super::result::*;
use super::P2pFigure;
use crate::reading::Reading;
use crate::units::{bytes, figure};

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<P2pMatrix>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(p) => {
            let header: Vec<String> = std::iter::once(s("src \\ dst"))
                .chain(p.gpus.iter().map(|g| format!("GPU {g}")))
                .collect();
            let matrix = |val: &dyn Fn(u32, u32) -> String| -> Vec<Vec<String>> {
                let mut rows = vec![header.clone()];
                for &a in &p.gpus {
                    let mut row = vec![format!("GPU {a}")];
                    for &b in &p.gpus {
                        row.push(if a == b { s("X") } else { val(a, b) });
                    }
                    rows.push(row);
                }
                rows
            };
            t.push((
                format!(
                    "GPU -> GPU one direction, {} ({})",
                    P2pFigure::Bandwidth.spec().unit.display(),
                    bytes(p.size_bytes)
                ),
                matrix(&|a, b| {
                    p.pair(a, b)
                        .map(|x| cell(&x.gbps.as_ref().map(|v| figure(*v))))
                        .unwrap_or_else(|| s("-"))
                }),
            ));
            t.push((
                format!(
                    "GPU <-> GPU both directions at once, {}",
                    P2pFigure::Bidirectional.spec().unit.display()
                ),
                matrix(&|a, b| {
                    p.bidirectional
                        .iter()
                        .find(|x| (x.a == a && x.b == b) || (x.a == b && x.b == a))
                        .map(|x| cell(&x.gbps.as_ref().map(|v| figure(*v))))
                        .unwrap_or_else(|| s("-"))
                }),
            ));
            t.push((
                format!(
                    "GPU -> GPU 4-byte copy, {}",
                    P2pFigure::Latency.spec().unit.display()
                ),
                matrix(&|a, b| {
                    p.pair(a, b)
                        .map(|x| cell(&x.latency_us.as_ref().map(|v| figure(*v))))
                        .unwrap_or_else(|| s("-"))
                }),
            ));
            if !p.patterns.is_empty() {
                let mut rows = vec![vec![s("GPU"), s("one to all"), s("all to one")]];
                for &g in &p.gpus {
                    let of = |k: PatternKind| {
                        p.patterns
                            .iter()
                            .find(|x| x.gpu == g && x.kind == k)
                            .map(|x| cell(&x.gbps.as_ref().map(|v| figure(*v))))
                            .unwrap_or_else(|| s("-"))
                    };
                    rows.push(vec![
                        format!("GPU {g}"),
                        of(PatternKind::OneToAll),
                        of(PatternKind::AllToOne),
                    ]);
                }
                t.push((
                    format!(
                        "One GPU and all the others at once, aggregate {} ({} a copy)",
                        P2pFigure::OneToAll.spec().unit.display(),
                        bytes(p.size_bytes)
                    ),
                    rows,
                ));
            }
            t.push((
                s("Peer access (cuDeviceCanAccessPeer)"),
                matrix(&|a, b| {
                    p.pair(a, b)
                        .map(|x| if x.peer_access { s("yes") } else { s("no") })
                        .unwrap_or_else(|| s("-"))
                }),
            ));
        }
        Reading::Unavailable(r) => t.push(not_measured("GPU <-> GPU copies", r)),
    }
    t
}
