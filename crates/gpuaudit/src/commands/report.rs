//! `gpuaudit report REPORT.json`: a saved report rendered again, without auditing again.

use crate::cli::ReportArgs;
use crate::output;
use anyhow::{anyhow, Result};
use gpuaudit_core::render::TableOptions;
use gpuaudit_core::report::Redactor;
use gpuaudit_core::Report;
use gpuaudit_probe::root::io_reason;
use std::io::Read;
use std::path::Path;

/// A report larger than this is not one gpuaudit wrote (a full audit of 8 GPUs is a few
/// hundred KiB); reading stops there.
pub use gpuaudit_core::report::limits::MAX_REPORT_BYTES;

/// Why a file is not a report this gpuaudit reads, in one line.
#[derive(Debug)]
pub enum NotRead {
    /// The file could not be opened or read (the reason, from the system).
    Io(String),
    /// It was read, and is not a report (too large, not UTF-8, not JSON, another schema).
    Content(String),
}

impl NotRead {
    /// The reason alone, for a list of files that names each (`gpuaudit fleet`).
    pub fn reason(&self) -> String {
        match self {
            NotRead::Io(r) => format!("cannot be read: {r}"),
            NotRead::Content(r) => r.clone(),
        }
    }

    /// The reason after the file's name, for an error of one file (`gpuaudit report`).
    pub fn of_file(&self, name: &str) -> String {
        match self {
            NotRead::Io(r) => format!("cannot read {name}: {r}"),
            NotRead::Content(r) => format!("{name}: {r}"),
        }
    }
}

/// The report in the file at `path` (at most [`MAX_REPORT_BYTES`], `gpuaudit.report/1`).
pub fn read(path: &Path) -> Result<Report, NotRead> {
    read_with(path, gpuaudit_core::report::from_json)
}

/// As [`read`], the text parsed by `parse` (`from_json_for_summary` for the fleet).
pub fn read_with(
    path: &Path,
    parse: impl Fn(&str) -> Result<Report, gpuaudit_core::report::ReadError>,
) -> Result<Report, NotRead> {
    let bytes = read_bounded(path)?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(NotRead::Content(
            "not a gpuaudit report (not UTF-8 text)".into(),
        ));
    };
    parse(&text).map_err(|e| NotRead::Content(e.to_string()))
}

/// The bytes of the regular file at `path`, at most [`MAX_REPORT_BYTES`]. It is opened
/// without blocking (a FIFO, or a device, would wait for a writer or never end) and refused
/// unless it is a regular file; a link is followed to what it names.
fn read_bounded(path: &Path) -> Result<Vec<u8>, NotRead> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let io = |e: std::io::Error| NotRead::Io(io_reason(&e));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() || kind.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(NotRead::Content(format!(
            "not a report file ({what}: gpuaudit reads regular files only)"
        )));
    }
    // Room for the whole file at once (a fleet reads 100,000): no growing and copying on the
    // way; the size is a hint, the read still stops at the bound.
    let mut bytes = Vec::with_capacity(meta.len().min(MAX_REPORT_BYTES) as usize + 1);
    f.take(MAX_REPORT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(NotRead::Content(format!(
            "larger than the {} MiB a report may be",
            MAX_REPORT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// The audit's exit status, from the report read: 0 no check failed, 1 a check failed (also
/// with -q: a script that renders a saved report learns its verdict as the audit's caller
/// did), 2 when the file is not a report this gpuaudit reads or cannot be written out.
pub fn run(args: &ReportArgs) -> Result<u8> {
    let name = args.report.display().to_string();
    let format = output::choose_format(args.format.map(Into::into), args.output.as_deref())?;
    let color = output::use_color(args.color, args.output.as_deref());
    let mut report = read(&args.report).map_err(|e| anyhow!(e.of_file(&name)))?;
    if args.redact {
        report = Redactor::new().redact(&report)?;
    }
    let table = TableOptions {
        color,
        verbose: args.verbose,
        quiet: args.quiet,
        width: output::table_width(args.output.as_deref()),
    };
    output::emit(&report, format, &table, args.output.as_deref())?;
    Ok(report.exit_code() as u8)
}
