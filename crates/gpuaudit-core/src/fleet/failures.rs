//! The checks that fail across the fleet: each check id with the nodes (and their GPUs) it
//! fails on, the most widespread first. A fault on many nodes is a fleet's problem (an image,
//! a driver rollout, a rack), not one machine's.

use super::node::Node;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailedOn {
    pub node: String,
    pub gpus: Vec<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FailingCheck {
    pub check: String,
    pub nodes: Vec<FailedOn>,
}

/// Every check that failed on some node: most nodes first, then by id.
pub fn failing_checks(nodes: &[Node]) -> Vec<FailingCheck> {
    let mut by: BTreeMap<&str, Vec<FailedOn>> = BTreeMap::new();
    for n in nodes {
        for c in &n.failed_checks {
            by.entry(c.check.as_str()).or_default().push(FailedOn {
                node: n.name.clone(),
                gpus: c.gpus.clone(),
            });
        }
    }
    let mut out: Vec<FailingCheck> = by
        .into_iter()
        .map(|(check, nodes)| FailingCheck {
            check: check.to_string(),
            nodes,
        })
        .collect();
    out.sort_by(|a, b| {
        b.nodes
            .len()
            .cmp(&a.nodes.len())
            .then(a.check.cmp(&b.check))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::node::{FailedCheck, Verdict};

    fn node(name: &str, checks: &[(&str, &[u32])]) -> Node {
        Node {
            name: name.into(),
            file: format!("{name}.json"),
            hostname: Some(name.into()),
            same_hostname_as: vec![],
            same_hostname_others: 0,
            not_read: None,
            verdict: Verdict::Fail,
            gpus: vec![],
            fail: checks.len() as u32,
            warn: 0,
            failed_checks: checks
                .iter()
                .map(|(c, g)| FailedCheck {
                    check: c.to_string(),
                    gpus: g.to_vec(),
                    explains: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn most_widespread_first_with_the_gpus() {
        let f = failing_checks(&[
            node("a", &[("pcie.link", &[1]), ("memory.errors", &[0])]),
            node("b", &[("memory.errors", &[0, 3])]),
            node("c", &[("cuda.driver", &[])]),
        ]);
        let ids: Vec<&str> = f.iter().map(|c| c.check.as_str()).collect();
        assert_eq!(ids, vec!["memory.errors", "cuda.driver", "pcie.link"]);
        assert_eq!(
            f[0].nodes,
            vec![
                FailedOn {
                    node: "a".into(),
                    gpus: vec![0]
                },
                FailedOn {
                    node: "b".into(),
                    gpus: vec![0, 3]
                }
            ]
        );
        // The views' "failing on several nodes": two nodes or more, not one.
        let mut fleet = crate::fleet::Fleet::summarise(&[]);
        fleet.failing_checks = f;
        let several: Vec<&str> = fleet
            .failing_on_several()
            .iter()
            .map(|c| c.check.as_str())
            .collect();
        assert_eq!(several, vec!["memory.errors"]);
    }
}
