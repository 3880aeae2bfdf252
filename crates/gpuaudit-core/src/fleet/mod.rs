//! `gpuaudit fleet`: many nodes' reports summarised (`gpuaudit.fleet/1`): one row per node,
//! the measured figures against the fleet's own median, configuration drift, and the checks
//! that fail on several nodes. Pure: the command reads the files, this judges and renders.
//!
//! - `node.rs`: a node from one report (or the reason its file is not one);
//! - `digest.rs`: what the fleet keeps of a report, and the nodes gathered in any order;
//! - `stats.rs`: median, MAD, and the rule that flags a node (its thresholds);
//! - `figures.rs`: each measured figure per group of peers;
//! - `drift.rs`: fields that differ between nodes;
//! - `failures.rs`: check id -> nodes;
//! - `table.rs`, `markdown.rs`: the views (JSON is the serialised [`Fleet`]).

mod digest;
pub(crate) mod drift;
mod failures;
pub(crate) mod figures;
mod markdown;
pub(crate) mod node;
pub mod stats;
mod table;

pub use digest::{Collector, Digest};
pub use drift::{Drift, DriftValue, EVIDENCE_READ};
pub use failures::{FailedOn, FailingCheck};
pub use figures::{Below, Figure, Kind, Outlier};
pub use markdown::markdown;
pub use node::{FailedCheck, GpuGroup, Input, Node, Verdict};
pub use stats::Rules;
pub use table::table;

use serde::Serialize;

pub const SCHEMA: &str = "gpuaudit.fleet/1";

#[derive(Clone, Debug, Serialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// What makes `gpuaudit fleet` exit 1 (`--fail-on`), for a Slurm prolog or a cluster's CI to
/// hold a job back from a node: each level includes the ones before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FailOn {
    /// A node failed a check, or its file is not a report (the default).
    #[default]
    Fail,
    /// Also a node flagged against its peers (slower, hotter, drawing other power than they
    /// do) or the threshold below what its GPU model attains.
    Slow,
    /// Also a node to watch: within the threshold, far outside the fleet's noise.
    Watch,
}

/// How many nodes of each verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub nodes: usize,
    pub pass: usize,
    pub warn: usize,
    pub fail: usize,
    pub not_read: usize,
    /// Nodes with at least one figure flagged against their peers (slower, or an anomaly).
    pub flagged: usize,
    /// Of those, the nodes flagged slower (a performance figure)...
    pub slow: usize,
    /// ...and those flagged for a condition (temperature, power).
    pub anomalous: usize,
    /// Nodes to watch (a figure within the threshold, far outside the noise), not flagged.
    pub watch: usize,
    /// Nodes the threshold or more below what their GPU model attains in some figure.
    pub below_attainable: usize,
}

/// The judge's constants, as this run used them.
#[derive(Clone, Debug, Serialize)]
pub struct RulesUsed {
    /// `--threshold`, a share (0.1: 10%).
    pub threshold: f64,
    pub robust_z: f64,
    pub watch_z: f64,
    pub watch_floor: f64,
    pub hotter_c: f64,
    pub watch_hotter_c: f64,
    pub min_peers: usize,
}

impl From<&Rules> for RulesUsed {
    fn from(r: &Rules) -> RulesUsed {
        RulesUsed {
            threshold: r.threshold,
            robust_z: stats::ROBUST_Z,
            watch_z: stats::WATCH_Z,
            watch_floor: stats::WATCH_FLOOR,
            hotter_c: stats::HOTTER_C,
            watch_hotter_c: stats::WATCH_HOTTER_C,
            min_peers: stats::MIN_PEERS,
        }
    }
}

/// The fleet summary: what `--format json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct Fleet {
    pub schema: String,
    pub tool: Tool,
    pub rules: RulesUsed,
    pub counts: Counts,
    pub nodes: Vec<Node>,
    pub figures: Vec<Figure>,
    pub drift: Vec<Drift>,
    pub failing_checks: Vec<FailingCheck>,
}

impl Fleet {
    /// The fleet of `inputs`, in their order (the command sorts the files), under the default
    /// rules.
    pub fn summarise(inputs: &[Input]) -> Fleet {
        Fleet::summarise_with(inputs, &Rules::default())
    }

    /// The fleet of `inputs` under `rules` (`--threshold`): each report digested in turn
    /// (`gpuaudit fleet` digests each file as it reads it, through a [`Collector`]).
    pub fn summarise_with(inputs: &[Input], rules: &Rules) -> Fleet {
        let mut c = Collector::new();
        for (i, input) in inputs.iter().enumerate() {
            let digest = match &input.report {
                Ok(r) => Ok(Digest::of(&input.stem, r)),
                Err(e) => Err(e.clone()),
            };
            c.add(i, input.file.clone(), input.stem.clone(), digest);
        }
        c.finish(rules)
    }

    /// The fleet of its named nodes, their judged figures and drift.
    pub(crate) fn of_parts(
        nodes: Vec<Node>,
        figures: Vec<Figure>,
        drift: Vec<Drift>,
        rules: &Rules,
    ) -> Fleet {
        let failing_checks = failures::failing_checks(&nodes);
        let distinct = |names: Vec<&str>| -> std::collections::BTreeSet<String> {
            names.into_iter().map(str::to_string).collect()
        };
        let of_kind = |k: Option<Kind>| {
            distinct(
                figures
                    .iter()
                    .flat_map(|f| f.outliers.iter())
                    .filter(|o| k.is_none_or(|k| o.kind == k))
                    .map(|o| o.node.as_str())
                    .collect(),
            )
        };
        let flagged = of_kind(None);
        let watch = distinct(
            figures
                .iter()
                .flat_map(|f| f.watch.iter().map(|o| o.node.as_str()))
                .filter(|n| !flagged.contains(*n))
                .collect(),
        );
        let below = distinct(
            figures
                .iter()
                .flat_map(|f| f.below_attainable.iter().map(|b| b.node.as_str()))
                .collect(),
        );
        let count = |v: Verdict| nodes.iter().filter(|n| n.verdict == v).count();
        let counts = Counts {
            nodes: nodes.len(),
            pass: count(Verdict::Pass),
            warn: count(Verdict::Warn),
            fail: count(Verdict::Fail),
            not_read: count(Verdict::NotRead),
            flagged: flagged.len(),
            slow: of_kind(Some(Kind::Slow)).len(),
            anomalous: of_kind(Some(Kind::Anomaly)).len(),
            watch: watch.len(),
            below_attainable: below.len(),
        };
        Fleet {
            schema: SCHEMA.into(),
            tool: Tool {
                name: "gpuaudit".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            rules: RulesUsed::from(rules),
            counts,
            nodes,
            figures,
            drift,
            failing_checks,
        }
    }

    /// Whether any node failed a check or could not be read (the command's exit 1).
    pub fn fails(&self) -> bool {
        self.nodes.iter().any(|n| n.verdict.fails())
    }

    /// Whether the fleet is to fail (the command's exit 1) under `--fail-on`: each level
    /// adds to the one before it.
    pub fn fails_on(&self, level: FailOn) -> bool {
        let outlier = self.counts.flagged > 0 || self.counts.below_attainable > 0;
        match level {
            FailOn::Fail => self.fails(),
            FailOn::Slow => self.fails() || outlier,
            FailOn::Watch => self.fails() || outlier || self.counts.watch > 0,
        }
    }

    /// Whether no report at all could be read (the command's exit 2).
    pub fn nothing_read(&self) -> bool {
        self.counts.not_read == self.counts.nodes
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            // Serialising plain data with string keys cannot fail; say so rather than panic.
            format!("{{\"schema\": \"{SCHEMA}\", \"error\": \"{e}\"}}")
        });
        s.push('\n');
        s
    }

    /// The figures with a node flagged, the figures that could not be judged are not.
    pub fn flagged_figures(&self) -> impl Iterator<Item = &Figure> {
        self.figures.iter().filter(|f| !f.outliers.is_empty())
    }

    /// The rules this fleet was judged under.
    pub fn rules(&self) -> Rules {
        Rules {
            threshold: self.rules.threshold,
        }
    }

    /// The checks failing on more than one node: what the views list as "failing on several
    /// nodes" (one node's failures are in its row).
    pub fn failing_on_several(&self) -> Vec<&FailingCheck> {
        self.failing_checks
            .iter()
            .filter(|c| c.nodes.len() > 1)
            .collect()
    }
}

/// How a verdict reads in the views.
pub(crate) fn verdict_word(n: &Node) -> String {
    match n.verdict {
        Verdict::NotRead => "not read".into(),
        Verdict::Fail => format!("FAIL {} · warn {}", n.fail, n.warn),
        Verdict::Warn => format!("warn {}", n.warn),
        Verdict::Pass => "pass".into(),
    }
}

/// A figure with its unit: "3959 GB/s", "57.6 us"; a ratio (the burn's variation) bare.
pub(crate) fn with_unit(v: f64, unit: &str) -> String {
    let v = crate::units::figure(v);
    if unit == "ratio" || unit.is_empty() {
        v
    } else {
        format!("{v} {unit}")
    }
}

/// A share as a percentage, at most one decimal: 0.1 -> "10", 0.075 -> "7.5".
pub(crate) fn percent(share: f64) -> String {
    let s = format!("{:.1}", share * 100.0);
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// How a node stands out, in words: "12.0% slower", "hotter by 8 °C", "power 18% below its
/// peers". A condition is never "slower".
pub(crate) fn how_worse(fig: &Figure, o: &Outlier) -> String {
    if let Some(d) = o.degrees {
        return format!("hotter by {d:.0} °C");
    }
    let s = o.shortfall.unwrap_or(0.0);
    match o.kind {
        Kind::Slow => format!("{:.1}% slower", s * 100.0),
        Kind::Anomaly => {
            let what = if fig.unit == "W" { "power" } else { "value" };
            let side = if o.value < fig.median {
                "below"
            } else {
                "above"
            };
            format!("{what} {:.0}% {side} its peers", s * 100.0)
        }
    }
}

/// The rule in a sentence, for the views' second line.
pub(crate) fn rule_text(f: &Fleet) -> String {
    format!(
        "a node stands out {}% or more worse ({} °C hotter) than the median of {} or more \
         peers and {} robust deviations; to watch: {}% ({} °C) and {} deviations",
        percent(f.rules.threshold),
        stats::HOTTER_C,
        stats::MIN_PEERS,
        stats::ROBUST_Z,
        percent(stats::WATCH_FLOOR),
        stats::WATCH_HOTTER_C,
        stats::WATCH_Z
    )
}

/// "the median node is 12% below what an NVIDIA H200 attains (3959 GB/s)", where it is.
pub(crate) fn attainable_text(f: &Fleet, fig: &Figure) -> Option<String> {
    let s = fig.median_shortfall_to_attainable?;
    if !fig.median_below_attainable(&f.rules()) {
        return None;
    }
    Some(format!(
        "the median node is {:.0}% below what an {} attains ({})",
        s * 100.0,
        fig.peers,
        with_unit(fig.attainable.unwrap_or(0.0), &fig.unit)
    ))
}

/// `pcie.link (GPU 1)`, `memory.errors (GPUs 0, 3)`, `cuda.driver`.
pub(crate) fn with_gpus(check: &str, gpus: &[u32]) -> String {
    match gpus {
        [] => check.to_string(),
        [g] => format!("{check} (GPU {g})"),
        _ => format!(
            "{check} (GPUs {})",
            gpus.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A failed check with the checks whose failures its cause explains: "gpu.driver-binding
/// (which fails gpu.present, kernel.modules)"; `show` writes an id as the view does.
pub(crate) fn explained(
    head: String,
    explains: &[String],
    show: impl Fn(&str) -> String,
) -> String {
    if explains.is_empty() {
        return head;
    }
    let ids: Vec<String> = explains.iter().map(|c| show(c)).collect();
    format!("{head} (which fails {})", ids.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--fail-on`: fail is the failed check or unread file only; slow adds the flagged and
    /// below-attainable nodes; watch adds the watched ones. Each count alone trips its level.
    #[test]
    fn each_fail_on_level_adds_to_the_one_before() {
        let mut f = Fleet::summarise(&[]);
        for level in [FailOn::Fail, FailOn::Slow, FailOn::Watch] {
            assert!(!f.fails_on(level), "{level:?} on an empty fleet");
        }
        assert_eq!(FailOn::default(), FailOn::Fail);
        let trips = |f: &Fleet| [FailOn::Fail, FailOn::Slow, FailOn::Watch].map(|l| f.fails_on(l));
        f.counts.watch = 1;
        assert_eq!(trips(&f), [false, false, true]);
        f.counts.watch = 0;
        f.counts.flagged = 1;
        assert_eq!(trips(&f), [false, true, true]);
        f.counts.flagged = 0;
        f.counts.below_attainable = 1;
        assert_eq!(trips(&f), [false, true, true]);
    }
    use crate::report::Report;
    use crate::testing::Machine;
    use crate::{Policy, Reading};

    fn input(host: &str, width1: u32) -> Input {
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.machine.hostname = Reading::Value(host.into()))
            .gpu(1, |g| g.pcie.width_current = Reading::Value(width1))
            .build();
        Input {
            file: format!("{host}.json"),
            stem: host.into(),
            report: Ok(Report::build(&facts, &Policy::default())),
        }
    }

    #[test]
    fn counts_and_exit_conditions() {
        let bad = Input {
            file: "bad.json".into(),
            stem: "bad".into(),
            report: Err("not JSON".into()),
        };
        let f = Fleet::summarise(&[input("a", 16), input("b", 8), bad.clone()]);
        assert_eq!(f.schema, "gpuaudit.fleet/1");
        assert_eq!(f.counts.nodes, 3);
        assert_eq!(f.counts.fail, 1);
        assert_eq!(f.counts.not_read, 1);
        assert_eq!(f.counts.pass + f.counts.warn, 1);
        assert!(f.fails());
        assert!(!f.nothing_read());
        assert_eq!(f.failing_checks[0].check, "pcie.link");
        let healthy = Fleet::summarise(&[input("a", 16)]);
        assert!(!healthy.fails());
        assert!(Fleet::summarise(std::slice::from_ref(&bad)).nothing_read());
        // An unread file alone makes the fleet fail.
        assert!(Fleet::summarise(&[input("a", 16), bad]).fails());
    }

    #[test]
    fn labels() {
        assert_eq!(with_unit(3959.3, "GB/s"), "3959 GB/s");
        assert_eq!(with_unit(0.0123, "ratio"), "0.01");
        assert_eq!(with_gpus("x", &[]), "x");
        assert_eq!(with_gpus("x", &[1]), "x (GPU 1)");
        assert_eq!(with_gpus("x", &[0, 3]), "x (GPUs 0, 3)");
    }

    #[test]
    fn json_names_its_schema_and_fields() {
        let f = Fleet::summarise(&[input("a", 16), input("b", 8)]);
        let v: serde_json::Value = serde_json::from_str(&f.to_json()).unwrap();
        assert_eq!(v["schema"], "gpuaudit.fleet/1");
        for k in [
            "tool",
            "counts",
            "nodes",
            "figures",
            "drift",
            "failing_checks",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let b = &v["nodes"][1];
        assert_eq!(b["name"], "b");
        assert_eq!(b["verdict"], "fail");
        assert_eq!(b["gpus"][0]["count"], 2);
        assert_eq!(b["failed_checks"][0]["check"], "pcie.link");
        assert_eq!(b["failed_checks"][0]["gpus"][0], 1);
    }

    /// Five measured nodes, node i's figures `name` scaled by `scale(i, name)`.
    fn measured(scale: impl Fn(usize, &str) -> f64) -> Vec<Input> {
        use crate::testing::measured;
        let facts = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| measured::full_run(m, 2))
            .build();
        let template = Report::build(&facts, &Policy::default());
        (0..5)
            .map(|i| {
                let mut r = template.clone();
                r.machine.hostname = Some(format!("n{i}"));
                for m in r.measurements.iter_mut() {
                    m.value *= scale(i, &m.name);
                }
                Input {
                    file: format!("n{i}.json"),
                    stem: format!("n{i}"),
                    report: Ok(r),
                }
            })
            .collect()
    }

    #[test]
    fn a_node_flagged_in_one_figure_and_watched_in_another_counts_as_flagged() {
        // n1: copies 20% slower (flagged, and below what an H200 attains), contexts 5% slower
        // (watched); n2: contexts 5% slower only (watched); n3: power 20% above (an anomaly).
        let f = Fleet::summarise(&measured(|i, name| match (i, name) {
            (1, "memory_copy_bandwidth") => 0.8,
            (1 | 2, "context_create_ms") => 1.05,
            (3, "burn_power_w") => 1.2,
            _ => 1.0,
        }));
        assert_eq!(f.counts.flagged, 2);
        assert_eq!(f.counts.slow, 1);
        assert_eq!(f.counts.anomalous, 1);
        assert_eq!(f.counts.watch, 1);
        assert_eq!(f.counts.below_attainable, 1);
        let power = f.figures.iter().find(|x| x.name == "burn_power_w").unwrap();
        assert_eq!(
            how_worse(power, &power.outliers[0]),
            "power 20% above its peers"
        );
        let t = table::headline(&f);
        assert!(
            t.ends_with(
                "; 1 node slower than its peers; 1 node running unlike its peers; 1 node to \
                 watch; 1 node below what its GPUs attain"
            ),
            "{t}"
        );
        // Flagged only, no failure: a warning in Markdown.
        assert!(markdown(&f).starts_with("### ⚠️ "));
        // Below what the model attains alone is a warning too.
        let f = Fleet::summarise(&measured(|i, name| {
            if i < 3 && name == "memory_copy_bandwidth" {
                0.8
            } else {
                1.0
            }
        }));
        assert_eq!((f.counts.flagged, f.counts.below_attainable), (0, 3));
        let m = markdown(&f);
        assert!(m.starts_with("### ⚠️ "), "{m}");
        assert!(
            m.contains("the median node is 25% below what an NVIDIA H200 attains (4224 GB/s)"),
            "{m}"
        );
        let t = table(&f, 80, false);
        assert!(
            t.contains("the median node is 25% below what an NVIDIA H200"),
            "{t}"
        );
        // Nothing of the kind: a pass.
        assert!(markdown(&Fleet::summarise(&measured(|_, _| 1.0))).starts_with("### ✅ "));
    }

    #[test]
    fn a_gpu_8_degrees_hotter_is_watched_in_degrees_never_slower() {
        let f = Fleet::summarise(&measured(|i, name| {
            if i == 4 && name == "burn_temperature_c" {
                78.0 / 70.0
            } else {
                1.0
            }
        }));
        let t = table(&f, 100, false);
        assert!(
            t.contains("watch: n4 78.0 C on GPU 0: hotter by 8 °C (within 10 °C)"),
            "{t}"
        );
        assert!(!t.contains("slower") && !t.contains("11.4%"), "{t}");
        assert_eq!(f.counts.watch, 1);
    }

    #[test]
    fn two_nodes_are_not_judged_by_each_other_but_by_what_their_model_attains() {
        let two: Vec<Input> = measured(|_, name| {
            if name == "memory_copy_bandwidth" {
                0.8
            } else {
                1.0
            }
        })
        .into_iter()
        .take(2)
        .collect();
        let f = Fleet::summarise(&two);
        assert_eq!(f.counts.below_attainable, 2);
        let t = table(&f, 80, false);
        assert!(
            t.contains("2 nodes 10% or more below what an NVIDIA H200 attains: n0, n1"),
            "{t}"
        );
        assert!(t.contains("not judged: "), "{t}");
    }

    #[test]
    fn percentages_and_the_rule_line() {
        assert_eq!(percent(0.1), "10");
        assert_eq!(percent(0.075), "7.5");
        let f = Fleet::summarise_with(&[input("a", 16)], &Rules { threshold: 0.05 });
        assert!(rule_text(&f).starts_with("a node stands out 5% or more worse (10 °C hotter)"));
        assert_eq!(f.rules.threshold, 0.05);
    }
}
