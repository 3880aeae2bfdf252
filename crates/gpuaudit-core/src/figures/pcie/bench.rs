//! The group's tables in `gpuaudit bench`. Host <-> device copies at every size, the host link's extras (both ways at once, SM copies, latency) and every GPU at once.

use super::super::bench::{f, not_measured, s, Table};
use super::result::*;
use super::PcieFigure;
use crate::reading::Reading;
use crate::units::{bytes, figure};

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<PcieBandwidth>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(p) => {
            let gbps = PcieFigure::H2dPinned.spec().unit.display();
            let mut rows = vec![vec![
                s("GPU"),
                s("size"),
                s("h2d pinned"),
                s("d2h pinned"),
                s("h2d pageable"),
                s("d2h pageable"),
            ]];
            for g in &p.per_gpu {
                match &g.result {
                    Reading::Value(v) => {
                        let mut sizes: Vec<u64> = v.points.iter().map(|x| x.size_bytes).collect();
                        sizes.sort_unstable();
                        sizes.dedup();
                        for size in sizes {
                            let at = |d: Direction, mm: HostMemory| {
                                f(v.points
                                    .iter()
                                    .find(|x| {
                                        x.size_bytes == size
                                            && x.direction == d
                                            && x.host_memory == mm
                                    })
                                    .map(|x| x.gbps))
                            };
                            rows.push(vec![
                                g.gpu.to_string(),
                                bytes(size),
                                at(Direction::H2d, HostMemory::Pinned),
                                at(Direction::D2h, HostMemory::Pinned),
                                at(Direction::H2d, HostMemory::Pageable),
                                at(Direction::D2h, HostMemory::Pageable),
                            ]);
                        }
                    }
                    Reading::Unavailable(r) => rows.push(vec![
                        g.gpu.to_string(),
                        s("-"),
                        r.clone(),
                        s(""),
                        s(""),
                        s(""),
                    ]),
                }
            }
            t.push((format!("Host <-> device copies, {gbps}"), rows));
            // Both directions at once, SM-driven copies and latency (--full / bench): one row
            // per GPU that has any of them, each missing reading with its reason.
            let mut extras = vec![vec![
                s("GPU"),
                s("both ways h2d"),
                s("both ways d2h"),
                s("both ways total"),
                s("SM h2d"),
                s("SM d2h"),
                format!(
                    "SM latency {}",
                    PcieFigure::HostLatencySm.spec().unit.display()
                ),
                format!(
                    "round trip {}",
                    PcieFigure::HostRoundTrip.spec().unit.display()
                ),
            ]];
            for g in &p.per_gpu {
                let Reading::Value(v) = &g.result else {
                    continue;
                };
                let all_missing = v.bidirectional.value().is_none()
                    && v.sm_copy.value().is_none()
                    && v.latency.value().is_none();
                if all_missing {
                    continue;
                }
                let or_why = |r: Option<f64>, why: Option<&str>| match r {
                    Some(x) => figure(x),
                    None => why.unwrap_or("-").to_string(),
                };
                let b = &v.bidirectional;
                let c = &v.sm_copy;
                let l = &v.latency;
                extras.push(vec![
                    g.gpu.to_string(),
                    or_why(b.value().map(|x| x.h2d_gbps), b.reason()),
                    f(b.value().map(|x| x.d2h_gbps)),
                    f(b.value().map(|x| x.total_gbps)),
                    or_why(c.value().map(|x| x.h2d_gbps), c.reason()),
                    f(c.value().map(|x| x.d2h_gbps)),
                    or_why(l.value().map(|x| x.sm_chase_us), l.reason()),
                    f(l.value().map(|x| x.memcpy_round_trip_us)),
                ]);
            }
            if extras.len() > 1 {
                t.push((
                    s("Host link: both directions at once, SM copies, latency"),
                    extras,
                ));
            }
            if let Reading::Value(all) = &p.all_at_once {
                let mut rows = vec![vec![s("direction"), s("size"), s("per GPU"), s("total")]];
                for c in all {
                    rows.push(vec![
                        s(c.direction.label()),
                        bytes(c.size_bytes),
                        c.per_gpu
                            .iter()
                            .map(|v| format!("GPU {}: {}", v.gpu, figure(v.value)))
                            .collect::<Vec<_>>()
                            .join(", "),
                        figure(c.total_gbps),
                    ]);
                }
                t.push((format!("Pinned copies on every GPU at once, {gbps}"), rows));
            }
        }
        Reading::Unavailable(r) => t.push(not_measured("Host <-> device copies", r)),
    }
    t
}
