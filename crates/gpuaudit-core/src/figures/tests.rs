//! The catalog and the report slices of its groups.
use super::*;
use crate::facts::{GemmDtype, GemmResult, OnGpu, PcieBandwidth};
use crate::reading::Reading;
use crate::testing::measured::{allreduce, gemm_point, p2p, pcie_gpu};
use crate::testing::Machine;
use crate::units::GIB;

#[test]
fn flat_list_carries_expectations() {
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .measured(|m| {
            m.pcie = Reading::Value(PcieBandwidth {
                per_gpu: vec![OnGpu::new(0, Reading::Value(pcie_gpu(55.4, 55.3)))],
                all_at_once: Reading::unavailable("one GPU"),
            });
            m.gemm = Reading::Value(vec![OnGpu::new(
                0,
                Reading::Value(vec![GemmResult {
                    dtype: GemmDtype::Bf16,
                    result: Reading::Value(gemm_point(789.0, true)),
                }]),
            )]);
            m.nccl = Reading::Value(allreduce(328.3, true));
            m.p2p = Reading::Value(p2p(393.7, true));
        })
        .build();
    let m = measurements(&f);
    let h2d = m.iter().find(|x| x.name == "h2d_pinned_bandwidth").unwrap();
    assert_eq!(h2d.gpu, Some(0));
    assert!((h2d.expected.unwrap() - 63.015).abs() < 0.01);
    assert!((h2d.ratio.unwrap() - 0.879).abs() < 0.01);
    let pageable = m
        .iter()
        .find(|x| x.name == "h2d_pageable_bandwidth")
        .unwrap();
    assert_eq!(pageable.expected, None);
    let g = m.iter().find(|x| x.name == "gemm_tflops").unwrap();
    assert_eq!(g.dtype.as_deref(), Some("bf16"));
    assert_eq!(g.expected, Some(989.5));
    // The method says what the figure is judged against, at the size measured.
    assert!(
        g.method.contains(
            "judged against the 81% of it healthy GPUs of this model reach at 8192x8192x8192"
        ),
        "{}",
        g.method
    );
    let bus: Vec<_> = m.iter().filter(|x| x.name == "allreduce_busbw").collect();
    assert_eq!(bus.len(), 2);
    assert_eq!(bus[0].size_bytes, Some(GIB));
    // Only the large message is held against the topology's figure.
    assert!(bus[0].expected.is_some() && bus[0].ratio.is_some());
    assert_eq!((bus[1].expected, bus[1].ratio), (None, None));
    let lat = m.iter().find(|x| x.name == "allreduce_latency_us").unwrap();
    assert_eq!(lat.value, 57.6);
    let p = m
        .iter()
        .find(|x| x.name == "p2p_bandwidth" && x.gpu == Some(0))
        .unwrap();
    assert_eq!((p.peer, p.expected), (Some(1), Some(450.0)));
    let j = serde_json::to_value(&m[0]).unwrap();
    assert!(
        j.get("size_bytes").is_some() && j.get("dtype").is_none(),
        "{j}"
    );
}

#[test]
fn host_extras_patterns_and_the_best_kernel_are_in_the_list() {
    use crate::facts::{
        BidirectionalCopy, HostLatency, KernelPoint, P2pPattern, PatternKind, SmHostCopy,
    };
    use crate::testing::measured::membw;
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .measured(|m| {
            let mut g = pcie_gpu(55.4, 55.3);
            g.bidirectional = Reading::Value(BidirectionalCopy {
                size_bytes: 256 << 20,
                h2d_gbps: 50.0,
                d2h_gbps: 48.0,
                total_gbps: 98.0,
            });
            g.sm_copy = Reading::Value(SmHostCopy {
                size_bytes: 256 << 20,
                h2d_gbps: 45.0,
                d2h_gbps: 44.0,
                kernel: "copy 528x512".into(),
            });
            g.latency = Reading::Value(HostLatency {
                sm_chase_us: 1.9,
                chase_steps: 2000,
                memcpy_round_trip_us: 18.5,
                round_trips: 100,
            });
            m.pcie = Reading::Value(PcieBandwidth {
                per_gpu: vec![OnGpu::new(0, Reading::Value(g))],
                all_at_once: Reading::unavailable("one GPU"),
            });
            let mut b = membw(4100.0);
            b.add_gbps = Some(4380.0);
            b.triad_gbps = Some(4386.0);
            b.sweep = vec![
                KernelPoint {
                    kernel: "triad".into(),
                    blocks: 528,
                    threads: 512,
                    gbps: 4110.0,
                    verified: true,
                },
                KernelPoint {
                    kernel: "triad_flat".into(),
                    blocks: 1 << 20,
                    threads: 256,
                    gbps: 4386.0,
                    verified: true,
                },
            ];
            m.memory = Reading::Value(vec![OnGpu::new(0, Reading::Value(b))]);
            let mut x = p2p(393.7, true);
            x.patterns = vec![
                P2pPattern {
                    kind: PatternKind::OneToAll,
                    gpu: 0,
                    peers: vec![1],
                    size_bytes: GIB,
                    gbps: Reading::Value(390.0),
                    verify: None,
                },
                P2pPattern {
                    kind: PatternKind::AllToOne,
                    gpu: 0,
                    peers: vec![1],
                    size_bytes: GIB,
                    gbps: Reading::unavailable("x"),
                    verify: None,
                },
            ];
            m.p2p = Reading::Value(x);
        })
        .build();
    let m = measurements(&f);
    let get = |n: &str| {
        m.iter()
            .find(|x| x.name == n)
            .unwrap_or_else(|| panic!("{n}"))
    };
    let link = 63.015;
    let b = get("h2d_bidirectional_bandwidth");
    assert_eq!(
        (b.value, b.gpu, b.size_bytes),
        (50.0, Some(0), Some(256 << 20))
    );
    assert!((b.expected.unwrap() - link).abs() < 0.01);
    assert!(b.method.contains("host_to_device_bidirectional_memcpy_ce"));
    assert_eq!(get("d2h_bidirectional_bandwidth").value, 48.0);
    let total = get("bidirectional_total_bandwidth");
    assert!((total.expected.unwrap() - 2.0 * link).abs() < 0.01);
    let sm = get("d2h_sm_bandwidth");
    assert_eq!(sm.value, 44.0);
    assert!(
        sm.method.contains("device_to_host_memcpy_sm"),
        "{}",
        sm.method
    );
    assert!(get("h2d_sm_bandwidth")
        .method
        .contains("host_to_device_memcpy_sm"));
    let lat = get("host_latency_sm_us");
    assert_eq!(
        (lat.value, lat.unit.as_str(), lat.expected),
        (1.9, "us", None)
    );
    assert!(lat.method.contains("host_device_latency_sm"));
    assert_eq!(get("host_round_trip_us").value, 18.5);
    // The method names the kernel and shape the figure came from.
    let triad = get("memory_triad_bandwidth");
    assert!(
        triad
            .method
            .contains("triad_flat at 1048576 blocks x 256 threads"),
        "{}",
        triad.method
    );
    // No sweep behind the add figure: the method says what it is, no launch.
    let add = get("memory_add_bandwidth");
    assert_eq!(add.value, 4380.0);
    assert!(!add.method.contains("best verified"), "{}", add.method);
    assert_eq!(triad.size_bytes, Some(4 * GIB));
    let one = get("p2p_one_to_all_bandwidth");
    assert_eq!((one.value, one.gpu, one.expected), (390.0, Some(0), None));
    assert_eq!(one.size_bytes, Some(GIB));
    assert!(one.method.contains("one_to_all_memcpy_ce"));
    // A pattern that was not measured has no figure (never 0).
    assert!(!m.iter().any(|x| x.name == "p2p_all_to_one_bandwidth"));
}

#[test]
fn a_size_without_an_attainable_figure_says_so() {
    let f = Machine::healthy("h200-sxm-141gb", 1)
        .measured(|m| {
            let mut p = gemm_point(700.0, true);
            (p.m, p.n, p.k) = (2048, 2048, 2048);
            m.gemm = Reading::Value(vec![OnGpu::new(
                0,
                Reading::Value(vec![GemmResult {
                    dtype: GemmDtype::Bf16,
                    result: Reading::Value(p),
                }]),
            )]);
        })
        .build();
    let m = measurements(&f);
    let g = m.iter().find(|x| x.name == "gemm_tflops").unwrap();
    assert!(
        g.method
            .contains("no attainable figure known for this model at this size"),
        "{}",
        g.method
    );
}

#[test]
fn every_figure_has_its_own_id_and_a_label() {
    let all = Figure::all();
    let mut ids: Vec<&str> = all.iter().map(|f| f.id()).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "an id is given twice");
    for f in &all {
        let s = f.spec();
        assert_eq!(Figure::from_id(s.id), Some(*f), "{}", s.id);
        assert!(
            !s.label.is_empty() && s.label != s.id,
            "{} has no label",
            s.id
        );
        assert_eq!(Unit::from_report(s.unit.report()), Some(s.unit));
        // Each group lists its own figures only.
        assert!(f.group().figures().contains(f));
    }
    assert_eq!(Figure::from_id("no_such_figure"), None);
}

#[test]
fn base_units_are_what_prometheus_names() {
    let cases = [
        (Unit::GigabytesPerSecond, 55.4, 55.4e9, "bytes_per_second"),
        (Unit::MegabytesPerSecond, 1200.0, 1.2e9, "bytes_per_second"),
        (Unit::Milliseconds, 450.0, 0.45, "seconds"),
        (Unit::Microseconds, 20.0, 20e-6, "seconds"),
        (Unit::Teraflops, 800.0, 8e14, "flops"),
        (Unit::Megahertz, 1980.0, 1.98e9, "hertz"),
        (Unit::Percent, 97.0, 0.97, "ratio"),
        (Unit::Watts, 700.0, 700.0, "watts"),
        (Unit::Celsius, 64.0, 64.0, "celsius"),
        (Unit::PerSecond, 9000.0, 9000.0, "per_second"),
        (Unit::Ratio, 0.01, 0.01, "ratio"),
        (Unit::SamplesPerSecond, 100.0, 100.0, "samples_per_second"),
    ];
    for (u, v, base, suffix) in cases {
        assert!((u.to_base(v) - base).abs() <= base.abs() * 1e-12, "{u:?}");
        assert_eq!(u.base_suffix(), suffix, "{u:?}");
    }
    assert!(Unit::Celsius.is_interval_scale());
    assert!(!Unit::Watts.is_interval_scale());
    assert_eq!(Unit::Microseconds.display(), "µs");
    assert_eq!(Unit::Celsius.display(), "°C");
}

#[test]
fn directions_natures_and_spreads() {
    let spec = |id: &str| Figure::from_id(id).unwrap().spec();
    for id in [
        "h2d_pinned_bandwidth",
        "memory_copy_bandwidth",
        "gemm_tflops",
        "burn_sm_clock_mhz",
        "storage_seq_read_bandwidth",
    ] {
        assert_eq!(spec(id).better, Better::Higher, "{id}");
        assert_eq!(spec(id).nature, Nature::Performance, "{id}");
    }
    for id in [
        "context_create_ms",
        "context_create_ms_max",
        "cuinit_ms",
        "host_round_trip_us",
        "p2p_latency_us",
        "allreduce_latency_us",
        "burn_tflops_cv",
        "loopback_round_trip_us",
    ] {
        assert_eq!(spec(id).better, Better::Lower, "{id}");
        assert_eq!(spec(id).spread, Spread::LongTailed, "{id}");
    }
    assert_eq!(spec("memory_copy_bandwidth").spread, Spread::Symmetric);
    // The burn's power and temperature are conditions, not speeds.
    assert_eq!(spec("burn_power_w").nature, Nature::Condition);
    assert_eq!(spec("burn_power_w").better, Better::Neither);
    assert_eq!(spec("burn_temperature_c").nature, Nature::Condition);
    assert_eq!(spec("burn_temperature_c").better, Better::Lower);
}

#[test]
fn labels_carry_the_dtype_and_size_and_an_unknown_name_stays() {
    let m = |_: &str, dtype: Option<&str>, size: Option<u64>| Measurement {
        dtype: dtype.map(str::to_string),
        size_bytes: size,
        ..measurement(Figure::Gemm(GemmFigure::Tflops), 1.0, None, "")
    };
    let m = |name: &str, dtype: Option<&str>, size: Option<u64>| Measurement {
        name: name.into(),
        ..m(name, dtype, size)
    };
    assert_eq!(
        Figure::label_of(&m("gemm_tflops", Some("bf16"), None)),
        "GEMM bf16"
    );
    assert_eq!(Figure::label_of(&m("gemm_tflops", None, None)), "GEMM");
    assert_eq!(
        Figure::label_of(&m("allreduce_busbw", None, Some(GIB))),
        "all-reduce bus bandwidth, 1 GiB"
    );
    assert_eq!(
        Figure::label_of(&m("allreduce_busbw", None, None)),
        "all-reduce bus bandwidth"
    );
    assert_eq!(
        Figure::label_of(&m("burn_tflops", Some("fp16"), None)),
        "burn fp16, median"
    );
    assert_eq!(
        Figure::label_of(&m("a_newer_figure", None, None)),
        "a_newer_figure"
    );
    // A name this build does not know: its unit says which way it is better.
    let mut x = m("a_newer_latency", None, None);
    x.unit = "us".into();
    assert_eq!(Figure::better_of(&x), Better::Lower);
    x.unit = "GB/s".into();
    assert_eq!(Figure::better_of(&x), Better::Higher);
}

/// Every figure outside the rehearsal comes out of a full audit's facts (the rehearsal's
/// are pinned by workload.pipeline's tests): a figure added to a group's enum without its
/// slice of the report fails here.
#[test]
fn a_full_audit_reports_every_figure_of_its_groups() {
    use crate::facts::{
        ConcurrentCopy, DirThroughput, Direction, GpuValue, IoResult, LoopbackRtt, P2pPattern,
        PatternKind,
    };
    use crate::testing::measured::full_run;
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .measured(|m| {
            full_run(m, 2);
            if let Reading::Value(p) = &mut m.pcie {
                use crate::facts::{BidirectionalCopy, HostLatency, SmHostCopy};
                if let Reading::Value(g) = &mut p.per_gpu[0].result {
                    g.bidirectional = Reading::Value(BidirectionalCopy {
                        size_bytes: 256 << 20,
                        h2d_gbps: 50.0,
                        d2h_gbps: 48.0,
                        total_gbps: 98.0,
                    });
                    g.sm_copy = Reading::Value(SmHostCopy {
                        size_bytes: 256 << 20,
                        h2d_gbps: 45.0,
                        d2h_gbps: 44.0,
                        kernel: "copy".into(),
                    });
                    g.latency = Reading::Value(HostLatency {
                        sm_chase_us: 1.9,
                        chase_steps: 2000,
                        memcpy_round_trip_us: 18.5,
                        round_trips: 100,
                    });
                }
                if let Reading::Value(all) = &mut p.all_at_once {
                    all.push(ConcurrentCopy {
                        direction: Direction::D2h,
                        size_bytes: GIB,
                        per_gpu: vec![GpuValue {
                            gpu: 0,
                            value: 50.0,
                        }],
                        total_gbps: 50.0,
                    });
                }
            }
            if let Reading::Value(mem) = &mut m.memory {
                if let Reading::Value(b) = &mut mem[0].result {
                    (b.read_gbps, b.write_gbps) = (Some(4300.0), Some(4200.0));
                    (b.triad_gbps, b.add_gbps) = (Some(4380.0), Some(4386.0));
                }
            }
            if let Reading::Value(p) = &mut m.p2p {
                for kind in [PatternKind::OneToAll, PatternKind::AllToOne] {
                    p.patterns.push(P2pPattern {
                        kind,
                        gpu: 0,
                        peers: vec![1],
                        size_bytes: GIB,
                        gbps: Reading::Value(390.0),
                        verify: None,
                    });
                }
            }
        })
        .with(|f| {
            f.host.throughput = Reading::Value(vec![DirThroughput {
                path: "/data".into(),
                result: Reading::Value(IoResult {
                    seq_write_mb_s: 900.0,
                    seq_read_mb_s: 2500.0,
                    rand_read_iops: 12000.0,
                    file_bytes: GIB,
                    direct: true,
                    method: "test".into(),
                }),
            }]);
            f.host.loopback = Reading::Value(LoopbackRtt {
                round_trips: 1000,
                median_us: 20.0,
                p99_us: 40.0,
                max_us: 90.0,
                method: "test".into(),
            });
        })
        .build();
    let got = measurements(&f);
    for fig in Figure::all() {
        if fig.group() == Group::Rehearsal {
            continue;
        }
        assert!(
            got.iter().any(|m| m.name == fig.id()),
            "{} is not in the report",
            fig.id()
        );
    }
    // Names, units and groups in report order.
    for m in &got {
        let fig = Figure::of(m).unwrap();
        assert_eq!(m.unit, fig.spec().unit.report(), "{}", m.name);
    }
    let groups: Vec<Group> = got.iter().map(|m| Figure::of(m).unwrap().group()).collect();
    let mut sorted = groups.clone();
    sorted.sort();
    assert_eq!(groups, sorted, "the report lists group by group");
    let storage = got
        .iter()
        .find(|m| m.name == "storage_seq_read_bandwidth")
        .unwrap();
    assert_eq!(
        (storage.value, storage.path.as_deref()),
        (2500.0, Some("/data"))
    );
    let rtt = got
        .iter()
        .find(|m| m.name == "loopback_round_trip_us")
        .unwrap();
    assert_eq!((rtt.value, rtt.gpu), (20.0, None));
    // What healthy GPUs reach: the device copy and the GEMMs, nothing else.
    let copy = got
        .iter()
        .find(|m| m.name == "memory_copy_bandwidth")
        .unwrap();
    assert!(
        (copy.attainable.unwrap() - 0.88 * 4800.0).abs() < 1.0,
        "{copy:?}"
    );
    let read = got.iter().find(|m| m.name == "memory_read_bandwidth");
    assert!(read.is_none_or(|r| r.attainable.is_none()));
    let bf16 = got
        .iter()
        .find(|m| m.name == "gemm_tflops" && m.dtype.as_deref() == Some("bf16"))
        .unwrap();
    assert!(
        (bf16.attainable.unwrap() - 0.81 * 989.5).abs() < 0.5,
        "{bf16:?}"
    );
    assert!(got
        .iter()
        .filter(|m| m.name.starts_with("h2d_") || m.name.starts_with("burn_"))
        .all(|m| m.attainable.is_none()));
    // The burn's figure is there, without the GEMM's attainable value.
    assert!(got.iter().any(|m| m.name == "burn_tflops"));
}

#[test]
fn every_figure_has_its_own_metric_in_base_units() {
    let all = Figure::all();
    let names: Vec<String> = all.iter().map(|f| f.spec().metric_name()).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "{names:?}");
    for n in &names {
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{n}"
        );
        // No unit of the report's left in the name (the CV's "tflops" is what varies).
        assert!(!n.ends_with("_tflops"), "{n}");
        for u in ["_ms", "_us", "_mhz", "_pct", "_per_s", "_gbps"] {
            assert!(!n.contains(&format!("{u}_")) && !n.ends_with(u), "{n}");
        }
    }
    let name = |id: &str| Figure::from_id(id).unwrap().spec().metric_name();
    for (id, want) in [
        (
            "h2d_pinned_bandwidth",
            "gpuaudit_h2d_pinned_bandwidth_bytes_per_second",
        ),
        ("context_create_ms", "gpuaudit_context_create_seconds"),
        (
            "context_create_ms_max",
            "gpuaudit_context_create_max_seconds",
        ),
        ("gemm_tflops", "gpuaudit_gemm_flops"),
        ("burn_tflops_cv", "gpuaudit_burn_tflops_cv_ratio"),
        ("burn_sm_clock_mhz", "gpuaudit_burn_sm_clock_hertz"),
        ("burn_power_w", "gpuaudit_burn_power_watts"),
        ("burn_temperature_c", "gpuaudit_burn_temperature_celsius"),
        ("p2p_latency_us", "gpuaudit_p2p_latency_seconds"),
        (
            "loopback_round_trip_us_p99",
            "gpuaudit_loopback_round_trip_p99_seconds",
        ),
        (
            "allreduce_busbw",
            "gpuaudit_allreduce_busbw_bytes_per_second",
        ),
        (
            "storage_rand_read_iops",
            "gpuaudit_storage_rand_read_per_second",
        ),
        (
            "rehearse_read_samples_per_s",
            "gpuaudit_rehearse_read_samples_per_second",
        ),
        ("rehearse_gpu_busy_pct", "gpuaudit_rehearse_gpu_busy_ratio"),
    ] {
        assert_eq!(name(id), want, "{id}");
    }
}

#[test]
fn attainment_is_better_above_one_either_way() {
    let spec = |id: &str| Figure::from_id(id).unwrap().spec();
    assert_eq!(
        spec("h2d_pinned_bandwidth").attainment(50.0, 62.5),
        Some(0.8)
    );
    // A latency twice its expectation attains half of it.
    assert_eq!(
        spec("context_create_ms").attainment(200.0, 100.0),
        Some(0.5)
    );
    assert_eq!(spec("context_create_ms").attainment(0.0, 100.0), None);
    assert_eq!(spec("burn_power_w").attainment(700.0, 700.0), None);
    assert_eq!(spec("h2d_pinned_bandwidth").attainment(50.0, 0.0), None);
    assert_eq!(spec("h2d_pinned_bandwidth").attainment(f64::NAN, 1.0), None);
}

#[test]
fn each_group_is_judged_by_a_check_of_the_catalog() {
    let ids: Vec<&str> = crate::checks::registry::ALL.iter().map(|c| c.id).collect();
    for g in Group::ALL {
        assert!(ids.contains(&g.check()), "{g:?}: {}", g.check());
    }
}

#[test]
fn the_rehearsals_gemm_is_labelled_with_its_dtype_and_no_expectation_gives_no_ratio() {
    let m = Measurement {
        dtype: Some("bf16".into()),
        ..measurement(
            Figure::Rehearsal(RehearsalFigure::GpuStepTflops),
            515.0,
            None,
            "",
        )
    };
    assert_eq!(Figure::label_of(&m), "GPU step bf16, alone");
    // An expectation of 0 is none: no ratio, never an infinite one.
    let z = measurement(Figure::Gemm(GemmFigure::Tflops), 5.0, Some(0.0), "");
    assert_eq!(z.ratio, None);
    let e = measurement(Figure::Gemm(GemmFigure::Tflops), 5.0, Some(10.0), "");
    assert_eq!(e.ratio, Some(0.5));
}
