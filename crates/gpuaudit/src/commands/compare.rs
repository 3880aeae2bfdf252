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
use gpuaudit_core::report::Redactor;
use std::path::Path;

fn choose_format(format: Option<CompareFormat>, out: Option<&Path>) -> Result<CompareFormat> {
    if let Some(f) = format {
        return Ok(f);
    }
    let formats = [Format::Table, Format::Json, Format::Markdown, Format::Html];
    Ok(match crate::output::format_for(None, out, &formats)? {
        Format::Json => CompareFormat::Json,
        Format::Markdown => CompareFormat::Md,
        Format::Html => CompareFormat::Html,
        Format::Table => CompareFormat::Table,
    })
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

/// Every report through one mapping, then the files' names (a report file named after its
/// host gets the host's placeholder).
fn redact(inputs: &mut [Input]) -> Result<()> {
    let mut r = Redactor::new();
    for i in inputs.iter_mut() {
        i.report = r.redact(&i.report)?;
    }
    for i in inputs.iter_mut() {
        i.stem = r.redact_text(&i.stem)?;
        i.file = redact_path(&mut r, &i.file, &i.stem)?;
    }
    Ok(())
}

/// A report's path with its directory redacted and its stem replaced by the redacted one
/// (a name runs on through a dot, so `node17.json` is not the host `node17` to the text
/// rules).
fn redact_path(r: &mut Redactor, file: &str, redacted_stem: &str) -> Result<String> {
    let p = Path::new(file);
    let name = match p.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{redacted_stem}.{ext}"),
        None => redacted_stem.to_string(),
    };
    Ok(
        match p
            .parent()
            .and_then(|d| d.to_str())
            .filter(|d| !d.is_empty())
        {
            Some(dir) => Path::new(&r.redact_text(dir)?)
                .join(name)
                .display()
                .to_string(),
            None => name,
        },
    )
}

/// Exit 0 when rendered (each report's verdict is in its column), 2 when a file is not a
/// report or an argument is wrong.
pub fn run(args: &CompareArgs) -> Result<u8> {
    if !args.names.is_empty() && args.names.len() != args.reports.len() {
        // Said before any file is read: the count is wrong whatever the files hold.
        let times = match args.names.len() {
            1 => "once".to_string(),
            2 => "twice".to_string(),
            n => format!("{n} times"),
        };
        return Err(anyhow!(
            "--name given {times} for {} reports: name every report, in order, or none",
            args.reports.len()
        ));
    }
    let mut inputs = read_all(args)?;
    if args.redact {
        redact(&mut inputs)?;
    }
    let comparison = Comparison::build(&inputs, &args.names).map_err(|e| anyhow!(e))?;
    let out = args.output.as_deref();
    let text = match choose_format(args.format, out)? {
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
    fn a_report_path_is_redacted_by_directory_and_stem() {
        let mut r = Redactor::new();
        let stem = r.redact_text("node17").unwrap();
        assert_eq!(stem, "node17", "no report named it: kept");
        assert_eq!(
            redact_path(&mut r, "/home/alice/runs/node17.json", "host-1").unwrap(),
            "/home/user-1/runs/host-1.json"
        );
        assert_eq!(
            redact_path(&mut r, "node17.json", "host-1").unwrap(),
            "host-1.json"
        );
        assert_eq!(redact_path(&mut r, "node17", "host-1").unwrap(), "host-1");
    }

    #[test]
    fn the_format_follows_the_output_file_unless_asked() {
        assert_eq!(choose_format(None, None).unwrap(), CompareFormat::Table);
        for (f, want) in [
            ("c.JSON", CompareFormat::Json),
            ("c.md", CompareFormat::Md),
            ("c.html", CompareFormat::Html),
            ("c.txt", CompareFormat::Table),
        ] {
            assert_eq!(
                choose_format(None, Some(Path::new(f))).unwrap(),
                want,
                "{f}"
            );
        }
        assert_eq!(
            choose_format(Some(CompareFormat::Md), Some(Path::new("c.json"))).unwrap(),
            CompareFormat::Md
        );
        assert!(choose_format(None, Some(Path::new("c.xyz"))).is_err());
    }
}
