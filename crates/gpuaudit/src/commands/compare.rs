//! `gpuaudit compare REPORT.json REPORT.json...`: several machines side by side
//! (gpuaudit-core's `compare`). This file reads the reports; the core compares and renders.
//! The reports are read first, then compared: a step that changes a report (redaction) sits
//! between the two.

use crate::cli::{CompareArgs, CompareFormat};
use crate::commands::report;
use crate::{output, sink};
use anyhow::{anyhow, Result};
use gpuaudit_core::compare::{self, Comparison, Input};
use gpuaudit_core::render::Format;
use std::path::Path;

fn choose_format(format: Option<CompareFormat>, out: Option<&Path>) -> CompareFormat {
    if let Some(f) = format {
        return f;
    }
    match crate::output::format_of_path(out) {
        Format::Json => CompareFormat::Json,
        Format::Markdown => CompareFormat::Md,
        Format::Html => CompareFormat::Html,
        Format::Table => CompareFormat::Table,
    }
}

/// Every report, in order; the first file that is not one is exit 2 with one line naming it.
fn read_all(args: &CompareArgs) -> Result<Vec<Input>> {
    args.reports
        .iter()
        .map(|p| {
            let file = p.display().to_string();
            let report = report::read(p).map_err(|e| anyhow!(e.of_file(&file)))?;
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| file.clone());
            Ok(Input { file, stem, report })
        })
        .collect()
}

/// Exit 0 when rendered (each report's verdict is in its column), 2 when a file is not a
/// report or an argument is wrong.
pub fn run(args: &CompareArgs) -> Result<u8> {
    if !args.names.is_empty() && args.names.len() != args.reports.len() {
        // Said before any file is read: the count is wrong whatever the files hold.
        return Err(anyhow!(
            "--name given {} time(s) for {} reports: name every report, in order, or none",
            args.names.len(),
            args.reports.len()
        ));
    }
    let inputs = read_all(args)?;
    let comparison = Comparison::build(&inputs, &args.names).map_err(|e| anyhow!(e))?;
    let out = args.output.as_deref();
    let text = match choose_format(args.format, out) {
        CompareFormat::Json => comparison.to_json(),
        CompareFormat::Md => compare::markdown(&comparison),
        CompareFormat::Html => compare::html(&comparison),
        CompareFormat::Table => compare::table(
            &comparison,
            output::table_width(out),
            output::use_color(args.color, out),
        ),
    };
    sink::deliver(text, out)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_follows_the_output_file_unless_asked() {
        assert_eq!(choose_format(None, None), CompareFormat::Table);
        for (f, want) in [
            ("c.JSON", CompareFormat::Json),
            ("c.md", CompareFormat::Md),
            ("c.html", CompareFormat::Html),
            ("c.txt", CompareFormat::Table),
        ] {
            assert_eq!(choose_format(None, Some(Path::new(f))), want, "{f}");
        }
        assert_eq!(
            choose_format(Some(CompareFormat::Md), Some(Path::new("c.json"))),
            CompareFormat::Md
        );
    }
}
