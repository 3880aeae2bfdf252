//! The check catalog: every check, registered once with its stable id, title and documentation.
//!
//! A check is a pure function of the facts and the policy. It never touches the machine, so
//! every check is tested from facts built in a test or read from a snapshot. Checks about GPUs
//! report one finding per GPU (passing ones included); every check reports at least one
//! finding, `skip` with the reason where it could not run.

mod common;
mod cuda;
mod gpu;
pub mod measured;
mod memory;
mod nvlink;
mod os;
mod pcie;
mod power;

use crate::facts::Facts;
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use std::panic::{catch_unwind, AssertUnwindSafe};

mod container;
mod hostcommon;
mod hostenv;
mod network;
mod stack;
mod storage;

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

#[derive(Clone, Copy)]
pub struct Check {
    pub id: &'static str,
    /// One line for `gpuaudit checks`.
    pub title: &'static str,
    pub kind: CheckKind,
    pub doc: CheckDoc,
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

/// Every registered check, in catalog order.
pub fn all() -> Vec<&'static Check> {
    let areas: &[&'static [Check]] = &[
        gpu::CHECKS,
        pcie::CHECKS,
        power::CHECKS,
        nvlink::CHECKS,
        cuda::CHECKS,
        os::CHECKS,
        memory::CHECKS,
        stack::CHECKS,
        container::CHECKS,
        storage::CHECKS,
        network::CHECKS,
        hostenv::CHECKS,
        measured::CHECKS,
    ];
    let mut checks: Vec<&'static Check> = areas.iter().flat_map(|a| a.iter()).collect();
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
