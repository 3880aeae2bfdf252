//! `gpuaudit collect --output DIR` (`--out`, its first name, is a hidden alias).

use crate::cli::CollectArgs;
use crate::sink;
use anyhow::Result;
use gpuaudit_core::render::escape::escape_line;
use gpuaudit_probe::collect::collect;
use gpuaudit_probe::gather::GatherOptions;
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::root::RootFs;
use std::time::Duration;

pub fn run(args: &CollectArgs) -> Result<u8> {
    let root = RootFs::live();
    let host = root
        .read_line("proc/sys/kernel/hostname")
        .unwrap_or_else(|_| "unknown host".into());
    let description = args.description.clone().unwrap_or_else(|| {
        format!(
            "{host}, collected by gpuaudit {}",
            env!("CARGO_PKG_VERSION")
        )
    });
    let opts = GatherOptions {
        command_timeout: Duration::from_secs(30),
        host: HostOptions {
            data_dirs: args.data_dirs.clone(),
            ..HostOptions::default()
        },
        ..GatherOptions::default()
    };
    let summary = collect(&root, &args.out, &description, &opts)?;
    for n in &summary.notes {
        sink::note(&format!("gpuaudit collect: {}", escape_line(n)));
    }
    let out = escape_line(&args.out.to_string_lossy()).into_owned();
    if !summary.failed.is_empty() {
        for f in &summary.failed {
            sink::note(&format!("gpuaudit collect: {}", escape_line(f)));
        }
        sink::note(&format!(
            "gpuaudit collect: {} could not be written: the snapshot in {out} is incomplete",
            files(summary.failed.len())
        ));
        return Ok(2);
    }
    sink::note(&format!(
        "gpuaudit collect: wrote {} to {out}; audit it with `gpuaudit --root {out}`",
        files(summary.files)
    ));
    Ok(0)
}

/// "1 file", "2 files" (also the rehearsal's dataset).
pub(crate) fn files(n: usize) -> String {
    if n == 1 {
        "1 file".to_string()
    } else {
        format!("{n} files")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_counts_are_words() {
        assert_eq!(super::files(1), "1 file");
        assert_eq!(super::files(0), "0 files");
        assert_eq!(super::files(7), "7 files");
    }
}
