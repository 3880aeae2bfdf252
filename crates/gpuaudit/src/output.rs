//! Where the report goes, and in which format.

use crate::cli::ColorWhen;
use crate::sink;
use anyhow::Result;
use gpuaudit_core::render::{self, Format, TableOptions};
use gpuaudit_core::Report;
use std::io::IsTerminal;
use std::path::Path;

pub fn choose_format(format: Option<Format>, output: Option<&Path>) -> Result<Format> {
    if let Some(f) = format {
        return Ok(f);
    }
    // The report for a person also when piped (`| less`, `| tee`, `ssh host gpuaudit`), as
    // ruff and ripgrep do; a script asks for JSON.
    Ok(format_of_path(output))
}

/// The format an output file's extension names (.json, .md or .markdown, .html or .htm),
/// else the table (and the table without a file): for every command's `--output`.
pub fn format_of_path(output: Option<&Path>) -> Format {
    let ext = output
        .and_then(|p| p.extension())
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "json" => Format::Json,
        "md" | "markdown" => Format::Markdown,
        "html" | "htm" => Format::Html,
        _ => Format::Table,
    }
}

/// The narrowest and widest the table is wrapped to, whatever the terminal or `$COLUMNS`
/// says (`COLUMNS=18446744073709551615` is a number, and no width to lay out text for).
pub const MIN_WIDTH: usize = 40;
pub const MAX_WIDTH: usize = 500;

/// The columns the table wraps to: the terminal's width where stdout is one, else
/// `$COLUMNS` where set, else 80; held to [`MIN_WIDTH`]..=[`MAX_WIDTH`].
pub fn table_width(output: Option<&Path>) -> usize {
    let terminal = if output.is_none() && std::io::stdout().is_terminal() {
        terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
    } else {
        None
    };
    width_from(terminal, std::env::var("COLUMNS").ok().as_deref())
}

fn width_from(terminal: Option<usize>, columns: Option<&str>) -> usize {
    terminal
        .filter(|w| *w > 0)
        .or_else(|| {
            columns?
                .trim()
                .parse::<u128>()
                .ok()
                .filter(|w| *w > 0)
                .map(|w| usize::try_from(w).unwrap_or(usize::MAX))
        })
        .unwrap_or(TableOptions::default().width)
        .clamp(MIN_WIDTH, MAX_WIDTH)
}

pub fn use_color(when: ColorWhen, output: Option<&Path>) -> bool {
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            output.is_none()
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

pub fn emit(
    report: &Report,
    format: Format,
    table: &TableOptions,
    output: Option<&Path>,
) -> Result<()> {
    let text = render::render(report, format, table);
    sink::deliver(text, output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_the_default_unless_json_is_asked_for() {
        assert_eq!(choose_format(None, None).unwrap(), Format::Table);
        assert_eq!(
            choose_format(None, Some(Path::new("r.json"))).unwrap(),
            Format::Json
        );
        assert_eq!(
            choose_format(Some(Format::Json), None).unwrap(),
            Format::Json
        );
        assert_eq!(
            choose_format(None, Some(Path::new("r.HTML"))).unwrap(),
            Format::Html
        );
        assert_eq!(
            choose_format(None, Some(Path::new("r.txt"))).unwrap(),
            Format::Table
        );
    }

    #[test]
    fn width_from_terminal_then_columns_then_80() {
        assert_eq!(width_from(Some(120), Some("100")), 120);
        assert_eq!(width_from(None, Some("100")), 100);
        assert_eq!(width_from(Some(0), Some(" 90 ")), 90);
        assert_eq!(width_from(None, Some("wide")), 80);
        assert_eq!(width_from(None, Some("0")), 80);
        assert_eq!(width_from(None, None), 80);
        // Held to a width text can be laid out for.
        assert_eq!(width_from(None, Some("18446744073709551615")), MAX_WIDTH);
        assert_eq!(width_from(None, Some("99999999999999999999999")), MAX_WIDTH);
        assert_eq!(width_from(None, Some("10000000")), MAX_WIDTH);
        assert_eq!(width_from(None, Some("3")), MIN_WIDTH);
        assert_eq!(width_from(Some(100_000), None), MAX_WIDTH);
    }
}
