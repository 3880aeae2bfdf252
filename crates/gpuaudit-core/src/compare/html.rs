//! The comparison as one self-contained HTML page (the audit's page shell, no script, nothing
//! fetched): the machines, the key figures (best marked, rows that differ highlighted), one
//! chart per key measurement across the machines, the checks and the configuration. Every
//! string from a report is hostile input: it goes through `parts::esc`.

use super::model::{Comparison, FigureRow};
use super::table::{check_text, figure_label, figure_text, BEST, DIFFERS_MARK};
use super::{with_unit, DIFFERS, TIE};
use crate::render::charts::{self, ValueBar};
use crate::render::html::parts::{esc, figure, page_with_style};
use std::fmt::Write;

const STYLE: &str = "
tr.differs>td:first-child{border-left:4px solid var(--warn);font-weight:600}
tr.differs{background:#fff8c5}
td.best{font-weight:700;color:var(--pass)}
td .why{display:block;color:#57606a;font-size:.85em}
";

/// A row of [`grid`]: its label, whether it differs, and its cells (HTML, best).
type Row = (String, bool, Vec<(String, bool)>);

/// A table whose rows may differ: like `parts::table`, with `class=differs` on those rows and
/// `class=best` on the best cells. Cells are HTML already escaped.
fn grid(head: &[String], rows: &[Row]) -> String {
    let mut o = String::from("<div class=scroll><table class=compare><thead><tr>");
    for h in head {
        let _ = write!(o, "<th>{h}</th>");
    }
    o.push_str("</tr></thead><tbody>\n");
    for (label, differs, cells) in rows {
        let cls = if *differs { " class=differs" } else { "" };
        let mark = if *differs {
            format!("{DIFFERS_MARK} ")
        } else {
            String::new()
        };
        let _ = write!(o, "<tr{cls}><td>{mark}{label}</td>");
        for (cell, best) in cells {
            let c = if *best { " class=best" } else { "" };
            let _ = write!(o, "<td{c}>{cell}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
    o
}

/// The chart of one figure: a bar per machine that has it; the others named in the note.
fn chart(c: &Comparison, r: &FigureRow) -> Option<String> {
    r.cells.iter().find(|x| x.value.is_some())?;
    let mut bars = Vec::new();
    let mut missing = Vec::new();
    for (i, (col, cell)) in c.columns.iter().zip(&r.cells).enumerate() {
        match cell.value {
            Some(v) => bars.push(ValueBar {
                label: col.name.clone(),
                value: v,
                note: format!(
                    "{}{}",
                    with_unit(v, &r.unit),
                    if cell.best {
                        format!(" {BEST}")
                    } else {
                        String::new()
                    }
                ),
                color: charts::gpu_color(i).to_string(),
            }),
            None => missing.push(col.name.clone()),
        }
    }
    let mut note = match r.better {
        Some(crate::fleet::stats::Better::Lower) => "lower is better".to_string(),
        _ => "higher is better".to_string(),
    };
    if !missing.is_empty() {
        note.push_str(&format!("; not measured on {}", missing.join(", ")));
    }
    let svg = match all_equal(&bars) {
        // Bars of one length say only that they are equal, and look like a difference was
        // found; a sentence says it.
        Some(v) => Err(format!(
            "every machine with a value has the same one, {}",
            with_unit(v, &r.unit)
        )),
        None => charts::value_bars(&bars, &r.unit),
    };
    Some(figure(
        &format!("chart-{}", r.key),
        &figure_label(r),
        svg,
        &[],
        &note,
    ))
}

/// The value every bar has, where there are two or more and each is within [`TIE`] of the
/// largest (the views write three or four digits: the reader sees one number).
fn all_equal(bars: &[ValueBar]) -> Option<f64> {
    let top = bars.iter().map(|b| b.value).fold(f64::NAN, f64::max);
    let equal = bars.len() >= 2
        && top.is_finite()
        && bars
            .iter()
            .all(|b| (b.value - top).abs() <= TIE * top.abs());
    equal.then_some(top)
}

pub fn html(c: &Comparison) -> String {
    let mut b = String::from("<main>\n");
    let names: Vec<String> = c.columns.iter().map(|x| esc(&x.name)).collect();
    let _ = write!(
        b,
        "<h1>{} machines side by side</h1>\n<p class=sub>{BEST} the best of a figure; \
         {DIFFERS_MARK} a row whose machines differ (a figure: the worst more than {:.0}% \
         worse than the best). A machine's figure is its worst GPU's.</p>\n",
        c.columns.len(),
        DIFFERS * 100.0
    );
    if c.redacted {
        let _ = writeln!(b, "<p class=sub>{}</p>", esc(crate::render::REDACTED_NOTE));
    }
    let mut head = vec![String::new()];
    head.extend(names.iter().cloned());
    let col_row = |label: &str, f: &dyn Fn(&super::Column) -> String| {
        (
            label.to_string(),
            false,
            c.columns.iter().map(|x| (esc(&f(x)), false)).collect(),
        )
    };
    b.push_str("<h2>Machines</h2>\n");
    b.push_str(&grid(
        &head,
        &[
            col_row("GPUs", &|x| x.gpu_label()),
            col_row("driver", &|x| {
                x.driver.clone().unwrap_or_else(|| "not known".into())
            }),
            col_row("audited", &|x| {
                x.audited_at.clone().unwrap_or_else(|| "not known".into())
            }),
            col_row("gpuaudit", &|x| x.tool_version.clone()),
            col_row("verdict", &|x| x.verdict_label()),
            col_row("file", &|x| x.file.clone()),
        ],
    ));

    b.push_str("<h2>Key figures</h2>\n");
    let rows: Vec<Row> = c
        .figures
        .iter()
        .map(|r| {
            let cells = r
                .cells
                .iter()
                .map(|x| {
                    let mut t = esc(&figure_text(x));
                    if x.best {
                        t.push_str(&format!(" {BEST}"));
                    }
                    if let Some(why) = x.not_measured.as_deref().filter(|w| !w.is_empty()) {
                        let _ = write!(t, "<span class=why>{}</span>", esc(why));
                    }
                    (t, x.best)
                })
                .collect();
            (esc(&figure_label(r)), r.differs, cells)
        })
        .collect();
    b.push_str(&grid(&head, &rows));

    b.push_str("<h2>Charts</h2>\n");
    let drawn: Vec<String> = c.figures.iter().filter_map(|r| chart(c, r)).collect();
    if drawn.is_empty() {
        b.push_str("<p class=note>No charts: no key figure was measured on any machine.</p>\n");
    }
    for d in drawn {
        b.push_str(&d);
    }

    let differ = c.checks.iter().filter(|r| r.differs).count();
    let _ = writeln!(
        b,
        "<h2>Checks</h2>\n<p class=note>{} checks, {differ} with statuses that differ.</p>",
        c.checks.len()
    );
    let rows: Vec<Row> = c
        .checks
        .iter()
        .map(|r| {
            let cells = r
                .cells
                .iter()
                .map(|x| {
                    let cls = x
                        .status
                        .map(crate::render::html::parts::class)
                        .unwrap_or("skip");
                    (
                        format!("<span class=\"badge {cls}\">{}</span>", esc(&check_text(x))),
                        false,
                    )
                })
                .collect();
            (
                format!("<span class=check>{}</span>", esc(&r.check)),
                r.differs,
                cells,
            )
        })
        .collect();
    b.push_str(&grid(&head, &rows));

    b.push_str("<h2>Configuration</h2>\n");
    let rows: Vec<Row> = c
        .facts
        .iter()
        .map(|r| {
            let cells = r
                .cells
                .iter()
                .map(|x| (esc(x.value.as_deref().unwrap_or("not known")), false))
                .collect();
            (esc(&r.field), r.differs, cells)
        })
        .collect();
    b.push_str(&grid(&head, &rows));
    let _ = write!(
        b,
        "<footer>gpuaudit {} · {}</footer>\n</main>\n",
        esc(&c.tool.version),
        esc(&c.schema)
    );
    page_with_style(
        &format!("gpuaudit compare: {}", c.names().join(" · ")),
        STYLE,
        &b,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bars(values: &[f64]) -> Vec<ValueBar> {
        values
            .iter()
            .map(|v| ValueBar {
                label: "m".into(),
                value: *v,
                note: String::new(),
                color: "#000000".into(),
            })
            .collect()
    }

    /// Pinned: two or more values within TIE (0.1%) of the largest are one value, and drawn
    /// as a sentence instead of bars of one length (issue 23).
    #[test]
    fn equal_values_are_a_sentence_not_a_chart() {
        assert_eq!(TIE, 0.001);
        assert_eq!(all_equal(&bars(&[700.0, 700.0, 700.0])), Some(700.0));
        assert_eq!(all_equal(&bars(&[700.0, 699.5])), Some(700.0));
        assert_eq!(all_equal(&bars(&[700.0, 699.0])), None);
        // One machine's value compares with nothing: its bar stays.
        assert_eq!(all_equal(&bars(&[700.0])), None);
        assert_eq!(all_equal(&bars(&[f64::NAN, 700.0])), None);
        assert_eq!(all_equal(&bars(&[0.0, 0.0])), Some(0.0));
    }
}
