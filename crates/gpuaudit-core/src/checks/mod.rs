//! The check catalog: every check, one file each (`checks/<area>/<name>.rs`, named from its
//! id), registered once with its stable id, title and documentation.
//!
//! A check is a pure function of the facts and the policy. It never touches the machine, so
//! every check is tested from facts built in a test or read from a snapshot. Checks about GPUs
//! report one finding per GPU (passing ones included); every check reports at least one
//! finding, `skip` with the reason where it could not run.

pub mod clocks;
pub mod compute;
pub mod container;
pub mod cuda;
pub mod env;
pub mod gpu;
pub mod health;
pub mod host;
pub mod kernel;
pub mod memory;
pub mod nccl;
pub mod net;
pub mod nvlink;
pub mod os;
pub mod p2p;
pub mod pcie;
pub mod power;
pub mod security;
pub mod stability;
pub mod storage;
pub mod workload;

mod causes;
mod common;
pub mod judge;
#[cfg(test)]
mod profiles;
pub mod registry;

use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::{Policy, Profile};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What `gpuaudit explain ID` prints.
#[derive(Clone, Copy, Debug)]
pub struct CheckDoc {
    /// What the check looks at.
    pub what: &'static str,
    /// Why it matters: what it costs when wrong.
    pub why: &'static str,
    /// How to verify it by hand.
    pub verify: &'static str,
    /// How to fix it.
    pub fix: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckKind {
    /// Judged from facts alone: runs on snapshots too.
    Facts,
    /// Needs a measurement on the live machine: `skip` on a snapshot or a facts-only audit.
    Measured,
}

/// What a workload profile (`--profile`) changes in a check's verdict; `gpuaudit explain`
/// prints them.
#[derive(Clone, Copy, Debug)]
pub struct ProfileEffect {
    pub profile: Profile,
    /// One sentence: what changes under this profile.
    pub effect: &'static str,
}

#[derive(Clone, Copy)]
pub struct Check {
    pub id: &'static str,
    /// One line for `gpuaudit checks`.
    pub title: &'static str,
    /// What it looks at, longer than the title: the row of the catalog table in
    /// docs/DESIGN.md, which is generated from these.
    pub looks_at: &'static str,
    pub kind: CheckKind,
    pub doc: CheckDoc,
    /// How the profiles change the verdict; empty where no profile does.
    pub profiles: &'static [ProfileEffect],
    pub run: fn(&Facts, &Policy) -> Vec<Finding>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("id", &self.id).finish()
    }
}

/// Every registered check, in catalog order ([`registry::ALL`]).
pub fn all() -> &'static [&'static Check] {
    registry::ALL
}

pub fn find(id: &str) -> Option<&'static Check> {
    all().iter().copied().find(|c| c.id == id)
}

/// Run every check. A check that returns nothing, or panics (a bug), still appears: as `skip`
/// with the reason, so a report is complete by construction.
pub fn run_all(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    all()
        .iter()
        .flat_map(|check| run_one(check, facts, policy))
        .collect()
}

pub fn run_one(check: &Check, facts: &Facts, policy: &Policy) -> Vec<Finding> {
    match catch_unwind(AssertUnwindSafe(|| (check.run)(facts, policy))) {
        Ok(findings) if findings.is_empty() => {
            vec![Finding::skip(check.id, "nothing to check here")]
        }
        Ok(mut findings) => {
            for f in &mut findings {
                debug_assert_eq!(f.check, check.id, "a check reported under another id");
                f.check = check.id.to_string();
            }
            findings
        }
        Err(_) => vec![Finding::new(
            check.id,
            Status::Skip,
            "internal error in this check (a bug in gpuaudit; please report it with the snapshot)",
        )],
    }
}

#[cfg(test)]
mod tests {
    /// Every model of the spec database, Kepler to Blackwell, with its figures or without
    /// them, goes through every check without a check panicking (a panic is reported as an
    /// internal error), and cuda.driver judges the R580 test driver by the model's
    /// architecture: it drives everything but Kepler (last branch R470).
    #[test]
    fn every_model_of_the_database_goes_through_every_check() {
        use crate::testing::Machine;
        for spec in &crate::spec::SpecDb::embedded().gpus {
            let facts = Machine::healthy(&spec.key, 2).build();
            let findings = super::run_all(&facts, &super::Policy::default());
            for f in &findings {
                assert!(
                    !f.message.contains("internal error"),
                    "{}: {} panicked",
                    spec.key,
                    f.check
                );
            }
            let driver: Vec<_> = findings
                .iter()
                .filter(|f| f.check == "cuda.driver")
                .map(|f| f.status)
                .collect();
            let expected = if spec.architecture == "Kepler" {
                super::Status::Fail
            } else {
                super::Status::Pass
            };
            assert_eq!(driver, vec![expected], "{}", spec.key);
        }
    }

    #[test]
    fn profile_effects_name_a_workload_profile_once_and_say_what_changes() {
        for c in super::all() {
            let mut seen = Vec::new();
            for p in c.profiles {
                assert_ne!(p.profile, super::Profile::General, "{}", c.id);
                assert!(!seen.contains(&p.profile), "{}: {} twice", c.id, p.profile);
                seen.push(p.profile);
                assert!(
                    p.effect.len() > 30 && p.effect.ends_with('.'),
                    "{}: '{}' is not a sentence",
                    c.id,
                    p.effect
                );
            }
        }
    }
}
