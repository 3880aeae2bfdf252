//! The figure catalog: every figure gpuaudit measures, as data (DESIGN "Measured figures").
//!
//! A check is a first-class unit (one file, one registry line); so is a figure. Each
//! measurement group (context, pcie, memory, gemm, p2p, nccl, burn, storage, loopback,
//! rehearsal) is one module here that owns its result type (`<group>/result.rs`, what the
//! facts hold) and its figures as an enum, what each is (its stable
//! JSON name, a person's label, its unit and base unit, which way it is better, whether it is
//! a performance or an operating condition, how it spreads across healthy machines) and its
//! slice of the report's `measurements`. Everything that reads a figure (the report, the
//! views, compare, fleet, `serve`) reads it through [`Figure`]: no figure's name is written as
//! a string outside this module, and a figure added to a group's enum is known to every
//! consumer, or the compiler (an exhaustive `match` in [`Figure::spec`]) and the tests
//! (`every_figure_is_reported_and_labelled`) say which one does not.
//!
//! The report's JSON keeps the names (`Measurement::name`): [`Figure::id`] is that name,
//! [`Figure::from_id`] reads it back, and a name this build does not know (a newer gpuaudit's
//! report) is kept and shown as it is, judged by nothing.

mod bench;
mod burn;
mod common;
mod context;
mod gemm;
mod loopback;
mod memory;
mod nccl;
mod p2p;
mod pcie;
mod rehearsal;
mod storage;

pub use burn::BurnFigure;
pub use context::ContextFigure;
pub use gemm::GemmFigure;
pub use loopback::LoopbackFigure;
pub use memory::MemoryFigure;
pub use nccl::NcclFigure;
pub use p2p::P2pFigure;
pub use pcie::PcieFigure;
pub use rehearsal::RehearsalFigure;
pub use storage::StorageFigure;

/// What each group measured, as the types `facts` holds: defined beside the group's figures
/// (its result and its figures change together) and re-exported by [`crate::facts`], where
/// checks read every fact from one place.
pub mod results {
    pub use super::burn::result::*;
    pub use super::common::*;
    pub use super::context::result::*;
    pub use super::gemm::result::*;
    pub use super::loopback::result::*;
    pub use super::memory::result::*;
    pub use super::nccl::result::*;
    pub use super::p2p::result::*;
    pub use super::pcie::result::*;
    pub use super::rehearsal::result::*;
    pub use super::storage::result::*;
}

use crate::facts::{Facts, MeasuredFacts, Measurement};
use crate::units::bytes;
use std::collections::HashMap;
use std::sync::OnceLock;

/// The measurement groups, in the order the report lists their figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    Context,
    Pcie,
    Memory,
    Gemm,
    P2p,
    Nccl,
    Burn,
    Storage,
    Loopback,
    Rehearsal,
}

impl Group {
    pub const ALL: [Group; 10] = [
        Group::Context,
        Group::Pcie,
        Group::Memory,
        Group::Gemm,
        Group::P2p,
        Group::Nccl,
        Group::Burn,
        Group::Storage,
        Group::Loopback,
        Group::Rehearsal,
    ];

    /// The group's full tables in `gpuaudit bench` (title, rows with the header first), from
    /// its own `bench.rs`. The host groups (storage, loopback) and the rehearsal have their
    /// own commands and views, and none here.
    pub fn bench_tables(self, m: &MeasuredFacts) -> Vec<(String, Vec<Vec<String>>)> {
        match self {
            Group::Context => context::bench::tables(&m.context),
            Group::Pcie => pcie::bench::tables(&m.pcie),
            Group::Memory => memory::bench::tables(&m.memory),
            Group::Gemm => gemm::bench::tables(&m.gemm),
            Group::P2p => p2p::bench::tables(&m.p2p),
            Group::Nccl => nccl::bench::tables(&m.nccl),
            Group::Burn => burn::bench::tables(&m.burn),
            Group::Storage | Group::Loopback | Group::Rehearsal => Vec::new(),
        }
    }

    /// The group's figures, in report order.
    pub fn figures(self) -> Vec<Figure> {
        match self {
            Group::Context => ContextFigure::ALL
                .iter()
                .map(|f| Figure::Context(*f))
                .collect(),
            Group::Pcie => PcieFigure::ALL.iter().map(|f| Figure::Pcie(*f)).collect(),
            Group::Memory => MemoryFigure::ALL
                .iter()
                .map(|f| Figure::Memory(*f))
                .collect(),
            Group::Gemm => GemmFigure::ALL.iter().map(|f| Figure::Gemm(*f)).collect(),
            Group::P2p => P2pFigure::ALL.iter().map(|f| Figure::P2p(*f)).collect(),
            Group::Nccl => NcclFigure::ALL.iter().map(|f| Figure::Nccl(*f)).collect(),
            Group::Burn => BurnFigure::ALL.iter().map(|f| Figure::Burn(*f)).collect(),
            Group::Storage => StorageFigure::ALL
                .iter()
                .map(|f| Figure::Storage(*f))
                .collect(),
            Group::Loopback => LoopbackFigure::ALL
                .iter()
                .map(|f| Figure::Loopback(*f))
                .collect(),
            Group::Rehearsal => RehearsalFigure::ALL
                .iter()
                .map(|f| Figure::Rehearsal(*f))
                .collect(),
        }
    }

    /// The check that judges the group's figures: its verdict is the figures' (the views
    /// colour a figure's bar by it).
    pub fn check(self) -> &'static str {
        match self {
            Group::Context => "cuda.context-latency",
            Group::Pcie => "pcie.bandwidth",
            Group::Memory => "memory.bandwidth",
            Group::Gemm => "compute.gemm",
            Group::P2p => "p2p.bandwidth",
            Group::Nccl => "nccl.allreduce",
            Group::Burn => "stability.burn",
            Group::Storage => "storage.throughput",
            Group::Loopback => "net.loopback",
            Group::Rehearsal => "workload.pipeline",
        }
    }

    /// The group's slice of the report's `measurements`.
    fn measurements(self, facts: &Facts) -> Vec<Measurement> {
        match self {
            Group::Context => context::measurements(facts),
            Group::Pcie => pcie::measurements(facts),
            Group::Memory => memory::measurements(facts),
            Group::Gemm => gemm::measurements(facts),
            Group::P2p => p2p::measurements(facts),
            Group::Nccl => nccl::measurements(facts),
            Group::Burn => burn::measurements(facts),
            Group::Storage => storage::measurements(facts),
            Group::Loopback => loopback::measurements(facts),
            Group::Rehearsal => rehearsal::measurements(facts),
        }
    }
}

/// The report's `measurements`: every group's figures, group by group.
pub fn measurements(facts: &Facts) -> Vec<Measurement> {
    Group::ALL
        .iter()
        .flat_map(|g| g.measurements(facts))
        .collect()
}

/// The unit a figure is reported in (the report's `unit`), and its base unit (what `serve`
/// exports, as Prometheus' naming rules ask).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// 10^9 bytes per second.
    GigabytesPerSecond,
    /// 10^6 bytes per second.
    MegabytesPerSecond,
    /// Operations per second.
    PerSecond,
    Milliseconds,
    Microseconds,
    /// 10^12 floating-point operations per second.
    Teraflops,
    Megahertz,
    Watts,
    Celsius,
    /// A dimensionless ratio (a coefficient of variation).
    Ratio,
    /// A share in percent.
    Percent,
    SamplesPerSecond,
}

impl Unit {
    /// As the report writes it ("GB/s", "us").
    pub fn report(self) -> &'static str {
        match self {
            Unit::GigabytesPerSecond => "GB/s",
            Unit::MegabytesPerSecond => "MB/s",
            Unit::PerSecond => "1/s",
            Unit::Milliseconds => "ms",
            Unit::Microseconds => "us",
            Unit::Teraflops => "TFLOPS",
            Unit::Megahertz => "MHz",
            Unit::Watts => "W",
            Unit::Celsius => "C",
            Unit::Ratio => "ratio",
            Unit::Percent => "%",
            Unit::SamplesPerSecond => "samples/s",
        }
    }

    /// As a person reads it ("GB/s", "µs", "°C").
    pub fn display(self) -> &'static str {
        match self {
            Unit::Microseconds => "µs",
            Unit::Celsius => "°C",
            Unit::PerSecond => "IOPS",
            Unit::Ratio => "",
            u => u.report(),
        }
    }

    /// The base unit's suffix of a Prometheus metric name.
    pub fn base_suffix(self) -> &'static str {
        match self {
            Unit::GigabytesPerSecond | Unit::MegabytesPerSecond => "bytes_per_second",
            Unit::PerSecond => "per_second",
            Unit::Milliseconds | Unit::Microseconds => "seconds",
            Unit::Teraflops => "flops",
            Unit::Megahertz => "hertz",
            Unit::Watts => "watts",
            Unit::Celsius => "celsius",
            Unit::Ratio | Unit::Percent => "ratio",
            Unit::SamplesPerSecond => "samples_per_second",
        }
    }

    /// A value in this unit, in the base unit.
    pub fn to_base(self, v: f64) -> f64 {
        v * match self {
            Unit::GigabytesPerSecond => 1e9,
            Unit::MegabytesPerSecond => 1e6,
            Unit::Milliseconds => 1e-3,
            Unit::Microseconds => 1e-6,
            Unit::Teraflops => 1e12,
            Unit::Megahertz => 1e6,
            Unit::Percent => 1e-2,
            Unit::PerSecond
            | Unit::Watts
            | Unit::Celsius
            | Unit::Ratio
            | Unit::SamplesPerSecond => 1.0,
        }
    }

    /// The unit of a report's `unit` string; None for one this build does not write.
    pub fn from_report(s: &str) -> Option<Unit> {
        ALL_UNITS.iter().copied().find(|u| u.report() == s)
    }

    /// A temperature: differences are in degrees, never a share of the value (72 °C is not
    /// "12.7% more" than 64 °C).
    pub fn is_interval_scale(self) -> bool {
        self == Unit::Celsius
    }
}

const ALL_UNITS: [Unit; 12] = [
    Unit::GigabytesPerSecond,
    Unit::MegabytesPerSecond,
    Unit::PerSecond,
    Unit::Milliseconds,
    Unit::Microseconds,
    Unit::Teraflops,
    Unit::Megahertz,
    Unit::Watts,
    Unit::Celsius,
    Unit::Ratio,
    Unit::Percent,
    Unit::SamplesPerSecond,
];

/// Which way a figure is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Bandwidth, TFLOPS, clocks: a machine's value is its lowest GPU's.
    Higher,
    /// Latencies, temperatures, the burn's variation: a machine's value is its highest GPU's.
    Lower,
    /// Neither: an operating condition that is wrong either way (the burn's power: drawing
    /// less than its peers is a cap or a throttle, more is a GPU that works harder for the
    /// same result). A machine's value is the GPU farthest from its machine's median.
    Neither,
}

impl Better {
    /// The worse of two values (for `Neither`: the one farther from `centre`).
    pub fn worse(self, a: f64, b: f64, centre: f64) -> f64 {
        match self {
            Better::Higher => a.min(b),
            Better::Lower => a.max(b),
            Better::Neither => {
                if (b - centre).abs() > (a - centre).abs() {
                    b
                } else {
                    a
                }
            }
        }
    }
}

/// What a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Nature {
    /// How fast: a worse value is a slower machine.
    Performance,
    /// How the GPU ran while it was measured (temperature, power): an anomaly, not "slower".
    Condition,
}

/// How a figure spreads across healthy machines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Spread {
    /// About evenly either side of the typical value (bandwidths, TFLOPS, clocks).
    Symmetric,
    /// A long tail on the slow side (latencies, context creation, the burn's variation):
    /// judged on a log scale, where a healthy tail is as narrow as the body.
    LongTailed,
}

/// What a figure is: everything a consumer needs besides the value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FigureSpec {
    /// The stable name in the report's JSON (`measurements[].name`).
    pub id: &'static str,
    /// A person's name ("host→GPU copy, pinned"); [`Figure::label_of`] adds dtype and size.
    pub label: &'static str,
    pub unit: Unit,
    pub better: Better,
    pub nature: Nature,
    pub spread: Spread,
}

impl FigureSpec {
    /// The figure's Prometheus family, without the unit: its id less the unit it is written
    /// in ("context_create_ms_max" → "context_create_max", "gemm_tflops" → "gemm",
    /// "rehearse_read_samples_per_s" → "rehearse_read"); [`Unit::base_suffix`] follows it.
    pub fn metric_stem(&self) -> String {
        let id = self.id;
        for (unit, qualifier) in [("_ms_", "max"), ("_us_", "p99")] {
            if let Some(stem) = id.strip_suffix(&format!("{unit}{qualifier}")) {
                return format!("{stem}_{qualifier}");
            }
        }
        for unit in [
            "_samples_per_s",
            "_tflops",
            "_iops",
            "_mhz",
            "_pct",
            "_ms",
            "_us",
            "_w",
            "_c",
        ] {
            if let Some(stem) = id.strip_suffix(unit) {
                return stem.to_string();
            }
        }
        id.to_string()
    }

    /// The label without its dtype and size placeholders ("GEMM", "all-reduce bus
    /// bandwidth"), for where one text stands for every dtype and size.
    pub fn plain_label(&self) -> String {
        self.label
            .replace(" {dtype}", "")
            .replace("{dtype} ", "")
            .replace(", {size}", "")
    }

    /// The full name of the figure's family in `serve`'s metrics, in base units:
    /// `gpuaudit_h2d_pinned_bandwidth_bytes_per_second`, `gpuaudit_context_create_seconds`.
    pub fn metric_name(&self) -> String {
        format!(
            "gpuaudit_{}_{}",
            self.metric_stem(),
            self.unit.base_suffix()
        )
    }

    /// How much of its expectation a value attains, above 1 better for every figure (value /
    /// expected where higher is better, expected / value where lower is): one alert rule
    /// (`< 0.9`) fits a bandwidth and a latency alike. None without a positive expectation,
    /// and for a condition wrong either way.
    pub fn attainment(&self, value: f64, expected: f64) -> Option<f64> {
        if !(expected > 0.0 && value.is_finite()) {
            return None;
        }
        match self.better {
            Better::Higher => Some(value / expected),
            Better::Lower if value > 0.0 => Some(expected / value),
            Better::Lower | Better::Neither => None,
        }
    }

    pub(crate) const fn perf(id: &'static str, label: &'static str, unit: Unit) -> FigureSpec {
        FigureSpec {
            id,
            label,
            unit,
            better: Better::Higher,
            nature: Nature::Performance,
            spread: Spread::Symmetric,
        }
    }

    /// A time or a variation: lower is better, with a long tail.
    pub(crate) const fn latency(id: &'static str, label: &'static str, unit: Unit) -> FigureSpec {
        FigureSpec {
            id,
            label,
            unit,
            better: Better::Lower,
            nature: Nature::Performance,
            spread: Spread::LongTailed,
        }
    }

    pub(crate) const fn condition(
        id: &'static str,
        label: &'static str,
        unit: Unit,
        better: Better,
    ) -> FigureSpec {
        FigureSpec {
            id,
            label,
            unit,
            better,
            nature: Nature::Condition,
            spread: Spread::Symmetric,
        }
    }
}

/// Every figure gpuaudit measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Figure {
    Context(ContextFigure),
    Pcie(PcieFigure),
    Memory(MemoryFigure),
    Gemm(GemmFigure),
    P2p(P2pFigure),
    Nccl(NcclFigure),
    Burn(BurnFigure),
    Storage(StorageFigure),
    Loopback(LoopbackFigure),
    Rehearsal(RehearsalFigure),
}

impl Figure {
    /// Every figure, group by group in report order.
    pub fn all() -> Vec<Figure> {
        Group::ALL.iter().flat_map(|g| g.figures()).collect()
    }

    pub fn spec(self) -> FigureSpec {
        match self {
            Figure::Context(f) => f.spec(),
            Figure::Pcie(f) => f.spec(),
            Figure::Memory(f) => f.spec(),
            Figure::Gemm(f) => f.spec(),
            Figure::P2p(f) => f.spec(),
            Figure::Nccl(f) => f.spec(),
            Figure::Burn(f) => f.spec(),
            Figure::Storage(f) => f.spec(),
            Figure::Loopback(f) => f.spec(),
            Figure::Rehearsal(f) => f.spec(),
        }
    }

    pub fn group(self) -> Group {
        match self {
            Figure::Context(_) => Group::Context,
            Figure::Pcie(_) => Group::Pcie,
            Figure::Memory(_) => Group::Memory,
            Figure::Gemm(_) => Group::Gemm,
            Figure::P2p(_) => Group::P2p,
            Figure::Nccl(_) => Group::Nccl,
            Figure::Burn(_) => Group::Burn,
            Figure::Storage(_) => Group::Storage,
            Figure::Loopback(_) => Group::Loopback,
            Figure::Rehearsal(_) => Group::Rehearsal,
        }
    }

    /// The stable JSON name.
    pub fn id(self) -> &'static str {
        self.spec().id
    }

    /// The figure of a report's `name`; None for a name this build does not know.
    pub fn from_id(id: &str) -> Option<Figure> {
        static BY_ID: OnceLock<HashMap<&'static str, Figure>> = OnceLock::new();
        BY_ID
            .get_or_init(|| Figure::all().into_iter().map(|f| (f.id(), f)).collect())
            .get(id)
            .copied()
    }

    /// The figure of a measurement.
    pub fn of(m: &Measurement) -> Option<Figure> {
        Figure::from_id(&m.name)
    }

    /// Which way it is better: the catalog's, else (a name this build does not know) the
    /// unit's (a time or a variation lower, anything else higher).
    pub fn better_of(m: &Measurement) -> Better {
        match Figure::of(m) {
            Some(f) => f.spec().better,
            None => match m.unit.as_str() {
                "ms" | "us" | "s" | "ratio" => Better::Lower,
                _ => Better::Higher,
            },
        }
    }

    /// A person's name for a measurement, with its dtype or message size where it has one;
    /// a name this build does not know, as it is.
    pub fn label_of(m: &Measurement) -> String {
        let Some(f) = Figure::of(m) else {
            return m.name.clone();
        };
        let label = f.spec().label;
        match (f, m.dtype.as_deref(), m.size_bytes) {
            (Figure::Gemm(_) | Figure::Burn(BurnFigure::Tflops), Some(d), _) => {
                label.replace("{dtype}", d)
            }
            (Figure::Rehearsal(RehearsalFigure::GpuStepTflops), Some(d), _) => {
                label.replace("{dtype}", d)
            }
            (Figure::Nccl(_), _, Some(size)) => label.replace("{size}", &bytes(size)),
            _ => f.spec().plain_label(),
        }
    }
}

/// A measurement of `figure`: its name and unit from the catalog, the ratio from the
/// expectation; gpu, peer, size and dtype are set by the caller.
pub(crate) fn measurement(
    figure: Figure,
    value: f64,
    expected: Option<f64>,
    method: impl Into<String>,
) -> Measurement {
    let spec = figure.spec();
    Measurement {
        name: spec.id.into(),
        gpu: None,
        peer: None,
        value,
        unit: spec.unit.report().into(),
        expected,
        ratio: expected.filter(|e| *e > 0.0).map(|e| value / e),
        method: method.into(),
        size_bytes: None,
        dtype: None,
        attainable: None,
        path: None,
    }
}

#[cfg(test)]
mod tests;
