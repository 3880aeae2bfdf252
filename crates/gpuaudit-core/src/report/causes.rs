//! What explains what: each finding's `caused_by` resolved to the finding it names, and each
//! finding's root (the finding at the end of its chain of causes). The views show a root with
//! its consequences under it and count it as one problem; the fleet counts roots; serve
//! marks the series a cause explains.
//!
//! A reference is resolved to a problem (warn or fail) of the same report: the first finding
//! of that check with that GPU (and, where given, that PCI address in its evidence), one that
//! has no cause of its own before one that has. A reference that resolves to nothing (the
//! cause's finding passed, or a report edited by hand) leaves the finding standing alone, so
//! a dangling reference never hides a problem; a cycle likewise ends at the finding it
//! started from. Linear in the findings: references are looked up by (check, GPU).

// "0000:00:07.0", "00000000:00:07.0" and "00:07.0" name one device (case aside): addresses
// are compared in the facts' canonical form.
use crate::facts::normalize_bus_id;
use crate::finding::{Cause, Finding, Status};
use std::collections::HashMap;

/// The resolved causes of a report's findings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Causes {
    /// For each finding, the finding its `caused_by` names, where it names one.
    cause: Vec<Option<usize>>,
    /// For each finding, the root of its chain (itself where it has no cause).
    root: Vec<usize>,
}

fn is_problem(s: Status) -> bool {
    matches!(s, Status::Warn | Status::Fail)
}

#[cfg(test)]
fn same_bus_id(a: &str, b: &str) -> bool {
    normalize_bus_id(a) == normalize_bus_id(b)
}

impl Causes {
    pub fn of(findings: &[Finding]) -> Causes {
        // The first two problems of each (check, GPU), and of each (check, GPU, address):
        // those without a cause of their own, and any. Two, because a finding never resolves
        // to itself.
        #[derive(Default)]
        struct Firsts {
            uncaused: Vec<usize>,
            any: Vec<usize>,
        }
        impl Firsts {
            fn add(&mut self, i: usize, uncaused: bool) {
                if uncaused && self.uncaused.len() < 2 {
                    self.uncaused.push(i);
                }
                if self.any.len() < 2 {
                    self.any.push(i);
                }
            }
            fn pick(&self, not: usize) -> Option<usize> {
                let other = |v: &Vec<usize>| v.iter().copied().find(|j| *j != not);
                other(&self.uncaused).or_else(|| other(&self.any))
            }
        }
        let mut by: HashMap<(&str, Option<u32>), Firsts> = HashMap::new();
        let mut by_bus: HashMap<(&str, Option<u32>, String), Firsts> = HashMap::new();
        for (i, f) in findings.iter().enumerate() {
            if !is_problem(f.status) {
                continue;
            }
            let uncaused = f.caused_by.is_none();
            by.entry((f.check.as_str(), f.gpu))
                .or_default()
                .add(i, uncaused);
            if let Some(bus) = f.evidence.get("pci_bus_id").and_then(|v| v.as_str()) {
                by_bus
                    .entry((f.check.as_str(), f.gpu, normalize_bus_id(bus)))
                    .or_default()
                    .add(i, uncaused);
            }
        }
        let resolve = |i: usize, c: &Cause| -> Option<usize> {
            match &c.pci_bus_id {
                None => by.get(&(c.check.as_str(), c.gpu))?.pick(i),
                Some(bus) => by_bus
                    .get(&(c.check.as_str(), c.gpu, normalize_bus_id(bus)))?
                    .pick(i),
            }
        };
        let cause: Vec<Option<usize>> = findings
            .iter()
            .enumerate()
            .map(|(i, f)| f.caused_by.as_ref().and_then(|c| resolve(i, c)))
            .collect();
        // Follow each chain to its end; a chain that comes back to a finding already on it
        // (a cycle) ends where it started. Each finding's root is computed once.
        let n = findings.len();
        let mut root: Vec<Option<usize>> = vec![None; n];
        for start in 0..n {
            if root[start].is_some() {
                continue;
            }
            let mut path = vec![start];
            let mut on_path = std::collections::HashSet::from([start]);
            let end = loop {
                let last = path[path.len() - 1];
                if let Some(r) = root[last] {
                    break Some(r);
                }
                match cause[last] {
                    None => break Some(last),
                    Some(next) if on_path.contains(&next) => break None,
                    Some(next) => {
                        on_path.insert(next);
                        path.push(next);
                    }
                }
            };
            match end {
                Some(r) => {
                    for p in path {
                        root[p].get_or_insert(r);
                    }
                }
                // A cycle: every finding on it stands alone.
                None => {
                    for p in path {
                        root[p].get_or_insert(p);
                    }
                }
            }
        }
        Causes {
            cause,
            root: root
                .into_iter()
                .enumerate()
                .map(|(i, r)| r.unwrap_or(i))
                .collect(),
        }
    }

    /// The finding `caused_by` of finding `i` names, where it resolves.
    pub fn cause_of(&self, i: usize) -> Option<usize> {
        self.cause.get(i).copied().flatten()
    }

    /// The root of finding `i`'s chain of causes (`i` itself where it has none).
    pub fn root_of(&self, i: usize) -> usize {
        self.root.get(i).copied().unwrap_or(i)
    }

    /// Whether another finding's cause explains finding `i`.
    pub fn is_consequence(&self, i: usize) -> bool {
        self.root_of(i) != i
    }

    /// The problems counted as causes: each root problem once, with the worst status of it
    /// and of the findings it explains (a warning that causes a failure is a failure).
    pub fn problems(&self, findings: &[Finding]) -> Vec<(usize, Status)> {
        let mut worst: Vec<Option<Status>> = vec![None; findings.len()];
        for (i, f) in findings.iter().enumerate() {
            if is_problem(f.status) {
                let r = self.root_of(i);
                let w = &mut worst[r];
                *w = Some(w.map_or(f.status, |s| s.max(f.status)));
            }
        }
        worst
            .into_iter()
            .enumerate()
            .filter_map(|(i, s)| s.map(|s| (i, s)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(bus: &str) -> Finding {
        Finding::fail("gpu.driver-binding", format!("{bus} is bound to nouveau"))
            .with("pci_bus_id", format!("0000:{bus}"))
    }

    #[test]
    fn a_reference_resolves_to_the_problem_it_names() {
        let f = vec![
            Finding::fail("gpu.present", "00:07.0 is not listed")
                .caused_by(Cause::device("gpu.driver-binding", "00:07.0")),
            binding("00:06.0"),
            binding("00:07.0"),
            Finding::fail("kernel.modules", "nouveau is loaded")
                .caused_by(Cause::check("gpu.driver-binding")),
        ];
        let c = Causes::of(&f);
        // The address picks the device; without one, the first problem of the check.
        assert_eq!(c.cause_of(0), Some(2));
        assert_eq!(c.cause_of(3), Some(1));
        assert_eq!((c.root_of(0), c.root_of(1), c.root_of(3)), (2, 1, 1));
        assert!(c.is_consequence(0) && !c.is_consequence(2));
        assert_eq!(
            c.problems(&f),
            vec![(1, Status::Fail), (2, Status::Fail)],
            "two causes, not four problems"
        );
    }

    #[test]
    fn a_reference_to_nothing_or_to_a_finding_that_passed_leaves_the_finding_alone() {
        let f = vec![
            Finding::fail("gpu.present", "not listed")
                .caused_by(Cause::check("gpu.driver-binding")),
            Finding::pass("gpu.driver-binding", "bound to nvidia"),
            Finding::warn("nvlink.status", "pairs").caused_by(Cause::gpu("nvlink.status", 3)),
            Finding::fail("nvlink.status", "fabric").gpu(2),
            Finding::warn("cuda.driver", "old").caused_by(Cause::device("gpu.present", "0:1.0")),
            Finding::fail("gpu.present", "x").with("pci_bus_id", "0000:00:07.0"),
        ];
        let c = Causes::of(&f);
        assert_eq!(c.cause_of(0), None, "the cause passed: not a problem");
        assert_eq!(c.cause_of(2), None, "no finding of GPU 3");
        assert_eq!(c.cause_of(4), None, "another device");
        assert_eq!(c.problems(&f).len(), 5);
    }

    #[test]
    fn chains_end_at_their_root_and_cycles_break() {
        let f = vec![
            Finding::warn("a.x", "1").caused_by(Cause::check("b.x")),
            Finding::fail("b.x", "2").caused_by(Cause::check("c.x")),
            Finding::warn("c.x", "3"),
            Finding::fail("d.x", "4").caused_by(Cause::check("e.x")),
            Finding::fail("e.x", "5").caused_by(Cause::check("d.x")),
            Finding::fail("f.x", "self").caused_by(Cause::check("f.x")),
        ];
        let c = Causes::of(&f);
        assert_eq!((c.root_of(0), c.root_of(1), c.root_of(2)), (2, 2, 2));
        // d -> e -> d: each stands alone, and so does a finding naming its own check.
        assert_eq!((c.root_of(3), c.root_of(4), c.root_of(5)), (3, 4, 5));
        // The warning at the root causes a failure: one problem, failed.
        assert_eq!(
            c.problems(&f),
            vec![
                (2, Status::Fail),
                (3, Status::Fail),
                (4, Status::Fail),
                (5, Status::Fail)
            ]
        );
    }

    #[test]
    fn the_root_without_a_cause_of_its_own_is_preferred() {
        let f = vec![
            Finding::fail("clocks.throttle", "hw slowdown")
                .gpu(1)
                .caused_by(Cause::gpu("clocks.throttle", 1)),
            Finding::fail("clocks.throttle", "thermal").gpu(1),
            Finding::fail("clocks.throttle", "thermal").gpu(0),
        ];
        let c = Causes::of(&f);
        assert_eq!(c.cause_of(0), Some(1));
        assert_eq!(c.cause_of(1), None);
    }

    #[test]
    fn a_reference_takes_the_first_finding_without_a_cause_of_its_own() {
        // Two problems of one check and GPU, the first explained by another: a third
        // finding naming them is explained by the second, which is its own cause.
        let f = vec![
            Finding::fail("x.y", "explained")
                .gpu(1)
                .caused_by(Cause::check("z.z")),
            Finding::fail("x.y", "its own").gpu(1),
            Finding::warn("a.b", "names x.y").caused_by(Cause::gpu("x.y", 1)),
            Finding::fail("z.z", "the root"),
        ];
        let c = Causes::of(&f);
        assert_eq!(c.cause_of(2), Some(1));
        assert_eq!(c.cause_of(0), Some(3));
    }

    #[test]
    fn bus_ids_match_with_or_without_the_domain() {
        assert!(same_bus_id("0000:00:07.0", "00:07.0"));
        assert!(same_bus_id("0000:3B:00.0", "0000:3b:00.0"));
        assert!(!same_bus_id("0000:00:07.0", "0000:00:06.0"));
        assert!(!same_bus_id("0001:00:07.0", "0000:01:07.0"));
        assert!(!same_bus_id("0001:00:07.0", "00:07.0"));
        assert!(same_bus_id("00000000:00:07.0", "00:07.0"));
    }

    #[test]
    fn many_findings_of_one_check_naming_it_resolve_in_linear_time() {
        // 200,000 machine findings of one check, each naming that check: every one resolves
        // to the first (the second for the first), found without a scan.
        let f: Vec<Finding> = (0..200_000)
            .map(|_| Finding::warn("x.y", "n").caused_by(Cause::check("x.y")))
            .collect();
        let c = Causes::of(&f);
        assert_eq!(
            (c.cause_of(0), c.cause_of(1), c.cause_of(7)),
            (Some(1), Some(0), Some(0))
        );
        // 0 and 1 name each other: a cycle, each its own root; the rest end at 0.
        assert_eq!((c.root_of(0), c.root_of(1), c.root_of(199_999)), (0, 1, 0));
    }

    #[test]
    fn many_findings_resolve_in_linear_time() {
        // 200,000 findings each naming the one before: resolved at once (a quadratic
        // resolution would take minutes).
        let mut f: Vec<Finding> = (0..200_000u32)
            .map(|i| Finding::fail("x.y", "n").gpu(i))
            .collect();
        for (i, x) in f.iter_mut().enumerate().skip(1) {
            let prev = u32::try_from(i - 1).unwrap();
            x.caused_by = Some(Cause::gpu("x.y", prev));
        }
        let c = Causes::of(&f);
        assert_eq!(c.root_of(199_999), 0);
        assert_eq!(c.problems(&f), vec![(0, Status::Fail)]);
    }
}
