//! The group's tables in `gpuaudit bench`. GEMM: every data type on every GPU, with its batches and its check.

use super::super::bench::{not_measured, s, Table};
use super::result::*;
use super::GemmFigure;
use crate::figures::common::*;
use crate::reading::Reading;
use crate::units::figure;

/// The group's full tables; one row with the reason when it did not run.
pub(in crate::figures) fn tables(reading: &Reading<Vec<OnGpu<Vec<GemmResult>>>>) -> Vec<Table> {
    let mut t: Vec<Table> = Vec::new();
    match reading {
        Reading::Value(v) => {
            let mut rows = vec![vec![
                s("GPU"),
                s("dtype"),
                s("size"),
                s(GemmFigure::Tflops.spec().unit.display()),
                s("ms/GEMM"),
                s("batches"),
                s("max error"),
                s("verified"),
                s("library"),
            ]];
            for g in v {
                match &g.result {
                    Reading::Value(rs) => {
                        for r in rs {
                            match &r.result {
                                Reading::Value(p) => rows.push(vec![
                                    g.gpu.to_string(),
                                    s(r.dtype.as_str()),
                                    format!("{}^3 {}", p.m, p.layout),
                                    figure(p.tflops),
                                    format!("{:.3}", p.ms_per_gemm),
                                    p.batches
                                        .iter()
                                        .map(|x| figure(*x))
                                        .collect::<Vec<_>>()
                                        .join(" "),
                                    format!("{:.1e}", p.max_error),
                                    if p.verified { s("yes") } else { s("NO") },
                                    p.library.clone(),
                                ]),
                                Reading::Unavailable(why) => rows.push(vec![
                                    g.gpu.to_string(),
                                    s(r.dtype.as_str()),
                                    why.clone(),
                                ]),
                            }
                        }
                    }
                    Reading::Unavailable(r) => {
                        rows.push(vec![g.gpu.to_string(), s("-"), r.clone()])
                    }
                }
            }
            t.push((s("GEMM"), rows));
        }
        Reading::Unavailable(r) => t.push(not_measured("GEMM", r)),
    }
    t
}
