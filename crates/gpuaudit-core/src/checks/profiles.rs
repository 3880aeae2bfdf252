//! The profile effects a check declares are real: for every check and every profile in its
//! `profiles`, there are facts on which that profile's verdict differs from `general`'s.
//!
//! Each check with declared effects provides `#[cfg(test)] pub(crate) fn profile_examples()
//! -> Vec<(Profile, Facts)>` in its own file (facts on which the profile changes a verdict)
//! and one row in [`EXAMPLES`]. The test fails when a declared profile has no example, when
//! an example's verdict is the same under the profile as under `general` (the declaration is
//! hollow), and when an example names a profile the check does not declare (the effect is
//! real but undocumented).
//!
//! [`PENDING`] lists the checks whose effects were declared before this test existed and
//! whose owners have not added their row yet; a check leaves it when its row is added (the
//! test fails while a check is in both, or in neither).

use super::*;
use crate::finding::Status;

type Examples = fn() -> Vec<(Profile, Facts)>;

/// (check id, the check file's `profile_examples`).
const EXAMPLES: &[(&str, Examples)] = &[
    (
        "cuda.context-latency",
        cuda::context_latency::profile_examples,
    ),
    ("compute.gemm", compute::gemm::profile_examples),
    ("nccl.allreduce", nccl::allreduce::profile_examples),
    ("p2p.bandwidth", p2p::bandwidth::profile_examples),
    ("os.graphics", os::graphics::profile_examples),
    ("nvlink.status", nvlink::status::profile_examples),
];

/// Checks that declare profile effects and have no row in [`EXAMPLES`] yet (owned by the
/// helpers reworking them: they add the row and take the id out of this list).
const PENDING: &[&str] = &[
    "gpu.uniform",
    "gpu.virtualization",
    "cuda.env",
    "kernel.modules",
    "os.persistence",
    "memory.ecc",
    "net.somaxconn",
    "net.loopback",
    "net.fabric",
    "storage.mounts",
    "storage.throughput",
    "host.shm",
];

/// The verdict of a check on some facts: each finding's GPU and status, in order.
fn verdict(check: &Check, facts: &Facts, profile: Profile) -> Vec<(Option<u32>, Status)> {
    let policy = Policy {
        profile,
        ..Policy::default()
    };
    run_one(check, facts, &policy)
        .into_iter()
        .map(|f| (f.gpu, f.status))
        .collect()
}

#[test]
fn every_declared_profile_changes_a_verdict() {
    for c in all() {
        let row = EXAMPLES.iter().find(|(id, _)| *id == c.id);
        let pending = PENDING.contains(&c.id);
        match (row, pending) {
            (Some(_), true) => panic!("{}: has its examples; take it out of PENDING", c.id),
            (None, true) => {
                assert!(
                    !c.profiles.is_empty(),
                    "{}: in PENDING but declares no effect",
                    c.id
                );
                continue;
            }
            (None, false) => {
                assert!(
                    c.profiles.is_empty(),
                    "{}: declares profile effects but has no profile_examples row in \
                     checks/profiles.rs",
                    c.id
                );
                continue;
            }
            (Some(_), false) => {}
        }
        let examples = row.map(|(_, f)| f()).unwrap_or_default();
        for effect in c.profiles {
            let mine: Vec<&Facts> = examples
                .iter()
                .filter(|(p, _)| *p == effect.profile)
                .map(|(_, f)| f)
                .collect();
            assert!(
                !mine.is_empty(),
                "{}: declares an effect of --profile {} but gives no example of it",
                c.id,
                effect.profile
            );
            for facts in mine {
                let general = verdict(c, facts, Profile::General);
                let under = verdict(c, facts, effect.profile);
                assert_ne!(
                    general, under,
                    "{}: --profile {} changes nothing on its example (hollow declaration)",
                    c.id, effect.profile
                );
            }
        }
        for (p, _) in &examples {
            assert!(
                c.profiles.iter().any(|e| e.profile == *p),
                "{}: an example for --profile {p}, which its `profiles` do not declare",
                c.id
            );
        }
    }
}

#[test]
fn rows_name_registered_checks_once() {
    for (i, (id, _)) in EXAMPLES.iter().enumerate() {
        assert!(find(id).is_some(), "{id}: not a registered check");
        assert!(
            !EXAMPLES[..i].iter().any(|(o, _)| o == id),
            "{id}: two rows"
        );
    }
    for id in PENDING {
        assert!(find(id).is_some(), "{id}: not a registered check");
    }
}

/// The doc comment of each `Profile` variant in policy.rs, which the README and DESIGN repeat.
fn policy_doc(profile: Profile) -> String {
    let src = include_str!("../policy.rs");
    let variant = format!(
        "    {}{},",
        profile.as_str()[..1].to_ascii_uppercase(),
        &profile.as_str()[1..]
    );
    let lines: Vec<&str> = src.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == variant)
        .unwrap_or_else(|| panic!("policy.rs has no variant line '{variant}'"));
    let mut doc = Vec::new();
    for l in lines[..at].iter().rev() {
        match l.trim_start().strip_prefix("///") {
            Some(d) => doc.push(d.trim()),
            None if l.trim_start().starts_with("#[") => continue,
            None => break,
        }
    }
    doc.reverse();
    doc.join(" ")
}

/// What a profile changes is said in one place for the user: the policy's doc of that
/// profile names every check that declares an effect of it.
#[test]
fn the_policy_names_every_check_a_profile_changes() {
    for c in all() {
        for e in c.profiles {
            let doc = policy_doc(e.profile);
            assert!(
                doc.contains(c.id),
                "policy.rs's doc of Profile::{:?} does not name {}, which declares: {}",
                e.profile,
                c.id,
                e.effect
            );
        }
    }
    assert!(policy_doc(Profile::General).contains("ordinary severity"));
}
