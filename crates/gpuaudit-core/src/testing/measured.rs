//! Measurement results for tests of the measured checks, the report and the bench tables:
//! each a plausible healthy figure on an H200, with the one value a test varies as argument.

use crate::facts::*;
use crate::reading::Reading;
use crate::units::{GIB, MIB};

/// Statistics of `n = 10` equal samples of `v`.
pub fn stats(v: f64) -> Stats {
    Stats {
        n: 10,
        median: v,
        min: v,
        max: v,
    }
}

/// One GPU's host copies at 1 GiB: pinned `h2d` and `d2h` GB/s, pageable host->GPU 20 GB/s,
/// the link at gen5 x16 under load (10 samples), data verified.
pub fn pcie_gpu(h2d: f64, d2h: f64) -> PcieGpu {
    let pt = |direction, host_memory, gbps| CopyPoint {
        direction,
        host_memory,
        size_bytes: GIB,
        gbps,
        repeats: 5,
    };
    PcieGpu {
        points: vec![
            pt(Direction::H2d, HostMemory::Pinned, h2d),
            pt(Direction::D2h, HostMemory::Pinned, d2h),
            pt(Direction::H2d, HostMemory::Pageable, 20.0),
        ],
        link_under_load: Reading::Value(PcieLinkState {
            gen: 5,
            width: 16,
            samples: 10,
        }),
        verify: vec![Verify {
            what: "h2d".into(),
            ok: true,
            detail: None,
        }],
        bidirectional: Reading::unavailable("quick audit: run with --full"),
        sm_copy: Reading::unavailable("quick audit: run with --full"),
        latency: Reading::unavailable("quick audit: run with --full"),
    }
}

/// Device memory: copy kernel `copy` GB/s over 4 GiB buffers, memcpy 1% below it.
pub fn membw(copy: f64) -> MemoryBandwidth {
    MemoryBandwidth {
        buffer_bytes: 4 * GIB,
        copy_gbps: Some(copy),
        memcpy_gbps: Some(copy * 0.99),
        read_gbps: None,
        write_gbps: None,
        triad_gbps: None,
        add_gbps: None,
        sweep: vec![],
        verify: vec![],
        note: None,
    }
}

/// An 8192³ GEMM at `tflops`; `verified: false` gives an error above the tolerance.
pub fn gemm_point(tflops: f64, verified: bool) -> GemmPoint {
    GemmPoint {
        m: 8192,
        n: 8192,
        k: 8192,
        tflops,
        ms_per_gemm: 1.0,
        repeats: 20,
        batches: vec![tflops],
        library: "cublasLt 130001".into(),
        layout: "NN".into(),
        max_error: if verified { 1e-3 } else { 5e-4 },
        tolerance: 1e-4,
        samples: 32,
        verified,
    }
}

/// Two GPUs, 1 GiB copies: GPU 0 -> GPU 1 at `gbps01`, GPU 1 -> GPU 0 at 394 GB/s, 6 us
/// latency, `peer` access either way, 740 GB/s both ways at once.
pub fn p2p(gbps01: f64, peer: bool) -> P2pMatrix {
    let pair = |src, dst, gbps| P2pPair {
        src,
        dst,
        peer_access: peer,
        gbps: Reading::Value(gbps),
        latency_us: Reading::Value(6.0),
        verify: Some(Verify {
            what: "x".into(),
            ok: true,
            detail: None,
        }),
    };
    P2pMatrix {
        gpus: vec![0, 1],
        size_bytes: GIB,
        pairs: vec![pair(0, 1, gbps01), pair(1, 0, 394.0)],
        bidirectional: vec![P2pBidir {
            a: 0,
            b: 1,
            gbps: Reading::Value(740.0),
        }],
        patterns: vec![],
    }
}

/// All-reduce over GPUs 0 and 1 (NCCL 2.27.7): 57.6 us at 1 MiB, `busbw` GB/s at 1 GiB.
pub fn allreduce(busbw: f64, ok: bool) -> AllReduce {
    AllReduce {
        gpus: vec![0, 1],
        nccl_version: Some("2.27.7".into()),
        points: vec![
            AllReducePoint {
                size_bytes: MIB,
                time_us: 57.6,
                algbw_gbps: 18.2,
                busbw_gbps: 18.2,
                iterations: 50,
            },
            AllReducePoint {
                size_bytes: GIB,
                time_us: 3270.0,
                algbw_gbps: busbw,
                busbw_gbps: busbw,
                iterations: 10,
            },
        ],
        verify: vec![Verify {
            what: "sum".into(),
            ok,
            detail: None,
        }],
    }
}

/// A 60 s burn at a steady `tflops`, NVML telemetry with the `throttle` reasons seen.
pub fn burn_gpu(tflops: f64, checksum: &str, throttle: Vec<ThrottleSeen>) -> BurnGpu {
    let windows = vec![tflops; 60];
    BurnGpu {
        tflops_stats: Stats::of(&windows),
        tflops_cv: coefficient_of_variation(&windows),
        tflops: windows,
        checksum: checksum.into(),
        self_consistent: true,
        max_error: 1e-3,
        tolerance: 3e-2,
        verified: true,
        telemetry: Reading::Value(Telemetry {
            samples: 300,
            interval_ms: 200,
            sm_clock_mhz: Some(stats(1755.0)),
            sm_clock_first_mhz: Some(1755.0),
            sm_clock_last_mhz: Some(1755.0),
            power_w: Some(stats(690.0)),
            temperature_c: Some(stats(70.0)),
            throttle,
            series: vec![],
        }),
    }
}

/// The NVML samples of a burn of `seconds` every 200 ms as a healthy H200 at its power limit
/// gives them: the clock starts at the 1980 MHz boost and settles near 1755 MHz once the
/// power cap is reached (a fifth of the way in, `sw_power_cap` from then on), power rises to
/// 690 W, the temperature from 40 to 70 °C. `hot_from`: from that second on, the GPU reports
/// hardware thermal slowdown and its clock halves.
pub fn burn_series(seconds: u64, hot_from: Option<u64>) -> Vec<TelemetrySample> {
    let n = seconds * 5;
    (0..n)
        .map(|i| {
            let t_ms = i * 200;
            let x = i as f64 / n.max(1) as f64;
            let capped = x >= 0.2;
            let hot = hot_from.is_some_and(|h| t_ms >= h * 1000);
            let mut throttle = Vec::new();
            if capped {
                throttle.push(ThrottleReason::SwPowerCap);
            }
            if hot {
                throttle.push(ThrottleReason::HwThermalSlowdown);
            }
            let clock = match (hot, capped) {
                (true, _) => 900,
                (false, true) => 1755 + (i % 3) as u32 * 15,
                (false, false) => 1980,
            };
            TelemetrySample {
                t_ms,
                sm_clock_mhz: Some(clock),
                power_w: Some(if capped { 690.0 } else { 300.0 + 2000.0 * x }),
                temperature_c: Some(40 + (30.0 * x.min(0.6) / 0.6) as u32),
                throttle,
            }
        })
        .collect()
}

/// Context creation taking `total` ms (cuInit three quarters of it), 2 GPUs visible, GPU
/// 0's persistence mode as given.
pub fn ctx(total: f64, persistence: bool) -> ContextLatency {
    ContextLatency {
        runs: 10,
        visible_gpus: Some(2),
        init_ms: stats(total * 0.75),
        context_ms: stats(total * 0.24),
        alloc_ms: stats(total * 0.01),
        total_ms: stats(total),
        persistence_mode: Reading::Value(vec![GpuFlag {
            gpu: 0,
            enabled: persistence,
        }]),
        failures: vec![],
    }
}

/// Everything `gpuaudit --full` measures on `n` H200s (SXM, NVLink), at the figures a
/// healthy 2×H200 VM gave against the anchors (BENCHMARKS.md, 2026-11-30): host copies by
/// size 4 KiB … 1 GiB, device memory, GEMM per dtype, the P2P matrix, the all-reduce sweep,
/// context creation and a 60 s burn with its NVML samples. For the reports' views and their
/// tests: change what a test is about afterwards.
pub fn full_run(m: &mut MeasuredFacts, n: u32) {
    let gpus: Vec<u32> = (0..n).collect();
    m.context = Reading::Value(ctx(454.6, true));
    let sweep = |g: u32| {
        let mut points = Vec::new();
        for (dir, mem, top) in [
            (Direction::H2d, HostMemory::Pinned, 54.6),
            (Direction::D2h, HostMemory::Pinned, 55.3),
            (Direction::H2d, HostMemory::Pageable, 20.3),
            (Direction::D2h, HostMemory::Pageable, 15.6),
        ] {
            // A copy costs a fixed ~10 us plus its bytes at the top rate.
            for k in (12..=30).step_by(2) {
                let size = 1u64 << k;
                let secs = 10e-6 + size as f64 / (top * 1e9);
                points.push(CopyPoint {
                    direction: dir,
                    host_memory: mem,
                    size_bytes: size,
                    gbps: size as f64 / secs / 1e9 * (1.0 - 0.002 * g as f64),
                    repeats: 5,
                });
            }
        }
        let mut p = pcie_gpu(54.6, 55.3);
        p.points = points;
        p
    };
    m.pcie = Reading::Value(PcieBandwidth {
        per_gpu: gpus
            .iter()
            .map(|g| OnGpu::new(*g, Reading::Value(sweep(*g))))
            .collect(),
        all_at_once: Reading::Value(vec![ConcurrentCopy {
            direction: Direction::H2d,
            size_bytes: GIB,
            per_gpu: gpus
                .iter()
                .map(|g| GpuValue {
                    gpu: *g,
                    value: 53.9,
                })
                .collect(),
            total_gbps: 53.9 * n as f64,
        }]),
    });
    m.memory = Reading::Value(
        gpus.iter()
            .map(|g| {
                let mut b = membw(3959.3);
                b.memcpy_gbps = Some(4265.7);
                b.read_gbps = Some(4410.0);
                b.write_gbps = Some(4330.0);
                b.triad_gbps = Some(4120.0);
                OnGpu::new(*g, Reading::Value(b))
            })
            .collect(),
    );
    let tflops = [
        (GemmDtype::Bf16, 822.0),
        (GemmDtype::Fp16, 771.6),
        (GemmDtype::Fp8, 1616.9),
        (GemmDtype::Tf32, 419.3),
        (GemmDtype::Fp32, 51.3),
        (GemmDtype::Fp64, 56.7),
    ];
    m.gemm = Reading::Value(
        gpus.iter()
            .map(|g| {
                OnGpu::new(
                    *g,
                    Reading::Value(
                        tflops
                            .iter()
                            .map(|(d, t)| GemmResult {
                                dtype: *d,
                                result: Reading::Value(gemm_point(*t, true)),
                            })
                            .collect(),
                    ),
                )
            })
            .collect(),
    );
    let mut pairs = Vec::new();
    let mut bidirectional = Vec::new();
    for a in 0..n {
        for b in 0..n {
            if a == b {
                continue;
            }
            pairs.push(P2pPair {
                src: a,
                dst: b,
                peer_access: true,
                gbps: Reading::Value(396.8 - 0.3 * (a + b) as f64),
                latency_us: Reading::Value(2.4),
                verify: None,
            });
            if a < b {
                bidirectional.push(P2pBidir {
                    a,
                    b,
                    gbps: Reading::Value(742.0),
                });
            }
        }
    }
    m.p2p = Reading::Value(P2pMatrix {
        gpus: gpus.clone(),
        size_bytes: GIB,
        pairs,
        bidirectional,
        patterns: vec![],
    });
    let mut ar = allreduce(331.8, true);
    ar.gpus = gpus.clone();
    m.nccl = Reading::Value(ar);
    m.burn = Reading::Value(Burn {
        seconds: 60.0,
        dtype: GemmDtype::Bf16,
        size: 8192,
        per_gpu: gpus
            .iter()
            .map(|g| {
                let mut b = burn_gpu(
                    700.0,
                    "9f2c",
                    vec![ThrottleSeen {
                        reason: ThrottleReason::SwPowerCap,
                        samples: 240,
                    }],
                );
                b.tflops = (0..60).map(|i| 700.0 + (i % 4) as f64 * 3.0).collect();
                b.tflops_stats = Stats::of(&b.tflops);
                b.tflops_cv = coefficient_of_variation(&b.tflops);
                if let Reading::Value(t) = &mut b.telemetry {
                    t.series = burn_series(60, None);
                    t.samples = t.series.len() as u32;
                }
                OnGpu::new(*g, Reading::Value(b))
            })
            .collect(),
    });
}
