//! The key figures, the ones that differ between providers, in this order: the PCIe link,
//! host↔device bandwidth, the power limit, NVLink, CUDA context creation, the loopback round
//! trip, device memory bandwidth, bf16 GEMM, the all-reduce. A machine's value of a figure
//! per GPU is its worst GPU's, by the fleet's rule (`fleet::figures::worst_by`).

use super::model::{FigureCell, FigureRow};
use crate::facts::pcie_link_gbps;
use crate::figures::{
    ContextFigure, Figure, GemmFigure, LoopbackFigure, MemoryFigure, NcclFigure, PcieFigure,
};
use crate::finding::Status;
use crate::fleet::figures::worst_by;
use crate::fleet::stats::{shortfall, Better};
use crate::report::Report;

/// A figure differs between machines when the worst is more than this share worse than the
/// best (5%): gpuaudit's measurements on one healthy machine repeat within a few percent
/// (BENCHMARKS.md: each figure within 0.97 of its anchor; the two GPUs of one H200 machine
/// 1–2% apart in copies and GEMMs), so a gap wider than 5% is the machines, not the noise.
pub const DIFFERS: f64 = 0.05;

/// Values within this share of each other (0.1%) are one value: the views write figures to
/// three or four significant digits, so the reader sees them as equal, and each is marked best.
pub const TIE: f64 = 0.001;

/// What a row is read from.
#[derive(Clone, Copy)]
enum Source {
    /// gpus[].pcie.
    Link,
    /// gpus[].power.
    Power,
    /// The nvlink.status findings.
    Nvlink,
    /// The net.loopback finding's `median_us`.
    Loopback,
    /// A measurement of a figure and dtype; `optional`: the row only where a machine has it.
    Measured {
        figure: Figure,
        dtype: Option<&'static str>,
        optional: bool,
    },
}

struct Spec {
    key: &'static str,
    /// The row's label; a measured row's is the catalog's.
    label: &'static str,
    source: Source,
    /// The check that measures it: its skip says why it was not measured.
    check: &'static str,
    /// What a cell's ratio is of.
    ratio_of: Option<&'static str>,
}

const fn measured(
    key: &'static str,
    figure: Figure,
    dtype: Option<&'static str>,
    optional: bool,
    check: &'static str,
    ratio_of: Option<&'static str>,
) -> Spec {
    Spec {
        key,
        label: "",
        source: Source::Measured {
            figure,
            dtype,
            optional,
        },
        check,
        ratio_of,
    }
}

const ROWS: &[Spec] = &[
    Spec {
        key: "pcie_link",
        label: "PCIe link",
        source: Source::Link,
        check: "pcie.link",
        ratio_of: Some("full width"),
    },
    measured(
        "h2d_pinned_bandwidth",
        Figure::Pcie(PcieFigure::H2dPinned),
        None,
        false,
        "pcie.bandwidth",
        Some("link"),
    ),
    measured(
        "d2h_pinned_bandwidth",
        Figure::Pcie(PcieFigure::D2hPinned),
        None,
        false,
        "pcie.bandwidth",
        Some("link"),
    ),
    measured(
        "bidirectional_total_bandwidth",
        Figure::Pcie(PcieFigure::BidirectionalTotal),
        None,
        true,
        "pcie.bandwidth",
        Some("link"),
    ),
    Spec {
        key: "power_limit",
        label: "power limit",
        source: Source::Power,
        check: "power.limit",
        ratio_of: Some("default"),
    },
    Spec {
        key: "nvlink",
        label: "NVLink",
        source: Source::Nvlink,
        check: "nvlink.status",
        ratio_of: None,
    },
    measured(
        "context_create_ms",
        Figure::Context(ContextFigure::Create),
        None,
        false,
        "cuda.context-latency",
        None,
    ),
    Spec {
        key: "loopback_rtt",
        label: "",
        source: Source::Loopback,
        check: "net.loopback",
        ratio_of: None,
    },
    measured(
        "memory_copy_bandwidth",
        Figure::Memory(MemoryFigure::Copy),
        None,
        false,
        "memory.bandwidth",
        Some("datasheet"),
    ),
    measured(
        "memory_memcpy_bandwidth",
        Figure::Memory(MemoryFigure::Memcpy),
        None,
        true,
        "memory.bandwidth",
        Some("datasheet"),
    ),
    measured(
        "gemm_tflops_bf16",
        Figure::Gemm(GemmFigure::Tflops),
        Some("bf16"),
        false,
        "compute.gemm",
        Some("datasheet"),
    ),
    measured(
        "allreduce_busbw",
        Figure::Nccl(NcclFigure::AllreduceBusbw),
        None,
        false,
        "nccl.allreduce",
        None,
    ),
];

/// A figure only `--full` measures, missing from a quick audit's report.
const QUICK_AUDIT: &str = "a quick audit: gpuaudit --full measures it";

/// Why `check` measured nothing on this machine: the audit's reason for measuring nothing,
/// else the check's skip, else that the audit was a quick one, else "" (the report does not
/// say).
fn why_not(r: &Report, check: &str) -> String {
    if let Some(w) = &r.audit.measurements_not_run {
        return w.clone();
    }
    r.findings
        .iter()
        .find(|f| f.check == check && f.status == Status::Skip)
        .map(|f| {
            f.message
                .strip_prefix("not measured: ")
                .unwrap_or(&f.message)
                .to_string()
        })
        .unwrap_or_else(|| {
            if r.audit.full {
                String::new()
            } else {
                QUICK_AUDIT.to_string()
            }
        })
}

fn not_measured(r: &Report, check: &str) -> FigureCell {
    FigureCell {
        value: None,
        text: "not measured".into(),
        ratio: None,
        gpu: None,
        not_measured: Some(why_not(r, check)),
        status: None,
        best: false,
        links: None,
    }
}

fn value(v: f64, text: String, ratio: Option<f64>, gpu: Option<u32>) -> FigureCell {
    FigureCell {
        value: Some(v),
        text,
        ratio,
        gpu,
        not_measured: None,
        status: None,
        best: false,
        links: None,
    }
}

/// The link's rate at the generation it reaches and the width it trained at (idle GPUs lower
/// their generation to save power: the current generation alone would rank an idle machine
/// low), as a share of its full width; the worst GPU.
fn link_cell(r: &Report) -> Option<FigureCell> {
    let mut worst: Option<(f64, f64, String, u32)> = None;
    for g in &r.gpus {
        let p = &g.pcie;
        let (Some(gm), Some(wc), Some(wm)) = (p.gen_max, p.width_current, p.width_max) else {
            continue;
        };
        let (Some(rate), Some(full)) = (pcie_link_gbps(gm, wc), pcie_link_gbps(gm, wm)) else {
            continue;
        };
        let gc = p.gen_current.unwrap_or(gm);
        let text = if (gc, wc) == (gm, wm) {
            format!("gen{gc} x{wc}")
        } else {
            format!("gen{gc} x{wc} of gen{gm} x{wm}")
        };
        if worst.as_ref().is_none_or(|w| rate < w.0) {
            worst = Some((rate, rate / full, text, g.index));
        }
    }
    worst.map(|(rate, ratio, text, gpu)| value(rate, text, Some(ratio), Some(gpu)))
}

/// The lowest enforced power limit, as a share of that GPU's default limit.
fn power_cell(r: &Report) -> Option<FigureCell> {
    let mut worst: Option<(f64, Option<f64>, u32)> = None;
    for g in &r.gpus {
        let Some(l) = g.power.limit_w.filter(|l| l.is_finite()) else {
            continue;
        };
        if worst.as_ref().is_none_or(|w| l < w.0) {
            let ratio = g.power.default_limit_w.filter(|d| *d > 0.0).map(|d| l / d);
            worst = Some((l, ratio, g.index));
        }
    }
    worst.map(|(l, ratio, gpu)| value(l, crate::units::figure(l), ratio, Some(gpu)))
}

/// nvlink.status: the worst of its findings, and the fewest links up of a GPU where the
/// findings say (`links_active` of `spec_links`).
fn nvlink_cell(r: &Report) -> FigureCell {
    let findings: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.check == "nvlink.status")
        .collect();
    let Some(status) = findings.iter().map(|f| f.status).max() else {
        return FigureCell {
            value: None,
            text: "n/a".into(),
            ratio: None,
            gpu: None,
            not_measured: None,
            status: None,
            best: false,
            links: None,
        };
    };
    let links = findings
        .iter()
        .filter_map(|f| {
            let n = |k: &str| f.evidence.get(k).and_then(serde_json::Value::as_u64);
            Some((n("links_active")?, n("spec_links")?, f.gpu))
        })
        .min_by_key(|(a, s, _)| (a * 1000) / (*s).max(1));
    let (text, gpu) = match links {
        Some((a, s, gpu)) => (format!("{} · {a}/{s} links", status.as_str()), gpu),
        None => (status.as_str().to_string(), None),
    };
    FigureCell {
        value: None,
        text,
        ratio: None,
        gpu,
        not_measured: None,
        status: Some(status),
        best: false,
        links: links.map(|(a, s, _)| (a, s)),
    }
}

/// The loopback figure, else (a report from before it was a measurement) the net.loopback
/// finding's `median_us`.
fn loopback_cell(r: &Report) -> Option<FigureCell> {
    if let Some(c) = measured_cell(r, Figure::Loopback(LoopbackFigure::RoundTrip), None) {
        return Some(c);
    }
    r.findings
        .iter()
        .filter(|f| f.check == "net.loopback")
        .find_map(|f| {
            f.evidence
                .get("median_us")
                .and_then(serde_json::Value::as_f64)
        })
        .filter(|v| v.is_finite())
        .map(|v| value(v, crate::units::figure(v), None, None))
}

fn measured_cell(r: &Report, figure: Figure, dtype: Option<&str>) -> Option<FigureCell> {
    let worst = worst_by(r, |m| (m.name.clone(), m.dtype.clone()));
    let w = worst.get(&(figure.id().to_string(), dtype.map(str::to_string)))?;
    let m = w.measurement;
    Some(value(
        m.value,
        crate::units::figure(m.value),
        m.ratio.filter(|x| x.is_finite()),
        m.gpu,
    ))
}

/// The row's unit and which way it is better: the catalog's for a measured figure.
fn unit_of(spec: &Spec) -> (String, Option<Better>) {
    let of = |f: Figure| {
        let s = f.spec();
        (s.unit.report().to_string(), Some(s.better))
    };
    match spec.source {
        Source::Link => ("GB/s".into(), Some(Better::Higher)),
        Source::Power => ("W".into(), Some(Better::Higher)),
        Source::Nvlink => (String::new(), None),
        Source::Loopback => of(Figure::Loopback(LoopbackFigure::RoundTrip)),
        Source::Measured { figure, .. } => of(figure),
    }
}

/// The row's label: a measured figure's is the catalog's ("GEMM bf16").
fn label_of(spec: &Spec) -> String {
    let label = |f: Figure, dtype: Option<&str>| {
        let spec = f.spec();
        match dtype {
            Some(d) => spec.label.replace("{dtype}", d),
            None => spec.plain_label(),
        }
    };
    match spec.source {
        Source::Measured { figure, dtype, .. } => label(figure, dtype),
        Source::Loopback => label(Figure::Loopback(LoopbackFigure::RoundTrip), None),
        _ => spec.label.to_string(),
    }
}

/// How bad a state is: pass best; skip and n/a are not ranked.
fn status_rank(s: Option<Status>) -> Option<u8> {
    match s? {
        Status::Pass => Some(0),
        Status::Info => Some(1),
        Status::Warn => Some(2),
        Status::Fail => Some(3),
        Status::Skip => None,
    }
}

fn is_tie(a: f64, b: f64) -> bool {
    (a - b).abs() <= TIE * a.abs().max(b.abs())
}

/// NVLink's row: the machines differ where their states differ (pass, info, warn, fail;
/// a skip and n/a say nothing about a machine, as in the checks' rows) or where the share of
/// links up does, among the machines whose findings give it: a difference of value, never of
/// wording ("pass" beside "pass · 18/18 links" is the same state). The best is a pass (a
/// note, such as a model without NVLink, is nothing to prefer, nor a warning or a failure),
/// and of the passes those with the largest known share of their links up.
fn judge_states(cells: &mut [FigureCell]) -> bool {
    let share = |c: &FigureCell| c.links.map(|(a, s)| a as f64 / s.max(1) as f64);
    let ranks: Vec<u8> = cells.iter().filter_map(|c| status_rank(c.status)).collect();
    let shares: Vec<f64> = cells
        .iter()
        .filter(|c| status_rank(c.status).is_some())
        .filter_map(share)
        .collect();
    let differs =
        ranks.windows(2).any(|w| w[0] != w[1]) || shares.windows(2).any(|w| !is_tie(w[0], w[1]));
    let best_share = cells
        .iter()
        .filter(|c| c.status == Some(Status::Pass))
        .filter_map(share)
        .reduce(f64::max);
    for c in cells.iter_mut() {
        c.best = c.status == Some(Status::Pass)
            && match (share(c), best_share) {
                (Some(s), Some(b)) => is_tie(s, b),
                _ => true,
            };
    }
    differs
}

/// Marks the best cells and says whether the row differs.
fn judge(cells: &mut [FigureCell], better: Option<Better>) -> bool {
    let Some(better) = better else {
        return judge_states(cells);
    };
    let values: Vec<f64> = cells.iter().filter_map(|c| c.value).collect();
    // Of one machine against another the centre is the best: a condition wrong either way
    // (`Neither`) is worse the farther it is from the first value.
    let centre = values.first().copied().unwrap_or(0.0);
    let best_of = |a: f64, b: f64| {
        if better.worse(a, b, centre) == a {
            b
        } else {
            a
        }
    };
    let (Some(best), Some(worst)) = (
        values.iter().copied().reduce(best_of),
        values
            .iter()
            .copied()
            .reduce(|a, b| better.worse(a, b, centre)),
    ) else {
        return false;
    };
    for c in cells.iter_mut() {
        c.best = c.value.is_some_and(|v| is_tie(v, best));
    }
    values.len() >= 2 && shortfall(worst, best, better).is_some_and(|s| s > DIFFERS)
}

/// Every key figure of the comparison, one cell per report.
pub(crate) fn rows(reports: &[&Report]) -> Vec<FigureRow> {
    let mut out = Vec::new();
    for spec in ROWS {
        let mut cells: Vec<FigureCell> = reports
            .iter()
            .map(|r| {
                let cell = match spec.source {
                    Source::Link => link_cell(r),
                    Source::Power => power_cell(r),
                    Source::Nvlink => Some(nvlink_cell(r)),
                    Source::Loopback => loopback_cell(r),
                    Source::Measured { figure, dtype, .. } => measured_cell(r, figure, dtype),
                };
                cell.unwrap_or_else(|| match spec.source {
                    // Read, not measured: an older report, a GPU whose link was not read.
                    Source::Link | Source::Power => FigureCell {
                        text: "not known".into(),
                        not_measured: Some("the report does not say".into()),
                        ..not_measured(r, spec.check)
                    },
                    _ => not_measured(r, spec.check),
                })
            })
            .collect();
        if let Source::Measured { optional: true, .. } = spec.source {
            if cells.iter().all(|c| c.value.is_none()) {
                continue;
            }
        }
        let (unit, better) = unit_of(spec);
        let differs = judge(&mut cells, better);
        out.push(FigureRow {
            key: spec.key.into(),
            label: label_of(spec),
            unit,
            better,
            ratio_of: spec.ratio_of.map(str::to_string),
            differs,
            cells,
        });
    }
    out
}
