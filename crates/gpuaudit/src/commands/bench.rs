//! `gpuaudit bench [NAME...]` and `gpuaudit burn [SECS]`: the measurements alone, with their
//! full tables.

use crate::cli::{parse_gpu_list, BenchArgs, BurnArgs, ListFormat, MeasureArgs};
use crate::commands::audit::{apply_measured, check_selection};
use crate::progress::Bar;
use crate::sink;
use anyhow::{bail, Result};
use gpuaudit_core::checks::{self, CheckKind};
use gpuaudit_core::facts::{Facts, MeasuredFacts};
use gpuaudit_core::render::escape::escape_line;
use gpuaudit_core::{Policy, Status};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::measure::{self, GpuGroup};
use std::fmt::Write;

pub fn bench(args: &BenchArgs) -> Result<u8> {
    let mut groups = Vec::new();
    for n in &args.names {
        match GpuGroup::parse(n) {
            Some(g) => groups.push(g),
            None => bail!(
                "no measurement '{n}': choose from {} (the rehearsal is `gpuaudit rehearse`)",
                GpuGroup::BENCH
                    .iter()
                    .map(|g| g.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    run("bench", measure::Options::bench(&groups), &args.common)
}

pub fn burn(args: &BurnArgs) -> Result<u8> {
    if args.seconds == 0 || args.seconds > 24 * 3600 {
        bail!("burn: SECS must be between 1 and 86400");
    }
    run("burn", measure::Options::burn(args.seconds), &args.common)
}

/// `command`: "bench" or "burn", for the messages.
fn run(command: &str, mut opts: measure::Options, common: &MeasureArgs) -> Result<u8> {
    // One rule for every command: the table unless JSON is asked for (not "JSON when
    // piped": the audit stays a table in `| less`, and so do these).
    let json =
        crate::output::list_format(common.format, common.output.as_deref())? == ListFormat::Json;
    opts.force = common.force;
    opts.gpus = common
        .gpus
        .as_deref()
        .map(parse_gpu_list)
        .transpose()
        .map_err(anyhow::Error::msg)?;

    let mut bar = Bar::spinner("reading the machine");
    let gopts = GatherOptions {
        host: HostOptions {
            ask_interpreter: false,
            ..HostOptions::default()
        },
        ..GatherOptions::default()
    };
    let mut facts = gather::live(&gopts);
    if let Err(e) = nothing_to_measure(&facts, opts.gpus.as_deref()) {
        bar.finish();
        return Err(e.context(format!("{command}: could not run")));
    }
    let measured = measure::run(&facts, &opts, &mut |p| {
        bar.update(&p.message, p.done_ms, p.total_ms)
    });
    bar.finish();
    if let Some(why) = measured
        .libraries
        .iter()
        .find(|l| l.name == measure::libs::Lib::Cuda.name())
        .and_then(|l| l.path.reason())
    {
        bail!("{command}: could not run: the CUDA driver library is missing: {why}");
    }
    apply_measured(&mut facts, measured);

    let policy = Policy {
        full: true,
        gpus: opts.gpus.clone(),
        ..Policy::default()
    };
    // The groups asked for (the options resolved "none named"); their measured checks judge
    // the figures.
    let asked: Vec<GpuGroup> = opts
        .groups
        .clone()
        .unwrap_or_else(|| GpuGroup::ALL.to_vec());
    let wanted: Vec<&str> = asked.iter().map(|g| g.check_id()).collect();
    let findings: Vec<_> = checks::all()
        .iter()
        .filter(|c| c.kind == CheckKind::Measured && wanted.contains(&c.id))
        .flat_map(|c| checks::run_one(c, &facts, &policy))
        .collect();
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();

    let text = if json {
        let v = serde_json::json!({
            "schema": "gpuaudit.bench/1",
            "measured": &facts.measured,
            "measurements": gpuaudit_core::report::measurements(&facts),
            "findings": findings,
        });
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        use gpuaudit_core::render::wrap::wrapped;
        // Wrapped to the terminal (else `$COLUMNS`, else 80), as the audit's table is.
        let width = crate::output::table_width(common.output.as_deref());
        let mut out = String::new();
        for (title, rows) in gpuaudit_core::render::bench::tables(&facts.measured) {
            let _ = writeln!(out, "{title}");
            let mut t = comfy_table::Table::new();
            t.load_style(comfy_table::presets::UTF8_HORIZONTAL_ONLY);
            t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
            t.set_width(u16::try_from(width).unwrap_or(u16::MAX));
            let mut rows = rows.into_iter();
            if let Some(h) = rows.next() {
                t.set_header(h);
            }
            for r in rows {
                t.add_row(r);
            }
            let _ = writeln!(out, "{t}\n");
        }
        for f in &findings {
            let gpu = f.gpu.map(|g| format!(" GPU {g}")).unwrap_or_default();
            let head = format!("{:<4} ", f.status.as_str().to_uppercase());
            let text = format!("{}{gpu}: {}", f.check, escape_line(&f.message));
            out.push_str(&wrapped(&text, width, &head, "     "));
            if matches!(f.status, Status::Fail | Status::Warn) {
                if let Some(fix) = &f.fix {
                    out.push_str(&wrapped(
                        &escape_line(fix),
                        width,
                        "     fix: ",
                        "          ",
                    ));
                }
            }
        }
        for n in &facts.measured.notes {
            out.push_str(&wrapped(&escape_line(n), width, "note: ", "      "));
        }
        out
    };
    sink::deliver(text, common.output.as_deref())?;
    let (code, why) = outcome(command, &asked, &facts.measured, failed);
    if let Some(why) = why {
        sink::note(&escape_line(&why));
    }
    Ok(code)
}

/// The exit status of bench and burn, with the line that says why where it is not 0: 1 when
/// no group asked for has a result, or when a measured check failed.
fn outcome(
    command: &str,
    asked: &[GpuGroup],
    m: &MeasuredFacts,
    failed: usize,
) -> (u8, Option<String>) {
    let not_measured: Vec<String> = asked
        .iter()
        .filter_map(|g| unmeasured(m, *g).map(|why| format!("{}: {why}", g.name())))
        .collect();
    if not_measured.len() == asked.len() {
        return (
            1,
            Some(format!(
                "gpuaudit {command}: nothing could be measured ({})",
                not_measured.join("; ")
            )),
        );
    }
    if failed > 0 {
        return (
            1,
            Some(format!(
                "gpuaudit {command}: {failed} measured check{} failed",
                if failed == 1 { "" } else { "s" }
            )),
        );
    }
    (0, None)
}

/// Why the measurements cannot start at all (exit 2): no GPU, or `--gpus` names one the
/// machine lacks.
fn nothing_to_measure(facts: &Facts, selected: Option<&[u32]>) -> Result<()> {
    if facts.gpu_list().is_empty() {
        let why = facts
            .gpus
            .reason()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        bail!("no NVIDIA GPU found{why}");
    }
    if let Some(sel) = selected {
        check_selection(facts, sel)?;
    }
    Ok(())
}

/// Why a group of measurements has no result, `None` where it has one.
fn unmeasured(m: &MeasuredFacts, g: GpuGroup) -> Option<&str> {
    match g {
        GpuGroup::Context => m.context.reason(),
        GpuGroup::Pcie => m.pcie.reason(),
        GpuGroup::Memory => m.memory.reason(),
        GpuGroup::Gemm => m.gemm.reason(),
        GpuGroup::P2p => m.p2p.reason(),
        GpuGroup::Nccl => m.nccl.reason(),
        GpuGroup::Burn => m.burn.reason(),
        GpuGroup::Rehearse => m.rehearsal.reason(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::testing::measured;
    use gpuaudit_core::Reading;

    #[test]
    fn exit_1_when_nothing_was_measured_or_a_check_failed() {
        let mut m = MeasuredFacts::not_run("x");
        m.context = Reading::unavailable("GPU 0 busy");
        m.pcie = Reading::unavailable("GPU 0 busy");
        let asked = [GpuGroup::Context, GpuGroup::Pcie];
        let (code, why) = outcome("bench", &asked, &m, 0);
        assert_eq!(code, 1);
        assert_eq!(
            why.as_deref(),
            Some(
                "gpuaudit bench: nothing could be measured (context: GPU 0 busy; pcie: GPU 0 busy)"
            )
        );
        // One group measured: the run counts; a failed check still makes it 1.
        m.context = Reading::Value(measured::ctx(120.0, true));
        assert_eq!(outcome("bench", &asked, &m, 0), (0, None));
        let (code, why) = outcome("bench", &asked, &m, 2);
        assert_eq!(code, 1);
        assert_eq!(
            why.as_deref(),
            Some("gpuaudit bench: 2 measured checks failed")
        );
        assert_eq!(
            outcome("burn", &[GpuGroup::Burn], &m, 0).1.as_deref(),
            Some("gpuaudit burn: nothing could be measured (burn: x)")
        );
    }
}
