//! `gpuaudit collect --out DIR`.

use crate::cli::CollectArgs;
use anyhow::Result;
use gpuaudit_probe::collect::{collect_base, collect_host, Collector};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::root::RootFs;
use std::time::Duration;

pub fn run(args: &CollectArgs) -> Result<u8> {
    let root = RootFs::live();
    let mut c = Collector::new(&root, &args.out)?;
    let host = root
        .read_trimmed("proc/sys/kernel/hostname")
        .unwrap_or_else(|_| "unknown host".into());
    let description = args.description.clone().unwrap_or_else(|| {
        format!(
            "{host}, collected by gpuaudit {}",
            env!("CARGO_PKG_VERSION")
        )
    });
    collect_base(&mut c, &description, Duration::from_secs(30))?;
    let host = HostOptions {
        data_dirs: args.data_dirs.clone(),
        ..HostOptions::default()
    };
    collect_host(&mut c, &host);
    for n in &c.summary.notes {
        eprintln!("gpuaudit collect: {n}");
    }
    eprintln!(
        "gpuaudit collect: wrote {} files to {}; audit it with `gpuaudit --root {}`",
        c.summary.files,
        args.out.display(),
        args.out.display()
    );
    Ok(0)
}
