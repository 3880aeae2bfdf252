//! The full tables of `gpuaudit bench`: every size, every GPU, every kernel shape.

use crate::facts::MeasuredFacts;
use crate::figures::Group;
use crate::reading::Reading;
use crate::units::{bytes, GIB};

/// The full tables of `gpuaudit bench`: (title, rows), the first row being the header. The
/// GPUs first, then each measurement group's own tables (`figures/<group>/bench.rs`) in the
/// catalog's order; a group that did not run is a one-row table with its reason.
pub fn tables(m: &MeasuredFacts) -> Vec<(String, Vec<Vec<String>>)> {
    let mut t: Vec<(String, Vec<Vec<String>>)> = Vec::new();
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
    for group in Group::ALL {
        t.extend(group.bench_tables(m));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;
    use crate::testing::measured::{allreduce, p2p};
    use crate::testing::Machine;
    use crate::units::figure;

    /// Two healthy H200s whose P2P copies and all-reduce were measured.
    fn two_gpus_with_p2p_and_nccl() -> crate::facts::Facts {
        Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                m.p2p = Reading::Value(p2p(393.7, true));
                m.nccl = Reading::Value(allreduce(328.3, true));
            })
            .build()
    }

    #[test]
    fn tables_cover_every_group() {
        let t = tables(&two_gpus_with_p2p_and_nccl().measured);
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

    /// Every group the measurement child runs has its bench table, in the catalog's order,
    /// with its own reason when it did not run; the host groups and the rehearsal have none.
    #[test]
    fn each_measured_group_has_its_table_in_catalog_order() {
        let m = MeasuredFacts::not_run("facts only");
        let t = tables(&m);
        let titles: Vec<&str> = t.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(
            titles,
            [
                "Context creation",
                "Host <-> device copies",
                "Device memory",
                "GEMM",
                "GPU <-> GPU copies",
                "All-reduce",
                "Burn"
            ]
        );
        assert!(t.iter().all(|x| x.1[1] == ["facts only"]));
        for g in [Group::Storage, Group::Loopback, Group::Rehearsal] {
            assert!(g.bench_tables(&m).is_empty(), "{g:?}");
        }
    }

    /// The tables' units are the catalog's (a person's "µs", not the report's "us").
    #[test]
    fn the_tables_take_their_units_from_the_catalog() {
        let t = tables(&two_gpus_with_p2p_and_nccl().measured);
        let find = |p: &str| &t.iter().find(|x| x.0.starts_with(p)).unwrap().1;
        assert_eq!(find("All-reduce")[0][1], "time µs");
        assert_eq!(find("All-reduce")[0][3], "busbw GB/s");
        assert!(t.iter().any(|x| x.0 == "GPU -> GPU 4-byte copy, µs"));
    }

    /// The both-ways matrix shows each unordered pair in both of its cells and nowhere
    /// else; the launch-shape table is there only when shapes were measured.
    #[test]
    fn pairs_and_launch_shapes_land_in_their_cells() {
        use crate::facts::{KernelPoint, OnGpu, P2pBidir};
        use crate::testing::measured::membw;
        let f = Machine::healthy("h200-sxm-141gb", 3)
            .measured(|m| {
                let mut x = p2p(393.7, true);
                x.gpus = vec![0, 1, 2];
                x.bidirectional = vec![
                    P2pBidir {
                        a: 0,
                        b: 1,
                        gbps: Reading::Value(740.0),
                    },
                    P2pBidir {
                        a: 2,
                        b: 1,
                        gbps: Reading::Value(500.0),
                    },
                ];
                m.p2p = Reading::Value(x);
                let mut swept = membw(4100.0);
                swept.sweep = vec![KernelPoint {
                    kernel: "copy".into(),
                    blocks: 528,
                    threads: 256,
                    gbps: 4100.0,
                    verified: true,
                }];
                m.memory = Reading::Value(vec![
                    OnGpu::new(0, Reading::Value(swept)),
                    OnGpu::new(1, Reading::Value(membw(4090.0))),
                ]);
            })
            .build();
        let t = tables(&f.measured);
        let both = &t
            .iter()
            .find(|x| x.0.starts_with("GPU <-> GPU both directions"))
            .unwrap()
            .1;
        assert_eq!(both[1], ["GPU 0", "X", "740", "-"]);
        assert_eq!(both[2], ["GPU 1", "740", "X", "500"]);
        assert_eq!(both[3], ["GPU 2", "-", "500", "X"]);
        let shapes = &t
            .iter()
            .find(|x| x.0 == "Device memory kernels by launch shape")
            .unwrap()
            .1;
        assert_eq!(shapes.len(), 2, "{shapes:?}");
        assert_eq!(shapes[1][..4], ["0", "copy", "528", "256"]);
        // No shape measured on any GPU: no table of shapes (not a header alone).
        let plain = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                m.memory = Reading::Value(vec![OnGpu::new(0, Reading::Value(membw(4100.0)))]);
            })
            .build();
        assert!(!tables(&plain.measured)
            .iter()
            .any(|x| x.0 == "Device memory kernels by launch shape"));
    }

    /// Each host-copy cell is the point of its size, direction and host memory, nothing else.
    #[test]
    fn host_copies_land_in_their_size_and_direction() {
        use crate::facts::*;
        use crate::testing::measured::pcie_gpu;
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .measured(|m| {
                let mut g = pcie_gpu(55.4, 55.3);
                g.points.push(CopyPoint {
                    direction: Direction::D2h,
                    host_memory: HostMemory::Pageable,
                    size_bytes: 1 << 20,
                    gbps: 7.0,
                    repeats: 5,
                });
                m.pcie = Reading::Value(PcieBandwidth {
                    per_gpu: vec![OnGpu::new(0, Reading::Value(g))],
                    all_at_once: Reading::unavailable("one GPU"),
                });
            })
            .build();
        let t = tables(&f.measured);
        let rows = &t
            .iter()
            .find(|x| x.0.starts_with("Host <-> device copies,"))
            .unwrap()
            .1;
        assert_eq!(
            rows[0],
            [
                "GPU",
                "size",
                "h2d pinned",
                "d2h pinned",
                "h2d pageable",
                "d2h pageable"
            ]
        );
        assert_eq!(rows[1], ["0", "1 MiB", "-", "-", "-", "7.00"]);
        assert_eq!(rows[2], ["0", "1 GiB", "55.4", "55.3", "20.0", "-"]);
    }
}
