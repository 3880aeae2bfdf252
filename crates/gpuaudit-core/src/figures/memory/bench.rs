//! The group's tables in `gpuaudit bench`. Device memory: each figure per GPU, and every kernel by launch shape.

use super::super::bench::{f, not_measured, s, Table};
use super::result::*;
use super::MemoryFigure;
use crate::figures::common::*;
use crate::reading::Reading;
use crate::units::{bytes, figure};

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<Vec<OnGpu<MemoryBandwidth>>>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(v) => {
            let gbps = MemoryFigure::Copy.spec().unit.display();
            let mut rows = vec![vec![
                s("GPU"),
                s("buffer"),
                s("copy kernel"),
                s("memcpy"),
                s("read"),
                s("write"),
                s("triad"),
                s("add"),
                s("verified"),
            ]];
            let mut sweep = vec![vec![
                s("GPU"),
                s("kernel"),
                s("blocks"),
                s("threads"),
                s(gbps),
                s("verified"),
            ]];
            for g in v {
                match &g.result {
                    Reading::Value(b) => {
                        rows.push(vec![
                            g.gpu.to_string(),
                            bytes(b.buffer_bytes),
                            f(b.copy_gbps),
                            f(b.memcpy_gbps),
                            f(b.read_gbps),
                            f(b.write_gbps),
                            f(b.triad_gbps),
                            f(b.add_gbps),
                            if b.verify.iter().all(|x| x.ok) {
                                s("yes")
                            } else {
                                s("NO")
                            },
                        ]);
                        for k in &b.sweep {
                            sweep.push(vec![
                                g.gpu.to_string(),
                                k.kernel.clone(),
                                k.blocks.to_string(),
                                k.threads.to_string(),
                                figure(k.gbps),
                                s(if k.verified { "yes" } else { "NO" }),
                            ]);
                        }
                    }
                    Reading::Unavailable(r) => rows.push(vec![g.gpu.to_string(), r.clone()]),
                }
            }
            t.push((
                format!("Device memory, {gbps} (copies: read + written)"),
                rows,
            ));
            if sweep.len() > 1 {
                t.push((s("Device memory kernels by launch shape"), sweep));
            }
        }
        Reading::Unavailable(r) => t.push(not_measured("Device memory", r)),
    }
    t
}
