//! The full tables of `gpuaudit bench`: every size, every GPU, every kernel shape.

use crate::facts::{Direction, HostMemory, MeasuredFacts, PatternKind};
use crate::reading::Reading;
use crate::units::{bytes, figure, GIB};

fn cell<T: std::fmt::Display>(r: &Reading<T>) -> String {
    match r {
        Reading::Value(v) => v.to_string(),
        Reading::Unavailable(_) => "-".into(),
    }
}

fn f(v: Option<f64>) -> String {
    v.map(figure).unwrap_or_else(|| "-".into())
}

/// The full tables of `gpuaudit bench`: (title, rows), the first row being the header. A
/// group that did not run is a one-row table with its reason.
pub fn tables(m: &MeasuredFacts) -> Vec<(String, Vec<Vec<String>>)> {
    let mut t: Vec<(String, Vec<Vec<String>>)> = Vec::new();
    let why = |title: &str, reason: &str| {
        (
            title.to_string(),
            vec![vec!["not measured".into()], vec![reason.to_string()]],
        )
    };
    let s = |x: &str| x.to_string();

    if let Reading::Value(devs) = &m.devices {
        let mut rows = vec![vec![
            s("GPU"),
            s("name"),
            s("PCI bus id"),
            s("SMs"),
            s("compute"),
            s("L2"),
            s("memory"),
            s("free"),
        ]];
        for d in devs {
            rows.push(vec![
                d.gpu.to_string(),
                d.name.clone(),
                d.pci_bus_id.clone(),
                d.sm_count.to_string(),
                d.compute_capability.to_string(),
                bytes(d.l2_bytes),
                format!("{:.1} GiB", d.total_memory_bytes as f64 / GIB as f64),
                format!("{:.1} GiB", d.free_memory_bytes as f64 / GIB as f64),
            ]);
        }
        t.push((s("GPUs as CUDA sees them"), rows));
    }
    if !m.skipped_gpus.is_empty() {
        let mut rows = vec![vec![s("GPU"), s("left out because")]];
        for g in &m.skipped_gpus {
            rows.push(vec![g.gpu.to_string(), g.reason.clone()]);
        }
        t.push((s("GPUs not measured"), rows));
    }

    match &m.context {
        Reading::Value(c) => {
            let mut rows = vec![vec![s("phase"), s("median ms"), s("min ms"), s("max ms")]];
            for (name, st) in [
                ("cuInit", c.init_ms),
                ("primary context retain + set current", c.context_ms),
                ("first 1 MiB cuMemAlloc", c.alloc_ms),
                ("total", c.total_ms),
            ] {
                rows.push(vec![
                    s(name),
                    figure(st.median),
                    figure(st.min),
                    figure(st.max),
                ]);
            }
            t.push((
                format!("Context creation ({} fresh processes)", c.runs),
                rows,
            ));
        }
        Reading::Unavailable(r) => t.push(why("Context creation", r)),
    }

    match &m.pcie {
        Reading::Value(p) => {
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
            t.push((s("Host <-> device copies, GB/s"), rows));
            // Both directions at once, SM-driven copies and latency (--full / bench): one row
            // per GPU that has any of them, each missing reading with its reason.
            let mut extras = vec![vec![
                s("GPU"),
                s("both ways h2d"),
                s("both ways d2h"),
                s("both ways total"),
                s("SM h2d"),
                s("SM d2h"),
                s("SM latency us"),
                s("round trip us"),
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
                t.push((s("Pinned copies on every GPU at once, GB/s"), rows));
            }
        }
        Reading::Unavailable(r) => t.push(why("Host <-> device copies", r)),
    }

    match &m.memory {
        Reading::Value(v) => {
            let mut rows = vec![vec![
                s("GPU"),
                s("buffer"),
                s("copy kernel"),
                s("memcpy"),
                s("read"),
                s("write"),
                s("triad"),
                s("add"),
                s("verified"),
            ]];
            let mut sweep = vec![vec![
                s("GPU"),
                s("kernel"),
                s("blocks"),
                s("threads"),
                s("GB/s"),
                s("verified"),
            ]];
            for g in v {
                match &g.result {
                    Reading::Value(b) => {
                        rows.push(vec![
                            g.gpu.to_string(),
                            bytes(b.buffer_bytes),
                            f(b.copy_gbps),
                            f(b.memcpy_gbps),
                            f(b.read_gbps),
                            f(b.write_gbps),
                            f(b.triad_gbps),
                            f(b.add_gbps),
                            if b.verify.iter().all(|x| x.ok) {
                                s("yes")
                            } else {
                                s("NO")
                            },
                        ]);
                        for k in &b.sweep {
                            sweep.push(vec![
                                g.gpu.to_string(),
                                k.kernel.clone(),
                                k.blocks.to_string(),
                                k.threads.to_string(),
                                figure(k.gbps),
                                s(if k.verified { "yes" } else { "NO" }),
                            ]);
                        }
                    }
                    Reading::Unavailable(r) => rows.push(vec![g.gpu.to_string(), r.clone()]),
                }
            }
            t.push((s("Device memory, GB/s (copies: read + written)"), rows));
            if sweep.len() > 1 {
                t.push((s("Device memory kernels by launch shape"), sweep));
            }
        }
        Reading::Unavailable(r) => t.push(why("Device memory", r)),
    }

    match &m.gemm {
        Reading::Value(v) => {
            let mut rows = vec![vec![
                s("GPU"),
                s("dtype"),
                s("size"),
                s("TFLOPS"),
                s("ms/GEMM"),
                s("batches"),
                s("max error"),
                s("verified"),
                s("library"),
            ]];
            for g in v {
                match &g.result {
                    Reading::Value(rs) => {
                        for r in rs {
                            match &r.result {
                                Reading::Value(p) => rows.push(vec![
                                    g.gpu.to_string(),
                                    s(r.dtype.as_str()),
                                    format!("{}^3 {}", p.m, p.layout),
                                    figure(p.tflops),
                                    format!("{:.3}", p.ms_per_gemm),
                                    p.batches
                                        .iter()
                                        .map(|x| figure(*x))
                                        .collect::<Vec<_>>()
                                        .join(" "),
                                    format!("{:.1e}", p.max_error),
                                    if p.verified { s("yes") } else { s("NO") },
                                    p.library.clone(),
                                ]),
                                Reading::Unavailable(why) => rows.push(vec![
                                    g.gpu.to_string(),
                                    s(r.dtype.as_str()),
                                    why.clone(),
                                ]),
                            }
                        }
                    }
                    Reading::Unavailable(r) => {
                        rows.push(vec![g.gpu.to_string(), s("-"), r.clone()])
                    }
                }
            }
            t.push((s("GEMM"), rows));
        }
        Reading::Unavailable(r) => t.push(why("GEMM", r)),
    }

    match &m.p2p {
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
                format!("GPU -> GPU one direction, GB/s ({})", bytes(p.size_bytes)),
                matrix(&|a, b| {
                    p.pair(a, b)
                        .map(|x| cell(&x.gbps.as_ref().map(|v| figure(*v))))
                        .unwrap_or_else(|| s("-"))
                }),
            ));
            t.push((
                s("GPU <-> GPU both directions at once, GB/s"),
                matrix(&|a, b| {
                    p.bidirectional
                        .iter()
                        .find(|x| (x.a == a && x.b == b) || (x.a == b && x.b == a))
                        .map(|x| cell(&x.gbps.as_ref().map(|v| figure(*v))))
                        .unwrap_or_else(|| s("-"))
                }),
            ));
            t.push((
                s("GPU -> GPU 4-byte copy, us"),
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
                        "One GPU and all the others at once, aggregate GB/s ({} a copy)",
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
        Reading::Unavailable(r) => t.push(why("GPU <-> GPU copies", r)),
    }

    match &m.nccl {
        Reading::Value(a) => {
            let mut rows = vec![vec![
                s("size"),
                s("time us"),
                s("algbw GB/s"),
                s("busbw GB/s"),
                s("iterations"),
            ]];
            for p in &a.points {
                rows.push(vec![
                    bytes(p.size_bytes),
                    figure(p.time_us),
                    figure(p.algbw_gbps),
                    figure(p.busbw_gbps),
                    p.iterations.to_string(),
                ]);
            }
            t.push((
                format!(
                    "All-reduce (NCCL{}, float32 sum, {} GPUs)",
                    a.nccl_version
                        .as_ref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default(),
                    a.gpus.len()
                ),
                rows,
            ));
        }
        Reading::Unavailable(r) => t.push(why("All-reduce", r)),
    }

    match &m.burn {
        Reading::Value(b) => {
            let mut rows = vec![vec![
                s("GPU"),
                s("TFLOPS median"),
                s("min"),
                s("max"),
                s("CV"),
                s("SM MHz"),
                s("W"),
                s("max C"),
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
        Reading::Unavailable(r) => t.push(why("Burn", r)),
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::measured::{allreduce, p2p};
    use crate::testing::Machine;

    #[test]
    fn tables_cover_every_group() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                m.p2p = Reading::Value(p2p(393.7, true));
                m.nccl = Reading::Value(allreduce(328.3, true));
            })
            .build();
        let t = tables(&f.measured);
        let titles: Vec<&str> = t.iter().map(|x| x.0.as_str()).collect();
        assert!(titles
            .iter()
            .any(|x| x.starts_with("GPU -> GPU one direction")));
        assert!(titles
            .iter()
            .any(|x| x.starts_with("All-reduce (NCCL 2.27.7")));
        assert!(titles.contains(&"GEMM"));
        let p2p = &t
            .iter()
            .find(|x| x.0.starts_with("GPU -> GPU one"))
            .unwrap()
            .1;
        assert_eq!(p2p[0], vec!["src \\ dst", "GPU 0", "GPU 1"]);
        assert_eq!(p2p[1], vec!["GPU 0", "X", "394"]);
        let gemm = &t.iter().find(|x| x.0 == "GEMM").unwrap().1;
        assert_eq!(gemm[0][0], "not measured");
        // No pattern and no host extra measured: no such table.
        assert!(!titles.iter().any(|x| x.starts_with("One GPU and all")));
        assert!(!titles.iter().any(|x| x.starts_with("Host link:")));
    }

    #[test]
    fn host_extras_and_patterns_have_their_tables() {
        use crate::facts::*;
        use crate::testing::measured::{membw, pcie_gpu};
        use crate::units::GIB;
        // Quick-audit host figures only: no extras table (not a header alone).
        let quick = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                m.pcie = Reading::Value(PcieBandwidth {
                    per_gpu: vec![OnGpu::new(0, Reading::Value(pcie_gpu(55.0, 55.0)))],
                    all_at_once: Reading::unavailable("one GPU"),
                });
            })
            .build();
        let t = tables(&quick.measured);
        assert!(t.iter().any(|x| x.0.starts_with("Host <-> device copies")));
        assert!(!t.iter().any(|x| x.0.starts_with("Host link:")));
        let f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|m| {
                let mut g = pcie_gpu(55.4, 55.3);
                g.bidirectional = Reading::Value(BidirectionalCopy {
                    size_bytes: 256 << 20,
                    h2d_gbps: 50.0,
                    d2h_gbps: 48.0,
                    total_gbps: 98.0,
                });
                g.latency = Reading::Value(HostLatency {
                    sm_chase_us: 1.9,
                    chase_steps: 2000,
                    memcpy_round_trip_us: 18.5,
                    round_trips: 100,
                });
                g.sm_copy = Reading::unavailable("cuMemHostAlloc(256 MiB, mapped): out of memory");
                let mut only_bidir = pcie_gpu(55.0, 55.0);
                only_bidir.bidirectional = g.bidirectional.clone();
                m.pcie = Reading::Value(PcieBandwidth {
                    per_gpu: vec![
                        OnGpu::new(0, Reading::Value(g)),
                        // One reading of the three is enough for a row.
                        OnGpu::new(1, Reading::Value(only_bidir)),
                        // Quick audit figures only: no row in the extras table.
                        OnGpu::new(2, Reading::Value(pcie_gpu(55.0, 55.0))),
                    ],
                    all_at_once: Reading::unavailable("x"),
                });
                let mut b = membw(4100.0);
                b.add_gbps = Some(4380.0);
                m.memory = Reading::Value(vec![OnGpu::new(0, Reading::Value(b))]);
                let mut x = p2p(393.7, true);
                x.patterns = vec![P2pPattern {
                    kind: PatternKind::AllToOne,
                    gpu: 1,
                    peers: vec![0],
                    size_bytes: GIB,
                    gbps: Reading::Value(391.0),
                    verify: None,
                }];
                m.p2p = Reading::Value(x);
            })
            .build();
        let t = tables(&f.measured);
        let find = |p: &str| &t.iter().find(|x| x.0.starts_with(p)).unwrap().1;
        let extras = find("Host link:");
        assert_eq!(extras.len(), 3, "{extras:?}");
        assert_eq!(extras[2][0], "1");
        assert_eq!(extras[2][1], "50.0");
        assert_eq!(extras[2][6], "quick audit: run with --full");
        assert_eq!(
            extras[1],
            vec![
                "0",
                "50.0",
                "48.0",
                "98.0",
                "cuMemHostAlloc(256 MiB, mapped): out of memory",
                "-",
                "1.90",
                "18.5"
            ]
        );
        let pats = find("One GPU and all the others");
        assert_eq!(pats[0], vec!["GPU", "one to all", "all to one"]);
        assert_eq!(pats[1], vec!["GPU 0", "-", "-"]);
        assert_eq!(pats[2], vec!["GPU 1", "-", "391"]);
        let mem = find("Device memory, GB/s");
        let add_col = mem[0].iter().position(|c| c == "add").unwrap();
        assert_eq!(mem[1][add_col], figure(4380.0));
    }
}
