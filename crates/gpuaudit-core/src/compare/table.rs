//! The comparison for a person at a terminal: a label column and one column per machine,
//! each cell wrapped to its column (2–4 machines fit 80 columns). Every string from a report
//! is escaped for the terminal (`render::escape`): a hostname is hostile input.

use super::model::{CheckCell, Comparison, FigureCell, FigureRow};
use super::DIFFERS;
use crate::finding::Status;
use crate::render::escape::escape_line;
use owo_colors::{OwoColorize, Style};
use std::fmt::Write;
use textwrap::core::display_width;

const MIN_WIDTH: usize = 40;
/// The label column: at most this wide, and at most a quarter of the width.
const LABEL_COLS: usize = 24;
const GAP: usize = 2;
pub(crate) const BEST: &str = "★";
pub(crate) const DIFFERS_MARK: &str = "≠";

fn esc(s: &str) -> String {
    escape_line(s).into_owned()
}

/// "55.2 (88%)", "gen5 x8 of gen5 x16 (50%)", "not measured"; the best mark is the caller's.
pub(crate) fn figure_text(c: &FigureCell) -> String {
    match c.ratio {
        Some(r) if c.value.is_some() => format!("{} ({:.0}%)", c.text, r * 100.0),
        _ => c.text.clone(),
    }
}

/// "pcie.link"'s cell: "FAIL GPU 1", "pass", "n/a", "FAIL (cause: gpu.driver-binding)".
pub(crate) fn check_text(c: &CheckCell) -> String {
    match c.status {
        None => "n/a".into(),
        Some(s @ (Status::Fail | Status::Warn)) => {
            let word = crate::render::status_label(s);
            let mut t = match c.gpus.as_slice() {
                [] => word.to_string(),
                [g] => format!("{word} GPU {g}"),
                gs => format!(
                    "{word} GPUs {}",
                    gs.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                ),
            };
            if let Some(cause) = &c.caused_by {
                t.push_str(&format!(" (cause: {cause})"));
            }
            t
        }
        Some(s) => s.as_str().to_string(),
    }
}

/// "host→device pinned (GB/s, % of link)"; the unit only where the cells show numbers in it
/// (the PCIe link's cells say "gen5 x16": its GB/s only order them and draw the chart).
pub(crate) fn figure_label(r: &FigureRow) -> String {
    let mut parts: Vec<String> = Vec::new();
    let numbers_shown = r
        .cells
        .iter()
        .filter(|c| c.value.is_some())
        .all(|c| c.text.starts_with(|ch: char| ch.is_ascii_digit()));
    let unit = crate::render::unit_text(&r.unit);
    if !unit.is_empty() && numbers_shown {
        parts.push(unit.to_string());
    }
    if let Some(of) = &r.ratio_of {
        parts.push(format!("% of {of}"));
    }
    if parts.is_empty() {
        r.label.clone()
    } else {
        format!("{} ({})", r.label, parts.join(", "))
    }
}

struct Grid {
    s: String,
    label: usize,
    col: usize,
    color: bool,
}

/// A cell's lines: a name longer than its column breaks after its own hyphens
/// (`h200-x2-power-` / `capped`), never in the middle of a word where it has one.
fn wrap(text: &str, cols: usize) -> Vec<String> {
    crate::render::wrap::wrap(text, cols.max(4), "", "")
}

impl Grid {
    fn pick(&self, s: Style) -> Style {
        if self.color {
            s
        } else {
            Style::new()
        }
    }

    /// One row: the label (with the differs mark) and a cell per machine, each (text, best).
    /// Every text is escaped for the terminal here (a check's cause, a check id: a report read
    /// back can hold anything there).
    fn row(&mut self, label: &str, differs: bool, cells: &[(String, bool)]) {
        let mark = if differs { DIFFERS_MARK } else { " " };
        let label_lines = wrap(&esc(label), self.label - 2);
        let cell_lines: Vec<Vec<String>> = cells
            .iter()
            .map(|(t, best)| {
                let t = if *best {
                    format!("{} {BEST}", esc(t))
                } else {
                    esc(t)
                };
                wrap(&t, self.col)
            })
            .collect();
        let height = cell_lines
            .iter()
            .map(Vec::len)
            .chain([label_lines.len()])
            .max()
            .unwrap_or(1);
        let label_style = self.pick(if differs {
            Style::new().yellow().bold()
        } else {
            Style::new()
        });
        for i in 0..height {
            let mut line = String::new();
            let l = label_lines.get(i).map(String::as_str).unwrap_or("");
            let m = if i == 0 { mark } else { " " };
            let cell = format!("{m} {l}");
            let pad = " ".repeat(self.label.saturating_sub(display_width(&cell)) + GAP);
            let _ = write!(line, "{}{pad}", cell.style(label_style));
            for (j, lines) in cell_lines.iter().enumerate() {
                let t = lines.get(i).map(String::as_str).unwrap_or("");
                let best = cells.get(j).is_some_and(|c| c.1);
                let st = self.pick(if best {
                    Style::new().green().bold()
                } else {
                    Style::new()
                });
                let last = j + 1 == cell_lines.len();
                let pad = if last {
                    String::new()
                } else {
                    " ".repeat(self.col.saturating_sub(display_width(t)) + GAP)
                };
                let _ = write!(line, "{}{pad}", t.style(st));
            }
            let _ = writeln!(self.s, "{}", line.trim_end());
        }
    }

    fn title(&mut self, t: &str) {
        let st = self.pick(Style::new().bold());
        let _ = writeln!(self.s, "\n{}", esc(t).style(st));
    }
}

/// The comparison at `width` columns (at least 40).
pub fn table(c: &Comparison, width: usize, color: bool) -> String {
    let width = width.max(MIN_WIDTH);
    let n = c.columns.len().max(1);
    let label = LABEL_COLS.min(width * 3 / 10).max(12);
    let col = (width.saturating_sub(label + GAP * n) / n).max(6);
    let mut g = Grid {
        s: String::new(),
        label,
        col,
        color,
    };
    let intro = format!(
        "{} machines side by side: {BEST} the best of a figure, {DIFFERS_MARK} a row whose \
         machines differ (a figure: the worst more than {:.0}% worse than the best). A \
         machine's figure is its worst GPU's.",
        c.columns.len(),
        DIFFERS * 100.0
    );
    let intro = if c.redacted {
        format!("{intro} ({})", crate::render::REDACTED_NOTE)
    } else {
        intro
    };
    g.s.push_str(&crate::render::wrap::wrapped(&intro, width, "", ""));
    let col_cells = |f: &dyn Fn(&super::Column) -> String| -> Vec<(String, bool)> {
        c.columns.iter().map(|x| (f(x), false)).collect()
    };
    g.s.push('\n');
    g.row("machine", false, &col_cells(&|x| x.name.clone()));
    g.row("GPUs", false, &col_cells(&|x| x.gpu_label()));
    g.row(
        "driver",
        false,
        &col_cells(&|x| x.driver.clone().unwrap_or_else(|| "not known".into())),
    );
    g.row(
        "audited (UTC)",
        false,
        &col_cells(&|x| x.audited_minute().unwrap_or_else(|| "not known".into())),
    );
    g.row("gpuaudit", false, &col_cells(&|x| x.tool_version.clone()));
    g.row("verdict", false, &col_cells(&|x| x.verdict_label()));

    g.title("Key figures");
    for r in &c.figures {
        let cells: Vec<(String, bool)> = r.cells.iter().map(|x| (figure_text(x), x.best)).collect();
        g.row(&figure_label(r), r.differs, &cells);
    }

    g.title("Checks");
    for r in &c.checks {
        let cells: Vec<(String, bool)> = r.cells.iter().map(|x| (check_text(x), false)).collect();
        g.row(&r.check, r.differs, &cells);
    }

    g.title("Configuration");
    for r in &c.facts {
        let cells: Vec<(String, bool)> = r
            .cells
            .iter()
            .map(|x| (x.value.as_deref().unwrap_or("not known").to_string(), false))
            .collect();
        g.row(&r.field, r.differs, &cells);
    }

    let why = c.not_measured();
    if !why.is_empty() {
        g.title("Not measured");
        for (name, reason) in why {
            let line = format!("{}: {}", esc(&name), esc(&reason));
            g.s.push_str(&crate::render::wrap::wrapped(&line, width, "  ", "    "));
        }
    }
    g.s
}
