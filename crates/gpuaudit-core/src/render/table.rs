//! The report for a person at a terminal: the verdict first, then each problem with its
//! evidence in brief and its fix, then what is worth knowing, one line per area, and the
//! measured figures. `verbose` lists every finding and every measurement; `quiet` only the
//! verdict and the problems. Lines are wrapped to `width` with a hanging indent.

use super::escape::escape_line;
use super::group::{brief_evidence, evidence_source, evidence_text, Group};
use super::overview::{figures, percent, Overview, Problem};
use super::{area, area_title, fmt_value, status_label};
use crate::finding::Status;
use crate::report::Report;
use owo_colors::{OwoColorize, Style};
use std::fmt::Write;

#[derive(Clone, Debug)]
pub struct TableOptions {
    pub color: bool,
    /// Every finding and every measurement.
    pub verbose: bool,
    /// The verdict and the problems only.
    pub quiet: bool,
    /// Columns to wrap to (the terminal's width; 80 where there is no terminal).
    pub width: usize,
}

/// Narrower than this and nothing reads well: wrap as if the terminal had this much.
pub const MIN_WIDTH: usize = 40;
/// Where no terminal says how wide it is.
pub const DEFAULT_WIDTH: usize = 80;

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            color: false,
            verbose: false,
            quiet: false,
            width: DEFAULT_WIDTH,
        }
    }
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

/// Writes wrapped lines; colour is put on after wrapping, so widths count only the text.
struct Out {
    s: String,
    width: usize,
    color: bool,
}

impl Out {
    fn plain_style(&self) -> Style {
        Style::new()
    }
    fn bold_style(&self) -> Style {
        if self.color {
            Style::new().bold()
        } else {
            Style::new()
        }
    }
    fn dim_style(&self) -> Style {
        if self.color {
            Style::new().dimmed()
        } else {
            Style::new()
        }
    }

    /// `head` (shown in `head_style`) then `text`, wrapped; continuation lines indented by
    /// `indent` columns. Both are escaped for the terminal here, whatever they hold (a check
    /// id, a reason, an area's name: every string of a report read back is the file's).
    fn para(
        &mut self,
        head: &str,
        head_style: Style,
        text: &str,
        text_style: Style,
        indent: usize,
    ) {
        let head = escape_line(head);
        let text = escape_line(text);
        let head_cols = textwrap::core::display_width(&head);
        let first_pad = " ".repeat(head_cols);
        let rest_pad = " ".repeat(indent);
        let lines = super::wrap::wrap(&text, self.width.max(MIN_WIDTH), &first_pad, &rest_pad);
        for (i, line) in lines.iter().enumerate() {
            let (pad, body) = if i == 0 {
                (
                    head.style(head_style).to_string(),
                    line.get(first_pad.len()..).unwrap_or(""),
                )
            } else {
                (rest_pad.clone(), line.get(rest_pad.len()..).unwrap_or(""))
            };
            let _ = writeln!(self.s, "{pad}{}", body.style(text_style));
        }
        if lines.is_empty() {
            let _ = writeln!(self.s, "{}", head.style(head_style));
        }
    }

    fn title(&mut self, t: &str) {
        let b = self.bold_style();
        let _ = writeln!(self.s, "\n{}", escape_line(t).style(b));
    }
}

/// Status label and a space: "FAIL ".
const STATUS_COLS: usize = 5;

pub fn render(report: &Report, opts: &TableOptions) -> String {
    let o = Overview::of(report);
    let mut out = Out {
        s: String::new(),
        width: opts.width,
        color: opts.color,
    };
    let (plain, dim, bold) = (out.plain_style(), out.dim_style(), out.bold_style());

    // The verdict, coloured by the worst problem.
    let worst = o.worst().unwrap_or(Status::Pass);
    let verdict_style = if opts.color {
        style(worst, true).bold()
    } else {
        plain
    };
    let what = o.what_you_got(report);
    let verdict = |out: &mut Out| {
        out.para(
            &format!("{what}: "),
            bold,
            &o.problems_count(),
            verdict_style,
            4,
        )
    };
    verdict(&mut out);
    if let Some(nr) = o.not_run_sentence() {
        out.para("", plain, &nr, plain, 4);
    }
    if !opts.quiet {
        out.para("", plain, &context_line(report), dim, 4);
    }
    // Also with -q: who reads a shared report must know the names in it are placeholders.
    if report.audit.redacted {
        out.para("", plain, super::REDACTED_NOTE, dim, 4);
    }

    let problems = o.problems();
    if !problems.is_empty() {
        if !opts.quiet {
            out.title("Problems");
        }
        for p in &problems {
            problem(&mut out, p);
        }
    }
    if opts.quiet {
        verdict_again(&mut out, verdict);
        return out.s;
    }

    if opts.verbose {
        every_finding(&mut out, &o);
    } else {
        let infos = o.infos();
        if !infos.is_empty() {
            out.title("Worth knowing");
            for g in infos {
                one_line(&mut out, g);
                note_fix(&mut out, g);
            }
        }
        not_run(&mut out, &o);
        out.title("By area");
        let areas = o.areas();
        let w = areas
            .iter()
            .map(|a| a.title.chars().count())
            .max()
            .unwrap_or(0);
        for a in &areas {
            let head = format!("  {:<w$}  ", a.title);
            let cols = textwrap::core::display_width(&head);
            out.para(&head, plain, &a.sentence(), plain, cols);
        }
    }

    measurements(&mut out, report, opts.verbose);

    let mut hints = Vec::new();
    if !opts.verbose {
        hints.push("every finding: -v".to_string());
    }
    if let Some(p) = problems.first() {
        hints.push(format!(
            "why and how to check by hand: gpuaudit explain {}",
            p.root.check
        ));
    }
    hints.push("all evidence: --format json".into());
    let _ = writeln!(out.s);
    out.para("", plain, &hints.join(" · "), dim, 0);
    verdict_again(&mut out, verdict);
    out.s
}

/// The rows of the smallest terminal people use (80×24): a report longer than this has
/// scrolled its verdict away by the time it ends.
pub const SCREEN_ROWS: usize = 24;

/// The verdict once more at the end of a report longer than a screen, so that the last
/// screen says what the first did.
fn verdict_again(out: &mut Out, verdict: impl Fn(&mut Out)) {
    if out.s.lines().count() > SCREEN_ROWS {
        let _ = writeln!(out.s);
        verdict(out);
    }
}

/// "gpuaudit 0.1.0 · host · snapshot DIR · profile general · CUDA 13.0".
fn context_line(report: &Report) -> String {
    let mut parts = vec![format!("gpuaudit {}", report.tool.version)];
    parts.push(
        report
            .machine
            .hostname
            .clone()
            .unwrap_or_else(|| "unknown host".into()),
    );
    match &report.audit.snapshot {
        Some(s) => parts.push(format!("snapshot {s}")),
        None => parts.push("live".into()),
    }
    parts.push(format!("profile {}", report.audit.profile));
    if let Some(e) = &report.audit.expect {
        parts.push(format!("expect {e}"));
    }
    if let Some(c) = &report.machine.cuda_driver_version {
        parts.push(format!("CUDA {c} (driver)"));
    }
    parts.join(" · ")
}

/// A problem: its status and check, the sentence, the key evidence, the fix, and what its
/// cause explains (each on a line of its own, without a fix: the root's is the one).
fn problem(out: &mut Out, p: &Problem) {
    let (g, fix_repeated) = (p.root, p.fix_repeated);
    let st = style(g.status, out.color);
    let head = format!("{} ", status_label(g.status));
    let text = format!("{}: {}", g.check, g.message);
    out.para(&head, st, &text, out.plain_style(), STATUS_COLS);
    let ev = brief_evidence(g);
    if !ev.is_empty() {
        let mut line = evidence_text(&ev);
        if let Some(src) = evidence_source(g) {
            line.push_str(&format!(" (from {src})"));
        }
        let head = " ".repeat(STATUS_COLS) + "evidence: ";
        let dim = out.dim_style();
        out.para(&head, dim, &line, dim, STATUS_COLS + 10);
    }
    if let Some(fix) = g.fix {
        let head = " ".repeat(STATUS_COLS) + "fix: ";
        // The same fix twice in a row is said once.
        let text = if fix_repeated {
            "the same as above"
        } else {
            fix
        };
        out.para(&head, st, text, out.plain_style(), STATUS_COLS + 5);
    }
    if !p.consequences.is_empty() {
        let dim = out.dim_style();
        let head = " ".repeat(STATUS_COLS) + "what it causes:";
        let _ = writeln!(out.s, "{}", head.style(dim));
        for c in &p.consequences {
            let head = format!("{}· {} ", " ".repeat(STATUS_COLS), status_label(c.status));
            let cols = textwrap::core::display_width(&head);
            let text = format!("{}: {}", c.check, c.message);
            out.para(
                &head,
                style(c.status, out.color),
                &text,
                out.plain_style(),
                cols,
            );
        }
    }
}

/// A finding on one line (wrapped): "INFO cuda.framework: no PyTorch …".
fn one_line(out: &mut Out, g: &Group) {
    let st = style(g.status, out.color);
    let head = format!("{} ", status_label(g.status));
    let text = format!("{}: {}", g.check, g.message);
    let text_style = if g.status == Status::Skip {
        out.dim_style()
    } else {
        out.plain_style()
    };
    out.para(&head, st, &text, text_style, STATUS_COLS);
}

/// The fix of a finding that is not a problem (a note can carry what to do about it too),
/// under its line: every format carries every fix.
fn note_fix(out: &mut Out, g: &Group) {
    if let Some(fix) = g.fix {
        let head = " ".repeat(STATUS_COLS) + "fix: ";
        let dim = out.dim_style();
        out.para(&head, dim, fix, out.plain_style(), STATUS_COLS + 5);
    }
}

/// The checks that could not run: those of the main reason on one line, each other with
/// its own reason.
fn not_run(out: &mut Out, o: &Overview) {
    let skips: Vec<&Group> = o.not_run_groups();
    if skips.is_empty() {
        return;
    }
    out.title("Not run");
    let plain = out.plain_style();
    let dim = out.dim_style();
    let main = o.not_run_reason.as_ref().map(|(r, _)| r.as_str());
    let (of_main, others): (Vec<&Group>, Vec<&Group>) = skips
        .iter()
        .partition(|g| main.is_some_and(|r| g.message.contains(r)));
    // A check that skipped for the main reason on one GPU and another on the next is listed
    // under the main reason only, as the overview counts it.
    let others: Vec<&Group> = others
        .into_iter()
        .filter(|g| !of_main.iter().any(|m| m.check == g.check))
        .collect();
    let ids = |v: &[&Group]| {
        let mut ids: Vec<&str> = Vec::new();
        for g in v {
            if !ids.contains(&g.check) {
                ids.push(g.check);
            }
        }
        ids.join(", ")
    };
    if let Some(r) = main.filter(|_| !of_main.is_empty()) {
        let text = format!("{r}: {}", ids(&of_main));
        out.para("  ", plain, &text, dim, 6);
        if !others.is_empty() {
            let text = format!("other reasons (-v says why): {}", ids(&others));
            out.para("  ", plain, &text, dim, 6);
        }
    } else {
        // No reason shared: each with its own.
        for g in others {
            let text = format!("{}: {}", g.check, g.message);
            out.para("  ", plain, &text, dim, 6);
        }
    }
}

/// `-v`: every finding by area, the problems' fixes given above, the others' under them.
fn every_finding(out: &mut Out, o: &Overview) {
    let mut current = "";
    for g in &o.groups {
        let a = area(g.check);
        if a != current {
            out.title(area_title(a));
            current = a;
        }
        one_line(out, g);
        match g.caused_by.and_then(|r| o.groups.get(r)) {
            // Its fix is its cause's, given with the problem above.
            Some(cause) if g.status != Status::Skip => {
                let head = " ".repeat(STATUS_COLS) + "caused by: ";
                let dim = out.dim_style();
                let text = format!("{} (above)", cause.check);
                out.para(&head, dim, &text, dim, STATUS_COLS + 11);
            }
            _ if !g.is_problem() => note_fix(out, g),
            _ => {}
        }
    }
}

fn measurements(out: &mut Out, report: &Report, verbose: bool) {
    if report.measurements.is_empty() {
        return;
    }
    let mut rows: Vec<[String; 5]> = Vec::new();
    if verbose {
        out.title("Measurements");
        for m in &report.measurements {
            rows.push([
                format!(
                    "{}{}",
                    super::overview::measurement_label(m),
                    match super::overview::place(m) {
                        p if p.is_empty() => String::new(),
                        p => format!(" ({p})"),
                    }
                ),
                super::with_unit(&fmt_value(m.value), &m.unit),
                m.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
                m.ratio.map(percent).unwrap_or_else(|| "-".into()),
                String::new(),
            ]);
        }
    } else {
        out.title("Measured");
        for f in figures(report) {
            let lowest = f.lowest_where();
            rows.push([
                f.label.clone(),
                super::with_unit(&f.value_text(), f.unit),
                f.expected().map(fmt_value).unwrap_or_else(|| "-".into()),
                f.lowest()
                    .map(|(r, _)| percent(r))
                    .unwrap_or_else(|| "-".into()),
                lowest,
            ]);
        }
    }
    let header = [
        "".to_string(),
        "measured".to_string(),
        "expected".to_string(),
        "ratio".to_string(),
        if verbose { "" } else { "lowest" }.to_string(),
    ];
    let all: Vec<&[String; 5]> = std::iter::once(&header).chain(rows.iter()).collect();
    let w: Vec<usize> = (0..5)
        .map(|c| {
            all.iter()
                .map(|r| textwrap::core::display_width(&escape_line(&r[c])))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for (i, r) in all.iter().enumerate() {
        let cell = |c: usize| {
            let s = escape_line(&r[c]).into_owned();
            let pad = w[c].saturating_sub(textwrap::core::display_width(&s));
            (s, pad)
        };
        let (a, pa) = cell(0);
        let (b, pb) = cell(1);
        let (c, pc) = cell(2);
        let (d, pd) = cell(3);
        let (e, _) = cell(4);
        let line = format!(
            "  {a}{}  {}{b}  {}{c}  {}{d}  {e}",
            " ".repeat(pa),
            " ".repeat(pb),
            " ".repeat(pc),
            " ".repeat(pd)
        );
        let line = line.trim_end().to_string();
        let st = if i == 0 {
            out.dim_style()
        } else {
            out.plain_style()
        };
        // Too wide for the terminal: let it wrap under its label rather than cut it.
        if textwrap::core::display_width(&line) > out.width.max(MIN_WIDTH) {
            out.para("  ", st, line.trim_start(), st, 6);
        } else {
            let _ = writeln!(out.s, "{}", line.style(st));
        }
    }
}
