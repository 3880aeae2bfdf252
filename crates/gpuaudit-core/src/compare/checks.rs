//! Every check id any machine ran, with its status on each: the worst of that machine's
//! findings of the id ("n/a" where its report has none: an older gpuaudit), and the GPUs
//! whose findings are that bad where it is a fail or a warn. A row differs where the machines
//! that ran the check got different verdicts.

use super::model::{CheckCell, CheckRow};
use crate::finding::{Finding, Status};
use crate::report::{Causes, Report};
use std::collections::HashMap;

/// One machine's findings by check, with their places in the report (linear in the
/// findings, however many checks).
struct ByCheck<'r> {
    report: &'r Report,
    causes: Causes,
    of: HashMap<&'r str, Vec<usize>>,
}

impl<'r> ByCheck<'r> {
    fn of(report: &'r Report) -> ByCheck<'r> {
        let mut of: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, f) in report.findings.iter().enumerate() {
            of.entry(f.check.as_str()).or_default().push(i);
        }
        ByCheck {
            report,
            causes: Causes::of(&report.findings),
            of,
        }
    }

    fn cell(&self, check: &str) -> CheckCell {
        let at: &[usize] = self.of.get(check).map(Vec::as_slice).unwrap_or(&[]);
        let f = |i: &usize| -> &Finding { &self.report.findings[*i] };
        let status = at.iter().map(|i| f(i).status).max();
        let (mut gpus, caused_by) = match status {
            Some(s @ (Status::Fail | Status::Warn)) => {
                let worst: Vec<usize> = at.iter().copied().filter(|i| f(i).status == s).collect();
                let gpus: Vec<u32> = worst.iter().filter_map(|i| f(i).gpu).collect();
                // Where another check's cause explains every one of them, it is named.
                let caused_by = worst
                    .iter()
                    .all(|i| self.causes.is_consequence(*i))
                    .then(|| worst.first())
                    .flatten()
                    .map(|i| self.report.findings[self.causes.root_of(*i)].check.clone())
                    .filter(|c| c != check);
                (gpus, caused_by)
            }
            _ => (Vec::new(), None),
        };
        gpus.sort_unstable();
        gpus.dedup();
        CheckCell {
            status,
            gpus,
            caused_by,
        }
    }
}

/// One row per check id, in the order of the first report that has it.
pub(crate) fn rows(reports: &[&Report]) -> Vec<CheckRow> {
    let mut ids: Vec<&str> = Vec::new();
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for r in reports {
        for f in &r.findings {
            if seen.insert(f.check.as_str()) {
                ids.push(&f.check);
            }
        }
    }
    let machines: Vec<ByCheck> = reports.iter().map(|r| ByCheck::of(r)).collect();
    ids.into_iter()
        .map(|id| {
            let cells: Vec<CheckCell> = machines.iter().map(|m| m.cell(id)).collect();
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
