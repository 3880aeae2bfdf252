//! Configuration drift: the software and firmware fields that differ between the fleet's
//! nodes, each with the nodes of each value, the most common value first.
//!
//! Where each field is read in a report:
//! - driver, CUDA (driver), kernel, toolkits: `machine` (`driver_version`,
//!   `cuda_driver_version`, `kernel` — its release, `toolkits`);
//! - VBIOS: `gpus[].vbios`, per GPU model (two models' firmware never match);
//! - NCCL: the libnccl copies cuda.libraries lists in its evidence (`copies`: `PATH -> FILE
//!   [SOURCE] version V`, written by `checks::cuda::describe`);
//! - PyTorch: cuda.framework's evidence `torch`, one finding per Python environment.

use super::node::gpu_model;
#[cfg(test)]
use super::node::{Input, Node};

/// The checks whose evidence the drift reads; a fleet's reader keeps only theirs
/// (`report::from_json_for_summary`).
pub const EVIDENCE_READ: &[&str] = &["cuda.libraries", "cuda.framework"];
use crate::report::Report;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DriftValue {
    pub value: String,
    pub nodes: Vec<String>,
}

/// One field whose value is not the same on every node that has one.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Drift {
    pub field: String,
    /// The most common value first (ties: in the value's order).
    pub values: Vec<DriftValue>,
    /// Nodes whose report does not say (a snapshot audit lists no libraries, no Python).
    pub not_known: Vec<String>,
}

/// "Linux version 6.8.0-60-generic (buildd@…) …" -> "6.8.0-60-generic"; anything else as is.
pub(crate) fn kernel_release(k: &str) -> String {
    match k.strip_prefix("Linux version ") {
        Some(rest) => rest.split_whitespace().next().unwrap_or(rest).to_string(),
        None => k.trim().to_string(),
    }
}

/// The versions of libnccl in cuda.libraries' evidence, sorted and distinct.
fn nccl_versions(report: &Report) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for f in report
        .findings
        .iter()
        .filter(|f| f.check == EVIDENCE_READ[0])
    {
        for (_, v) in f.evidence.0.iter() {
            let items: Vec<&str> = match v {
                serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_str()).collect(),
                serde_json::Value::String(s) => vec![s.as_str()],
                _ => continue,
            };
            for copy in items {
                // "PATH -> FILE [SOURCE] version V": the file names the library.
                let Some((_, file)) = copy.split_once(" -> ") else {
                    continue;
                };
                if !file.starts_with("libnccl.so") {
                    continue;
                }
                if let Some((_, version)) = file.rsplit_once(" version ") {
                    out.insert(version.trim().to_string());
                }
            }
        }
    }
    out
}

fn torch_versions(report: &Report) -> BTreeSet<String> {
    report
        .findings
        .iter()
        .filter(|f| f.check == EVIDENCE_READ[1])
        .filter_map(|f| f.evidence.get("torch")?.as_str().map(str::to_string))
        .collect()
}

fn joined(set: BTreeSet<String>) -> Option<String> {
    (!set.is_empty()).then(|| set.into_iter().collect::<Vec<_>>().join(", "))
}

/// Each field's value on one node; None where the report does not say.
pub(crate) fn fields(report: &Report) -> Vec<(String, Option<String>)> {
    let m = &report.machine;
    let mut out = vec![
        ("driver".to_string(), m.driver_version.clone()),
        ("CUDA (driver)".to_string(), m.cuda_driver_version.clone()),
        (
            "kernel".to_string(),
            m.kernel.as_deref().map(kernel_release),
        ),
    ];
    let mut vbios: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for g in &report.gpus {
        let set = vbios.entry(gpu_model(report, g.index)).or_default();
        if let Some(v) = &g.vbios {
            set.insert(v.clone());
        }
    }
    for (model, set) in vbios {
        out.push((format!("VBIOS ({model})"), joined(set)));
    }
    out.push(("NCCL".into(), joined(nccl_versions(report))));
    out.push(("PyTorch".into(), joined(torch_versions(report))));
    out.push((
        "toolkits".into(),
        joined(m.toolkits.iter().cloned().collect()),
    ));
    out
}

/// The fields that differ, in the order of `fields` (a VBIOS field only among the nodes with
/// GPUs of its model): the fleet's, for the tests of the drift.
#[cfg(test)]
pub fn drift(inputs: &[Input], _nodes: &[Node]) -> Vec<Drift> {
    super::Fleet::summarise(inputs).drift
}

/// One field over the fleet: the nodes (by index) of each value (None: not known), and where
/// it was first seen: (node, position among that node's fields).
struct Field {
    first: (usize, usize),
    values: BTreeMap<Option<String>, Vec<usize>>,
}

/// The drift's fields gathered node by node in any order; [`Fields::drift`] gives what a
/// reading in the fleet's order gives.
#[derive(Default)]
pub(crate) struct Fields {
    by_field: HashMap<String, Field>,
}

impl Fields {
    /// Node `node`'s fields ([`fields`]).
    pub fn add(&mut self, node: usize, fields: Vec<(String, Option<String>)>) {
        for (pos, (field, value)) in fields.into_iter().enumerate() {
            let f = self.by_field.entry(field).or_insert_with(|| Field {
                first: (node, pos),
                values: BTreeMap::new(),
            });
            f.first = f.first.min((node, pos));
            // One copy of each value: most nodes share theirs.
            match f.values.get_mut(&value) {
                Some(nodes) => nodes.push(node),
                None => {
                    f.values.insert(value, vec![node]);
                }
            }
        }
    }

    /// The fields that differ, in the order of [`fields`] (the fixed ones first, the others
    /// where a node in the fleet's order first had them), each node named by its index in
    /// `names`.
    pub fn drift(self, names: &[String]) -> Vec<Drift> {
        let name = |i: &usize| names.get(*i).cloned().unwrap_or_default();
        let mut fields: Vec<(String, Field)> = self.by_field.into_iter().collect();
        // First seen first: the order one pass over the nodes in order meets them.
        fields.sort_by_key(|(_, f)| f.first);
        let order: Vec<String> = fields.iter().map(|(n, _)| n.clone()).collect();
        let rank = |f: &str| -> (usize, usize) {
            // The fixed fields first, in their order; VBIOS fields where they first came.
            let fixed = ["driver", "CUDA (driver)", "kernel"];
            match fixed.iter().position(|x| *x == f) {
                Some(i) => (0, i),
                None => (1, order.iter().position(|x| x == f).unwrap_or(usize::MAX)),
            }
        };
        fields.sort_by_key(|(f, _)| rank(f));
        fields
            .into_iter()
            .filter_map(|(field, f)| {
                let mut values = f.values;
                // Each value's nodes in the fleet's order, whatever order they came in.
                let named = |mut v: Vec<usize>| {
                    v.sort_unstable();
                    v.iter().map(name).collect::<Vec<String>>()
                };
                let not_known = named(values.remove(&None).unwrap_or_default());
                if values.len() < 2 {
                    return None;
                }
                let mut values: Vec<DriftValue> = values
                    .into_iter()
                    .filter_map(|(v, nodes)| {
                        Some(DriftValue {
                            value: v?,
                            nodes: named(nodes),
                        })
                    })
                    .collect();
                values.sort_by(|a, b| {
                    b.nodes
                        .len()
                        .cmp(&a.nodes.len())
                        .then(a.value.cmp(&b.value))
                });
                Some(Drift {
                    field,
                    values,
                    not_known,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::node::nodes;
    use crate::testing::Machine;
    use crate::{Evidence, Finding, Policy, Reading};

    fn report(host: &str, driver: &str) -> Input {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.machine.hostname = Reading::Value(host.into());
                f.driver.version = Reading::Value(driver.into());
            })
            .build();
        Input {
            file: format!("{host}.json"),
            stem: host.into(),
            report: Ok(Report::build(&facts, &Policy::default())),
        }
    }

    fn run(inputs: &[Input]) -> Vec<Drift> {
        drift(inputs, &nodes(inputs))
    }

    #[test]
    fn one_value_everywhere_is_no_drift() {
        let d = run(&[report("a", "580.159.04"), report("b", "580.159.04")]);
        assert_eq!(d, vec![]);
    }

    #[test]
    fn a_field_that_differs_lists_its_values_majority_first() {
        let d = run(&[
            report("a", "580.159.04"),
            report("b", "570.86.15"),
            report("c", "580.159.04"),
        ]);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "driver");
        assert_eq!(
            d[0].values,
            vec![
                DriftValue {
                    value: "580.159.04".into(),
                    nodes: vec!["a".into(), "c".into()]
                },
                DriftValue {
                    value: "570.86.15".into(),
                    nodes: vec!["b".into()]
                },
            ]
        );
    }

    #[test]
    fn kernel_vbios_nccl_and_torch_are_read_where_the_report_has_them() {
        let mut a = report("a", "580.159.04");
        let mut b = report("b", "580.159.04");
        let copy =
            |v: &str| format!("/usr/lib/libnccl.so.2 -> libnccl.so.{v} [ld.so.cache] version {v}");
        for (i, v, torch, bios, kernel) in [
            (
                &mut a,
                "2.21.5",
                "2.5.1+cu124",
                "96.00.74.00.01",
                "6.8.0-60-generic",
            ),
            (
                &mut b,
                "2.28.3",
                "2.9.0+cu130",
                "96.00.74.00.02",
                "6.8.0-71-generic",
            ),
        ] {
            let r = i.report.as_mut().unwrap();
            r.machine.kernel = Some(format!("Linux version {kernel} (buildd@x) #1 SMP"));
            r.gpus[0].vbios = Some(bios.into());
            r.gpus[1].vbios = Some(bios.into());
            let mut f = Finding::info("cuda.libraries", "CUDA libraries found");
            f.evidence = Evidence::new().with(
                "copies",
                vec![
                    copy(v),
                    "/x -> libcudart.so.13 [ld.so.cache] version 13.0.96".into(),
                ],
            );
            r.findings.push(f);
            let mut t = Finding::pass("cuda.framework", "torch");
            t.evidence = Evidence::new().with("torch", torch);
            r.findings.push(t);
        }
        let d = run(&[a, b, report("c", "580.159.04")]);
        let field = |name: &str| d.iter().find(|x| x.field == name).unwrap();
        assert_eq!(field("kernel").values[0].value, "6.8.0-60-generic");
        assert_eq!(field("kernel").values[1].value, "6.8.0-71-generic");
        let nccl = field("NCCL");
        assert_eq!(nccl.values[0].value, "2.21.5");
        assert_eq!(nccl.values[1].value, "2.28.3");
        assert_eq!(nccl.not_known, vec!["c".to_string()]);
        assert_eq!(field("PyTorch").values[1].value, "2.9.0+cu130");
        let bios: Vec<&str> = field("VBIOS (NVIDIA H200)")
            .values
            .iter()
            .map(|v| v.value.as_str())
            .collect();
        assert!(
            bios.contains(&"96.00.74.00.01") && bios.contains(&"96.00.74.00.02"),
            "{bios:?}"
        );
        // libcudart is no NCCL.
        assert!(!nccl.values.iter().any(|v| v.value.contains("13.0")));
    }

    #[test]
    fn kernel_release_is_the_third_word() {
        assert_eq!(kernel_release("Linux version 6.8.0 (x) #1"), "6.8.0");
        assert_eq!(kernel_release("6.1.0-13-amd64"), "6.1.0-13-amd64");
    }
}
