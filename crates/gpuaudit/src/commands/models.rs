//! `gpuaudit models`: every GPU model the spec database knows, and the names `--expect`
//! accepts for it.

use crate::cli::ListFormat;
use crate::sink;
use anyhow::Result;
use gpuaudit_core::render::wrap::wrapped;
use gpuaudit_core::spec::{GpuSpec, SpecDb};
use serde::Serialize;
use std::fmt::Write;

/// One model as `gpuaudit models --format json` shows it (schema `gpuaudit.models/1`).
#[derive(Serialize)]
struct ModelRow<'a> {
    key: &'a str,
    name: &'a str,
    family: &'a str,
    architecture: &'a str,
    compute_capability: &'a str,
    /// NVIDIA's capacity label in GB; `null` where the database does not know it.
    memory_gb: Option<f64>,
    memory_type: Option<&'a str>,
    form_factor: &'a str,
    /// "unknown" | "none" | "bridge" | "direct" | "switch".
    nvlink: &'static str,
    pci_device_ids: Vec<String>,
    nvml_names: &'a [String],
    /// Every name `--expect` accepts for this model: its key, its aliases, its family.
    expect_names: Vec<String>,
}

#[derive(Serialize)]
struct ModelList<'a> {
    schema: &'static str,
    models: Vec<ModelRow<'a>>,
}

fn row(g: &GpuSpec) -> ModelRow<'_> {
    ModelRow {
        key: &g.key,
        name: &g.name,
        family: &g.family,
        architecture: &g.architecture,
        compute_capability: &g.compute_capability,
        memory_gb: g.memory_gb,
        memory_type: g.memory_type.as_deref(),
        form_factor: &g.form_factor,
        nvlink: g.nvlink_kind().as_str(),
        pci_device_ids: g
            .pci_device_ids
            .iter()
            .map(|id| format!("0x{id:04x}"))
            .collect(),
        nvml_names: &g.nvml_names,
        expect_names: g.expect_names(),
    }
}

pub fn run(format: ListFormat) -> Result<u8> {
    let db = SpecDb::embedded();
    let text = match format {
        ListFormat::Table => table(db, crate::output::table_width(None)),
        ListFormat::Json => {
            let list = ModelList {
                schema: "gpuaudit.models/1",
                models: db.gpus.iter().map(row).collect(),
            };
            let mut s = serde_json::to_string_pretty(&list)?;
            s.push('\n');
            s
        }
    };
    sink::print(text)?;
    Ok(0)
}

/// One line per model where that fits the terminal (else `$COLUMNS`, else 80); narrower,
/// each model's name, architecture and memory beside its key and the names `--expect`
/// accepts under them, wrapped: the one-line table is 211 columns wide.
fn table(db: &SpecDb, columns: usize) -> String {
    let memory = |g: &GpuSpec| match (g.memory_gb, g.memory_type.as_deref()) {
        (Some(gb), Some(t)) => format!("{gb} GB {t}"),
        (Some(gb), None) => format!("{gb} GB"),
        _ => "?".to_string(),
    };
    let rows: Vec<[String; 5]> = db
        .gpus
        .iter()
        .map(|g| {
            [
                g.key.clone(),
                g.name.clone(),
                g.architecture.clone(),
                memory(g),
                g.expect_names().join(", "),
            ]
        })
        .collect();
    let header = ["KEY", "NAME", "ARCHITECTURE", "MEMORY", "--expect ACCEPTS"];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain(std::iter::once(header[i].len()))
            .max()
            .unwrap_or(0)
    };
    let widths = [width(0), width(1), width(2), width(3)];
    let mut out = String::new();
    let mut line = |cells: [&str; 5]| {
        let _ = writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
    };
    line(header);
    for r in &rows {
        line([&r[0], &r[1], &r[2], &r[3], &r[4]]);
    }
    let foot = |column: &str| {
        format!(
            "{} models. `--expect NAME[:COUNT]` accepts any name {column} (a family name \
             stands for all its models); `?` is a figure the datasheets read did not give.",
            rows.len()
        )
    };
    let wide = out.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    if wide <= columns {
        out.push('\n');
        out.push_str(&wrapped(&foot("in the last column"), columns, "", ""));
        return out;
    }
    let key = widths[0] + 2;
    let pad = " ".repeat(key);
    let mut out = String::new();
    let head = format!("{:<key$}", header[0]);
    out.push_str(&wrapped(
        "NAME · ARCHITECTURE · MEMORY",
        columns,
        &head,
        &pad,
    ));
    out.push_str(&wrapped("--expect accepts: NAMES", columns, &pad, &pad));
    for r in &rows {
        let head = format!("{:<key$}", r[0]);
        out.push_str(&wrapped(
            &format!("{} · {} · {}", r[1], r[2], r[3]),
            columns,
            &head,
            &pad,
        ));
        out.push_str(&wrapped(
            &format!("--expect accepts: {}", r[4]),
            columns,
            &pad,
            &pad,
        ));
    }
    out.push('\n');
    out.push_str(&wrapped(
        &foot("after \"--expect accepts\""),
        columns,
        "",
        "",
    ));
    out
}
