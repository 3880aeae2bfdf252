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
pub mod stability;
pub mod storage;

mod common;
pub mod judge;

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

/// The catalog order (DESIGN.md's table). Reports list findings in this order.
pub const CATALOG: &[&str] = &[
    "gpu.present",
    "gpu.identity",
    "gpu.uniform",
    "gpu.virtualization",
    "gpu.driver-binding",
    "pcie.link",
    "pcie.bandwidth",
    "power.limit",
    "clocks.throttle",
    "clocks.max",
    "nvlink.status",
    "p2p.bandwidth",
    "nccl.allreduce",
    "cuda.driver",
    "cuda.toolkit-compat",
    "cuda.libraries",
    "cuda.framework",
    "cuda.env",
    "cuda.context-latency",
    "kernel.modules",
    "os.platform",
    "os.persistence",
    "os.numa",
    "memory.ecc",
    "memory.errors",
    "memory.bandwidth",
    "compute.gemm",
    "stability.burn",
    "net.somaxconn",
    "net.loopback",
    "net.fabric",
    "storage.mounts",
    "storage.throughput",
    "host.shm",
    "container.runtime",
    "env.jupyter",
    "env.ssh",
];

/// Every check, one file each.
const CHECKS: &[&Check] = &[
    &clocks::max::CHECK,
    &clocks::throttle::CHECK,
    &compute::gemm::CHECK,
    &container::runtime::CHECK,
    &cuda::context_latency::CHECK,
    &cuda::driver::CHECK,
    &cuda::env::CHECK,
    &cuda::framework::CHECK,
    &cuda::libraries::CHECK,
    &cuda::toolkit_compat::CHECK,
    &env::jupyter::CHECK,
    &env::ssh::CHECK,
    &gpu::driver_binding::CHECK,
    &gpu::identity::CHECK,
    &gpu::present::CHECK,
    &gpu::uniform::CHECK,
    &gpu::virtualization::CHECK,
    &host::shm::CHECK,
    &kernel::modules::CHECK,
    &memory::bandwidth::CHECK,
    &memory::ecc::CHECK,
    &memory::errors::CHECK,
    &nccl::allreduce::CHECK,
    &net::fabric::CHECK,
    &net::loopback::CHECK,
    &net::somaxconn::CHECK,
    &nvlink::status::CHECK,
    &os::numa::CHECK,
    &os::persistence::CHECK,
    &os::platform::CHECK,
    &p2p::bandwidth::CHECK,
    &pcie::bandwidth::CHECK,
    &pcie::link::CHECK,
    &power::limit::CHECK,
    &stability::burn::CHECK,
    &storage::mounts::CHECK,
    &storage::throughput::CHECK,
];

/// Every registered check, in catalog order.
pub fn all() -> Vec<&'static Check> {
    let mut checks: Vec<&'static Check> = CHECKS.to_vec();
    checks.sort_by_key(|c| {
        CATALOG
            .iter()
            .position(|id| *id == c.id)
            .unwrap_or(CATALOG.len())
    });
    checks
}

pub fn find(id: &str) -> Option<&'static Check> {
    all().into_iter().find(|c| c.id == id)
}

/// Run every check. A check that returns nothing, or panics (a bug), still appears: as `skip`
/// with the reason, so a report is complete by construction.
pub fn run_all(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    all()
        .into_iter()
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
    #[test]
    fn host_checks_are_registered_with_their_documentation() {
        for id in [
            "cuda.libraries",
            "cuda.framework",
            "cuda.env",
            "container.runtime",
            "storage.mounts",
            "storage.throughput",
            "host.shm",
            "net.somaxconn",
            "net.loopback",
            "net.fabric",
            "env.jupyter",
            "env.ssh",
        ] {
            let c = super::find(id).unwrap_or_else(|| panic!("{id} not registered"));
            assert!(super::CATALOG.contains(&id));
            for (what, text) in [
                ("what", c.doc.what),
                ("why", c.doc.why),
                ("verify", c.doc.verify),
                ("fix", c.doc.fix),
            ] {
                assert!(text.len() > 40, "{id}: {what} is too short");
                if what != "verify" {
                    assert!(
                        !text.contains("  "),
                        "{id}: {what} has a run of spaces (a broken line continuation?)"
                    );
                }
            }
        }
        let lo = super::find("net.loopback").unwrap();
        assert!(lo.doc.verify.contains("\n    c, _ = s.accept()"));
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
