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
    if let Some(p) = output {
        let ext = p
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        return Ok(match ext.as_str() {
            "json" => Format::Json,
            "md" | "markdown" => Format::Markdown,
            "html" | "htm" => Format::Html,
            _ => Format::Table,
        });
    }
    Ok(if std::io::stdout().is_terminal() {
        Format::Table
    } else {
        Format::Json
    })
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
