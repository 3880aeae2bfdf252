//! The report's flat list of measured figures: every headline figure with the datasheet (or
//! link) expectation it is judged against and the ratio.

use crate::checks::judge::{
    allreduce_expected, gemm_expected, p2p_expected, pcie_expected, spec_of,
};
use crate::facts::{
    best_verified_point, Direction, Facts, HostMemory, MeasuredFacts, Measurement, PatternKind,
    ADD_KERNELS, COPY_KERNELS, READ_KERNELS, TRIAD_KERNELS, WRITE_KERNELS,
};
use crate::reading::Reading;
use crate::spec::Attainable;
use crate::units::MIB;

/// A figure with its expectation; gpu, peer, size and dtype are set by the caller.
fn mk(name: &str, value: f64, unit: &str, expected: Option<f64>, method: &str) -> Measurement {
    Measurement {
        name: name.into(),
        gpu: None,
        peer: None,
        value,
        unit: unit.into(),
        expected,
        ratio: expected.filter(|e| *e > 0.0).map(|e| value / e),
        method: method.into(),
        size_bytes: None,
        dtype: None,
    }
}

/// The report's `measurements`: every headline figure with its datasheet expectation and
/// ratio (value / expected).
pub fn measurements(facts: &Facts) -> Vec<Measurement> {
    let m: &MeasuredFacts = &facts.measured;
    let mut out: Vec<Measurement> = Vec::new();
    if let Reading::Value(c) = &m.context {
        let how = format!(
            "cuInit + cuDevicePrimaryCtxRetain + cuCtxSetCurrent + first 1 MiB cuMemAlloc, a \
             fresh process each run, {} runs",
            c.runs
        );
        out.push(mk(
            "context_create_ms",
            c.total_ms.median,
            "ms",
            None,
            &format!("median; {how}"),
        ));
        out.push(mk(
            "context_create_ms_max",
            c.total_ms.max,
            "ms",
            None,
            &format!("maximum; {how}"),
        ));
        out.push(mk(
            "cuinit_ms",
            c.init_ms.median,
            "ms",
            None,
            &format!("cuInit alone, median; {how}"),
        ));
    }
    if let Reading::Value(p) = &m.pcie {
        for g in &p.per_gpu {
            let Some(v) = g.result.value() else { continue };
            let link = pcie_expected(facts, g.gpu).map(|e| e.0);
            for (dir, mem) in [
                (Direction::H2d, HostMemory::Pinned),
                (Direction::D2h, HostMemory::Pinned),
                (Direction::H2d, HostMemory::Pageable),
                (Direction::D2h, HostMemory::Pageable),
            ] {
                let Some(pt) = v.largest(dir, mem) else {
                    continue;
                };
                let exp = if mem == HostMemory::Pinned {
                    link
                } else {
                    None
                };
                let how = format!(
                    "cuMemcpy{}Async, {} host memory, median of {} copies timed with CUDA \
                     events; expected: the PCIe link's one-direction rate",
                    if dir == Direction::H2d {
                        "HtoD"
                    } else {
                        "DtoH"
                    },
                    mem.label(),
                    pt.repeats
                );
                let name = format!("{}_{}_bandwidth", dir.label(), mem.label());
                out.push(Measurement {
                    gpu: Some(g.gpu),
                    size_bytes: Some(pt.size_bytes),
                    ..mk(&name, pt.gbps, "GB/s", exp, &how)
                });
            }
            out.extend(host_extras(v, g.gpu, link));
        }
        if let Reading::Value(all) = &p.all_at_once {
            for c in all {
                for v in &c.per_gpu {
                    let name = format!("{}_pinned_bandwidth_all_gpus", c.direction.label());
                    let exp = pcie_expected(facts, v.gpu).map(|e| e.0);
                    out.push(Measurement {
                        gpu: Some(v.gpu),
                        size_bytes: Some(c.size_bytes),
                        ..mk(
                            &name,
                            v.value,
                            "GB/s",
                            exp,
                            "pinned copies (cuMemcpyAsync, copy engines) on every GPU at once, \
                             each GPU timed with its own events (nvbandwidth's host_to_all / \
                             all_to_host_memcpy_ce)",
                        )
                    });
                }
            }
        }
    }
    if let Reading::Value(mem) = &m.memory {
        for g in mem {
            let Some(v) = g.result.value() else { continue };
            let exp = spec_of(facts, g.gpu).and_then(|s| s.memory_bandwidth_gbps);
            let best = |kernels: &[&str], what: &str| -> String {
                match best_verified_point(&v.sweep, kernels) {
                    Some(p) => format!(
                        "{what}; best verified launch of kernels {}: {} at {} blocks x {} \
                         threads",
                        kernels.join("/"),
                        p.kernel,
                        p.blocks,
                        p.threads
                    ),
                    None => what.to_string(),
                }
            };
            let figures = [
                (
                    "memory_copy_bandwidth",
                    v.copy_gbps,
                    best(
                        &COPY_KERNELS,
                        "gpuaudit copy kernels (16-byte vectors; grid-stride, streaming, tiled \
                         and flat one-vector-per-thread), bytes read + written, median of \
                         repeats, each launch's output verified",
                    ),
                ),
                (
                    "memory_memcpy_bandwidth",
                    v.memcpy_gbps,
                    "cuMemcpyDtoDAsync within the GPU, bytes read + written, median of repeats, \
                     output verified"
                        .to_string(),
                ),
                (
                    "memory_read_bandwidth",
                    v.read_gbps,
                    best(
                        &READ_KERNELS,
                        "gpuaudit read kernel (XOR reduction, as BabelStream's Dot reads), \
                         bytes read",
                    ),
                ),
                (
                    "memory_write_bandwidth",
                    v.write_gbps,
                    best(&WRITE_KERNELS, "gpuaudit write kernel, bytes written"),
                ),
                (
                    "memory_triad_bandwidth",
                    v.triad_gbps,
                    best(
                        &TRIAD_KERNELS,
                        "STREAM triad a = b + s*c over f32, 2 reads + 1 write per element",
                    ),
                ),
                (
                    "memory_add_bandwidth",
                    v.add_gbps,
                    best(
                        &ADD_KERNELS,
                        "STREAM/BabelStream add a = b + c over f32, 2 reads + 1 write per \
                         element",
                    ),
                ),
            ];
            for (name, val, how) in figures {
                if let Some(val) = val {
                    out.push(Measurement {
                        gpu: Some(g.gpu),
                        size_bytes: Some(v.buffer_bytes),
                        ..mk(name, val, "GB/s", exp, &how)
                    });
                }
            }
        }
    }
    if let Reading::Value(gemm) = &m.gemm {
        for g in gemm {
            let Some(rs) = g.result.value() else { continue };
            let spec = spec_of(facts, g.gpu);
            for r in rs {
                let Some(p) = r.result.value() else { continue };
                let judged = match spec.and_then(|s| Attainable::embedded().gemm(s, r.dtype, p.m)) {
                    Some(a) => format!(
                        "judged against the {:.0}% of it healthy GPUs of this model reach at \
                         {}x{}x{} ({})",
                        a.fraction * 100.0,
                        a.size,
                        a.size,
                        a.size,
                        a.source
                    ),
                    None => "no attainable figure known for this model at this size: judged \
                             against the generic floor of the peak"
                        .to_string(),
                };
                let how = format!(
                    "{}x{}x{} {} GEMM ({} layout) on random data via {}, best of {} batches of {} \
                     back-to-back GEMMs timed with events, output checked against the CPU; \
                     expected: the datasheet's dense peak; {judged}",
                    p.m,
                    p.n,
                    p.k,
                    r.dtype.as_str(),
                    p.layout,
                    p.library,
                    p.batches.len(),
                    p.repeats
                );
                let exp = spec.and_then(|s| gemm_expected(s, r.dtype));
                out.push(Measurement {
                    gpu: Some(g.gpu),
                    dtype: Some(r.dtype.as_str().into()),
                    ..mk("gemm_tflops", p.tflops, "TFLOPS", exp, &how)
                });
            }
        }
    }
    if let Reading::Value(p) = &m.p2p {
        for x in &p.pairs {
            let exp = p2p_expected(facts, x.src, x.dst).map(|e| e.0);
            if let Reading::Value(v) = x.gbps {
                out.push(Measurement {
                    gpu: Some(x.src),
                    peer: Some(x.dst),
                    size_bytes: Some(p.size_bytes),
                    ..mk(
                        "p2p_bandwidth",
                        v,
                        "GB/s",
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
                    ..mk(
                        "p2p_latency_us",
                        v,
                        "us",
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
                    ..mk(
                        "p2p_bidir_bandwidth",
                        v,
                        "GB/s",
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
                out.push(Measurement {
                    gpu: Some(t.gpu),
                    size_bytes: Some(t.size_bytes),
                    ..mk(
                        &format!("p2p_{}_bandwidth", t.kind.label()),
                        v,
                        "GB/s",
                        None,
                        &how,
                    )
                });
            }
        }
    }
    if let Reading::Value(a) = &m.nccl {
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
                ..mk("allreduce_busbw", pt.busbw_gbps, "GB/s", exp, &how)
            });
        }
        if let Some(pt) = a.at(MIB) {
            out.push(Measurement {
                size_bytes: Some(MIB),
                ..mk("allreduce_latency_us", pt.time_us, "us", None, &how)
            });
        }
    }
    if let Reading::Value(b) = &m.burn {
        for g in &b.per_gpu {
            let Some(v) = g.result.value() else { continue };
            let gpu = Some(g.gpu);
            let how = format!(
                "{}x{} {} GEMM on every GPU at once for {:.0} s, TFLOPS per ~1 s window",
                b.size,
                b.size,
                b.dtype.as_str(),
                b.seconds
            );
            let spec = spec_of(facts, g.gpu);
            if let Some(s) = v.tflops_stats {
                let exp = spec.and_then(|sp| gemm_expected(sp, b.dtype));
                out.push(Measurement {
                    gpu,
                    dtype: Some(b.dtype.as_str().into()),
                    ..mk(
                        "burn_tflops",
                        s.median,
                        "TFLOPS",
                        exp,
                        &format!("median; {how}"),
                    )
                });
            }
            if let Some(cv) = v.tflops_cv {
                let how = format!("coefficient of variation; {how}");
                out.push(Measurement {
                    gpu,
                    ..mk("burn_tflops_cv", cv, "ratio", None, &how)
                });
            }
            if let Reading::Value(t) = &v.telemetry {
                let nv = format!("NVML every {} ms during the burn", t.interval_ms);
                if let Some(c) = t.sm_clock_mhz {
                    let exp = spec.and_then(|s| s.boost_clock_mhz).map(f64::from);
                    let how = format!("median; {nv}; expected: the datasheet boost clock");
                    out.push(Measurement {
                        gpu,
                        ..mk("burn_sm_clock_mhz", c.median, "MHz", exp, &how)
                    });
                }
                if let Some(p) = t.power_w {
                    let exp = spec.and_then(|s| s.tdp_w);
                    let how = format!("median; {nv}; expected: the datasheet TDP");
                    out.push(Measurement {
                        gpu,
                        ..mk("burn_power_w", p.median, "W", exp, &how)
                    });
                }
                if let Some(c) = t.temperature_c {
                    let how = format!("maximum; {nv}");
                    out.push(Measurement {
                        gpu,
                        ..mk("burn_temperature_c", c.max, "C", None, &how)
                    });
                }
            }
        }
    }
    out.extend(crate::checks::workload::pipeline::measurements(facts));
    out
}

/// The bidirectional, SM-driven and latency figures of one GPU's host link.
fn host_extras(v: &crate::facts::PcieGpu, gpu: u32, link: Option<f64>) -> Vec<Measurement> {
    let mut out = Vec::new();
    let at = |size: u64, m: Measurement| Measurement {
        gpu: Some(gpu),
        size_bytes: Some(size),
        ..m
    };
    if let Reading::Value(b) = &v.bidirectional {
        let how = "pinned cuMemcpyHtoDAsync and cuMemcpyDtoHAsync at the same time on two \
                   streams (copy engines), each direction timed with its own events, data \
                   verified (nvbandwidth's host_to_device_bidirectional_memcpy_ce)";
        out.push(at(
            b.size_bytes,
            mk(
                "h2d_bidirectional_bandwidth",
                b.h2d_gbps,
                "GB/s",
                link,
                &format!("host to device while device to host runs: {how}; expected: the PCIe link's one-direction rate"),
            ),
        ));
        out.push(at(
            b.size_bytes,
            mk(
                "d2h_bidirectional_bandwidth",
                b.d2h_gbps,
                "GB/s",
                link,
                &format!("device to host while host to device runs: {how}; expected: the PCIe link's one-direction rate"),
            ),
        ));
        out.push(at(
            b.size_bytes,
            mk(
                "bidirectional_total_bandwidth",
                b.total_gbps,
                "GB/s",
                link.map(|l| 2.0 * l),
                &format!("both directions added: {how}; expected: twice the PCIe link's one-direction rate (the link is full duplex)"),
            ),
        ));
    }
    if let Reading::Value(c) = &v.sm_copy {
        let how = format!(
            "gpuaudit's copy kernel ({}) between device memory and mapped pinned host memory, \
             the SMs moving the data over the link, median of launches, data verified \
             (nvbandwidth's {{}}_memcpy_sm); expected: the PCIe link's one-direction rate",
            c.kernel
        );
        for (name, val, nv) in [
            ("h2d_sm_bandwidth", c.h2d_gbps, "host_to_device"),
            ("d2h_sm_bandwidth", c.d2h_gbps, "device_to_host"),
        ] {
            out.push(at(
                c.size_bytes,
                mk(name, val, "GB/s", link, &how.replace("{}", nv)),
            ));
        }
    }
    if let Reading::Value(l) = &v.latency {
        out.push(Measurement {
            gpu: Some(gpu),
            ..mk(
                "host_latency_sm_us",
                l.sm_chase_us,
                "us",
                None,
                &format!(
                    "one GPU thread following {} dependent links through mapped pinned host \
                     memory (each link its own 512-byte line, never followed twice), time per \
                     load, median of launches (nvbandwidth's host_device_latency_sm)",
                    l.chase_steps
                ),
            )
        });
        out.push(Measurement {
            gpu: Some(gpu),
            ..mk(
                "host_round_trip_us",
                l.memcpy_round_trip_us,
                "us",
                None,
                &format!(
                    "a synchronous 4-byte cuMemcpyHtoDAsync then DtoH (each followed by \
                     cuStreamSynchronize), timed on the host, median of {} round trips",
                    l.round_trips
                ),
            )
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{GemmDtype, GemmResult, OnGpu, PcieBandwidth};
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
                (p.m, p.n, p.k) = (4096, 4096, 4096);
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
}
