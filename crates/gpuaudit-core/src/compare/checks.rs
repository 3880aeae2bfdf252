//! Every check id any machine ran, with its status on each: the worst of that machine's
//! findings of the id ("n/a" where its report has none: an older gpuaudit), and the GPUs
//! whose findings are that bad where it is a fail or a warn. A row differs where the machines
//! that ran the check got different verdicts.

use super::model::{CheckCell, CheckRow};
use crate::finding::Status;
use crate::report::Report;

fn cell(r: &Report, check: &str) -> CheckCell {
    let of_check: Vec<_> = r.findings.iter().filter(|f| f.check == check).collect();
    let status = of_check.iter().map(|f| f.status).max();
    let mut gpus: Vec<u32> = match status {
        Some(s @ (Status::Fail | Status::Warn)) => of_check
            .iter()
            .filter(|f| f.status == s)
            .filter_map(|f| f.gpu)
            .collect(),
        _ => Vec::new(),
    };
    gpus.sort_unstable();
    gpus.dedup();
    CheckCell { status, gpus }
}

/// One row per check id, in the order of the first report that has it.
pub(crate) fn rows(reports: &[&Report]) -> Vec<CheckRow> {
    let mut ids: Vec<&str> = Vec::new();
    for r in reports {
        for f in &r.findings {
            if !ids.contains(&f.check.as_str()) {
                ids.push(&f.check);
            }
        }
    }
    ids.into_iter()
        .map(|id| {
            let cells: Vec<CheckCell> = reports.iter().map(|r| cell(r, id)).collect();
            // Machines differ where the check ran on them with different verdicts: a skip
            // (a snapshot measures nothing) or a report without the check says nothing about
            // the machine, as "not measured" and "not known" do in the other rows.
            let mut ran = cells
                .iter()
                .filter_map(|c| c.status)
                .filter(|s| *s != Status::Skip);
            let first = ran.next();
            let differs = first.is_some_and(|f| ran.any(|s| s != f));
            CheckRow {
                check: id.to_string(),
                differs,
                cells,
            }
        })
        .collect()
}
