//! What is generated from the command line and the report's types: `gpuaudit schema`,
//! `gpuaudit completions SHELL`, `gpuaudit man [--out DIR]`.

use crate::cli::Cli;
use crate::sink;
use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::Path;

pub fn schema() -> Result<u8> {
    sink::print(gpuaudit_core::report::json_schema_text())?;
    Ok(0)
}

pub fn completions(shell: clap_complete::Shell) -> Result<u8> {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gpuaudit", &mut script);
    sink::print(script)?;
    Ok(0)
}

/// The man page of gpuaudit on stdout, or into `out` one page per command (gpuaudit.1,
/// gpuaudit-audit.1, ...), as packagers install them.
pub fn man(out: Option<&Path>) -> Result<u8> {
    let cmd = Cli::command();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut page)
                .context("cannot render the man page")?;
            sink::print(page)?;
        }
    }
    Ok(0)
}
