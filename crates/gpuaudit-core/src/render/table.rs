//! The report for a person at a terminal: grouped by area, one line per finding, coloured by
//! status, the fix under each failing or warning finding.

use super::escape::escape_line;
use super::{area_title, by_area, fmt_value, headline, status_label};
use crate::finding::{Finding, Status};
use crate::report::Report;
use owo_colors::{OwoColorize, Style};
use std::fmt::Write;

#[derive(Clone, Debug, Default)]
pub struct TableOptions {
    pub color: bool,
    /// Show every passing finding; by default a check whose GPUs all pass is one line.
    pub verbose: bool,
}

fn style(s: Status, color: bool) -> Style {
    if !color {
        return Style::new();
    }
    match s {
        Status::Pass => Style::new().green(),
        Status::Info => Style::new().cyan(),
        Status::Warn => Style::new().yellow().bold(),
        Status::Fail => Style::new().red().bold(),
        Status::Skip => Style::new().dimmed(),
    }
}

pub fn render(report: &Report, opts: &TableOptions) -> String {
    let c = opts.color;
    let dim = if c {
        Style::new().dimmed()
    } else {
        Style::new()
    };
    let bold = if c { Style::new().bold() } else { Style::new() };
    let mut out = String::new();

    let host = report.machine.hostname.as_deref().unwrap_or("unknown host");
    let _ = writeln!(
        out,
        "{} {} — {} — {}",
        "gpuaudit".style(bold),
        report.tool.version,
        escape_line(host),
        escape_line(&headline(report))
    );
    let mut sub = Vec::new();
    if let Some(s) = &report.audit.snapshot {
        sub.push(format!("snapshot {s}"));
    } else {
        sub.push("live".to_string());
    }
    sub.push(format!("profile {}", report.audit.profile));
    if let Some(e) = &report.audit.expect {
        sub.push(format!("expect {e}"));
    }
    if let Some(r) = &report.audit.measurements_not_run {
        sub.push(format!("not measured: {r}"));
    }
    let _ = writeln!(out, "{}", escape_line(&sub.join(" · ")).style(dim));

    let width = report
        .findings
        .iter()
        .map(|f| f.check.len())
        .max()
        .unwrap_or(10);

    for (area, findings) in by_area(&report.findings) {
        let _ = writeln!(out, "\n{}", area_title(area).style(bold));
        for group in group_by_check(&findings) {
            render_check(&mut out, &group, width, opts);
        }
    }

    if !report.measurements.is_empty() {
        let _ = writeln!(out, "\n{}", "Measurements".style(bold));
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec!["name", "gpu", "value", "unit", "expected", "ratio"]);
        for m in &report.measurements {
            let gpu = match (m.gpu, m.peer) {
                (Some(a), Some(b)) => format!("{a}→{b}"),
                (Some(a), None) => a.to_string(),
                _ => "-".into(),
            };
            t.add_row(vec![
                escape_line(&m.name).into_owned(),
                gpu,
                fmt_value(m.value),
                escape_line(&m.unit).into_owned(),
                m.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
                m.ratio
                    .map(|r| format!("{:.0}%", r * 100.0))
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        for line in t.to_string().lines() {
            let _ = writeln!(out, "  {}", line.trim_end());
        }
    }

    let s = &report.summary;
    let verdict = if s.fail > 0 {
        format!("{} failed", s.fail)
            .style(style(Status::Fail, c))
            .to_string()
    } else if s.warn > 0 {
        "no failures, some warnings"
            .style(style(Status::Warn, c))
            .to_string()
    } else {
        "all good".style(style(Status::Pass, c)).to_string()
    };
    let _ = writeln!(
        out,
        "\n{}: {} pass, {} info, {} warn, {} fail, {} skip — {verdict}",
        "Summary".style(bold),
        s.pass,
        s.info,
        s.warn,
        s.fail,
        s.skip
    );
    if s.fail + s.warn > 0 {
        let _ = writeln!(
            out,
            "{}",
            "Details: `gpuaudit explain <check>`; all evidence: `--format json`.".style(dim)
        );
    }
    out
}

fn group_by_check<'a>(findings: &[&'a Finding]) -> Vec<Vec<&'a Finding>> {
    let mut out: Vec<Vec<&Finding>> = Vec::new();
    for f in findings {
        match out.last_mut() {
            Some(g) if g[0].check == f.check => g.push(f),
            _ => out.push(vec![f]),
        }
    }
    out
}

fn render_check(out: &mut String, group: &[&Finding], width: usize, opts: &TableOptions) {
    let all_pass = group.iter().all(|f| f.status == Status::Pass);
    let per_gpu = group.iter().filter(|f| f.gpu.is_some()).count();
    if all_pass && per_gpu > 1 && !opts.verbose {
        let first = group[0];
        let more = per_gpu - 1;
        let note = format!(
            "  (+{more} more GPU{} pass{}; -v lists each)",
            if more == 1 { "" } else { "s" },
            if more == 1 { "es" } else { "" }
        );
        line(out, first, width, opts, Some(&note));
        return;
    }
    for f in group {
        line(out, f, width, opts, None);
    }
}

fn line(out: &mut String, f: &Finding, width: usize, opts: &TableOptions, note: Option<&str>) {
    let c = opts.color;
    let st = style(f.status, c);
    let dim = if c {
        Style::new().dimmed()
    } else {
        Style::new()
    };
    let message = escape_line(&f.message);
    let msg = if f.status == Status::Skip {
        message.style(dim).to_string()
    } else {
        message.into_owned()
    };
    let _ = writeln!(
        out,
        "  {}  {:<width$}  {}{}",
        status_label(f.status).style(st),
        escape_line(&f.check),
        msg,
        note.unwrap_or("").style(dim),
        width = width
    );
    if matches!(f.status, Status::Fail | Status::Warn) {
        if let Some(fix) = &f.fix {
            let pad = " ".repeat(width + 8);
            let _ = writeln!(out, "{pad}{} {}", "fix:".style(st), escape_line(fix));
        }
    }
}
