//! The report as Markdown, to paste into a GitHub issue or a ticket: the verdict, each
//! problem with its evidence and fix, the measured figures, and the rest folded in
//! `<details>` (the passing checks, every measurement, the machine's GPUs). Status shows as
//! an emoji and a word, which GitHub renders everywhere. Every value from the machine goes
//! through [`escape::markdown_cell`].

use super::document::Document;
use super::escape;
use super::group::{brief_evidence, evidence_source, evidence_text, Group};
use super::overview::{figures, measurement_label, percent, place, Overview, Problem};
use super::{area, area_title, fmt_value, status_label};
use crate::finding::Status;
use crate::report::Report;
use std::fmt::Write;

/// Text from the machine in a table cell: see [`escape::markdown_cell`].
fn cell(s: &str) -> String {
    escape::markdown_cell(s)
}

/// Text from the machine outside a table: see [`escape::markdown_text`].
fn text(s: &str) -> String {
    escape::markdown_text(s)
}

/// A check id as code, outside a table (`cell`: in one): see [`escape::markdown_code`]. A
/// report read back can hold any text there.
fn code(s: &str, cell: bool) -> String {
    escape::markdown_code(s, cell)
}

/// The status as GitHub shows it at a glance.
pub fn badge(s: Status) -> String {
    let icon = match s {
        Status::Pass => "✅",
        Status::Info => "ℹ️",
        Status::Warn => "⚠️",
        Status::Fail => "❌",
        Status::Skip => "⏭️",
    };
    format!("{icon} {}", status_label(s))
}

pub fn render(report: &Report) -> String {
    let o = Overview::of(report);
    let doc = Document::of(report);
    let mut out = String::new();

    let icon = match o.worst() {
        Some(Status::Fail) => "❌",
        Some(_) => "⚠️",
        None => "✅",
    };
    let _ = writeln!(
        out,
        "### {icon} {}: {}\n",
        text(&o.what_you_got(report)),
        text(&o.problems_count())
    );
    if let Some(nr) = o.not_run_sentence() {
        let _ = writeln!(out, "{}\n", text(&nr));
    }
    let mut context = vec![format!("gpuaudit {}", text(&report.tool.version))];
    context.push(text(
        report.machine.hostname.as_deref().unwrap_or("unknown host"),
    ));
    if let Some(at) = doc.audited_at() {
        context.push(text(&at));
    }
    context.push(match &report.audit.snapshot {
        Some(s) => format!("snapshot {}", text(s)),
        None => "live".into(),
    });
    context.push(format!("profile {}", text(&report.audit.profile)));
    let _ = writeln!(out, "{}\n", context.join(" · "));
    if report.audit.redacted {
        let _ = writeln!(out, "_{}_\n", super::REDACTED_NOTE);
    }

    let problems = o.problems();
    if !problems.is_empty() {
        let _ = writeln!(out, "#### Problems\n");
        for p in &problems {
            problem(&mut out, p);
        }
    }

    let infos = o.infos();
    if !infos.is_empty() {
        let _ = writeln!(out, "#### Worth knowing\n");
        for g in infos {
            let _ = writeln!(
                out,
                "- {} {}: {}",
                badge(g.status),
                code(g.check, false),
                text(&g.message)
            );
            // A ticket carries what to do about each note too (the table keeps it to one line).
            if let Some(fix) = g.fix {
                let _ = writeln!(out, "  - fix: {}", text(fix));
            }
        }
        let _ = writeln!(out);
    }

    measurements(&mut out, report);

    // Everything else, folded: each check by area.
    let rest: Vec<&Group> = o
        .groups
        .iter()
        .filter(|g| !g.is_problem() && g.status != Status::Info)
        .collect();
    if !rest.is_empty() {
        let pass = rest.iter().filter(|g| g.status == Status::Pass).count();
        let skip = rest.len() - pass;
        let mut summary = format!("✅ {pass} passing");
        if skip > 0 {
            summary.push_str(&format!(", ⏭️ {skip} not run"));
        }
        summary.push_str(" (each check, by area)");
        let _ = writeln!(out, "<details><summary>{summary}</summary>\n");
        let _ = writeln!(
            out,
            "| area | status | check | finding |\n|---|---|---|---|"
        );
        for g in rest {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(area_title(area(g.check))),
                badge(g.status),
                code(g.check, true),
                cell(&g.message)
            );
        }
        let _ = writeln!(out, "\n</details>\n");
    }

    machine(&mut out, &doc);
    out
}

/// A problem: the root's status, check and sentence, its key evidence and fix, then what its
/// cause explains (without their fixes: the root's is the one to follow).
fn problem(out: &mut String, p: &Problem) {
    let (g, fix_repeated) = (p.root, p.fix_repeated);
    let _ = writeln!(
        out,
        "**{}** {}: {}\n",
        badge(g.status),
        code(g.check, false),
        text(&g.message)
    );
    let ev = brief_evidence(g);
    if !ev.is_empty() {
        let mut line = text(&evidence_text(&ev));
        if let Some(src) = evidence_source(g) {
            line.push_str(&format!(" (from {})", text(src)));
        }
        let _ = writeln!(out, "- evidence: {line}");
    }
    if let Some(fix) = g.fix {
        if fix_repeated {
            let _ = writeln!(out, "- fix: the same as above");
        } else {
            let _ = writeln!(out, "- fix: {}", text(fix));
        }
    }
    if !p.consequences.is_empty() {
        let _ = writeln!(out, "- what it causes:");
        for c in &p.consequences {
            let _ = writeln!(
                out,
                "  - {} {}: {}",
                badge(c.status),
                code(c.check, false),
                text(&c.message)
            );
        }
    }
    let _ = writeln!(out);
}

fn measurements(out: &mut String, report: &Report) {
    if report.measurements.is_empty() {
        if let Some(r) = &report.audit.measurements_not_run {
            let _ = writeln!(out, "Measurements: none ({}).\n", text(r));
        }
        return;
    }
    let _ = writeln!(out, "#### Measured\n");
    let _ = writeln!(
        out,
        "| measurement | measured | expected | ratio | lowest on |\n|---|--:|--:|--:|---|"
    );
    for f in figures(report) {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            cell(&f.label),
            cell(&super::with_unit(&f.value_text(), f.unit)),
            f.expected().map(fmt_value).unwrap_or_else(|| "-".into()),
            f.lowest()
                .map(|(r, _)| percent(r))
                .unwrap_or_else(|| "-".into()),
            cell(&f.lowest_where())
        );
    }
    let _ = writeln!(
        out,
        "\nexpected: the datasheet's figure (or the link's rate); ratio: measured / expected, \
         the lowest over the GPUs.\n"
    );
    let _ = writeln!(
        out,
        "<details><summary>Every measurement ({})</summary>\n",
        report.measurements.len()
    );
    let _ = writeln!(
        out,
        "| measurement | GPU | value | expected | ratio | method |\n|---|---|--:|--:|--:|---|"
    );
    for m in &report.measurements {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&measurement_label(m)),
            cell(&place(m)),
            cell(&super::with_unit(&fmt_value(m.value), &m.unit)),
            m.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
            m.ratio.map(percent).unwrap_or_else(|| "-".into()),
            cell(&m.method)
        );
    }
    let _ = writeln!(out, "\n</details>\n");
}

fn machine(out: &mut String, doc: &Document) {
    let _ = writeln!(
        out,
        "<details><summary>The machine and its GPUs</summary>\n"
    );
    let _ = writeln!(out, "| machine | |\n|---|---|");
    for (k, v) in doc.machine_rows() {
        let _ = writeln!(out, "| {k} | {} |", cell(&v));
    }
    let (header, rows) = doc.gpu_rows();
    if !rows.is_empty() {
        let _ = writeln!(out, "\n| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }
    let _ = writeln!(out, "\n</details>");
}
