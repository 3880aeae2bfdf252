//! Where the report goes, and in which format.

use anyhow::{Context, Result};
use gpuaudit_core::render::{self, Format, TableOptions};
use gpuaudit_core::Report;
use std::io::{IsTerminal, Write};
use std::path::Path;

pub fn choose_format(format: Option<&str>, output: Option<&Path>) -> Result<Format> {
    if let Some(f) = format {
        return f.parse::<Format>().map_err(anyhow::Error::msg);
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

pub fn use_color(when: &str, output: Option<&Path>) -> Result<bool> {
    match when {
        "always" => Ok(true),
        "never" => Ok(false),
        "auto" => Ok(output.is_none()
            && std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())),
        other => anyhow::bail!("--color '{other}': expected auto, always or never"),
    }
}

pub fn emit(
    report: &Report,
    format: Format,
    table: &TableOptions,
    output: Option<&Path>,
) -> Result<()> {
    let text = render::render(report, format, table);
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display())),
        None => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`gpuaudit | head`) is not an error worth a message.
            match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("cannot write the report"),
            }
        }
    }
}
