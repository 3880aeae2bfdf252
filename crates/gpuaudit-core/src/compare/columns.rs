//! One column per machine, and the columns' names: `--name` in order, else the report's
//! hostname, else the file's stem; two columns of one name get their file's stem added, so
//! that each column is distinct.

use super::model::Column;
use super::Input;
use crate::finding::Status;
use crate::fleet::node::gpu_groups;

/// The names of the columns of `inputs`. `given` (`--name`): none, or exactly one per
/// report; another count is an error, in one line.
pub fn column_names(inputs: &[Input], given: &[String]) -> Result<Vec<String>, String> {
    if !given.is_empty() && given.len() != inputs.len() {
        return Err(format!(
            "--name given {} time{} for {} report{}: name every report, in order, or none",
            given.len(),
            if given.len() == 1 { "" } else { "s" },
            inputs.len(),
            if inputs.len() == 1 { "" } else { "s" },
        ));
    }
    let base: Vec<String> = if given.is_empty() {
        inputs
            .iter()
            .map(|i| {
                i.report
                    .machine
                    .hostname
                    .clone()
                    .filter(|h| !h.trim().is_empty())
                    .unwrap_or_else(|| i.stem.clone())
            })
            .collect()
    } else {
        given.to_vec()
    };
    let mut names: Vec<String> = base
        .iter()
        .zip(inputs)
        .map(|(n, i)| {
            if base.iter().filter(|b| *b == n).count() > 1 && *n != i.stem {
                format!("{n} ({})", i.stem)
            } else {
                n.clone()
            }
        })
        .collect();
    // Still the same (one stem given twice, a name that is another's stem): the position
    // makes them distinct.
    let repeated: Vec<bool> = names
        .iter()
        .map(|n| names.iter().filter(|m| *m == n).count() > 1)
        .collect();
    for (i, (n, r)) in names.iter_mut().zip(repeated).enumerate() {
        if r {
            *n = format!("{n} [{}]", i + 1);
        }
    }
    Ok(names)
}

pub(crate) fn column(input: &Input, name: String) -> Column {
    let r = &input.report;
    // Problems as the audit's verdict counts them: one cause, one problem.
    let s = crate::report::ProblemCounts::of(r);
    let verdict = if s.fail > 0 {
        Status::Fail
    } else if s.warn > 0 {
        Status::Warn
    } else {
        Status::Pass
    };
    Column {
        name,
        file: input.file.clone(),
        hostname: r.machine.hostname.clone(),
        gpus: gpu_groups(r),
        driver: r.machine.driver_version.clone(),
        audited_at: r.audit.audited_at.clone(),
        tool_version: r.tool.version.clone(),
        verdict,
        fail: s.fail,
        warn: s.warn,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{input, snapshot_report};
    use crate::report::Report;

    fn named(hosts: &[(&str, Option<&str>)]) -> Vec<Input> {
        hosts
            .iter()
            .map(|(stem, host)| {
                let mut r = snapshot_report();
                r.machine.hostname = host.map(str::to_string);
                input(stem, r)
            })
            .collect()
    }

    #[test]
    fn hostname_else_stem_and_duplicates_get_the_stem() {
        let i = named(&[("a", Some("gpu-1")), ("b", None), ("c", Some("gpu-1"))]);
        assert_eq!(
            column_names(&i, &[]).unwrap(),
            vec!["gpu-1 (a)", "b", "gpu-1 (c)"]
        );
        // An empty hostname is no name.
        let i = named(&[("a", Some(" ")), ("b", Some("x"))]);
        assert_eq!(column_names(&i, &[]).unwrap(), vec!["a", "x"]);
    }

    #[test]
    fn names_given_are_taken_in_order_and_counted() {
        let i = named(&[("a", Some("h")), ("b", Some("h"))]);
        let given = vec!["AWS".to_string(), "Lambda".to_string()];
        assert_eq!(column_names(&i, &given).unwrap(), vec!["AWS", "Lambda"]);
        let e = column_names(&i, &given[..1]).unwrap_err();
        assert_eq!(
            e,
            "--name given 1 time for 2 reports: name every report, in order, or none"
        );
        assert!(!e.contains('\n'));
        // The same name twice: each gets its file's stem.
        let same = vec!["x".to_string(), "x".to_string()];
        assert_eq!(column_names(&i, &same).unwrap(), vec!["x (a)", "x (b)"]);
    }

    #[test]
    fn a_name_that_still_repeats_gets_its_position() {
        // Two files of one stem in different directories, one hostname.
        let i = named(&[("r", Some("h")), ("r", Some("h"))]);
        assert_eq!(
            column_names(&i, &[]).unwrap(),
            vec!["h (r) [1]", "h (r) [2]"]
        );
        // A hostname equal to its own stem, twice.
        let i = named(&[("h", Some("h")), ("h", Some("h"))]);
        assert_eq!(column_names(&i, &[]).unwrap(), vec!["h [1]", "h [2]"]);
    }

    /// The report with `fail` failed and `warn` warned problems of its own, and one failure
    /// the first failure explains (not a problem of its own).
    fn with_problems(mut r: Report, fail: usize, warn: usize) -> Report {
        use crate::finding::{Cause, Finding};
        r.findings
            .retain(|f| !matches!(f.status, Status::Fail | Status::Warn));
        for i in 0..fail {
            r.findings.push(Finding::fail(&format!("f.{i}"), "failed"));
        }
        for i in 0..warn {
            r.findings.push(Finding::warn(&format!("w.{i}"), "warned"));
        }
        if fail > 0 {
            r.findings
                .push(Finding::fail("c.x", "explained").caused_by(Cause::check("f.0")));
        }
        r
    }

    #[test]
    fn a_column_says_what_the_machine_is() {
        let mut r = with_problems(snapshot_report(), 2, 1);
        r.audit.audited_at = Some("2026-12-01T10:00:00Z".into());
        let c = column(&input("a", r), "a".into());
        assert_eq!(c.gpu_label(), "2× NVIDIA H200");
        assert_eq!(c.verdict, Status::Fail);
        assert_eq!(c.verdict_label(), "2 fail · 1 warn");
        assert_eq!(c.audited_at.as_deref(), Some("2026-12-01T10:00:00Z"));
        assert_eq!(c.audited_minute().as_deref(), Some("2026-12-01 10:00"));
        let mut other = c.clone();
        for (at, shown) in [
            ("yesterday", "yesterday"),
            ("2026-12-01T10:00:00+01:00", "2026-12-01T10:00:00+01:00"),
            ("2026-12-01é10:00:00Z", "2026-12-01é10:00:00Z"),
        ] {
            other.audited_at = Some(at.into());
            assert_eq!(other.audited_minute().as_deref(), Some(shown));
        }
        other.audited_at = None;
        assert_eq!(other.audited_minute(), None);
        assert_eq!(c.driver.as_deref(), Some("580.159.04"));
        let r = with_problems(snapshot_report(), 0, 3);
        let c = column(&input("a", r), "a".into());
        assert_eq!(
            (c.verdict, c.verdict_label()),
            (Status::Warn, "3 warn".into())
        );
        let r = with_problems(snapshot_report(), 0, 0);
        let c = column(&input("a", r), "a".into());
        assert_eq!(
            (c.verdict, c.verdict_label()),
            (Status::Pass, "pass".into())
        );
        let r = with_problems(snapshot_report(), 1, 0);
        assert_eq!(column(&input("a", r), "a".into()).verdict_label(), "1 fail");
    }
}
