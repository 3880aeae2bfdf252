//! The measured figures across the fleet: per figure (name and dtype) and per group of peers,
//! the median of the nodes' values, its MAD, and the nodes that stand out (`stats.rs`).

use super::node::gpu_model;
#[cfg(test)]
use super::node::{Input, Node};
use super::stats::{self, Better};
use crate::facts::Measurement;
use crate::figures::{self as catalog, Nature, Spread, Unit};
use crate::report::Report;
use serde::Serialize;
use std::collections::BTreeMap;

/// Whether a node stands out as slower (a performance figure) or as running unlike its peers
/// (a condition: temperature, power), which is an anomaly, never "slower".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Slow,
    Anomaly,
}

/// One node's value of one figure, and how far it is from its peers.
#[derive(Clone, Debug, Serialize)]
pub struct Outlier {
    pub node: String,
    pub value: f64,
    /// Worse than the median by this share of it (0.12: 12% worse; on a log scale
    /// exp(Δ)−1); null for a temperature, whose distance is in `degrees`.
    pub shortfall: Option<f64>,
    /// Degrees hotter than the median (a temperature); null otherwise.
    pub degrees: Option<f64>,
    /// Robust standard deviations worse than the median (on the judged scale); null where
    /// the peers agree (MAD 0).
    pub robust_z: Option<f64>,
    /// The GPU whose figure is the node's (its worst), where the figure is per GPU.
    pub gpu: Option<u32>,
    pub kind: Kind,
}

impl Outlier {
    /// How much worse, in the unit it is judged in (a share, or degrees): the sort key.
    fn worse(&self) -> f64 {
        self.degrees.or(self.shortfall).unwrap_or(0.0)
    }
}

/// A node whose figure is the threshold or more below what the model attains.
#[derive(Clone, Debug, Serialize)]
pub struct Below {
    pub node: String,
    pub value: f64,
    /// Below the attainable figure by this share of it.
    pub shortfall: f64,
    pub gpu: Option<u32>,
}

/// One figure over one group of peers.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub dtype: Option<String>,
    pub unit: String,
    pub better: Better,
    pub nature: Nature,
    pub spread: Spread,
    /// The peers: a GPU model for a figure per GPU; the node's GPUs (`8× NVIDIA H200`) for a
    /// figure of the whole machine (the all-reduce, context creation), count included.
    pub peers: String,
    pub nodes: usize,
    pub median: f64,
    pub mad: f64,
    /// The MAD of ln(value), where the figure is judged on a log scale (long-tailed).
    pub log_mad: Option<f64>,
    /// Why no node is flagged whatever its value (too few peers); null where they were judged.
    pub not_judged: Option<String>,
    pub outliers: Vec<Outlier>,
    /// Within the threshold but far outside the noise: not flagged.
    pub watch: Vec<Outlier>,
    /// What healthy GPUs of the model attain (the median of the nodes' reports'), where
    /// they say.
    pub attainable: Option<f64>,
    /// The median node's shortfall to `attainable` (0.12: 12% below).
    pub median_shortfall_to_attainable: Option<f64>,
    /// The nodes the threshold or more below `attainable`, the farthest first.
    pub below_attainable: Vec<Below>,
}

impl Figure {
    /// Whether the median node is the threshold or more below what the model attains.
    pub fn median_below_attainable(&self, rules: &stats::Rules) -> bool {
        self.median_shortfall_to_attainable
            .is_some_and(|s| s >= rules.threshold)
    }

    /// Whether the views have something to say of it: a node flagged or to watch, or the
    /// fleet below what the model attains.
    pub fn remarkable(&self, rules: &stats::Rules) -> bool {
        !self.outliers.is_empty()
            || !self.watch.is_empty()
            || self.median_below_attainable(rules)
            || !self.below_attainable.is_empty()
    }

    /// `gemm_tflops bf16`, `memory_copy_bandwidth`.
    pub fn label(&self) -> String {
        match &self.dtype {
            Some(d) => format!("{} {d}", self.name),
            None => self.name.clone(),
        }
    }
}

/// A figure over one group of peers: its name, dtype and peers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub name: String,
    pub dtype: Option<String>,
    pub peers: String,
}

/// A node's value of one figure (its worst GPU's, or pair's).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeValue {
    pub value: f64,
    pub gpu: Option<u32>,
    /// What the model attains, where the report says (finite and positive).
    pub attainable: Option<f64>,
}

/// A machine's value of one figure: the measurement that gave it (its worst GPU or pair).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Worst<'a> {
    pub measurement: &'a Measurement,
}

/// A machine's value of each figure, keyed by `key` (the fleet: name, dtype and peers; the
/// comparison: name and dtype): of a figure's entries only those of the largest size (the
/// all-reduce's headline figure, not its latency-bound 1 MiB point), then the worst GPU (or
/// pair) under the key ([`pick_worst`]): the lowest where higher is better, the highest where
/// lower is. The one rule of `gpuaudit fleet` and `gpuaudit compare`.
pub(crate) fn worst_by<K: Ord>(
    report: &Report,
    key: impl Fn(&Measurement) -> K,
) -> BTreeMap<K, Worst<'_>> {
    let mut by: BTreeMap<K, Vec<&Measurement>> = BTreeMap::new();
    for m in counted(report) {
        by.entry(key(m)).or_default().push(m);
    }
    by.into_iter()
        .filter_map(|(k, ms)| {
            // A condition wrong either way: the GPU farthest from the machine's own median
            // (the fleet gives its peers' instead: `digest.rs`).
            let either: Vec<f64> = ms
                .iter()
                .filter(|m| catalog::Figure::better_of(m) == Better::Neither)
                .map(|m| m.value)
                .collect();
            let centre = stats::median(&either);
            let (w, _) = pick_worst(&ms, |m| (catalog::Figure::better_of(m), m.value), centre)?;
            Some((k, Worst { measurement: ms[w] }))
        })
        .collect()
}

/// Which of one machine's `entries` of a figure (in report order; `of` gives an entry's way
/// of being better and its value) is its worst: the lowest where higher is better, the
/// highest where lower is, and for a condition wrong either way (`Better::Neither`) the one
/// farthest from `centre` (none: each value is its own, so the first stays). The first of
/// equal values. With the first entry's way of being better, which the machine's value
/// keeps.
pub(crate) fn pick_worst<T>(
    entries: &[T],
    of: impl Fn(&T) -> (Better, f64),
    centre: Option<f64>,
) -> Option<(usize, Better)> {
    let first = of(entries.first()?).0;
    let mut w = 0;
    for (j, e) in entries.iter().enumerate().skip(1) {
        let (better, v) = of(e);
        let current = of(&entries[w]).1;
        if better.worse(current, v, centre.unwrap_or(v)) != current {
            w = j;
        }
    }
    Some((w, first))
}

/// The measurements [`worst_by`] counts: finite, and of their figure's largest size.
pub(crate) fn counted(report: &Report) -> Vec<&Measurement> {
    let mut largest: BTreeMap<(&str, Option<&str>, bool), Option<u64>> = BTreeMap::new();
    for m in &report.measurements {
        let k = (m.name.as_str(), m.dtype.as_deref(), m.gpu.is_some());
        let e = largest.entry(k).or_insert(m.size_bytes);
        *e = (*e).max(m.size_bytes);
    }
    report
        .measurements
        .iter()
        .filter(|m| {
            let k = (m.name.as_str(), m.dtype.as_deref(), m.gpu.is_some());
            m.value.is_finite() && largest.get(&k).copied().flatten() == m.size_bytes
        })
        .collect()
}

/// The key of a measurement: its figure and its peers.
pub(crate) fn key_of(report: &Report, machine_peers: &str, m: &Measurement) -> Key {
    Key {
        name: m.name.clone(),
        dtype: m.dtype.clone(),
        peers: match m.gpu {
            Some(g) => gpu_model(report, g),
            None => machine_peers.to_string(),
        },
    }
}

/// What a figure is: the catalog's, else (a name this build does not know) a performance
/// figure, judged as shares of the median.
fn nature_spread(name: &str) -> (Nature, Spread) {
    match catalog::Figure::from_id(name) {
        Some(f) => (f.spec().nature, f.spec().spread),
        None => (Nature::Performance, Spread::Symmetric),
    }
}

/// Whether a figure is held to what its GPU model attains, where its reports say: the device
/// copies and the GEMMs, which data/attainable.toml measured. Not the burn, whose reports
/// carry its GEMM's figure: a sustained load on every GPU at once runs below a GEMM's best
/// (the healthy 2×H200 VM of `testing::measured::full_run`: 704.5 TFLOPS bf16 against 801),
/// so every healthy node would be listed.
fn judged_against_attainable(name: &str) -> bool {
    matches!(
        catalog::Figure::from_id(name).map(catalog::Figure::group),
        Some(catalog::Group::Memory | catalog::Group::Gemm)
    )
}

/// One figure's values over its peers, in the fleet's order of nodes: the unit and which way
/// is better of the first node's, each node by its index in the fleet.
pub(crate) struct Acc {
    pub unit: String,
    pub better: Better,
    pub values: Vec<(usize, NodeValue)>,
}

/// Every figure of the fleet's reports, by name, dtype and peers, judged under `rules` (the
/// fleet's own, for the tests of the judge).
#[cfg(test)]
pub fn figures(inputs: &[Input], _nodes: &[Node], rules: &stats::Rules) -> Vec<Figure> {
    super::Fleet::summarise_with(inputs, rules).figures
}

/// Each figure of `acc` judged under `rules`, its nodes named by their index in `names`.
pub(crate) fn judge(
    acc: BTreeMap<Key, Acc>,
    names: &[String],
    rules: &stats::Rules,
) -> Vec<Figure> {
    let name = |i: &usize| names.get(*i).cloned().unwrap_or_default();
    acc.into_iter()
        .filter_map(|(key, a)| {
            let (nature, spread) = nature_spread(&key.name);
            let degrees = Unit::from_report(&a.unit).is_some_and(Unit::is_interval_scale);
            let vals: Vec<f64> = a.values.iter().map(|(_, v)| v.value).collect();
            let y = stats::yardstick(&vals, a.better, spread == Spread::LongTailed, degrees)?;
            let median = y.median;
            let mad = stats::mad(&vals, median).unwrap_or(0.0);
            let n = a.values.len();
            let not_judged = (n < stats::MIN_PEERS).then(|| {
                format!(
                    "{n} node{} of these GPUs: fewer than {} peers flag nothing",
                    if n == 1 { "" } else { "s" },
                    stats::MIN_PEERS
                )
            });
            let kind = match nature {
                Nature::Performance => Kind::Slow,
                Nature::Condition => Kind::Anomaly,
            };
            let mut outliers = Vec::new();
            let mut watch = Vec::new();
            if not_judged.is_none() {
                for (node, v) in &a.values {
                    let Some(d) = stats::distance(v.value, &y) else {
                        continue;
                    };
                    let into = match stats::tier(&d, rules) {
                        stats::Tier::Flagged => &mut outliers,
                        stats::Tier::Watch => &mut watch,
                        stats::Tier::Within => continue,
                    };
                    into.push(Outlier {
                        node: name(node),
                        value: v.value,
                        shortfall: d.shortfall,
                        degrees: d.degrees,
                        robust_z: d.z,
                        gpu: v.gpu,
                        kind,
                    });
                }
                outliers.sort_by(|x, y| y.worse().total_cmp(&x.worse()));
                watch.sort_by(|x, y| y.worse().total_cmp(&x.worse()));
            }
            // What the model attains: the median of what the nodes' reports say, for the
            // figures it was measured for (`judged_against_attainable`).
            let att: Vec<f64> = if judged_against_attainable(&key.name) {
                a.values.iter().filter_map(|(_, v)| v.attainable).collect()
            } else {
                Vec::new()
            };
            let attainable = stats::median(&att);
            let median_shortfall_to_attainable =
                attainable.and_then(|t| stats::shortfall(median, t, a.better));
            let mut below_attainable: Vec<Below> = match attainable {
                Some(t) => a
                    .values
                    .iter()
                    .filter_map(|(node, v)| {
                        let s = stats::shortfall(v.value, t, a.better)?;
                        (s >= rules.threshold).then(|| Below {
                            node: name(node),
                            value: v.value,
                            shortfall: s,
                            gpu: v.gpu,
                        })
                    })
                    .collect(),
                None => Vec::new(),
            };
            below_attainable.sort_by(|x, y| y.shortfall.total_cmp(&x.shortfall));
            Some(Figure {
                name: key.name,
                dtype: key.dtype,
                unit: a.unit,
                better: a.better,
                nature,
                spread,
                peers: key.peers,
                nodes: n,
                median,
                mad,
                log_mad: y.scale.log.then_some(y.mad),
                not_judged,
                outliers,
                watch,
                attainable,
                median_shortfall_to_attainable,
                below_attainable,
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
        figures(inputs, &nodes(inputs), &stats::Rules::default())
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
        assert!(copy.outliers.is_empty() && copy.watch.is_empty());
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

    /// A fixed linear congruential generator (Knuth's MMIX constants): simulated fleets are
    /// the same on every run.
    struct Lcg(u64);

    impl Lcg {
        fn uniform(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        /// A standard normal deviate (Box-Muller).
        fn normal(&mut self) -> f64 {
            let (u1, u2) = (self.uniform(), self.uniform());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }
    }

    /// A fleet cloned from one measured node, node i's figure `name` (every entry of it, on
    /// every GPU) at `values[i]`; node i is named `names(i)`.
    fn fleet_of(name: &str, values: &[f64], names: impl Fn(usize) -> String) -> Vec<Input> {
        let template = node("t", 3959.3, 454.6);
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut input = template.clone();
                let host = names(i);
                let r = input.report.as_mut().unwrap();
                r.machine.hostname = Some(host.clone());
                for m in r.measurements.iter_mut().filter(|m| m.name == name) {
                    m.value = *v;
                }
                input.file = format!("{host}.json");
                input.stem = host;
                input
            })
            .collect()
    }

    fn numbered(i: usize) -> String {
        format!("n{i:02}")
    }

    fn judged(inputs: &[Input], threshold: f64) -> Vec<Figure> {
        figures(inputs, &nodes(inputs), &stats::Rules { threshold })
    }

    fn node_names(o: &[Outlier]) -> Vec<&str> {
        o.iter().map(|x| x.node.as_str()).collect()
    }

    #[test]
    fn a_node_6_percent_slow_in_a_1_percent_fleet_is_watched_then_flagged_at_5() {
        // 63 healthy nodes, 1% normal noise; node n63 6% slow.
        let mut rng = Lcg(20261203);
        let mut values: Vec<f64> = (0..63)
            .map(|_| 4000.0 * (1.0 + 0.01 * rng.normal()))
            .collect();
        values.push(4000.0 * 0.94);
        let inputs = fleet_of("memory_copy_bandwidth", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert!(copy.outliers.is_empty(), "{:?}", copy.outliers);
        assert_eq!(node_names(&copy.watch), vec!["n63"]);
        let w = &copy.watch[0];
        assert_eq!(w.kind, Kind::Slow);
        let z = w.robust_z.unwrap();
        assert!((stats::WATCH_Z..8.0).contains(&z), "{z}");
        let s = w.shortfall.unwrap();
        assert!((0.05..0.07).contains(&s), "{s}");
        // --threshold 5: flagged, no longer watched.
        let f = judged(&inputs, 0.05);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert_eq!(node_names(&copy.outliers), vec!["n63"]);
        assert!(copy.watch.is_empty());
        // --threshold 7: within it again, watched.
        let f = judged(&inputs, 0.07);
        assert_eq!(
            node_names(&figure(&f, "memory_copy_bandwidth").watch),
            vec!["n63"]
        );
    }

    #[test]
    fn long_tailed_figures_are_judged_on_a_log_scale() {
        // Context creation of healthy nodes spreads log-normally (σ 0.3 of ln): on a linear
        // scale the slow tail's MAD is too narrow and healthy nodes are flagged; on the log
        // scale none is, while a node twice as slow still is.
        let mut rng = Lcg(7);
        let (mut linear, mut log, mut total) = (0, 0, 0);
        for fleet in 0..20 {
            let mut values: Vec<f64> = (0..64)
                .map(|_| 450.0 * (0.3 * rng.normal()).exp())
                .collect();
            if fleet == 0 {
                values[0] = 450.0 * 5.0;
            }
            let y = stats::yardstick(&values, Better::Lower, false, false).unwrap();
            linear += values
                .iter()
                .skip(usize::from(fleet == 0))
                .filter(|v| {
                    let d = stats::distance(**v, &y).unwrap();
                    stats::tier(&d, &stats::Rules::default()) == stats::Tier::Flagged
                })
                .count();
            let inputs = fleet_of("context_create_ms", &values, numbered);
            let f = judged(&inputs, stats::SHORTFALL);
            let ctx = figure(&f, "context_create_ms");
            assert_eq!(ctx.spread, Spread::LongTailed);
            assert!(ctx.log_mad.is_some());
            let flagged = node_names(&ctx.outliers);
            if fleet == 0 {
                assert_eq!(flagged, vec!["n00"], "{:?}", ctx.outliers);
                let s = ctx.outliers[0].shortfall.unwrap();
                // exp(Δ)−1 against the log-scale centre: about 400% slower.
                assert!((3.0..5.0).contains(&s), "{s}");
                log += flagged.len() - 1;
            } else {
                log += flagged.len();
            }
            total += 64;
        }
        let (linear, log) = (linear as f64 / total as f64, log as f64 / total as f64);
        assert!(linear > 0.005, "linear {linear}");
        assert!(log < 0.001, "log {log}");
    }

    #[test]
    fn half_the_fleet_12_percent_slower_is_below_what_the_model_attains() {
        let template = node("t", 3959.3, 454.6);
        let attainable = template
            .report
            .as_ref()
            .unwrap()
            .measurements
            .iter()
            .find(|m| m.name == "memory_copy_bandwidth")
            .and_then(|m| m.attainable)
            .expect("an H200's device copy has an attainable figure");
        // 33 of 64 regressed 12% (the median node among them): no node stands out from its
        // peers, but the figure says the median node is 12% below, and lists the 33.
        let values: Vec<f64> = (0..64)
            .map(|i| attainable * if i < 33 { 0.88 } else { 1.0 })
            .collect();
        let inputs = fleet_of("memory_copy_bandwidth", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert!(copy.outliers.is_empty() && copy.watch.is_empty());
        assert_eq!(copy.attainable, Some(attainable));
        let s = copy.median_shortfall_to_attainable.unwrap();
        assert!((s - 0.12).abs() < 1e-9, "{s}");
        assert!(copy.median_below_attainable(&stats::Rules::default()));
        assert_eq!(copy.below_attainable.len(), 33);
        assert_eq!(copy.below_attainable[0].gpu, Some(0));
        // At --threshold 13 it is within: neither said nor listed.
        let f = judged(&inputs, 0.13);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert!(!copy.median_below_attainable(&stats::Rules { threshold: 0.13 }));
        assert!(copy.below_attainable.is_empty());
        // Exactly half: the median lies halfway (6% below), not said; the 32 are listed.
        let values: Vec<f64> = (0..64)
            .map(|i| attainable * if i < 32 { 0.88 } else { 1.0 })
            .collect();
        let inputs = fleet_of("memory_copy_bandwidth", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let copy = figure(&f, "memory_copy_bandwidth");
        assert!(!copy.median_below_attainable(&stats::Rules::default()));
        assert_eq!(copy.below_attainable.len(), 32);
        // Exactly the threshold below attainable is listed; just above it is not.
        let values = [
            attainable,
            attainable,
            attainable * 0.90,
            attainable * 0.9001,
        ];
        let inputs = fleet_of("memory_copy_bandwidth", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let copy = figure(&f, "memory_copy_bandwidth");
        let below: Vec<&str> = copy
            .below_attainable
            .iter()
            .map(|b| b.node.as_str())
            .collect();
        assert_eq!(below, vec!["n02"]);
        // A figure without an attainable value says nothing of it.
        let ctx = figure(&f, "context_create_ms");
        assert_eq!(ctx.attainable, None);
        assert!(ctx.below_attainable.is_empty());
        // The burn carries its GEMM's figure, which a sustained load does not reach: it is
        // not held to it (the healthy template's burn is 12% under).
        let burn = figure(&f, "burn_tflops");
        assert_eq!(burn.attainable, None);
        assert!(burn.below_attainable.is_empty());
        let gemm = f.iter().find(|x| x.label() == "gemm_tflops bf16").unwrap();
        assert!(gemm.attainable.is_some());
    }

    #[test]
    fn a_hot_gpu_is_an_anomaly_in_degrees() {
        let values = [64.0, 64.0, 65.0, 63.0, 64.0, 64.0, 72.0, 76.0];
        let inputs = fleet_of("burn_temperature_c", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let t = figure(&f, "burn_temperature_c");
        assert_eq!(t.nature, Nature::Condition);
        // 76 °C: 12 °C hotter, flagged; 72 °C: 8 °C, far outside the noise: watched.
        assert_eq!(node_names(&t.outliers), vec!["n07"]);
        let o = &t.outliers[0];
        assert_eq!(o.kind, Kind::Anomaly);
        assert_eq!(o.degrees, Some(12.0));
        assert_eq!(o.shortfall, None);
        assert_eq!(node_names(&t.watch), vec!["n06"]);
        assert_eq!(t.watch[0].degrees, Some(8.0));
        // The threshold is a share: it does not move the degrees' rule.
        let f = judged(&inputs, 0.5);
        assert_eq!(
            node_names(&figure(&f, "burn_temperature_c").outliers),
            vec!["n07"]
        );
        // Exactly 10 °C hotter, where the peers agree, is flagged; 9 °C is watched.
        let values = [64.0, 64.0, 64.0, 74.0, 73.0];
        let inputs = fleet_of("burn_temperature_c", &values, numbered);
        let t = judged(&inputs, stats::SHORTFALL);
        let t = figure(&t, "burn_temperature_c");
        assert_eq!(node_names(&t.outliers), vec!["n03"]);
        assert_eq!(node_names(&t.watch), vec!["n04"]);
    }

    #[test]
    fn burn_power_is_judged_either_way() {
        let values = [700.0, 700.0, 700.0, 700.0, 574.0, 826.0, 640.0];
        let inputs = fleet_of("burn_power_w", &values, numbered);
        let f = judged(&inputs, stats::SHORTFALL);
        let p = figure(&f, "burn_power_w");
        assert_eq!(p.better, Better::Neither);
        assert_eq!(node_names(&p.outliers), vec!["n04", "n05"]);
        assert!(p.outliers.iter().all(|o| o.kind == Kind::Anomaly));
        let s = p.outliers[0].shortfall.unwrap();
        assert!((s - 0.18).abs() < 1e-9, "{s}");
        // 640 W is 8.6% below: within 10%, but the peers agree: watched.
        assert_eq!(node_names(&p.watch), vec!["n06"]);
        // One GPU of two 18% below: the machine's own median lies halfway between its two
        // GPUs; judged from its peers' median, the odd GPU is the node's value.
        let mut inputs = fleet_of("burn_power_w", &[700.0; 5], numbered);
        let r = inputs[4].report.as_mut().unwrap();
        for m in r.measurements.iter_mut() {
            if m.name == "burn_power_w" && m.gpu == Some(1) {
                m.value = 574.0;
            }
        }
        let f = judged(&inputs, stats::SHORTFALL);
        let p = figure(&f, "burn_power_w");
        assert_eq!(node_names(&p.outliers), vec!["n04"]);
        assert_eq!(p.outliers[0].gpu, Some(1));
        assert_eq!(p.outliers[0].value, 574.0);
    }
}
