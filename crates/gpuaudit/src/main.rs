//! gpuaudit: tells the owner of a GPU machine what they really got.
//!
//! The binary is thin: it parses the command line, gathers facts through `gpuaudit-probe`,
//! judges them with `gpuaudit-core`, prints the report and returns the exit status
//! (0 no failure, 1 a check failed, 2 gpuaudit could not do its job).

mod cli;
mod commands;
mod output;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    install_panic_hook();
    let cli = cli::Cli::parse();
    let result = match cli.command {
        None => commands::audit::run(&cli.audit),
        Some(cli::Command::Audit(a)) => commands::audit::run(&a),
        Some(cli::Command::Collect(c)) => commands::collect::run(&c),
        Some(cli::Command::Checks) => commands::catalog::list(),
        Some(cli::Command::Explain { id }) => commands::catalog::explain(&id),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            // One line: the whole error chain, outermost first.
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("gpuaudit: {}", chain.join(": "));
            ExitCode::from(2)
        }
    }
}

/// Panics inside guarded NVML calls are turned into readings; keep them off the terminal.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if gpuaudit_probe::nvml::in_guarded_call() {
            return;
        }
        default(info);
    }));
}
