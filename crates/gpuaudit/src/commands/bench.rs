//! `gpuaudit bench [NAME...]` and `gpuaudit burn [SECS]`: the measurements alone, with their
//! full tables.

use crate::cli::{parse_gpu_list, BenchArgs, BurnArgs, MeasureArgs};
use crate::commands::audit::apply_measured;
use crate::progress::Bar;
use anyhow::{bail, Result};
use gpuaudit_core::checks::{self, CheckKind};
use gpuaudit_core::{Policy, Status};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::measure::{self, Group};
use std::fmt::Write;
use std::io::IsTerminal;

pub fn bench(args: &BenchArgs) -> Result<u8> {
    let mut groups = Vec::new();
    for n in &args.names {
        match Group::parse(n) {
            Some(g) => groups.push(g),
            None => bail!(
                "no measurement '{n}': choose from {} (the rehearsal is `gpuaudit rehearse`)",
                Group::BENCH
                    .iter()
                    .map(|g| g.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    run(measure::Options::bench(&groups), &args.common, &groups)
}

pub fn burn(args: &BurnArgs) -> Result<u8> {
    if args.seconds == 0 || args.seconds > 24 * 3600 {
        bail!("burn: SECS must be between 1 and 86400");
    }
    run(
        measure::Options::burn(args.seconds),
        &args.common,
        &[Group::Burn],
    )
}

fn run(mut opts: measure::Options, common: &MeasureArgs, groups: &[Group]) -> Result<u8> {
    let json = match common.format.as_deref() {
        Some("json") => true,
        Some("table") => false,
        Some(other) => bail!("--format '{other}': bench and burn print table or json"),
        None => common
            .output
            .as_ref()
            .map(|p| p.extension().is_some_and(|e| e == "json"))
            .unwrap_or(!std::io::stdout().is_terminal()),
    };
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
    let measured = measure::run(&facts, &opts, &mut |p| {
        bar.update(&p.message, p.done_ms, p.total_ms)
    });
    bar.finish();
    apply_measured(&mut facts, measured);

    let policy = Policy {
        full: true,
        gpus: opts.gpus.clone(),
        ..Policy::default()
    };
    // The measured checks of the groups that ran judge the figures.
    let wanted: Vec<&str> = if groups.is_empty() {
        Group::BENCH
            .iter()
            .filter(|g| **g != Group::Burn)
            .map(|g| g.check_id())
            .collect()
    } else {
        groups.iter().map(|g| g.check_id()).collect()
    };
    let findings: Vec<_> = checks::all()
        .iter()
        .filter(|c| c.kind == CheckKind::Measured && wanted.contains(&c.id))
        .flat_map(|c| checks::run_one(c, &facts, &policy))
        .collect();
    let failed = findings.iter().any(|f| f.status == Status::Fail);

    let text = if json {
        let v = serde_json::json!({
            "schema": "gpuaudit.bench/1",
            "measured": &facts.measured,
            "measurements": gpuaudit_core::report::measurements(&facts),
            "findings": findings,
        });
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        let mut out = String::new();
        for (title, rows) in gpuaudit_core::render::bench::tables(&facts.measured) {
            let _ = writeln!(out, "{title}");
            let mut t = comfy_table::Table::new();
            t.load_style(comfy_table::presets::UTF8_HORIZONTAL_ONLY);
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
            let _ = writeln!(
                out,
                "{:<4} {}{gpu}: {}",
                f.status.as_str().to_uppercase(),
                f.check,
                f.message
            );
            if matches!(f.status, Status::Fail | Status::Warn) {
                if let Some(fix) = &f.fix {
                    let _ = writeln!(out, "     fix: {fix}");
                }
            }
        }
        for n in &facts.measured.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    };
    match &common.output {
        Some(p) => std::fs::write(p, text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(if failed { 1 } else { 0 })
}
