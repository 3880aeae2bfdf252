//! The configuration side by side: driver, CUDA (driver), kernel, OS, VBIOS, GPU model, GPU
//! memory, host memory, CPU. A row differs where the known values are not all the same; a
//! report that does not say (null) does not make it differ.

use super::model::{FactCell, FactRow};
use crate::fleet::drift::kernel_release;
use crate::fleet::node::gpu_groups;
use crate::report::Report;

/// The distinct values of `values`, in order, joined with ", "; None where there is none.
fn distinct(values: impl Iterator<Item = String>) -> Option<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    (!out.is_empty()).then(|| out.join(", "))
}

type Field = (&'static str, fn(&Report) -> Option<String>);

const FIELDS: &[Field] = &[
    ("driver", |r| r.machine.driver_version.clone()),
    ("CUDA (driver)", |r| r.machine.cuda_driver_version.clone()),
    ("kernel", |r| {
        r.machine.kernel.as_deref().map(kernel_release)
    }),
    ("OS", |r| r.machine.os.clone()),
    ("VBIOS", |r| {
        distinct(r.gpus.iter().filter_map(|g| g.vbios.clone()))
    }),
    ("GPU", |r| {
        let groups: Vec<String> = gpu_groups(r)
            .into_iter()
            .map(|g| format!("{}× {}", g.count, g.model))
            .collect();
        (!groups.is_empty()).then(|| groups.join(" + "))
    }),
    ("GPU memory", |r| {
        distinct(
            r.gpus
                .iter()
                .filter_map(|g| g.memory_total_mib)
                .map(|m| format!("{m} MiB")),
        )
    }),
    ("memory", |r| {
        r.machine
            .memory_gib
            .filter(|m| m.is_finite())
            .map(|m| format!("{m:.0} GiB"))
    }),
    ("CPU", |r| {
        let cpu = r.machine.cpu.clone()?;
        Some(match r.machine.cpus {
            Some(n) => format!("{cpu} ({n} CPUs)"),
            None => cpu,
        })
    }),
];

pub(crate) fn rows(reports: &[&Report]) -> Vec<FactRow> {
    FIELDS
        .iter()
        .map(|(field, read)| {
            let cells: Vec<FactCell> = reports
                .iter()
                .map(|r| FactCell { value: read(r) })
                .collect();
            let mut known = cells.iter().filter_map(|c| c.value.as_ref());
            let first = known.next();
            let differs = first.is_some_and(|f| known.any(|v| v != f));
            FactRow {
                field: field.to_string(),
                differs,
                cells,
            }
        })
        .collect()
}
