//! gpuaudit: tells the owner of a GPU machine what they really got.
//!
//! The binary is thin: it parses the command line, gathers facts through `gpuaudit-probe`,
//! judges them with `gpuaudit-core`, prints the report and returns the exit status
//! (0 no failure, 1 a check failed, 2 gpuaudit could not do its job).

mod cli;
mod commands;
mod output;
mod progress;
mod sink;

use gpuaudit_probe::{cleanup, measure, nvml};
use std::process::ExitCode;

fn main() -> ExitCode {
    install_panic_hook();
    // The children (measurements, NVML) are this binary re-executed: route them before clap.
    // They run in their own process groups and die with their parent (PR_SET_PDEATHSIG); the
    // parent kills them on a signal.
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some(measure::CHILD_SUBCOMMAND) => return exit_code(measure::child_main(&args[2..])),
        Some(measure::CTX_PROBE_SUBCOMMAND) => return exit_code(measure::ctx_probe_main()),
        Some(nvml::SUBCOMMAND) => return exit_code(nvml::child_main(&args[2..])),
        _ => {}
    }
    // Before anything is started or created: SIGINT, SIGTERM and SIGHUP kill every child's
    // process group and remove every temporary file and directory, then end gpuaudit with the
    // signal (the shell sees 130, 143, 129).
    cleanup::install_signal_cleanup();
    let cli = match cli::Cli::parse_args() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    let result = match cli.command {
        None => commands::audit::run(&cli.audit),
        Some(cli::Command::Audit(a)) => commands::audit::run(&a),
        Some(cli::Command::Collect(c)) => commands::collect::run(&c),
        Some(cli::Command::Checks) => commands::catalog::list(),
        Some(cli::Command::Models { format }) => commands::models::run(format),
        Some(cli::Command::Explain { id }) => commands::catalog::explain(&id),
        Some(cli::Command::Bench(b)) => commands::bench::bench(&b),
        Some(cli::Command::Burn(b)) => commands::bench::burn(&b),
        Some(cli::Command::Report(r)) => commands::report::run(&r),
        Some(cli::Command::Fleet(f)) => commands::fleet::run(&f),
        Some(cli::Command::Compare(c)) => commands::compare::run(&c),
        Some(cli::Command::Schema) => commands::generate::schema(),
        Some(cli::Command::Completions { shell }) => commands::generate::completions(shell),
        Some(cli::Command::Man { out }) => commands::generate::man(out.as_deref()),
        Some(cli::Command::Rehearse(r)) => commands::rehearse::run(&r),
        Some(cli::Command::Serve(s)) => commands::serve::run(&s),
    };
    // A signal that arrived meanwhile ends the process with the signal's status, not ours.
    cleanup::wait_if_terminating();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            sink::note(&format!("gpuaudit: {}", error_line(&e)));
            ExitCode::from(2)
        }
    }
}

/// One line: the whole error chain, outermost first, each cause once (an error whose message
/// already quotes its source is not followed by the source again), escaped for the terminal
/// (paths and reasons come from the machine and the command line).
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if line.contains(&cause) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&cause);
    }
    gpuaudit_core::render::escape::escape_line(&line).into_owned()
}

/// `--help` and `--version` go to stdout through the one writer (a full disk is an error
/// there too, as for every command); usage errors go to stderr, exit 2, as clap has them.
fn usage(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit()
    }
    let styled = e.render();
    let text = if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        styled.ansi().to_string()
    } else {
        styled.to_string()
    };
    match sink::print(text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            sink::note(&format!("gpuaudit: {}", error_line(&err)));
            ExitCode::from(2)
        }
    }
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(2))
}

/// Panics inside guarded NVML calls (in the `__nvml` child) are turned into readings; keep them
/// off the terminal.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if gpuaudit_probe::nvml::in_guarded_call() {
            return;
        }
        default(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chain_is_one_line_each_cause_once() {
        let io = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let inner = anyhow::Error::new(io);
        let msg = format!("cannot write /x: {inner}");
        let e = inner.context(msg);
        let line = error_line(&e);
        assert_eq!(line.matches("permission denied").count(), 1, "{line}");
        let e = anyhow::anyhow!("bad\x1b]0;title\x07 name").context("outer");
        assert_eq!(error_line(&e), "outer: bad\\x1b]0;title\\x07 name");
    }
}
