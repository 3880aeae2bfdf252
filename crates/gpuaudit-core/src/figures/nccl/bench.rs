//! The group's tables in `gpuaudit bench`. All-reduce: every size.

use super::super::bench::{not_measured, s, Table};
use super::result::*;
use super::NcclFigure;
use crate::reading::Reading;
use crate::units::{bytes, figure};

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<AllReduce>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(a) => {
            let mut rows = vec![vec![
                s("size"),
                format!(
                    "time {}",
                    NcclFigure::AllreduceLatency.spec().unit.display()
                ),
                format!("algbw {}", NcclFigure::AllreduceBusbw.spec().unit.display()),
                format!("busbw {}", NcclFigure::AllreduceBusbw.spec().unit.display()),
                s("iterations"),
            ]];
            for p in &a.points {
                rows.push(vec![
                    bytes(p.size_bytes),
                    figure(p.time_us),
                    figure(p.algbw_gbps),
                    figure(p.busbw_gbps),
                    p.iterations.to_string(),
                ]);
            }
            t.push((
                format!(
                    "All-reduce (NCCL{}, float32 sum, {} GPUs)",
                    a.nccl_version
                        .as_ref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default(),
                    a.gpus.len()
                ),
                rows,
            ));
        }
        Reading::Unavailable(r) => t.push(not_measured("All-reduce", r)),
    }
    t
}
