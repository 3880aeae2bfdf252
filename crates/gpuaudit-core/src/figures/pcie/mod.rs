//! The host link (pcie.bandwidth): pinned and pageable copies each way, all GPUs at once,
//! both ways at once, SM-driven copies and the latency of host memory.

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::pcie_expected;
use crate::facts::{Direction, Facts, HostMemory, Measurement, PcieGpu};
use crate::reading::Reading;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PcieFigure {
    H2dPinned,
    D2hPinned,
    H2dPageable,
    D2hPageable,
    H2dBidirectional,
    D2hBidirectional,
    BidirectionalTotal,
    H2dSm,
    D2hSm,
    HostLatencySm,
    HostRoundTrip,
    H2dPinnedAllGpus,
    D2hPinnedAllGpus,
}

impl PcieFigure {
    pub const ALL: [PcieFigure; 13] = [
        PcieFigure::H2dPinned,
        PcieFigure::D2hPinned,
        PcieFigure::H2dPageable,
        PcieFigure::D2hPageable,
        PcieFigure::H2dBidirectional,
        PcieFigure::D2hBidirectional,
        PcieFigure::BidirectionalTotal,
        PcieFigure::H2dSm,
        PcieFigure::D2hSm,
        PcieFigure::HostLatencySm,
        PcieFigure::HostRoundTrip,
        PcieFigure::H2dPinnedAllGpus,
        PcieFigure::D2hPinnedAllGpus,
    ];

    pub fn spec(self) -> FigureSpec {
        let gb = Unit::GigabytesPerSecond;
        let p = FigureSpec::perf;
        match self {
            PcieFigure::H2dPinned => p("h2d_pinned_bandwidth", "host→GPU copy, pinned", gb),
            PcieFigure::D2hPinned => p("d2h_pinned_bandwidth", "GPU→host copy, pinned", gb),
            PcieFigure::H2dPageable => p("h2d_pageable_bandwidth", "host→GPU copy, pageable", gb),
            PcieFigure::D2hPageable => p("d2h_pageable_bandwidth", "GPU→host copy, pageable", gb),
            PcieFigure::H2dBidirectional => p(
                "h2d_bidirectional_bandwidth",
                "host→GPU while GPU→host runs",
                gb,
            ),
            PcieFigure::D2hBidirectional => p(
                "d2h_bidirectional_bandwidth",
                "GPU→host while host→GPU runs",
                gb,
            ),
            PcieFigure::BidirectionalTotal => p(
                "bidirectional_total_bandwidth",
                "host link, both ways summed",
                gb,
            ),
            PcieFigure::H2dSm => p("h2d_sm_bandwidth", "host→GPU copy by the SMs", gb),
            PcieFigure::D2hSm => p("d2h_sm_bandwidth", "GPU→host copy by the SMs", gb),
            PcieFigure::HostLatencySm => FigureSpec::latency(
                "host_latency_sm_us",
                "host memory latency from the SM",
                Unit::Microseconds,
            ),
            PcieFigure::HostRoundTrip => FigureSpec::latency(
                "host_round_trip_us",
                "host↔GPU 4-byte round trip",
                Unit::Microseconds,
            ),
            PcieFigure::H2dPinnedAllGpus => p(
                "h2d_pinned_bandwidth_all_gpus",
                "host→GPU, all GPUs at once",
                gb,
            ),
            PcieFigure::D2hPinnedAllGpus => p(
                "d2h_pinned_bandwidth_all_gpus",
                "GPU→host, all GPUs at once",
                gb,
            ),
        }
    }

    fn copy(dir: Direction, mem: HostMemory) -> PcieFigure {
        match (dir, mem) {
            (Direction::H2d, HostMemory::Pinned) => PcieFigure::H2dPinned,
            (Direction::D2h, HostMemory::Pinned) => PcieFigure::D2hPinned,
            (Direction::H2d, HostMemory::Pageable) => PcieFigure::H2dPageable,
            (Direction::D2h, HostMemory::Pageable) => PcieFigure::D2hPageable,
        }
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(p) = &facts.measured.pcie else {
        return Vec::new();
    };
    let mut out = Vec::new();
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
            out.push(Measurement {
                gpu: Some(g.gpu),
                size_bytes: Some(pt.size_bytes),
                ..measurement(Figure::Pcie(PcieFigure::copy(dir, mem)), pt.gbps, exp, how)
            });
        }
        out.extend(host_extras(v, g.gpu, link));
    }
    if let Reading::Value(all) = &p.all_at_once {
        for c in all {
            let figure = match c.direction {
                Direction::H2d => PcieFigure::H2dPinnedAllGpus,
                Direction::D2h => PcieFigure::D2hPinnedAllGpus,
            };
            for v in &c.per_gpu {
                let exp = pcie_expected(facts, v.gpu).map(|e| e.0);
                out.push(Measurement {
                    gpu: Some(v.gpu),
                    size_bytes: Some(c.size_bytes),
                    ..measurement(
                        Figure::Pcie(figure),
                        v.value,
                        exp,
                        "pinned copies (cuMemcpyAsync, copy engines) on every GPU at once, \
                         each GPU timed with its own events (nvbandwidth's host_to_all / \
                         all_to_host_memcpy_ce)",
                    )
                });
            }
        }
    }
    out
}

/// The bidirectional, SM-driven and latency figures of one GPU's host link.
fn host_extras(v: &PcieGpu, gpu: u32, link: Option<f64>) -> Vec<Measurement> {
    let mut out = Vec::new();
    let at = |size: u64, m: Measurement| Measurement {
        gpu: Some(gpu),
        size_bytes: Some(size),
        ..m
    };
    let f = Figure::Pcie;
    if let Reading::Value(b) = &v.bidirectional {
        let how = "pinned cuMemcpyHtoDAsync and cuMemcpyDtoHAsync at the same time on two \
                   streams (copy engines), each direction timed with its own events, data \
                   verified (nvbandwidth's host_to_device_bidirectional_memcpy_ce)";
        out.push(at(
            b.size_bytes,
            measurement(
                f(PcieFigure::H2dBidirectional),
                b.h2d_gbps,
                link,
                format!("host to device while device to host runs: {how}; expected: the PCIe link's one-direction rate"),
            ),
        ));
        out.push(at(
            b.size_bytes,
            measurement(
                f(PcieFigure::D2hBidirectional),
                b.d2h_gbps,
                link,
                format!("device to host while host to device runs: {how}; expected: the PCIe link's one-direction rate"),
            ),
        ));
        out.push(at(
            b.size_bytes,
            measurement(
                f(PcieFigure::BidirectionalTotal),
                b.total_gbps,
                link.map(|l| 2.0 * l),
                format!("both directions added: {how}; expected: twice the PCIe link's one-direction rate (the link is full duplex)"),
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
        for (figure, val, nv) in [
            (PcieFigure::H2dSm, c.h2d_gbps, "host_to_device"),
            (PcieFigure::D2hSm, c.d2h_gbps, "device_to_host"),
        ] {
            out.push(at(
                c.size_bytes,
                measurement(f(figure), val, link, how.replace("{}", nv)),
            ));
        }
    }
    if let Reading::Value(l) = &v.latency {
        out.push(Measurement {
            gpu: Some(gpu),
            ..measurement(
                f(PcieFigure::HostLatencySm),
                l.sm_chase_us,
                None,
                format!(
                    "one GPU thread following {} dependent links through mapped pinned host \
                     memory (each link its own 512-byte line, never followed twice), time per \
                     load, median of launches (nvbandwidth's host_device_latency_sm)",
                    l.chase_steps
                ),
            )
        });
        out.push(Measurement {
            gpu: Some(gpu),
            ..measurement(
                f(PcieFigure::HostRoundTrip),
                l.memcpy_round_trip_us,
                None,
                format!(
                    "a synchronous 4-byte cuMemcpyHtoDAsync then DtoH (each followed by \
                     cuStreamSynchronize), timed on the host, median of {} round trips",
                    l.round_trips
                ),
            )
        });
    }
    out
}
