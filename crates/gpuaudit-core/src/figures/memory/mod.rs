//! Device memory bandwidth (memory.bandwidth): gpuaudit's kernels and cuMemcpy within the GPU.

pub(super) mod bench;
pub(super) mod result;

use super::{measurement, Figure, FigureSpec, Unit};
use crate::checks::judge::spec_of;
use crate::facts::{
    best_verified_point, Facts, Measurement, ADD_KERNELS, COPY_KERNELS, READ_KERNELS,
    TRIAD_KERNELS, WRITE_KERNELS,
};
use crate::reading::Reading;
use crate::spec::Attainable;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryFigure {
    Copy,
    Memcpy,
    Read,
    Write,
    Triad,
    Add,
}

impl MemoryFigure {
    pub const ALL: [MemoryFigure; 6] = [
        MemoryFigure::Copy,
        MemoryFigure::Memcpy,
        MemoryFigure::Read,
        MemoryFigure::Write,
        MemoryFigure::Triad,
        MemoryFigure::Add,
    ];

    pub fn spec(self) -> FigureSpec {
        let gb = Unit::GigabytesPerSecond;
        let p = FigureSpec::perf;
        match self {
            MemoryFigure::Copy => p("memory_copy_bandwidth", "memory copy (kernel)", gb),
            MemoryFigure::Memcpy => p("memory_memcpy_bandwidth", "memory copy (memcpy)", gb),
            MemoryFigure::Read => p("memory_read_bandwidth", "memory read", gb),
            MemoryFigure::Write => p("memory_write_bandwidth", "memory write", gb),
            MemoryFigure::Triad => p("memory_triad_bandwidth", "memory triad", gb),
            MemoryFigure::Add => p("memory_add_bandwidth", "memory add", gb),
        }
    }

    /// The figures memory.bandwidth judges (per GPU the better of the two) and the headline
    /// holds against what healthy GPUs reach.
    pub fn is_device_copy(self) -> bool {
        matches!(self, MemoryFigure::Copy | MemoryFigure::Memcpy)
    }
}

pub(super) fn measurements(facts: &Facts) -> Vec<Measurement> {
    let Reading::Value(mem) = &facts.measured.memory else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for g in mem {
        let Some(v) = g.result.value() else { continue };
        let spec = spec_of(facts, g.gpu);
        let exp = spec.and_then(|s| s.memory_bandwidth_gbps);
        // What healthy GPUs of the model reach in a device copy (data/attainable.toml).
        let attainable = spec.and_then(|s| {
            let a = Attainable::embedded().memory(s)?;
            Some(a.fraction * s.memory_bandwidth_gbps?)
        });
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
                MemoryFigure::Copy,
                v.copy_gbps,
                best(
                    &COPY_KERNELS,
                    "gpuaudit copy kernels (16-byte vectors; grid-stride, streaming, tiled \
                     and flat one-vector-per-thread), bytes read + written, median of \
                     repeats, each launch's output verified",
                ),
            ),
            (
                MemoryFigure::Memcpy,
                v.memcpy_gbps,
                "cuMemcpyDtoDAsync within the GPU, bytes read + written, median of repeats, \
                 output verified"
                    .to_string(),
            ),
            (
                MemoryFigure::Read,
                v.read_gbps,
                best(
                    &READ_KERNELS,
                    "gpuaudit read kernel (XOR reduction, as BabelStream's Dot reads), \
                     bytes read",
                ),
            ),
            (
                MemoryFigure::Write,
                v.write_gbps,
                best(&WRITE_KERNELS, "gpuaudit write kernel, bytes written"),
            ),
            (
                MemoryFigure::Triad,
                v.triad_gbps,
                best(
                    &TRIAD_KERNELS,
                    "STREAM triad a = b + s*c over f32, 2 reads + 1 write per element",
                ),
            ),
            (
                MemoryFigure::Add,
                v.add_gbps,
                best(
                    &ADD_KERNELS,
                    "STREAM/BabelStream add a = b + c over f32, 2 reads + 1 write per \
                     element",
                ),
            ),
        ];
        for (figure, val, how) in figures {
            if let Some(val) = val {
                out.push(Measurement {
                    gpu: Some(g.gpu),
                    size_bytes: Some(v.buffer_bytes),
                    attainable: attainable.filter(|_| figure.is_device_copy()),
                    ..measurement(Figure::Memory(figure), val, exp, how)
                });
            }
        }
    }
    out
}
