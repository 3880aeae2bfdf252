//! Where the report goes, and in which format.

use crate::cli::{ColorWhen, ListFormat};
use crate::sink;
use anyhow::Result;
use gpuaudit_core::render::{self, Format, TableOptions};
use gpuaudit_core::Report;
use std::io::IsTerminal;
use std::path::Path;

/// Every format of the audit's report (and `gpuaudit report`'s).
pub const REPORT_FORMATS: &[Format] =
    &[Format::Table, Format::Json, Format::Markdown, Format::Html];

/// The audit's and `gpuaudit report`'s format: `--format`, else the output file's extension.
pub fn choose_format(format: Option<Format>, output: Option<&Path>) -> Result<Format> {
    format_for(format, output, REPORT_FORMATS)
}

/// The extensions that name each format: the first is the one error messages give.
fn extensions(f: Format) -> &'static [&'static str] {
    match f {
        Format::Table => &["txt", "text"],
        Format::Json => &["json"],
        Format::Markdown => &["md", "markdown"],
        Format::Html => &["html", "htm"],
    }
}

/// One rule for every command: `--format` where given; else the format the `--output`
/// file's extension names (.json, .md, .html, .txt: the table) among the command's
/// `formats`; else the table, also when piped (`| less`, `| tee`, `ssh host gpuaudit`, as
/// ruff and ripgrep do: a script asks for JSON) and for a file without an extension. An
/// extension that names none of the command's formats is an error naming those it knows:
/// writing a table into `report.xyz` (or `report.pdf`) without a word was a surprise.
pub fn format_for(
    format: Option<Format>,
    output: Option<&Path>,
    formats: &[Format],
) -> Result<Format> {
    if let Some(f) = format {
        return Ok(f);
    }
    let Some(path) = output else {
        return Ok(Format::Table);
    };
    let Some(ext) = path.extension() else {
        return Ok(Format::Table);
    };
    let ext = ext.to_string_lossy().to_ascii_lowercase();
    if let Some(f) = formats
        .iter()
        .find(|f| extensions(**f).contains(&ext.as_str()))
    {
        return Ok(*f);
    }
    let known: Vec<String> = formats
        .iter()
        .map(|f| match f {
            Format::Table => format!(".{} (the table)", extensions(*f)[0]),
            _ => format!(".{}", extensions(*f)[0]),
        })
        .collect();
    anyhow::bail!(
        "--output {}: '.{ext}' names no format this command writes; the extensions it knows: \
         {} (or give --format)",
        gpuaudit_core::render::escape::escape_line(&path.display().to_string()),
        known.join(", ")
    )
}

/// `bench`, `burn` and `rehearse` (table or JSON) by [`format_for`]'s rule: the table
/// unless `--format json` or a `.json` output, also when piped (as the audit).
pub fn list_format(format: Option<ListFormat>, output: Option<&Path>) -> Result<ListFormat> {
    let asked = format.map(|f| match f {
        ListFormat::Table => Format::Table,
        ListFormat::Json => Format::Json,
    });
    Ok(
        match format_for(asked, output, &[Format::Table, Format::Json])? {
            Format::Json => ListFormat::Json,
            _ => ListFormat::Table,
        },
    )
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
        assert_eq!(
            choose_format(None, Some(Path::new("report"))).unwrap(),
            Format::Table
        );
        // --format says what the file holds, whatever its name.
        assert_eq!(
            choose_format(Some(Format::Markdown), Some(Path::new("r.xyz"))).unwrap(),
            Format::Markdown
        );
    }

    #[test]
    fn an_unknown_extension_is_an_error_naming_the_known_ones() {
        let e = choose_format(None, Some(Path::new("r.xyz")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "--output r.xyz: '.xyz' names no format this command writes; the extensions it \
             knows: .txt (the table), .json, .md, .html (or give --format)"
        );
        // A command of two formats refuses the others' extensions, and says its own.
        let e = format_for(
            None,
            Some(Path::new("b.md")),
            &[Format::Table, Format::Json],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("'.md'") && e.ends_with(".txt (the table), .json (or give --format)"),
            "{e}"
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
