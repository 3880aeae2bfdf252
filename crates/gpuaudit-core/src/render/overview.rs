//! What every view says first, computed once from the report: the verdict (what you got and
//! how many problems, counted as causes, not copies), what could not be checked and why, a
//! tally per area, the measured figures against the datasheet, and the key ratios the HTML
//! headline gives. The table, Markdown and HTML renderers (and a later `compare`) word it
//! each in their own form.

use super::group::{gpus_label, groups, Group};
use super::{area, area_title, fmt_value, gpu_names};
use crate::facts::Measurement;
use crate::figures::{self as catalog, GemmFigure, PcieFigure};
use crate::finding::Status;
use crate::report::Report;
use std::collections::HashMap;

/// The report as the views summarise it.
pub struct Overview<'a> {
    pub groups: Vec<Group<'a>>,
    /// The checks that ran into nothing to report but could not run: the skip groups.
    pub not_run: usize,
    /// The reason most of them give, with how many give it.
    pub not_run_reason: Option<(String, usize)>,
    /// Whether the GPUs are what `--expect` ordered: `None` without `--expect`.
    pub as_ordered: Option<bool>,
}

impl<'a> Overview<'a> {
    pub fn of(report: &'a Report) -> Overview<'a> {
        let groups = groups(report);
        let skips: Vec<&Group> = not_run_groups(&groups).collect();
        // Checks, not groups: a check that skipped on each GPU is one check not run.
        let not_run = distinct_checks(skips.iter().copied());
        let not_run_reason = main_reason(report, &skips);
        let as_ordered = report.audit.expect.as_ref().map(|_| {
            let identity: Vec<&Group> = groups
                .iter()
                .filter(|g| g.check == "gpu.identity")
                .collect();
            !identity.is_empty()
                && identity
                    .iter()
                    .all(|g| matches!(g.status, Status::Pass | Status::Info))
        });
        Overview {
            groups,
            not_run,
            not_run_reason,
            as_ordered,
        }
    }

    /// The problems counted as causes (fail, then warn, by the worst of each problem; in
    /// report order within each): each root group with the groups its cause explains under
    /// it, and whether its fix is the one of the problem before (the views then say "the
    /// same as above" rather than repeat it).
    pub fn problems(&self) -> Vec<Problem<'_, 'a>> {
        let mut consequences: Vec<Vec<&Group<'a>>> = vec![Vec::new(); self.groups.len()];
        for g in &self.groups {
            if let Some(r) = g.caused_by {
                // What a cause explains: its problems and its notes (a skip it explains
                // stays among the checks not run, which say why).
                if matches!(g.status, Status::Fail | Status::Warn | Status::Info) {
                    if let Some(c) = consequences.get_mut(r) {
                        c.push(g);
                    }
                }
            }
        }
        let mut out: Vec<Problem<'_, 'a>> = self
            .groups
            .iter()
            .zip(consequences)
            .filter(|(g, _)| g.is_problem() && g.caused_by.is_none())
            .map(|(root, consequences)| {
                let status = consequences
                    .iter()
                    .map(|c| c.status)
                    .fold(root.status, Status::max);
                Problem {
                    root,
                    consequences,
                    status,
                    fix_repeated: false,
                }
            })
            .collect();
        // Fails first (stable: report order within each).
        out.sort_by_key(|p| std::cmp::Reverse(p.status == Status::Fail));
        let mut previous = None;
        for p in &mut out {
            p.fix_repeated = p.root.fix.is_some() && p.root.fix == previous;
            previous = p.root.fix;
        }
        out
    }

    /// The worst status of any problem (what colours the verdict), `None` without one.
    pub fn worst(&self) -> Option<Status> {
        self.problems().iter().map(|p| p.status).max()
    }

    /// The skips of the checks that did not run at all (not those that ran elsewhere).
    pub fn not_run_groups(&self) -> Vec<&Group<'a>> {
        not_run_groups(&self.groups).collect()
    }

    /// The info findings ("worth knowing") that no problem explains, in report order.
    pub fn infos(&self) -> Vec<&Group<'a>> {
        self.groups
            .iter()
            .filter(|g| g.status == Status::Info && g.caused_by.is_none())
            .collect()
    }

    /// The problems that count as `s` (fail or warn), each cause once.
    pub fn count(&self, s: Status) -> usize {
        self.problems().iter().filter(|p| p.status == s).count()
    }

    /// The GPUs some problem is about, its consequences included.
    pub fn gpus_with_problems(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .problems()
            .iter()
            .flat_map(|p| {
                std::iter::once(p.root)
                    .chain(p.consequences.iter().copied())
                    .filter(|g| g.is_problem())
                    .flat_map(|g| g.gpus.iter().copied())
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// "1 problem on GPU 1", "2 problems (1 fail, 1 warning) on 8 GPUs", or the sentence
    /// that says none was found and what could not be checked.
    pub fn problems_sentence(&self) -> String {
        let mut s = self.problems_count();
        if let Some(nr) = self.not_run_sentence() {
            s.push_str("; ");
            s.push_str(&nr);
        }
        s
    }

    /// "1 problem (1 failed) on GPU 1", "no problem found in what was checked" (where
    /// checks did not run), "no problem found; every check ran".
    pub fn problems_count(&self) -> String {
        let (fails, warns) = (self.count(Status::Fail), self.count(Status::Warn));
        let n = fails + warns;
        if n == 0 {
            if self.not_run == 0 {
                "no problem found; every check ran".to_string()
            } else {
                "no problem found in what was checked".to_string()
            }
        } else {
            let kinds = match (fails, warns) {
                (0, w) => format!(" ({})", plural(w, "warning", "warnings")),
                (f, 0) => format!(" ({f} failed)"),
                (f, w) => format!(" ({f} failed, {})", plural(w, "warning", "warnings")),
            };
            let gpus = self.gpus_with_problems();
            let on = match gpus.len() {
                0 => String::new(),
                1 | 2 => format!(" on {}", gpus_label(&gpus)),
                k => format!(" on {k} GPUs"),
            };
            format!("{}{kinds}{on}", plural(n, "problem", "problems"))
        }
    }

    /// "13 checks not run: snapshot audit: nothing is measured (10), other reasons (3)";
    /// `None` when every check ran.
    pub fn not_run_sentence(&self) -> Option<String> {
        if self.not_run == 0 {
            return None;
        }
        let head = format!("{} not run", plural(self.not_run, "check", "checks"));
        Some(match &self.not_run_reason {
            Some((r, k)) if *k == self.not_run => format!("{head}: {r}"),
            Some((r, k)) => format!("{head}: {r} ({k}), other reasons ({})", self.not_run - k),
            None => format!("{head}, each for its own reason"),
        })
    }

    /// The verdict in one line: "2× NVIDIA H200 (as ordered), driver 580.159.04: 1 problem
    /// (1 failed) on GPU 1".
    pub fn verdict(&self, report: &Report) -> String {
        format!(
            "{}: {}",
            self.what_you_got(report),
            self.problems_sentence()
        )
    }

    /// "2× NVIDIA H200 (as ordered), driver 580.159.04".
    pub fn what_you_got(&self, report: &Report) -> String {
        let mut s = gpu_names(report);
        match self.as_ordered {
            Some(true) => s.push_str(" (as ordered)"),
            Some(false) => s.push_str(" (not as ordered)"),
            None => {}
        }
        if let Some(d) = &report.machine.driver_version {
            s.push_str(&format!(", driver {d}"));
        }
        s
    }

    /// One tally per area, in report order: how its checks came out.
    pub fn areas(&self) -> Vec<AreaTally> {
        let mut out: Vec<AreaTally> = Vec::new();
        // A check's outcome is the worst of its findings (skip only where all are skips).
        // In first-seen order, found by name (linear in the groups: a report may hold
        // 100,000 findings).
        let mut checks: Vec<(&str, Status)> = Vec::new();
        let mut check_at: HashMap<&str, usize> = HashMap::new();
        for g in &self.groups {
            match check_at.get(g.check) {
                Some(&i) => checks[i].1 = checks[i].1.max(g.status),
                None => {
                    check_at.insert(g.check, checks.len());
                    checks.push((g.check, g.status));
                }
            }
        }
        let mut area_at: HashMap<&str, usize> = HashMap::new();
        for (check, status) in checks {
            let a = area(check);
            let i = match area_at.get(a) {
                Some(&i) => i,
                None => {
                    area_at.insert(a, out.len());
                    out.push(AreaTally {
                        area: a.to_string(),
                        title: area_title(a).to_string(),
                        ..AreaTally::default()
                    });
                    out.len() - 1
                }
            };
            let t = &mut out[i];
            match status {
                Status::Pass => t.pass += 1,
                Status::Info => t.info += 1,
                Status::Warn | Status::Fail => t.problem += 1,
                Status::Skip => t.not_run += 1,
            }
        }
        out
    }
}

/// A problem as the views show it: the group that names its cause (the root), the groups
/// that cause explains (its consequences, shown under it and not counted on their own), and
/// what it counts as. The root's fix is the one to follow.
#[derive(Clone, Debug)]
pub struct Problem<'o, 'a> {
    pub root: &'o Group<'a>,
    /// The fails, warnings and notes the cause explains, in report order.
    pub consequences: Vec<&'o Group<'a>>,
    /// The worst of the root's status and its consequences' (a warning that causes a
    /// failure is a failed problem).
    pub status: Status,
    /// The root's fix is the one of the problem shown before it.
    pub fix_repeated: bool,
}

/// How the checks of one area came out: each check counted once, by its worst finding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AreaTally {
    pub area: String,
    pub title: String,
    pub pass: usize,
    pub info: usize,
    pub problem: usize,
    pub not_run: usize,
}

impl AreaTally {
    /// "2 checks pass", "1 pass, 1 with a problem, 1 not run".
    pub fn sentence(&self) -> String {
        let total = self.pass + self.info + self.problem + self.not_run;
        if self.pass == total {
            return if total == 1 {
                "1 check passes".into()
            } else {
                format!("{total} checks pass")
            };
        }
        if self.not_run == total {
            return format!("{} not run", plural(total, "check", "checks"));
        }
        let mut parts = Vec::new();
        if self.pass > 0 {
            parts.push(format!("{} pass", self.pass));
        }
        if self.info > 0 {
            parts.push(format!("{} to note", self.info));
        }
        if self.problem > 0 {
            parts.push(format!("{} with a problem", self.problem));
        }
        if self.not_run > 0 {
            parts.push(format!("{} not run", self.not_run));
        }
        parts.join(", ")
    }
}

/// The reason most skips give: the audit's reason for measuring nothing where there is one
/// (the skips that quote it), else the most common skip message given twice or more.
fn main_reason(report: &Report, skips: &[&Group]) -> Option<(String, usize)> {
    if let Some(r) = &report.audit.measurements_not_run {
        let k = distinct_checks(
            skips
                .iter()
                .copied()
                .filter(|g| g.message.contains(r.as_str())),
        );
        if k > 0 {
            return Some((r.clone(), k));
        }
    }
    // Each message with the checks that give it (a check counted once per message).
    let mut counts: Vec<(&str, usize)> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    let mut seen: std::collections::HashSet<(&str, &str)> = std::collections::HashSet::new();
    for g in skips {
        if !seen.insert((g.message.as_str(), g.check)) {
            continue;
        }
        match at.get(g.message.as_str()) {
            Some(&i) => counts[i].1 += 1,
            None => {
                at.insert(&g.message, counts.len());
                counts.push((&g.message, 1));
            }
        }
    }
    counts
        .into_iter()
        .filter(|(_, c)| *c >= 2)
        .max_by_key(|(_, c)| *c)
        .map(|(m, c)| (m.to_string(), c))
}

/// The skips of the checks that did not run at all: a check that ran on one GPU (a note, a
/// problem) and skipped on another stands where its worst finding puts it, as the areas
/// count it, not also among the checks not run (its skip is in `-v` and the JSON).
fn not_run_groups<'g, 'a>(groups: &'g [Group<'a>]) -> impl Iterator<Item = &'g Group<'a>> {
    let ran: std::collections::HashSet<&str> = groups
        .iter()
        .filter(|g| g.status != Status::Skip)
        .map(|g| g.check)
        .collect();
    groups
        .iter()
        .filter(move |g| g.status == Status::Skip && !ran.contains(g.check))
}

/// How many checks the groups are of (the groups of one check counted once).
pub fn distinct_checks<'g, 'a: 'g>(groups: impl Iterator<Item = &'g Group<'a>>) -> usize {
    groups
        .map(|g| g.check)
        .collect::<std::collections::HashSet<&str>>()
        .len()
}

pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

// ---------------------------------------------------------------- figures

/// One measured figure over the GPUs (or pairs) it was taken on.
#[derive(Clone, Debug)]
pub struct Figure<'a> {
    /// "host→GPU copy, pinned", "GEMM bf16".
    pub label: String,
    pub unit: &'a str,
    pub rows: Vec<&'a Measurement>,
}

impl Figure<'_> {
    pub fn values(&self) -> Vec<f64> {
        self.rows.iter().map(|m| m.value).collect()
    }

    /// The median over the GPUs (or pairs).
    pub fn median(&self) -> f64 {
        let mut v = self.values();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n == 0 {
            return f64::NAN;
        }
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }

    /// "55.4", or "52.1–55.4" where the GPUs differ by more than 2%.
    pub fn value_text(&self) -> String {
        let v = self.values();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if v.len() > 1 && hi > 0.0 && (hi - lo) / hi > SPREAD_SHOWN {
            format!("{}–{}", fmt_value(lo), fmt_value(hi))
        } else {
            fmt_value(self.median())
        }
    }

    /// The datasheet (or link) figure, where every row has the same.
    pub fn expected(&self) -> Option<f64> {
        let e = self.rows.first()?.expected?;
        self.rows
            .iter()
            .all(|m| m.expected.is_some_and(|x| (x - e).abs() <= e * 1e-9))
            .then_some(e)
    }

    /// The lowest ratio to the expectation, and on which row.
    pub fn lowest(&self) -> Option<(f64, &Measurement)> {
        self.rows
            .iter()
            .filter_map(|m| m.ratio.map(|r| (r, *m)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// "GPU 3", "GPU 0→5" where the GPUs (or pairs) differ; "" for a machine-wide figure
    /// and where they measure alike (within [`ALIKE`]), as then no GPU is the low one.
    pub fn lowest_where(&self) -> String {
        if self.rows.len() < 2 {
            return String::new();
        }
        let ratios: Vec<f64> = self.rows.iter().filter_map(|m| m.ratio).collect();
        let hi = ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        if hi - lo <= ALIKE * hi.abs() {
            return String::new();
        }
        self.lowest().map(|(_, m)| place(m)).unwrap_or_default()
    }
}

/// Where GPUs differ by more than this fraction, the table shows their range.
const SPREAD_SHOWN: f64 = 0.02;
/// GPUs whose ratios are this close measure alike: none is named as the lowest.
const ALIKE: f64 = 0.01;

/// "GPU 3", "GPU 0→1", "" for a machine-wide figure.
pub fn place(m: &Measurement) -> String {
    match (m.gpu, m.peer) {
        (Some(a), Some(b)) => format!("GPU {a}→{b}"),
        (Some(a), None) => format!("GPU {a}"),
        _ => String::new(),
    }
}

/// A person's name for a measurement (the figure catalog's label, with its dtype or size).
pub fn measurement_label(m: &Measurement) -> String {
    catalog::Figure::label_of(m)
}

/// The report's measurements as figures: one per name (and dtype; and size for the
/// machine-wide ones), in report order.
pub fn figures(report: &Report) -> Vec<Figure<'_>> {
    let mut out: Vec<Figure> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for m in &report.measurements {
        let key = format!(
            "{}\u{0}{}\u{0}{}",
            m.name,
            m.dtype.as_deref().unwrap_or(""),
            if m.gpu.is_none() {
                m.size_bytes.unwrap_or(0)
            } else {
                0
            }
        );
        match at.get(&key) {
            Some(&i) => out[i].rows.push(m),
            None => {
                at.insert(key, out.len());
                out.push(Figure {
                    label: measurement_label(m),
                    unit: &m.unit,
                    rows: vec![m],
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------- key ratios

/// The three figures the headline holds against the datasheet, each the lowest over the
/// GPUs, and N, their geometric mean.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyRatios {
    /// Device memory: per GPU the better of the copy kernel and memcpy, against the
    /// datasheet bandwidth.
    pub memory: Option<f64>,
    /// bf16 GEMM against the datasheet's dense peak.
    pub bf16: Option<f64>,
    /// Pinned host copies (either direction) against the PCIe link's rate.
    pub host_link: Option<f64>,
}

impl KeyRatios {
    /// Against the datasheet (the host link against the PCIe link's rate).
    pub fn of(report: &Report) -> KeyRatios {
        KeyRatios::by(report, &|m| m.ratio)
    }

    /// Against what healthy GPUs of the model reach (`Measurement::attainable`, from
    /// data/attainable.toml): the device copy and bf16 GEMM where the model has an entry; the
    /// host link has none.
    pub fn attained(report: &Report) -> KeyRatios {
        KeyRatios::by(report, &|m| {
            m.attainable
                .filter(|a| *a > 0.0 && m.value.is_finite())
                .map(|a| m.value / a)
        })
    }

    fn by(report: &Report, ratio: &dyn Fn(&Measurement) -> Option<f64>) -> KeyRatios {
        let lowest = |pred: &dyn Fn(&Measurement) -> bool| {
            report
                .measurements
                .iter()
                .filter(|m| pred(m))
                .filter_map(ratio)
                .min_by(f64::total_cmp)
        };
        // Per GPU the better memory figure (as memory.bandwidth judges it), then the lowest.
        let mut gpus: Vec<u32> = report.measurements.iter().filter_map(|m| m.gpu).collect();
        gpus.sort_unstable();
        gpus.dedup();
        let memory = gpus
            .iter()
            .filter_map(|g| {
                report
                    .measurements
                    .iter()
                    .filter(|m| {
                        m.gpu == Some(*g)
                            && matches!(
                                catalog::Figure::of(m),
                                Some(catalog::Figure::Memory(f)) if f.is_device_copy()
                            )
                    })
                    .filter_map(ratio)
                    .max_by(f64::total_cmp)
            })
            .min_by(f64::total_cmp);
        KeyRatios {
            memory,
            bf16: lowest(&|m| {
                catalog::Figure::of(m) == Some(catalog::Figure::Gemm(GemmFigure::Tflops))
                    && m.dtype.as_deref() == Some("bf16")
            }),
            host_link: lowest(&|m| {
                matches!(
                    catalog::Figure::of(m),
                    Some(catalog::Figure::Pcie(
                        PcieFigure::H2dPinned | PcieFigure::D2hPinned
                    ))
                )
            }),
        }
    }

    /// (label, ratio) of the ratios measured.
    pub fn parts(&self) -> Vec<(&'static str, f64)> {
        [
            ("memory bandwidth", self.memory),
            ("bf16", self.bf16),
            ("host link", self.host_link),
        ]
        .into_iter()
        .filter_map(|(l, r)| r.map(|r| (l, r)))
        .collect()
    }

    /// The geometric mean of the ratios measured; `None` when none was.
    pub fn overall(&self) -> Option<f64> {
        let p = self.parts();
        if p.is_empty() || p.iter().any(|(_, r)| *r <= 0.0) {
            return None;
        }
        let log_sum: f64 = p.iter().map(|(_, r)| r.ln()).sum();
        Some((log_sum / p.len() as f64).exp())
    }
}

/// "NVIDIA H200 SXM 141GB" where every GPU matched the same datasheet entry.
pub fn datasheet_name(report: &Report) -> Option<&str> {
    let first = report.gpus.first()?.spec.as_ref()?;
    report
        .gpus
        .iter()
        .all(|g| g.spec.as_ref().is_some_and(|s| s.key == first.key))
        .then_some(first.name.as_str())
}

pub fn percent(r: f64) -> String {
    format!("{:.0}%", r * 100.0)
}

#[cfg(test)]
mod tests {
    /// Every figure a full audit reports has a person's name (the HTML chart showed
    /// "memory_add_bandwidth" and the bidirectional figures by their JSON names).
    #[test]
    fn every_measured_figure_has_a_label() {
        for n in [1, 2] {
            let facts = crate::testing::Machine::healthy("h200-sxm-141gb", n)
                .measured(|m| crate::testing::measured::full_run(m, n))
                .build();
            let report = crate::Report::build(&facts, &crate::policy::Policy::default());
            assert!(!report.measurements.is_empty());
            for m in &report.measurements {
                assert_ne!(measurement_label(m), m.name, "{} has no label", m.name);
            }
        }
    }

    use super::*;
    use crate::facts::{Facts, Origin};
    use crate::finding::Finding;
    use crate::policy::{Expectation, Policy};
    use crate::testing::Machine;

    fn report_of(findings: Vec<Finding>, policy: &Policy, not_run: Option<&str>) -> Report {
        let mut facts: Facts = Machine::healthy("h200-sxm-141gb", 8).build();
        facts.measured.not_run = not_run.map(str::to_string);
        Report::from_findings(&facts, policy, findings)
    }

    fn fabric(i: u32) -> Finding {
        Finding::fail(
            "nvlink.status",
            format!("GPU {i} (00:{:02x}.0): fabric down", 6 + i),
        )
        .gpu(i)
        .fix("Start the fabric manager.")
    }

    #[test]
    fn counts_causes_not_copies() {
        let mut f: Vec<Finding> = (0..8).map(fabric).collect();
        f.push(Finding::pass("pcie.link", "ok"));
        let r = report_of(f, &Policy::default(), None);
        let o = Overview::of(&r);
        assert_eq!(o.problems().len(), 1);
        assert_eq!(o.problems_sentence(), "1 problem (1 failed) on 8 GPUs");
        assert!(
            o.verdict(&r).starts_with("8× NVIDIA H200, driver 580"),
            "{}",
            o.verdict(&r)
        );
    }

    #[test]
    fn never_all_good_when_checks_did_not_run() {
        let reason = "snapshot audit: nothing is measured";
        let mut f = vec![Finding::pass("pcie.link", "ok")];
        for c in ["pcie.bandwidth", "compute.gemm", "memory.bandwidth"] {
            f.push(Finding::skip(c, reason));
        }
        f.push(Finding::skip(
            "net.loopback",
            format!("not measured: {reason}"),
        ));
        f.push(Finding::skip(
            "cuda.env",
            "the snapshot has no cmd/env.json",
        ));
        let r = report_of(f, &Policy::default(), Some(reason));
        let o = Overview::of(&r);
        let s = o.problems_sentence();
        assert_eq!(
            s,
            "no problem found in what was checked; 5 checks not run: snapshot audit: \
             nothing is measured (4), other reasons (1)"
        );
        assert!(!s.contains("all good"));
        // Every skip for the same reason: the reason alone.
        let r = report_of(
            vec![Finding::skip("compute.gemm", reason)],
            &Policy::default(),
            Some(reason),
        );
        assert_eq!(
            Overview::of(&r).problems_sentence(),
            "no problem found in what was checked; 1 check not run: snapshot audit: nothing \
             is measured"
        );
        // Live, everything ran.
        let r = report_of(
            vec![Finding::pass("pcie.link", "ok")],
            &Policy::default(),
            None,
        );
        assert_eq!(
            Overview::of(&r).problems_sentence(),
            "no problem found; every check ran"
        );
        // Skips without a shared reason.
        let r = report_of(
            vec![Finding::skip("a.b", "x"), Finding::skip("c.d", "y")],
            &Policy::default(),
            None,
        );
        assert_eq!(
            Overview::of(&r).not_run_sentence().as_deref(),
            Some("2 checks not run, each for its own reason")
        );
    }

    /// A check that skipped on each GPU is one check not run, in the count and in the
    /// reason's count (the table lists it once).
    #[test]
    fn a_check_skipped_on_every_gpu_is_one_check_not_run() {
        let reason = "snapshot audit: nothing is measured";
        let f = vec![
            Finding::skip("pcie.aer", "GPU 0 (00:06.0): counters not known").gpu(0),
            Finding::skip("pcie.aer", "GPU 1 (00:07.0): counters not known").gpu(1),
            Finding::skip("compute.gemm", reason).gpu(0),
            Finding::skip("compute.gemm", reason).gpu(1),
            Finding::skip("memory.bandwidth", reason),
        ];
        let r = report_of(f, &Policy::default(), Some(reason));
        let o = Overview::of(&r);
        assert_eq!(o.not_run, 3);
        assert_eq!(
            o.not_run_sentence().as_deref(),
            Some("3 checks not run: snapshot audit: nothing is measured (2), other reasons (1)")
        );
        // Without a measurement reason: the shared message counted once per check.
        let f = vec![
            Finding::skip("a.b", "same").gpu(0),
            Finding::skip("a.b", "same").gpu(1),
            Finding::skip("c.d", "other"),
        ];
        let r = report_of(f, &Policy::default(), None);
        assert_eq!(
            Overview::of(&r).not_run_sentence().as_deref(),
            Some("2 checks not run, each for its own reason")
        );
    }

    #[test]
    fn problems_name_their_gpus_and_kinds() {
        let f = vec![
            fabric(1),
            Finding::warn("os.persistence", "GPU 0 (00:06.0): off").gpu(0),
            Finding::warn("cuda.env", "CUDA_LAUNCH_BLOCKING=1"),
        ];
        let r = report_of(f, &Policy::default(), None);
        let o = Overview::of(&r);
        assert_eq!(
            o.problems_sentence(),
            "3 problems (1 failed, 2 warnings) on GPUs 0, 1"
        );
        // Fails first.
        assert_eq!(o.problems()[0].root.check, "nvlink.status");
        // The second warning has no fix; a fix is "repeated" only when it is the same one.
        let rep: Vec<bool> = o.problems().iter().map(|p| p.fix_repeated).collect();
        assert_eq!(rep, vec![false, false, false]);
        let same = vec![
            fabric(1),
            Finding::fail("nvlink.status", "the fabric").fix("Start the fabric manager."),
            Finding::warn("cuda.env", "x"),
        ];
        let r = report_of(same, &Policy::default(), None);
        let o = Overview::of(&r);
        let rep: Vec<bool> = o.problems().iter().map(|p| p.fix_repeated).collect();
        assert_eq!(rep, vec![false, true, false]);
        assert_eq!(o.infos().len(), 0);
        let r = report_of(
            vec![Finding::warn("cuda.env", "x")],
            &Policy::default(),
            None,
        );
        assert_eq!(
            Overview::of(&r).problems_sentence(),
            "1 problem (1 warning)"
        );
    }

    /// A GPU bound to nouveau, as the checks say it: the binding is the cause, the GPU the
    /// driver does not list and the module loaded are what it causes.
    fn nouveau() -> Vec<Finding> {
        use crate::finding::Cause;
        vec![
            Finding::fail(
                "gpu.present",
                "1 GPU on the PCI bus is not listed by the driver",
            )
            .caused_by(Cause::device("gpu.driver-binding", "0000:00:07.0"))
            .fix("Blacklist nouveau."),
            Finding::fail("gpu.driver-binding", "00:07.0 is bound to nouveau")
                .with("pci_bus_id", "0000:00:07.0")
                .fix("Blacklist nouveau."),
            Finding::warn("os.persistence", "GPU 0 (00:06.0): off").gpu(0),
            Finding::fail("kernel.modules", "nouveau is loaded")
                .caused_by(Cause::check("gpu.driver-binding"))
                .fix("Blacklist nouveau, then reboot."),
            Finding::info("clocks.throttle", "a note the binding explains")
                .caused_by(Cause::check("gpu.driver-binding")),
            Finding::skip("compute.gemm", "not measured")
                .caused_by(Cause::check("gpu.driver-binding")),
        ]
    }

    #[test]
    fn one_cause_is_one_problem_shown_first_with_what_it_causes() {
        let r = report_of(nouveau(), &Policy::default(), None);
        let o = Overview::of(&r);
        let p = o.problems();
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(p[0].root.check, "gpu.driver-binding");
        let under: Vec<&str> = p[0].consequences.iter().map(|c| c.check).collect();
        // Its problems and notes, in report order; a skip stays among the checks not run.
        assert_eq!(under, ["gpu.present", "kernel.modules", "clocks.throttle"]);
        assert_eq!(p[0].status, Status::Fail);
        assert!(p[1].consequences.is_empty());
        assert_eq!(
            o.problems_count(),
            "2 problems (1 failed, 1 warning) on GPU 0"
        );
        // The note it explains is not "worth knowing" on its own; one of its own is.
        assert!(o.infos().is_empty());
        let mut f = nouveau();
        f.push(Finding::info("net.fabric", "no RDMA device"));
        let r = report_of(f, &Policy::default(), None);
        let infos: Vec<&str> = Overview::of(&r).infos().iter().map(|g| g.check).collect();
        assert_eq!(infos, ["net.fabric"]);
        assert_eq!(o.not_run, 1);
    }

    #[test]
    fn a_warning_that_causes_a_failure_is_a_failed_problem() {
        use crate::finding::Cause;
        let f = vec![
            Finding::warn("gpu.virtualization", "GPU 0 (00:06.0) has MIG enabled").gpu(0),
            Finding::warn("os.persistence", "GPU 1 (00:07.0): off").gpu(1),
            Finding::fail("compute.gemm", "GPU 0 (00:06.0): slow")
                .gpu(0)
                .caused_by(Cause::gpu("gpu.virtualization", 0)),
        ];
        let r = report_of(f, &Policy::default(), None);
        let o = Overview::of(&r);
        let p = o.problems();
        // Fails first: the MIG warning, which causes a failure, before the plain warning.
        assert_eq!(
            p.iter()
                .map(|p| (p.root.check, p.status))
                .collect::<Vec<_>>(),
            [
                ("gpu.virtualization", Status::Fail),
                ("os.persistence", Status::Warn)
            ]
        );
        assert_eq!(o.worst(), Some(Status::Fail));
        assert_eq!(
            o.problems_count(),
            "2 problems (1 failed, 1 warning) on GPUs 0, 1"
        );
        // A consequence's GPUs count among the problems' GPUs.
        let f = vec![
            Finding::fail("nvlink.status", "the fabric").fix("x"),
            Finding::fail("nvlink.status", "GPU 3 (00:09.0): no links")
                .gpu(3)
                .caused_by(Cause::check("nvlink.status")),
        ];
        let r = report_of(f, &Policy::default(), None);
        assert_eq!(Overview::of(&r).gpus_with_problems(), vec![3]);
    }

    #[test]
    fn as_ordered_follows_gpu_identity_under_expect() {
        let policy = Policy {
            expect: Some("h200:8".parse::<Expectation>().unwrap()),
            ..Policy::default()
        };
        let ok = vec![Finding::pass("gpu.identity", "GPU 0 (00:06.0) is an H200").gpu(0)];
        let r = report_of(ok, &policy, None);
        assert!(Overview::of(&r).what_you_got(&r).contains("(as ordered)"));
        let bad = vec![Finding::fail("gpu.identity", "4 GPUs, 8 ordered")];
        let r = report_of(bad, &policy, None);
        assert!(Overview::of(&r)
            .what_you_got(&r)
            .contains("(not as ordered)"));
        let r = report_of(vec![], &Policy::default(), None);
        assert!(!Overview::of(&r).what_you_got(&r).contains("ordered"));
    }

    /// What the verdict says where the driver describes no GPU: none only where none is seen.
    #[test]
    fn no_gpu_described_is_said_for_what_it_is() {
        let got = |f: &dyn Fn(&mut Facts)| {
            let facts = Machine::healthy("h200-sxm-141gb", 2).with(f).build();
            let r = Report::build(&facts, &Policy::default());
            Overview::of(&r).what_you_got(&r)
        };
        let why = "nvidia-smi -q -x: malformed: nvidia-smi XML: unexpected end of stream";
        let unread = |f: &mut Facts| {
            f.gpus = crate::Reading::unavailable(why);
            f.driver.query = crate::Reading::unavailable(why);
            f.driver.report_unreadable = Some(why.into());
        };
        assert_eq!(
            got(&unread),
            "2× NVIDIA GPU on the PCI bus (the driver's report could not be read), driver 580.159.04"
        );
        // Never "no GPU found", whatever the PCI bus says.
        for pci in [
            crate::Reading::Value(vec![]),
            crate::Reading::unavailable("no sysfs"),
        ] {
            let unread_no_bus = |f: &mut Facts| {
                unread(f);
                f.pci_gpus = pci.clone();
            };
            assert_eq!(
                got(&unread_no_bus),
                "GPUs not known (the driver's report could not be read), driver 580.159.04"
            );
        }
        let silent = |f: &mut Facts| {
            f.gpus = crate::Reading::unavailable("NVML: not loaded");
            f.driver.query = crate::Reading::unavailable("NVML: not loaded");
        };
        assert_eq!(
            got(&silent),
            "2× NVIDIA GPU on the PCI bus (not described by the driver), driver 580.159.04"
        );
        let none = |f: &mut Facts| {
            silent(f);
            f.pci_gpus = crate::Reading::Value(vec![]);
        };
        assert_eq!(got(&none), "no GPU found, driver 580.159.04");
        assert_eq!(got(&|_| {}), "2× NVIDIA H200, driver 580.159.04");
    }

    #[test]
    fn area_tallies_count_each_check_by_its_worst_finding() {
        let f = vec![
            Finding::pass("pcie.link", "GPU 0 (00:06.0) ok").gpu(0),
            Finding::fail("pcie.link", "GPU 1 (00:07.0) x8").gpu(1),
            Finding::skip("pcie.bandwidth", "not measured"),
            Finding::pass("gpu.present", "ok"),
            Finding::pass("gpu.uniform", "ok"),
            Finding::skip("container.runtime", "no dev nodes"),
            Finding::info("container.runtime", "not in a container"),
        ];
        let r = report_of(f, &Policy::default(), None);
        let a = Overview::of(&r).areas();
        let s: Vec<(String, String)> = a.iter().map(|t| (t.title.clone(), t.sentence())).collect();
        assert_eq!(
            s,
            vec![
                ("PCIe".into(), "1 with a problem, 1 not run".into()),
                ("GPUs".into(), "2 checks pass".into()),
                ("Container".into(), "1 to note".into()),
            ]
        );
        let only_skips = AreaTally {
            not_run: 2,
            ..AreaTally::default()
        };
        assert_eq!(only_skips.sentence(), "2 checks not run");
    }

    fn m(name: &str, gpu: Option<u32>, value: f64, expected: Option<f64>) -> Measurement {
        Measurement {
            name: name.into(),
            gpu,
            peer: None,
            value,
            unit: "GB/s".into(),
            expected,
            ratio: expected.map(|e| value / e),
            method: String::new(),
            size_bytes: None,
            dtype: None,
            attainable: None,
            path: None,
        }
    }

    #[test]
    fn key_ratios_take_the_lowest_gpu_and_the_geometric_mean() {
        let mut facts = Facts::empty(Origin::Live, "x");
        facts.measured.not_run = None;
        let mut r = Report::from_findings(&facts, &Policy::default(), vec![]);
        r.measurements = vec![
            m("memory_copy_bandwidth", Some(0), 3900.0, Some(4800.0)),
            m("memory_memcpy_bandwidth", Some(0), 4300.0, Some(4800.0)),
            m("memory_copy_bandwidth", Some(1), 2400.0, Some(4800.0)),
            m("h2d_pinned_bandwidth", Some(0), 55.0, Some(63.0)),
            m("d2h_pinned_bandwidth", Some(1), 31.5, Some(63.0)),
            Measurement {
                dtype: Some("bf16".into()),
                ..m("gemm_tflops", Some(0), 800.0, Some(1000.0))
            },
            Measurement {
                dtype: Some("fp16".into()),
                ..m("gemm_tflops", Some(0), 100.0, Some(1000.0))
            },
        ];
        let k = KeyRatios::of(&r);
        // GPU 0's better figure is memcpy (0.896); GPU 1 has only the kernel (0.5).
        assert_eq!(k.memory, Some(0.5));
        assert_eq!(k.bf16, Some(0.8));
        assert_eq!(k.host_link, Some(0.5));
        let n = k.overall().unwrap();
        assert!(
            (n - (0.5f64 * 0.8 * 0.5).powf(1.0 / 3.0)).abs() < 1e-12,
            "{n}"
        );
        let none = KeyRatios {
            memory: None,
            bf16: None,
            host_link: None,
        };
        assert_eq!(none.overall(), None);
        let one = KeyRatios {
            bf16: Some(0.8),
            ..none
        };
        assert_eq!(one.overall(), Some(0.8));
    }

    #[test]
    fn figures_gather_gpus_and_show_their_spread() {
        let mut facts = Facts::empty(Origin::Live, "x");
        facts.measured.not_run = None;
        let mut r = Report::from_findings(&facts, &Policy::default(), vec![]);
        r.measurements = vec![
            m("h2d_pinned_bandwidth", Some(0), 55.0, Some(63.0)),
            m("h2d_pinned_bandwidth", Some(1), 31.5, Some(63.0)),
            m("d2h_pinned_bandwidth", Some(0), 55.0, Some(63.0)),
            m("d2h_pinned_bandwidth", Some(1), 54.5, Some(63.0)),
            Measurement {
                size_bytes: Some(1 << 30),
                ..m("allreduce_busbw", None, 330.0, None)
            },
            Measurement {
                size_bytes: Some(1 << 20),
                ..m("allreduce_busbw", None, 18.0, None)
            },
        ];
        let f = figures(&r);
        assert_eq!(f.len(), 4);
        assert_eq!(f[0].label, "host→GPU copy, pinned");
        assert_eq!(f[0].value_text(), "31.5–55.0");
        assert_eq!(f[0].expected(), Some(63.0));
        assert_eq!(f[0].lowest_where(), "GPU 1");
        // Alike within 1%: no GPU is the low one.
        assert_eq!(f[1].lowest_where(), "");
        // Within 2%: one figure, the median.
        assert_eq!(f[1].value_text(), "54.8");
        assert_eq!(f[2].label, "all-reduce bus bandwidth, 1 GiB");
        assert_eq!(f[3].label, "all-reduce bus bandwidth, 1 MiB");
        assert_eq!(f[2].lowest_where(), "");
    }
}
