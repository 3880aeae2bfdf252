//! The group's tables in `gpuaudit bench`. Context creation: each phase over the fresh processes.

use super::super::bench::{not_measured, s, Table};
use super::result::*;
use super::ContextFigure;
use crate::reading::Reading;
use crate::units::figure;

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<ContextLatency>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(c) => {
            let ms = ContextFigure::Create.spec().unit.display();
            let mut rows = vec![vec![
                s("phase"),
                format!("median {ms}"),
                format!("min {ms}"),
                format!("max {ms}"),
            ]];
            for (name, st) in [
                ("cuInit", c.init_ms),
                ("primary context retain + set current", c.context_ms),
                ("first 1 MiB cuMemAlloc", c.alloc_ms),
                ("total", c.total_ms),
            ] {
                rows.push(vec![
                    s(name),
                    figure(st.median),
                    figure(st.min),
                    figure(st.max),
                ]);
            }
            t.push((
                format!("Context creation ({} fresh processes)", c.runs),
                rows,
            ));
        }
        Reading::Unavailable(r) => t.push(not_measured("Context creation", r)),
    }
    t
}
