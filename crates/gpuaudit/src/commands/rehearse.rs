//! `gpuaudit rehearse`: a training-shaped pipeline run end to end; which stage starves the
//! GPU (the workload.pipeline check).
//!
//! Exit status as bench's: 0 when the GPU stages were measured and no finding failed, 1 when
//! a finding failed or nothing could be measured on a GPU (on a machine without one the CPU
//! stages still run and are reported), 2 when the rehearsal could not run at all (bad
//! arguments, a data directory that cannot be read).

use crate::cli::{parse_gpu_list, RehearseArgs};
use crate::progress::Bar;
use crate::sink;
use anyhow::{bail, Result};
use gpuaudit_core::checks::{self, workload::pipeline};
use gpuaudit_core::facts::{Rehearsal, Stage};
use gpuaudit_core::units::figure;
use gpuaudit_core::{Policy, Reading, Status};
use gpuaudit_probe::gather::{self, GatherOptions};
use gpuaudit_probe::host::HostOptions;
use gpuaudit_probe::rehearse;
use std::fmt::Write;

pub const SCHEMA: &str = "gpuaudit.rehearse/1";

/// The rehearsal's options from the command line: every size not given is the default.
pub fn options(args: &RehearseArgs) -> Result<rehearse::Options> {
    let d = rehearse::Options::defaults(rehearse::cpus());
    let o = rehearse::Options {
        data_dir: args.data_dir.clone(),
        batch: args.batch.unwrap_or(d.batch),
        sample_bytes: scaled(
            "--sample-kb",
            args.sample_kb,
            1 << 10,
            rehearse::MAX_SAMPLE_KB,
            d.sample_bytes,
        )?,
        tensor_bytes: scaled(
            "--tensor-kb",
            args.tensor_kb,
            1 << 10,
            rehearse::MAX_TENSOR_KB,
            d.tensor_bytes,
        )?,
        width: args.width.unwrap_or(d.width),
        depth: args.depth.unwrap_or(d.depth),
        tokens: args.tokens.unwrap_or(d.tokens),
        readers: args.readers.unwrap_or(d.readers),
        workers: args.workers.unwrap_or(d.workers),
        transform_cost: args.transform_cost.unwrap_or(d.transform_cost),
        pinned: !args.pageable,
        read_throttle_mb_s: args.read_throttle_mbps,
        steps: args.steps,
        seconds: args.seconds.unwrap_or(d.seconds),
        dataset_bytes: scaled(
            "--dataset-mb",
            args.dataset_mb,
            1 << 20,
            rehearse::MAX_DATASET_MB,
            d.dataset_bytes,
        )?,
        gpus: args
            .common
            .gpus
            .as_deref()
            .map(parse_gpu_list)
            .transpose()
            .map_err(anyhow::Error::msg)?,
        force: args.common.force,
        torch: args.torch,
    };
    o.validate().map_err(anyhow::Error::msg)?;
    Ok(o)
}

/// A size flag in bytes; one whose bytes are past `u64` is refused as out of its range (it
/// is, whatever the range), naming the value as it was given.
fn scaled(flag: &str, v: Option<u64>, unit: u64, max: u64, default: u64) -> Result<u64> {
    match v {
        None => Ok(default),
        Some(v) => v
            .checked_mul(unit)
            .ok_or_else(|| anyhow::anyhow!(rehearse::out_of_range(flag, v, 1, max))),
    }
}

pub fn run(args: &RehearseArgs) -> Result<u8> {
    let common = &args.common;
    // One rule for every command: the table unless JSON is asked for (not "JSON when
    // piped": the audit stays a table in `| less`, and so do these).
    let json = crate::output::list_format(common.format, common.output.as_deref())?
        == crate::cli::ListFormat::Json;
    let opts = options(args)?;
    // The products of the sizes against the machine, before anything is gathered, allocated
    // or written: past them, one line and exit 2.
    match rehearse::check(&opts) {
        Ok(_) => {}
        Err(rehearse::Error::Limit(e)) => {
            sink::note(&format!(
                "gpuaudit rehearse: {}",
                gpuaudit_core::render::escape::escape_line(&e.to_string())
            ));
            return Ok(2);
        }
        Err(e) => return Err(e.into()),
    }

    let mut bar = Bar::spinner("reading the machine");
    let gopts = GatherOptions {
        host: HostOptions {
            ask_interpreter: false,
            ..HostOptions::default()
        },
        ..GatherOptions::default()
    };
    let mut facts = gather::live(&gopts);
    if let Some(sel) = &opts.gpus {
        let have: Vec<u32> = facts.gpu_list().iter().map(|g| g.index).collect();
        if let Some(bad) = sel.iter().find(|i| !have.contains(i)) {
            bail!("--gpus: there is no GPU {bad}");
        }
    }
    let measured = rehearse::run(&facts, &opts, &mut |p| {
        bar.update(&p.message, p.done_ms, p.total_ms)
    })?;
    bar.finish();
    crate::commands::audit::apply_measured(&mut facts, measured);

    let policy = Policy {
        full: true,
        gpus: opts.gpus.clone(),
        ..Policy::default()
    };
    let findings = checks::find(pipeline::CHECK.id)
        .map(|c| checks::run_one(c, &facts, &policy))
        .unwrap_or_default();
    let failed = findings.iter().any(|f| f.status == Status::Fail);
    let rehearsal = facts.measured.rehearsal.value();
    let gpu_measured = rehearsal.is_some_and(|r| r.stage(Stage::GpuStep).is_value());

    let text = if json {
        let v = serde_json::json!({
            "schema": SCHEMA,
            "rehearsal": &facts.measured.rehearsal,
            "measurements": gpuaudit_core::report::measurements(&facts),
            "findings": findings,
            "notes": &facts.measured.notes,
        });
        format!("{}\n", serde_json::to_string_pretty(&v)?)
    } else {
        table(
            rehearsal,
            &findings,
            &facts.measured.notes,
            crate::output::table_width(common.output.as_deref()),
        )
    };
    sink::deliver(text, common.output.as_deref())?;
    if !gpu_measured {
        let why = rehearsal
            .map(|r| match r.stage(Stage::GpuStep) {
                Reading::Unavailable(w) => w,
                Reading::Value(_) => String::new(),
            })
            .unwrap_or_default();
        sink::note(&format!(
            "gpuaudit rehearse: the GPU stages could not run ({}): only the CPU stages were \
             measured",
            gpuaudit_core::render::escape::escape_line(&why)
        ));
    }
    Ok(if failed || !gpu_measured { 1 } else { 0 })
}

fn rate(v: f64) -> String {
    pipeline::rate(v)
}

/// The stage table, the whole pipeline, the findings, wrapped to `width` columns (the
/// terminal's, else `$COLUMNS`, else 80), as the audit's table is.
fn table(
    r: Option<&Rehearsal>,
    findings: &[gpuaudit_core::Finding],
    notes: &[String],
    width: usize,
) -> String {
    use gpuaudit_core::render::wrap::wrapped;
    let esc = |s: &str| gpuaudit_core::render::escape::escape_line(s).into_owned();
    let mut out = String::new();
    if let Some(r) = r {
        let c = &r.config;
        let gpu_line = match &r.gpu {
            Reading::Value(g) => format!(
                " on {} GPU{} ({}), {}",
                g.gpus.len(),
                if g.gpus.len() == 1 { "" } else { "s" },
                g.gpus
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                g.dtype
            ),
            Reading::Unavailable(_) => " (no GPU stage ran)".into(),
        };
        let head = format!(
            "gpuaudit rehearse: batch {}{gpu_line}; model {} layers of {}x{} on {} tokens; \
             {} reader{}, {} worker{}, {} staging",
            c.batch,
            c.depth,
            c.width,
            c.width,
            c.tokens,
            c.readers,
            if c.readers == 1 { "" } else { "s" },
            c.workers,
            if c.workers == 1 { "" } else { "s" },
            if c.pinned { "pinned" } else { "pageable" }
        );
        out.push_str(&wrapped(&head, width, "", "    "));
        let data = format!(
            "data: {} ({}, {}{})",
            esc(&r.data.path),
            super::collect::files(r.data.files as usize),
            gpuaudit_core::units::bytes(r.data.bytes),
            if r.data.generated && r.data.page_cache {
                ", generated, read from the page cache"
            } else if r.data.generated {
                ", generated, each sample dropped from the page cache after reading"
            } else {
                ", each sample dropped from the page cache after reading"
            }
        );
        out.push_str(&wrapped(&data, width, "", "    "));
        out.push('\n');
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::UTF8_HORIZONTAL_ONLY);
        // The reasons a stage did not run are long: the table wraps its cells to the width.
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
        t.set_width(u16::try_from(width).unwrap_or(u16::MAX));
        t.set_header(vec!["stage (alone)", "samples/s", "MB/s", ""]);
        for s in Stage::ALL {
            let row = match r.stage(s) {
                Reading::Value(f) => vec![
                    s.label().to_string(),
                    rate(f.samples_per_s),
                    if f.bytes_per_s > 0.0 {
                        rate(f.bytes_per_s / 1e6)
                    } else {
                        String::new()
                    },
                    match (f.tflops, f.busbw_gbps) {
                        (Some(tf), _) => format!("{} TFLOPS", figure(tf)),
                        (_, Some(b)) => format!("{} GB/s bus bandwidth", figure(b)),
                        _ => String::new(),
                    },
                ],
                Reading::Unavailable(why) => {
                    vec![s.label().to_string(), "-".into(), "-".into(), esc(&why)]
                }
            };
            t.add_row(row);
        }
        if let Reading::Value(g) = &r.gpu {
            match &g.pipeline {
                Reading::Value(p) => {
                    let nvml = p
                        .nvml_utilization_pct
                        .value()
                        .map(|u| format!(", NVML utilisation {u:.0}%"))
                        .unwrap_or_default();
                    t.add_row(vec![
                        "whole pipeline".to_string(),
                        rate(p.samples_per_s),
                        String::new(),
                        format!(
                            "GPU busy {:.0}%{nvml}, {} steps",
                            p.gpu_busy * 100.0,
                            p.steps
                        ),
                    ]);
                }
                Reading::Unavailable(why) => {
                    t.add_row(vec![
                        "whole pipeline".to_string(),
                        "-".into(),
                        "-".into(),
                        esc(why),
                    ]);
                }
            }
        }
        let _ = writeln!(out, "{t}\n");
    }
    for f in findings {
        let head = format!("{:<4} ", f.status.as_str().to_uppercase());
        let text = format!("{}: {}", f.check, esc(&f.message));
        out.push_str(&wrapped(&text, width, &head, "     "));
        if matches!(f.status, Status::Fail | Status::Warn) {
            if let Some(fix) = &f.fix {
                out.push_str(&wrapped(&esc(fix), width, "     fix: ", "          "));
            }
        }
    }
    for n in notes {
        out.push_str(&wrapped(&esc(n), width, "note: ", "      "));
    }
    out
}
