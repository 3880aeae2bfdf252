//! The comparison in Markdown, for a GitHub issue: the machines, the key figures (the best in
//! bold with ★, a row that differs marked ≠), the checks folded, the configuration. Cells are
//! escaped with `markdown_cell` (`<`, `>`, `&` as entities, `|` as `\|`).

use super::model::Comparison;
use super::table::{check_text, figure_label, figure_text, BEST, DIFFERS_MARK};
use super::DIFFERS;
use crate::render::escape::{markdown_cell, markdown_text};
use std::fmt::Write;

fn header(o: &mut String, first: &str, c: &Comparison) {
    let _ = write!(o, "| {first} |");
    for col in &c.columns {
        let _ = write!(o, " {} |", markdown_cell(&col.name));
    }
    o.push_str("\n|---|");
    for _ in &c.columns {
        o.push_str("---|");
    }
    o.push('\n');
}

fn row(o: &mut String, label: &str, differs: bool, cells: &[String]) {
    let mark = if differs {
        format!("{DIFFERS_MARK} ")
    } else {
        String::new()
    };
    let _ = write!(o, "| {mark}{label} |");
    for cell in cells {
        let _ = write!(o, " {cell} |");
    }
    o.push('\n');
}

pub fn markdown(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "### {} machines side by side\n", c.columns.len());
    let _ = writeln!(
        o,
        "{BEST} the best of a figure; {DIFFERS_MARK} a row whose machines differ (a figure: \
         the worst more than {:.0}% worse than the best). A machine's figure is its worst \
         GPU's.\n",
        DIFFERS * 100.0
    );
    if c.redacted {
        let _ = writeln!(o, "_{}_\n", crate::render::REDACTED_NOTE);
    }
    header(&mut o, "machine", c);
    let cols = |f: &dyn Fn(&super::Column) -> String| -> Vec<String> {
        c.columns.iter().map(|x| markdown_cell(&f(x))).collect()
    };
    row(&mut o, "GPUs", false, &cols(&|x| x.gpu_label()));
    row(
        &mut o,
        "driver",
        false,
        &cols(&|x| x.driver.clone().unwrap_or_else(|| "not known".into())),
    );
    row(
        &mut o,
        "audited",
        false,
        &cols(&|x| x.audited_at.clone().unwrap_or_else(|| "not known".into())),
    );
    row(
        &mut o,
        "gpuaudit",
        false,
        &cols(&|x| x.tool_version.clone()),
    );
    row(&mut o, "verdict", false, &cols(&|x| x.verdict_label()));

    o.push_str("\n#### Key figures\n\n");
    header(&mut o, "figure", c);
    for r in &c.figures {
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|x| {
                let t = markdown_cell(&figure_text(x));
                if x.best {
                    format!("**{t}** {BEST}")
                } else {
                    t
                }
            })
            .collect();
        row(&mut o, &markdown_cell(&figure_label(r)), r.differs, &cells);
    }
    let why = c.not_measured();
    if !why.is_empty() {
        o.push('\n');
        for (name, reason) in why {
            let _ = writeln!(
                o,
                "- not measured on {}: {}",
                markdown_text(&name),
                markdown_text(&reason)
            );
        }
    }

    let differ = c.checks.iter().filter(|r| r.differs).count();
    let _ = write!(
        o,
        "\n<details><summary>Checks: {} ({differ} differ)</summary>\n\n",
        c.checks.len()
    );
    header(&mut o, "check", c);
    for r in &c.checks {
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|x| markdown_cell(&check_text(x)))
            .collect();
        row(&mut o, &markdown_cell(&r.check), r.differs, &cells);
    }
    o.push_str("\n</details>\n\n#### Configuration\n\n");
    header(&mut o, "", c);
    for r in &c.facts {
        let cells: Vec<String> = r
            .cells
            .iter()
            .map(|x| markdown_cell(x.value.as_deref().unwrap_or("not known")))
            .collect();
        row(&mut o, &markdown_cell(&r.field), r.differs, &cells);
    }
    o
}
