//! `gpuaudit compare A.json B.json ...`: several machines' reports side by side
//! (`gpuaudit.compare/1`), for choosing between providers: one column per machine, the key
//! figures (the best marked, the rows that differ highlighted), every check's status, and the
//! configuration. Pure: the command reads the reports (and may change them, e.g. redact them)
//! before they are compared here.
//!
//! - `model.rs`: the comparison's types (what `--format json` writes);
//! - `columns.rs`: one column per machine, and the names of the columns;
//! - `figures.rs`: the key figures, the best of each, and when a figure differs (its threshold);
//! - `checks.rs`: every check id any machine ran, its status per machine;
//! - `config.rs`: driver, CUDA, kernel, OS, VBIOS, GPU model, memory, CPU;
//! - `table.rs`, `markdown.rs`, `html.rs`: the views.

mod checks;
mod columns;
mod config;
mod figures;
mod html;
mod markdown;
mod model;
mod table;

pub use columns::column_names;
pub use figures::{DIFFERS, TIE};
pub use html::html;
pub use markdown::markdown;
pub use model::{
    CheckCell, CheckRow, Column, Comparison, FactCell, FactRow, FigureCell, FigureRow, Tool,
};
pub use table::table;

use crate::report::Report;

pub const SCHEMA: &str = "gpuaudit.compare/1";

/// One report given to `gpuaudit compare`: its file as given, the file's stem (a column's
/// name of last resort) and the report.
#[derive(Clone, Debug)]
pub struct Input {
    pub file: String,
    pub stem: String,
    pub report: Report,
}

impl Comparison {
    /// The comparison of `inputs`, in their order. `names`: the columns' names as the user
    /// gave them (`--name`), none or one per report; another count is an error (one line).
    pub fn build(inputs: &[Input], names: &[String]) -> Result<Comparison, String> {
        let names = column_names(inputs, names)?;
        let reports: Vec<&Report> = inputs.iter().map(|i| &i.report).collect();
        Ok(Comparison {
            schema: SCHEMA.into(),
            tool: Tool {
                name: "gpuaudit".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            columns: inputs
                .iter()
                .zip(names)
                .map(|(i, n)| columns::column(i, n))
                .collect(),
            figures: figures::rows(&reports),
            checks: checks::rows(&reports),
            facts: config::rows(&reports),
            redacted: !reports.is_empty() && reports.iter().all(|r| r.audit.redacted),
        })
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            // Serialising plain data with string keys cannot fail; say so rather than panic.
            format!("{{\"schema\": \"{SCHEMA}\", \"error\": \"{e}\"}}")
        });
        s.push('\n');
        s
    }

    /// The columns' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.columns.iter().map(|c| c.name.as_str()).collect()
    }

    /// Every "not measured" reason per column that has one (the views' footnote), in order:
    /// (column name, reason). A column's reasons are listed once each.
    pub fn not_measured(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (i, c) in self.columns.iter().enumerate() {
            for r in &self.figures {
                if let Some(Some(why)) = r.cells.get(i).map(|x| x.not_measured.as_ref()) {
                    if !why.is_empty() && !out.iter().any(|(n, w)| n == &c.name && w == why) {
                        out.push((c.name.clone(), why.clone()));
                    }
                }
            }
        }
        out
    }
}

/// A figure with its unit: "3959 GB/s", "57.6 us"; a ratio bare.
pub(crate) fn with_unit(v: f64, unit: &str) -> String {
    let v = crate::units::figure(v);
    if unit == "ratio" || unit.is_empty() {
        v
    } else {
        format!("{v} {unit}")
    }
}

#[cfg(test)]
pub(crate) mod tests;
