//! What the fleet keeps of a report: a [`Digest`] (its node, its figures' values, its drift
//! fields: a few KiB where the report parsed is some 40 KiB), and the [`Collector`] that
//! gathers digests one at a time, in any order, into the fleet. `gpuaudit fleet` reads each
//! file, digests it and drops the report, so 100,000 reports never sit in memory at once.
//!
//! The collector keeps each node by its index in the fleet (the command's order of files):
//! whatever order the digests come in, [`Collector::finish`] gives the fleet a reading of
//! the reports in that order gives, to the byte.

use super::drift::{self, Fields};
use super::figures::{self, Acc, Key, NodeValue};
use super::node::{self, Node};
use super::stats::{self, Better};
use super::{Fleet, Rules};
use crate::report::Report;
use std::collections::{BTreeMap, HashMap};

/// One of a node's measurements that the fleet counts ([`figures::counted`]).
#[derive(Clone, Debug)]
struct Entry {
    unit: String,
    better: Better,
    value: f64,
    gpu: Option<u32>,
    attainable: Option<f64>,
}

/// What the fleet reads of one report.
#[derive(Clone, Debug)]
pub struct Digest {
    /// The node, named by its hostname or the file's stem; the collector names it uniquely.
    node: Node,
    /// The counted measurements by figure and peers, each in report order.
    figures: BTreeMap<Key, Vec<Entry>>,
    /// The drift's fields ([`drift::fields`]).
    fields: Vec<(String, Option<String>)>,
}

impl Digest {
    /// The digest of `report`, read from a file of stem `stem` (the node's name where the
    /// report has no hostname).
    pub fn of(stem: &str, report: &Report) -> Digest {
        // The file is the collector's to say (`Collector::add`).
        let node = node::read(String::new(), stem, report);
        let peers = node.gpu_label();
        let mut figs: BTreeMap<Key, Vec<Entry>> = BTreeMap::new();
        for m in figures::counted(report) {
            figs.entry(figures::key_of(report, &peers, m))
                .or_default()
                .push(Entry {
                    unit: m.unit.clone(),
                    better: crate::figures::Figure::better_of(m),
                    value: m.value,
                    gpu: m.gpu,
                    attainable: m.attainable.filter(|a| a.is_finite() && *a > 0.0),
                });
        }
        Digest {
            node,
            figures: figs,
            fields: drift::fields(report),
        }
    }
}

/// One entry of a figure wrong either way, as the collector keeps it (its unit by number).
struct Kept {
    unit: u32,
    better: Better,
    value: NodeValue,
}

/// A node's value of one figure as the collector keeps it: its worst entry, or, where the
/// figure is wrong either way (`Better::Neither`), every entry until the fleet's median of
/// them tells which is farthest.
enum Slot {
    Worst(Kept),
    Either(Vec<Kept>),
}

/// The fleet, one node at a time ([`Collector::add`]) in any order.
#[derive(Default)]
pub struct Collector {
    /// By index: each node and its file's stem (`None`: not added).
    nodes: Vec<Option<(Node, String)>>,
    /// Per figure and peers, each node's slot, by index.
    figures: BTreeMap<Key, Vec<(usize, Slot)>>,
    /// Units, each kept once (a fleet's figures have a handful).
    units: Vec<String>,
    unit_ids: HashMap<String, u32>,
    fields: Fields,
}

impl Collector {
    pub fn new() -> Collector {
        Collector::default()
    }

    fn keep(&mut self, e: Entry) -> Kept {
        let unit = match self.unit_ids.get(&e.unit) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.units.len()).unwrap_or(u32::MAX);
                self.units.push(e.unit.clone());
                self.unit_ids.insert(e.unit, id);
                id
            }
        };
        Kept {
            unit,
            better: e.better,
            value: NodeValue {
                value: e.value,
                gpu: e.gpu,
                attainable: e.attainable,
            },
        }
    }

    /// The node at `index` of the fleet, of the file `file` (stem `stem`): its digest, or why
    /// it is not a report. A second node at one index is not added: the first stays.
    pub fn add(
        &mut self,
        index: usize,
        file: String,
        stem: String,
        digest: Result<Digest, String>,
    ) {
        if self.nodes.len() <= index {
            self.nodes.resize_with(index + 1, || None);
        }
        if self.nodes[index].is_some() {
            return;
        }
        let mut d = match digest {
            Ok(d) => d,
            Err(reason) => {
                self.nodes[index] = Some((node::unread(file, &stem, reason), stem));
                return;
            }
        };
        d.node.file = file;
        for (key, entries) in d.figures {
            let slot = if entries.iter().any(|e| e.better == Better::Neither) {
                Slot::Either(entries.into_iter().map(|e| self.keep(e)).collect())
            } else {
                // Higher or lower is better: the worst is the node's own, whatever the fleet.
                let Some((w, better)) =
                    figures::pick_worst(&entries, |e| (e.better, e.value), None)
                else {
                    continue;
                };
                let Some(e) = entries.into_iter().nth(w) else {
                    continue;
                };
                let mut kept = self.keep(e);
                kept.better = better;
                Slot::Worst(kept)
            };
            self.figures.entry(key).or_default().push((index, slot));
        }
        self.fields.add(index, d.fields);
        self.nodes[index] = Some((d.node, stem));
    }

    /// The indices below `n` that no node was added at.
    pub fn missing(&self, n: usize) -> Vec<usize> {
        (0..n)
            .filter(|&i| self.nodes.get(i).is_none_or(Option::is_none))
            .collect()
    }

    /// The fleet of the nodes added, in the order of their indices, judged under `rules`.
    pub fn finish(self, rules: &Rules) -> Fleet {
        let (mut nodes, mut stems, mut index) = (Vec::new(), Vec::new(), Vec::new());
        for (i, slot) in self.nodes.into_iter().enumerate() {
            if let Some((n, s)) = slot {
                nodes.push(n);
                stems.push(s);
                index.push(i);
            }
        }
        node::name_uniquely(&mut nodes, &stems);
        drop(stems);
        // Each node's name by its index (an index no node was added at has none, and is in
        // no figure and no field).
        let mut names: Vec<String> = vec![String::new(); index.last().map_or(0, |l| l + 1)];
        for (n, &i) in nodes.iter().zip(&index) {
            names[i] = n.name.clone();
        }

        let units = self.units;
        let unit = |id: u32| units.get(id as usize).cloned().unwrap_or_default();
        let mut acc: BTreeMap<Key, Acc> = BTreeMap::new();
        for (key, mut slots) in self.figures {
            // The fleet's order, whatever order the nodes came in (one slot a node).
            slots.sort_by_key(|(i, _)| *i);
            // The fleet's median of the values wrong either way: every GPU's, of every node.
            let either: Vec<f64> = slots
                .iter()
                .flat_map(|(_, s)| match s {
                    Slot::Either(v) => v.as_slice(),
                    Slot::Worst(_) => &[],
                })
                .filter(|k| k.better == Better::Neither)
                .map(|k| k.value.value)
                .collect();
            let centre = stats::median(&either);
            let mut out: Option<Acc> = None;
            for (i, s) in slots {
                let (kept, better) = match s {
                    Slot::Worst(k) => {
                        let b = k.better;
                        (k, b)
                    }
                    Slot::Either(entries) => {
                        let own: Vec<f64> = entries
                            .iter()
                            .filter(|k| k.better == Better::Neither)
                            .map(|k| k.value.value)
                            .collect();
                        let c = centre.or_else(|| stats::median(&own));
                        let Some((w, better)) =
                            figures::pick_worst(&entries, |k| (k.better, k.value.value), c)
                        else {
                            continue;
                        };
                        let Some(k) = entries.into_iter().nth(w) else {
                            continue;
                        };
                        (k, better)
                    }
                };
                out.get_or_insert_with(|| Acc {
                    unit: unit(kept.unit),
                    better,
                    values: Vec::new(),
                })
                .values
                .push((i, kept.value));
            }
            if let Some(a) = out {
                acc.insert(key, a);
            }
        }
        let figures = figures::judge(acc, &names, rules);
        let drift = self.fields.drift(&names);
        Fleet::of_parts(nodes, figures, drift, rules)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Input;
    use crate::testing::{measured, Machine};
    use crate::{Policy, Reading};

    /// The real 1×H200 `--full` report of fixtures/reports.
    fn real() -> String {
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/reports/h200-x1-vm-full.json"
        );
        std::fs::read_to_string(p).unwrap()
    }

    /// A fleet of every kind of node: the real report a little apart each time (one slow,
    /// one hot, one drawing less power, one on another driver), measured 2×H200 nodes (one on
    /// an x8 link), two of one hostname, an unread file whose stem is a hostname.
    fn fleet() -> Vec<(String, String, Result<String, String>)> {
        let mut out = Vec::new();
        let real: serde_json::Value = serde_json::from_str(&real()).unwrap();
        for i in 0..12usize {
            let mut v = real.clone();
            v["machine"]["hostname"] = format!("h{i:02}").into();
            if i % 4 == 1 {
                v["machine"]["driver_version"] = "580.95.05".into();
            }
            for m in v["measurements"].as_array_mut().unwrap() {
                let name = m["name"].as_str().unwrap().to_string();
                let mut x = m["value"].as_f64().unwrap() * (1.0 + (i % 5) as f64 * 0.004);
                match (i, name.as_str()) {
                    (2, "memory_copy_bandwidth") => x *= 0.8,
                    (4, "burn_temperature_c") => x += 14.0,
                    (6, "burn_power_w") => x *= 0.8,
                    _ => {}
                }
                m["value"] = serde_json::json!(x);
            }
            out.push((
                format!("h{i:02}.json"),
                format!("h{i:02}"),
                Ok(v.to_string()),
            ));
        }
        let policy = Policy {
            full: true,
            ..Policy::default()
        };
        for (host, width) in [("p0", 16), ("p1", 16), ("p2", 16), ("p3", 8), ("p1", 16)] {
            let facts = Machine::healthy("h200-sxm-141gb", 2)
                .with(|f| f.machine.hostname = Reading::Value(host.into()))
                .gpu(1, |g| g.pcie.width_current = Reading::Value(width))
                .measured(|m| measured::full_run(m, 2))
                .build();
            let text = serde_json::to_string(&Report::build(&facts, &policy)).unwrap();
            let stem = format!("{host}-{}", out.len());
            out.push((format!("{stem}.json"), stem, Ok(text)));
        }
        out.push(("h03.json.bad".into(), "h03".into(), Err("not JSON".into())));
        out
    }

    /// The fleet's views, all three: what must not change.
    fn views(f: &Fleet) -> String {
        format!(
            "{}\n{}\n{}",
            f.to_json(),
            crate::fleet::table(f, 100, false),
            crate::fleet::markdown(f)
        )
    }

    /// The summary reader's digests give the fleet the full reports give, in every view.
    #[test]
    fn a_digest_of_the_summary_reader_gives_what_the_full_report_gives() {
        let files = fleet();
        let full: Vec<Input> = files
            .iter()
            .map(|(file, stem, text)| Input {
                file: file.clone(),
                stem: stem.clone(),
                report: text
                    .clone()
                    .and_then(|t| crate::report::from_json(&t).map_err(|e| e.to_string())),
            })
            .collect();
        let want = Fleet::summarise(&full);
        // The fleet has something to say: a node flagged, one anomalous, drift, a failure.
        assert!(
            want.counts.slow >= 1 && want.counts.anomalous >= 2,
            "{:?}",
            want.counts
        );
        assert!(!want.drift.is_empty() && !want.failing_checks.is_empty());
        let mut c = Collector::new();
        for (i, (file, stem, text)) in files.iter().enumerate() {
            let d = text.clone().and_then(|t| {
                crate::report::from_json_for_summary(&t, crate::fleet::EVIDENCE_READ)
                    .map(|r| Digest::of(stem, &r))
                    .map_err(|e| e.to_string())
            });
            c.add(i, file.clone(), stem.clone(), d);
        }
        assert_eq!(views(&c.finish(&Rules::default())), views(&want));
    }

    /// Digests added in any order give the fleet of the files' order, to the byte.
    #[test]
    fn the_order_digests_come_in_changes_nothing() {
        let files = fleet();
        let digests: Vec<_> = files
            .iter()
            .map(|(file, stem, text)| {
                let d = text.clone().and_then(|t| {
                    crate::report::from_json(&t)
                        .map(|r| Digest::of(stem, &r))
                        .map_err(|e| e.to_string())
                });
                (file.clone(), stem.clone(), d)
            })
            .collect();
        let run = |order: &[usize]| {
            let mut c = Collector::new();
            for &i in order {
                let (file, stem, d) = digests[i].clone();
                c.add(i, file, stem, d);
            }
            assert!(c.missing(digests.len()).is_empty());
            views(&c.finish(&Rules { threshold: 0.05 }))
        };
        let n = digests.len();
        let forward: Vec<usize> = (0..n).collect();
        let want = run(&forward);
        let backward: Vec<usize> = (0..n).rev().collect();
        assert_eq!(run(&backward), want);
        // Odd places first, then even; and a fixed shuffle (an LCG).
        let mut odd_even: Vec<usize> = (1..n).step_by(2).collect();
        odd_even.extend((0..n).step_by(2));
        assert_eq!(run(&odd_even), want);
        let mut shuffled = forward.clone();
        let mut x: u64 = 7;
        for i in (1..n).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            shuffled.swap(i, (x >> 33) as usize % (i + 1));
        }
        assert_eq!(run(&shuffled), want);
    }

    #[test]
    fn a_place_never_added_is_missing_and_the_first_node_at_a_place_stays() {
        let mut c = Collector::new();
        c.add(2, "c.json".into(), "c".into(), Err("x".into()));
        c.add(2, "d.json".into(), "d".into(), Err("y".into()));
        assert_eq!(c.missing(4), vec![0, 1, 3]);
        let f = c.finish(&Rules::default());
        assert_eq!(f.nodes.len(), 1);
        assert_eq!(f.nodes[0].file, "c.json");
    }
}
