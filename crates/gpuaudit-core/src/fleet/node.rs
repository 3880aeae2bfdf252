//! One node of the fleet: the report read from one file (or why it could not be), its GPUs,
//! its verdict and the checks that failed on it.

use crate::finding::{Finding, Status};
use crate::report::{Causes, ProblemCounts, Report};
use serde::Serialize;
use std::collections::BTreeMap;

/// One file given to `gpuaudit fleet`: its path as given, its stem, and the report in it or
/// the one-line reason it is not one.
#[derive(Clone, Debug)]
pub struct Input {
    pub file: String,
    pub stem: String,
    pub report: Result<Report, String>,
}

/// GPUs of one model on a node: `8× NVIDIA H100 80GB HBM3`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GpuGroup {
    pub count: u32,
    pub model: String,
}

/// A check that failed on a node, and on which of its GPUs (empty: about the machine):
/// a cause, counted once, with the checks whose failures it explains (`caused_by`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailedCheck {
    pub check: String,
    pub gpus: Vec<u32>,
    /// The checks that fail because of it, in report order (they are not failed checks of
    /// their own here).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub explains: Vec<String>,
}

/// A node's verdict: the worst of its findings; a report that could not be read fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
    NotRead,
}

impl Verdict {
    pub fn fails(self) -> bool {
        matches!(self, Verdict::Fail | Verdict::NotRead)
    }
}

/// The other files of one hostname a node names (the rest are counted).
pub const SAME_HOSTNAME_LISTED: usize = 3;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// "same hostname as a.json, b.json" or "same hostname as a.json, b.json, c.json and 3,997
/// more", each file through `esc`.
pub fn same_hostname_text(n: &Node, esc: impl Fn(&str) -> String) -> Option<String> {
    if n.same_hostname_as.is_empty() {
        return None;
    }
    let files: Vec<String> = n.same_hostname_as.iter().map(|f| esc(f)).collect();
    let more = n
        .same_hostname_others
        .saturating_sub(n.same_hostname_as.len());
    let mut t = format!("same hostname as {}", files.join(", "));
    if more > 0 {
        t.push_str(&format!(
            " and {} more",
            crate::report::limits::thousands(more)
        ));
    }
    Some(t)
}

#[derive(Clone, Debug, Serialize)]
pub struct Node {
    /// How the fleet names the node, unique in it: the report's hostname, else the file's
    /// stem; where two reports have one hostname, the hostname and the file's stem.
    pub name: String,
    pub file: String,
    pub hostname: Option<String>,
    /// Other files whose report has this node's hostname: the first
    /// [`SAME_HOSTNAME_LISTED`] of them, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub same_hostname_as: Vec<String>,
    /// How many other files' reports have this node's hostname (`same_hostname_as` lists
    /// the first of them); 0 where none.
    #[serde(skip_serializing_if = "is_zero")]
    pub same_hostname_others: usize,
    /// Why the file is not a report this gpuaudit reads (one line); null where it was read.
    pub not_read: Option<String>,
    pub verdict: Verdict,
    pub gpus: Vec<GpuGroup>,
    /// Problems that failed, and that warned, counted as causes as the audit's verdict
    /// counts them (one cause on several GPUs, or with consequences, is one).
    pub fail: u32,
    pub warn: u32,
    pub failed_checks: Vec<FailedCheck>,
}

/// `8× NVIDIA H200` (several models: joined with " + "); "no GPU" where none was listed.
pub fn gpus_label(gpus: &[GpuGroup]) -> String {
    if gpus.is_empty() {
        return "no GPU".into();
    }
    gpus.iter()
        .map(|g| format!("{}× {}", g.count, g.model))
        .collect::<Vec<_>>()
        .join(" + ")
}

impl Node {
    /// `8× NVIDIA H200`: [`gpus_label`].
    pub fn gpu_label(&self) -> String {
        gpus_label(&self.gpus)
    }
}

/// A GPU's model as the fleet groups peers: its name as the driver gives it, else its spec
/// entry's name.
pub fn gpu_model(report: &Report, index: u32) -> String {
    report
        .gpus
        .iter()
        .find(|g| g.index == index)
        .map(|g| {
            g.name
                .clone()
                .or_else(|| g.spec.as_ref().map(|s| s.name.clone()))
                .unwrap_or_else(|| "unknown GPU".into())
        })
        .unwrap_or_else(|| "unknown GPU".into())
}

pub(crate) fn gpu_groups(report: &Report) -> Vec<GpuGroup> {
    let mut groups: Vec<GpuGroup> = Vec::new();
    for g in &report.gpus {
        let model = gpu_model(report, g.index);
        match groups.iter_mut().find(|x| x.model == model) {
            Some(x) => x.count += 1,
            None => groups.push(GpuGroup { count: 1, model }),
        }
    }
    groups
}

/// The causes that failed (a warning whose consequence fails too), by check, in report
/// order: the GPUs of their findings, and the checks their consequences fail.
fn failed_checks(findings: &[Finding]) -> Vec<FailedCheck> {
    let causes = Causes::of(findings);
    let mut by_check: BTreeMap<&str, (Vec<u32>, Vec<String>)> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let failed: std::collections::HashSet<usize> = causes
        .problems(findings)
        .into_iter()
        .filter(|(_, s)| *s == Status::Fail)
        .map(|(i, _)| i)
        .collect();
    for (i, f) in findings.iter().enumerate() {
        let root = causes.root_of(i);
        if !failed.contains(&root) || !matches!(f.status, Status::Fail | Status::Warn) {
            continue;
        }
        let root_check = findings[root].check.as_str();
        let (gpus, explains) = by_check.entry(root_check).or_insert_with(|| {
            order.push(root_check);
            (Vec::new(), Vec::new())
        });
        if root == i {
            gpus.extend(f.gpu);
        } else if f.status == Status::Fail && f.check != root_check && !explains.contains(&f.check)
        {
            explains.push(f.check.clone());
        }
    }
    order
        .into_iter()
        .map(|c| {
            let (mut gpus, explains) = by_check.remove(c).unwrap_or_default();
            gpus.sort_unstable();
            gpus.dedup();
            FailedCheck {
                check: c.to_string(),
                gpus,
                explains,
            }
        })
        .collect()
}

/// A node of a report that could not be read: `reason`, and its file's stem as its name.
pub(crate) fn unread(file: String, stem: &str, reason: String) -> Node {
    Node {
        name: stem.to_string(),
        file,
        hostname: None,
        same_hostname_as: vec![],
        same_hostname_others: 0,
        not_read: Some(reason),
        verdict: Verdict::NotRead,
        gpus: vec![],
        fail: 0,
        warn: 0,
        failed_checks: vec![],
    }
}

/// What a node of `report` is, before the fleet names it uniquely ([`name_uniquely`]): its
/// hostname (else `stem`), GPUs, verdict and failed checks.
pub(crate) fn read(file: String, stem: &str, report: &Report) -> Node {
    let ProblemCounts { fail, warn } = ProblemCounts::of(report);
    let hostname = report
        .machine
        .hostname
        .clone()
        .filter(|h| !h.trim().is_empty());
    Node {
        name: hostname.clone().unwrap_or_else(|| stem.to_string()),
        file,
        hostname,
        same_hostname_as: vec![],
        same_hostname_others: 0,
        not_read: None,
        verdict: if fail > 0 {
            Verdict::Fail
        } else if warn > 0 {
            Verdict::Warn
        } else {
            Verdict::Pass
        },
        gpus: gpu_groups(report),
        fail,
        warn,
        failed_checks: failed_checks(&report.findings),
    }
}

/// The nodes of `inputs`, in their order, named uniquely.
#[cfg(test)]
pub(crate) fn nodes(inputs: &[Input]) -> Vec<Node> {
    super::Fleet::summarise(inputs).nodes
}

/// The fleet's nodes (`out`, in the fleet's order, each of the file of `stems`' stem) named
/// uniquely: two of one hostname get their file's stem, a name that still repeats its file.
pub(crate) fn name_uniquely(out: &mut [Node], stems: &[String]) {
    // Two reports of one hostname are two nodes (the same machine audited twice, or two
    // machines that kept an image's hostname): both stay, each names the other's file.
    let mut by_host: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, n) in out.iter().enumerate() {
        if let Some(h) = &n.hostname {
            by_host.entry(h.clone()).or_default().push(i);
        }
    }
    // Each names a few of the others and how many there are: a redacted fleet (every node
    // `host-1`) would otherwise list every file at every node.
    for idx in by_host.values().filter(|v| v.len() > 1) {
        for &i in idx {
            let others: Vec<String> = idx
                .iter()
                .filter(|&&j| j != i)
                .take(SAME_HOSTNAME_LISTED)
                .map(|&j| out[j].file.clone())
                .collect();
            out[i].same_hostname_as = others;
            out[i].same_hostname_others = idx.len() - 1;
            let stem = stems.get(i).map(String::as_str).unwrap_or_default();
            out[i].name = format!("{} ({stem})", out[i].name);
        }
    }
    // A stem that happens to equal another node's name (an unread file `a.json` beside the
    // report of host `a`) is told apart by its file.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for n in out.iter() {
        *seen.entry(n.name.clone()).or_default() += 1;
    }
    for n in out.iter_mut() {
        if seen.get(&n.name).copied().unwrap_or(0) > 1 {
            n.name = format!("{} [{}]", n.name, n.file);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Machine;
    use crate::{Policy, Reading};

    fn input(stem: &str, host: Option<&str>) -> Input {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.machine.hostname = match host {
                    Some(h) => Reading::Value(h.into()),
                    None => Reading::unavailable("no hostname"),
                }
            })
            .build();
        Input {
            file: format!("{stem}.json"),
            stem: stem.into(),
            report: Ok(Report::build(&facts, &Policy::default())),
        }
    }

    #[test]
    fn a_node_is_its_hostname_else_its_stem() {
        let n = nodes(&[input("a", Some("gpu-1")), input("b", None)]);
        assert_eq!(n[0].name, "gpu-1");
        assert_eq!(n[1].name, "b");
        assert_eq!(n[0].gpu_label(), "2× NVIDIA H200");
        assert_eq!(n[0].verdict, Verdict::Pass);
    }

    #[test]
    fn two_reports_of_one_hostname_stay_two_nodes() {
        let n = nodes(&[
            input("a", Some("h")),
            input("b", Some("h")),
            input("c", Some("x")),
        ]);
        assert_eq!(n.len(), 3);
        assert_eq!(n[0].name, "h (a)");
        assert_eq!(n[1].name, "h (b)");
        assert_eq!(n[0].same_hostname_as, vec!["b.json".to_string()]);
        assert_eq!(n[0].same_hostname_others, 1);
        assert!(n[2].same_hostname_as.is_empty());
        assert_eq!(
            same_hostname_text(&n[0], str::to_string).unwrap(),
            "same hostname as b.json"
        );
        assert_eq!(same_hostname_text(&n[2], str::to_string), None);
    }

    #[test]
    fn many_reports_of_one_hostname_name_a_few_and_count_the_rest() {
        let inputs: Vec<Input> = (0..50)
            .map(|i| input(&format!("n{i}"), Some("host-1")))
            .collect();
        let n = nodes(&inputs);
        assert_eq!(n[0].same_hostname_as, vec!["n1.json", "n2.json", "n3.json"]);
        assert_eq!(n[7].same_hostname_as, vec!["n0.json", "n1.json", "n2.json"]);
        assert!(n.iter().all(|x| x.same_hostname_others == 49));
        assert_eq!(
            same_hostname_text(&n[0], str::to_string).unwrap(),
            "same hostname as n1.json, n2.json, n3.json and 46 more"
        );
    }

    #[test]
    fn the_json_names_the_count_of_same_hostname_files_only_where_there_are_some() {
        let n = nodes(&[
            input("a", Some("h")),
            input("b", Some("h")),
            input("c", Some("x")),
        ]);
        let json = |node: &Node| serde_json::to_value(node).unwrap_or_default();
        assert_eq!(json(&n[0])["same_hostname_others"], 1);
        assert!(json(&n[2]).get("same_hostname_others").is_none());
    }

    #[test]
    fn an_unread_file_fails_and_keeps_its_reason() {
        let bad = Input {
            file: "x.json".into(),
            stem: "x".into(),
            report: Err("not JSON".into()),
        };
        let n = nodes(&[bad, input("y", Some("x"))]);
        assert_eq!(n[0].verdict, Verdict::NotRead);
        assert!(n[0].verdict.fails());
        assert_eq!(n[0].not_read.as_deref(), Some("not JSON"));
        assert_eq!(n[0].name, "x [x.json]");
        assert_eq!(n[1].name, "x [y.json]");
    }

    #[test]
    fn a_warning_is_a_warn_node_and_a_failure_a_fail_node() {
        let mut w = input("w", Some("w"));
        let mut f = input("f", Some("f"));
        w.report
            .as_mut()
            .unwrap()
            .findings
            .push(Finding::warn("os.persistence", "off"));
        let r = f.report.as_mut().unwrap();
        r.findings.push(Finding::warn("os.persistence", "off"));
        r.findings.push(Finding::fail("cuda.driver", "too old"));
        let n = nodes(&[w, f]);
        assert_eq!((n[0].verdict, n[0].fail, n[0].warn), (Verdict::Warn, 0, 1));
        assert!(n[0].failed_checks.is_empty());
        assert_eq!((n[1].verdict, n[1].fail, n[1].warn), (Verdict::Fail, 1, 1));
        assert_eq!(
            n[1].failed_checks,
            vec![FailedCheck {
                check: "cuda.driver".into(),
                gpus: vec![],
                explains: vec![],
            }]
        );
    }

    #[test]
    fn one_cause_is_one_failure_that_names_what_it_explains() {
        use crate::finding::Cause;
        let mut i = input("n", Some("n"));
        let r = i.report.as_mut().unwrap();
        r.findings.extend([
            Finding::fail("gpu.present", "00:07.0 is not listed")
                .caused_by(Cause::device("gpu.driver-binding", "00:07.0")),
            Finding::fail("gpu.driver-binding", "00:07.0 is bound to nouveau")
                .with("pci_bus_id", "0000:00:07.0"),
            Finding::fail("kernel.modules", "nouveau is loaded")
                .caused_by(Cause::check("gpu.driver-binding")),
            // A warning of the cause's is not named; a warning that causes a failure fails.
            Finding::warn("cuda.env", "x").caused_by(Cause::check("gpu.driver-binding")),
            Finding::warn("gpu.virtualization", "GPU 1 (00:07.0) has MIG").gpu(1),
            Finding::fail("compute.gemm", "GPU 1 (00:07.0) slow")
                .gpu(1)
                .caused_by(Cause::gpu("gpu.virtualization", 1)),
            Finding::warn("os.persistence", "off"),
        ]);
        let n = &nodes(&[i])[0];
        assert_eq!((n.verdict, n.fail, n.warn), (Verdict::Fail, 2, 1));
        assert_eq!(
            n.failed_checks,
            vec![
                FailedCheck {
                    check: "gpu.driver-binding".into(),
                    gpus: vec![],
                    explains: vec!["gpu.present".into(), "kernel.modules".into()],
                },
                FailedCheck {
                    check: "gpu.virtualization".into(),
                    gpus: vec![1],
                    explains: vec!["compute.gemm".into()],
                },
            ]
        );
        assert_eq!(
            super::super::explained("a".into(), &n.failed_checks[0].explains, |s| s.into()),
            "a (which fails gpu.present, kernel.modules)"
        );
        assert_eq!(super::super::explained("a".into(), &[], |s| s.into()), "a");
    }

    #[test]
    fn failed_checks_name_their_gpus() {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
            .build();
        let i = Input {
            file: "a.json".into(),
            stem: "a".into(),
            report: Ok(Report::build(&facts, &Policy::default())),
        };
        let n = &nodes(&[i])[0];
        assert_eq!(n.verdict, Verdict::Fail);
        assert!(n.fail >= 1);
        let link = n
            .failed_checks
            .iter()
            .find(|c| c.check == "pcie.link")
            .unwrap();
        assert_eq!(link.gpus, vec![1]);
        assert!(!Verdict::Warn.fails() && !Verdict::Pass.fails());
    }
}
