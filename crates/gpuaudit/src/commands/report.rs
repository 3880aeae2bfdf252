//! `gpuaudit report REPORT.json`: a saved report rendered again, without auditing again.

use crate::cli::ReportArgs;
use crate::output;
use anyhow::{anyhow, bail, Context, Result};
use gpuaudit_core::render::TableOptions;
use gpuaudit_probe::root::io_reason;
use std::io::Read;

/// A report larger than this is not one gpuaudit wrote (a full audit of 8 GPUs is a few
/// hundred KiB); reading stops there, so `gpuaudit report /dev/zero` ends.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;

/// Exit 0 when the report was rendered (its verdict is in it: the audit's own exit status
/// said it when it ran), 2 when the file is not a report this gpuaudit reads.
pub fn run(args: &ReportArgs) -> Result<u8> {
    let name = args.report.display().to_string();
    let format = output::choose_format(args.format.map(Into::into), args.output.as_deref())?;
    let color = output::use_color(args.color, args.output.as_deref());
    let mut bytes = Vec::new();
    std::fs::File::open(&args.report)
        .and_then(|f| f.take(MAX_REPORT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| anyhow!("cannot read {name}: {}", io_reason(&e)))?;
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        bail!(
            "{name}: larger than {} MiB: not a gpuaudit report",
            MAX_REPORT_BYTES >> 20
        );
    }
    let Ok(text) = String::from_utf8(bytes) else {
        bail!("{name}: not a gpuaudit report (not UTF-8 text)");
    };
    let report = gpuaudit_core::report::from_json(&text).with_context(|| name.clone())?;
    let table = TableOptions {
        color,
        verbose: args.verbose,
        quiet: args.quiet,
        width: output::table_width(args.output.as_deref()),
    };
    output::emit(&report, format, &table, args.output.as_deref())?;
    Ok(0)
}
