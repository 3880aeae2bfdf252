//! The measured figures across the fleet: per figure (name and dtype) and per group of peers,
//! the median of the nodes' values, its MAD, and the nodes that stand out (`stats.rs`).

use super::node::{gpu_model, Input, Node};
use super::stats::{self, Better};
use crate::facts::Measurement;
use crate::figures as catalog;
use crate::report::Report;
use serde::Serialize;
use std::collections::BTreeMap;

/// One node's value of one figure, and how far it is from its peers.
#[derive(Clone, Debug, Serialize)]
pub struct Outlier {
    pub node: String,
    pub value: f64,
    /// Worse than the median by this share of it (0.12: 12% worse).
    pub shortfall: f64,
    /// Robust standard deviations worse than the median; null where the peers agree (MAD 0).
    pub robust_z: Option<f64>,
    /// The GPU whose figure is the node's (its worst), where the figure is per GPU.
    pub gpu: Option<u32>,
}

/// One figure over one group of peers.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub dtype: Option<String>,
    pub unit: String,
    pub better: Better,
    /// The peers: a GPU model for a figure per GPU; the node's GPUs (`8× NVIDIA H200`) for a
    /// figure of the whole machine (the all-reduce, context creation), count included.
    pub peers: String,
    pub nodes: usize,
    pub median: f64,
    pub mad: f64,
    /// Why no node is flagged whatever its value (too few peers); null where they were judged.
    pub not_judged: Option<String>,
    pub outliers: Vec<Outlier>,
}

impl Figure {
    /// `gemm_tflops bf16`, `memory_copy_bandwidth`.
    pub fn label(&self) -> String {
        match &self.dtype {
            Some(d) => format!("{} {d}", self.name),
            None => self.name.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    name: String,
    dtype: Option<String>,
    peers: String,
}

struct NodeValue {
    value: f64,
    gpu: Option<u32>,
}

/// A machine's value of one figure: the measurement that gave it (its worst GPU or pair) and
/// which way the figure is better.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Worst<'a> {
    pub measurement: &'a Measurement,
    pub better: Better,
}

/// A machine's value of each figure, keyed by `key` (the fleet: name, dtype and peers; the
/// comparison: name and dtype): of a figure's entries only those of the largest size (the
/// all-reduce's headline figure, not its latency-bound 1 MiB point), then the worst GPU (or
/// pair) under the key: the lowest where higher is better, the highest where lower is. The
/// one rule of `gpuaudit fleet` and `gpuaudit compare`.
pub(crate) fn worst_by<K: Ord>(
    report: &Report,
    key: impl Fn(&Measurement) -> K,
) -> BTreeMap<K, Worst<'_>> {
    let mut largest: BTreeMap<(&str, Option<&str>, bool), Option<u64>> = BTreeMap::new();
    for m in &report.measurements {
        let k = (m.name.as_str(), m.dtype.as_deref(), m.gpu.is_some());
        let e = largest.entry(k).or_insert(m.size_bytes);
        *e = (*e).max(m.size_bytes);
    }
    let counted = |m: &Measurement| {
        let k = (m.name.as_str(), m.dtype.as_deref(), m.gpu.is_some());
        m.value.is_finite() && largest.get(&k).copied().flatten() == m.size_bytes
    };
    // A condition wrong either way (`Better::Neither`) is judged by the GPU farthest from
    // the machine's own median of it.
    let mut values: BTreeMap<K, Vec<f64>> = BTreeMap::new();
    for m in report.measurements.iter().filter(|m| counted(m)) {
        if catalog::Figure::better_of(m) == Better::Neither {
            values.entry(key(m)).or_default().push(m.value);
        }
    }
    let mut out: BTreeMap<K, Worst<'_>> = BTreeMap::new();
    for m in report.measurements.iter().filter(|m| counted(m)) {
        let better = catalog::Figure::better_of(m);
        let k = key(m);
        let centre = values
            .get(&k)
            .and_then(|v| stats::median(v))
            .unwrap_or(m.value);
        match out.entry(k) {
            std::collections::btree_map::Entry::Occupied(mut e) => {
                let w = e.get_mut();
                if better.worse(w.measurement.value, m.value, centre) != w.measurement.value {
                    w.measurement = m;
                }
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(Worst {
                    measurement: m,
                    better,
                });
            }
        }
    }
    out
}

/// One node's value of each figure, per figure and group of peers ([`worst_by`]).
fn node_values(report: &Report, machine_peers: &str) -> BTreeMap<Key, (String, Better, NodeValue)> {
    worst_by(report, |m| Key {
        name: m.name.clone(),
        dtype: m.dtype.clone(),
        peers: match m.gpu {
            Some(g) => gpu_model(report, g),
            None => machine_peers.to_string(),
        },
    })
    .into_iter()
    .map(|(k, w)| {
        (
            k,
            (
                w.measurement.unit.clone(),
                w.better,
                NodeValue {
                    value: w.measurement.value,
                    gpu: w.measurement.gpu,
                },
            ),
        )
    })
    .collect()
}

/// Every figure of the fleet's reports, by name, dtype and peers.
pub fn figures(inputs: &[Input], nodes: &[Node]) -> Vec<Figure> {
    struct Acc {
        unit: String,
        better: Better,
        values: Vec<(String, NodeValue)>,
    }
    let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
    for (input, node) in inputs.iter().zip(nodes) {
        let Ok(report) = &input.report else { continue };
        for (key, (unit, better, v)) in node_values(report, &node.gpu_label()) {
            acc.entry(key)
                .or_insert_with(|| Acc {
                    unit,
                    better,
                    values: Vec::new(),
                })
                .values
                .push((node.name.clone(), v));
        }
    }
    acc.into_iter()
        .filter_map(|(key, a)| {
            let vals: Vec<f64> = a.values.iter().map(|(_, v)| v.value).collect();
            let median = stats::median(&vals)?;
            let mad = stats::mad(&vals, median).unwrap_or(0.0);
            let n = a.values.len();
            let not_judged = (n < stats::MIN_PEERS).then(|| {
                format!(
                    "{n} node{} of these GPUs: fewer than {} peers flag nothing",
                    if n == 1 { "" } else { "s" },
                    stats::MIN_PEERS
                )
            });
            let mut outliers = Vec::new();
            if not_judged.is_none() {
                for (node, v) in &a.values {
                    let s = stats::shortfall(v.value, median, a.better);
                    let z = stats::robust_z(v.value, median, mad, a.better);
                    if stats::stands_out(s, z) {
                        outliers.push(Outlier {
                            node: node.clone(),
                            value: v.value,
                            shortfall: s.unwrap_or(0.0),
                            robust_z: z,
                            gpu: v.gpu,
                        });
                    }
                }
                outliers.sort_by(|x, y| y.shortfall.total_cmp(&x.shortfall));
            }
            Some(Figure {
                name: key.name,
                dtype: key.dtype,
                unit: a.unit,
                better: a.better,
                peers: key.peers,
                nodes: n,
                median,
                mad,
                not_judged,
                outliers,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::node::nodes;
    use crate::testing::{measured, Machine};
    use crate::{Policy, Reading};

    /// A measured 2×H200 node `host` whose GPU 1 copies device memory at `copy` GB/s (GPU 0
    /// 1% faster) and
    /// whose contexts take `ctx_ms`.
    fn node(host: &str, copy: f64, ctx_ms: f64) -> Input {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.machine.hostname = Reading::Value(host.into()))
            .measured(|m| {
                measured::full_run(m, 2);
                if let Reading::Value(mem) = &mut m.memory {
                    // GPU 0 a little faster: GPU 1 is the node's worst.
                    mem[0].result = Reading::Value(measured::membw(copy * 1.01));
                    mem[1].result = Reading::Value(measured::membw(copy));
                }
                m.context = Reading::Value(measured::ctx(ctx_ms, true));
            })
            .build();
        Input {
            file: format!("{host}.json"),
            stem: host.into(),
            report: Ok(Report::build(&facts, &Policy::default())),
        }
    }

    fn figure<'a>(f: &'a [Figure], name: &str) -> &'a Figure {
        f.iter().find(|x| x.name == name).unwrap()
    }

    fn run(inputs: &[Input]) -> Vec<Figure> {
        figures(inputs, &nodes(inputs))
    }

    #[test]
    fn the_worst_gpu_is_the_nodes_value_and_10_percent_flags() {
        let inputs = [
            node("a", 4000.0, 450.0),
            node("b", 4000.0, 450.0),
            node("c", 4000.0 * 0.88, 450.0),
            node("d", 4000.0 * 0.95, 450.0),
            node("e", 4000.0 * 0.90, 450.0),
            node("f", 4000.0, 450.0),
            node("g", 4000.0, 450.0),
            node("h", 4000.0, 450.0),
        ];
        let f = run(&inputs);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert_eq!(copy.peers, "NVIDIA H200");
        assert_eq!(copy.nodes, 8);
        let flagged: Vec<&str> = copy.outliers.iter().map(|o| o.node.as_str()).collect();
        // 12% worse first, then exactly 10%; 5% is not flagged.
        assert_eq!(flagged, vec!["c", "e"]);
        assert_eq!(copy.outliers[0].gpu, Some(1));
        assert_eq!(copy.better, Better::Higher);
        assert!(copy.not_judged.is_none());
    }

    #[test]
    fn a_latency_is_worse_higher_and_judged_per_machine() {
        let inputs = [
            node("a", 3959.3, 400.0),
            node("b", 3959.3, 400.0),
            node("c", 3959.3, 400.0),
            node("d", 3959.3, 440.0),
            node("e", 3959.3, 439.0),
            node("f", 3959.3, 300.0),
            node("g", 3959.3, 400.0),
        ];
        let f = run(&inputs);
        let ctx = figure(&f, "context_create_ms");
        assert_eq!(ctx.peers, "2× NVIDIA H200");
        assert_eq!(ctx.better, Better::Lower);
        let flagged: Vec<&str> = ctx.outliers.iter().map(|o| o.node.as_str()).collect();
        assert_eq!(flagged, vec!["d"]);
    }

    #[test]
    fn fewer_than_three_peers_flag_nothing() {
        let two = [node("a", 3959.3, 450.0), node("b", 1000.0, 450.0)];
        let f = run(&two);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert!(copy.outliers.is_empty());
        assert_eq!(
            copy.not_judged.as_deref(),
            Some("2 nodes of these GPUs: fewer than 3 peers flag nothing")
        );
        let three = [
            node("a", 3959.3, 450.0),
            node("b", 3959.3, 450.0),
            node("c", 1000.0, 450.0),
        ];
        let f = run(&three);
        assert_eq!(figure(&f, "memory_copy_bandwidth").outliers.len(), 1);
    }

    #[test]
    fn a_wide_fleet_flags_only_what_is_far_from_its_spread() {
        // Copy figures spread ±8%: the MAD is wide, so 11.5% worse is not 3.5 robust
        // deviations.
        let base = 4000.0;
        let mut inputs: Vec<Input> = [1.08, 0.92, 1.06, 0.94, 1.0, 1.04, 0.96]
            .iter()
            .enumerate()
            .map(|(i, k)| node(&format!("n{i}"), base * k, 450.0))
            .collect();
        // Median 0.96 of base, MAD 0.08: 11.5% worse is under one robust deviation, half is
        // 3.9.
        inputs.push(node("slow11", base * 0.85, 450.0));
        inputs.push(node("slow50", base * 0.50, 450.0));
        let f = run(&inputs);
        let copy = figure(&f, "memory_copy_bandwidth");
        let flagged: Vec<&str> = copy.outliers.iter().map(|o| o.node.as_str()).collect();
        assert_eq!(flagged, vec!["slow50"]);
        assert!(copy.outliers[0].robust_z.unwrap() >= stats::ROBUST_Z);
    }

    #[test]
    fn the_all_reduce_is_its_largest_message() {
        let inputs = [node("a", 3959.3, 450.0)];
        let f = run(&inputs);
        let ar: Vec<&Figure> = f.iter().filter(|x| x.name == "allreduce_busbw").collect();
        assert_eq!(ar.len(), 1);
        let r = inputs[0].report.as_ref().unwrap();
        let largest = r
            .measurements
            .iter()
            .filter(|m| m.name == "allreduce_busbw")
            .max_by_key(|m| m.size_bytes)
            .unwrap();
        assert_eq!(ar[0].median, largest.value);
        // The GEMMs are one figure per dtype.
        assert!(f.iter().any(|x| x.label() == "gemm_tflops bf16"));
        assert!(f.iter().any(|x| x.label() == "gemm_tflops fp64"));
    }
}
