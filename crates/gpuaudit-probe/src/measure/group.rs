//! The measurement groups the probe plans and runs on the GPUs.
//!
//! The list of groups is the figure catalog's ([`figures::Group`]: their order, the check
//! that judges each). The probe names its own notion, [`GpuGroup`], because it plans and runs
//! only some of them: the catalog's storage and loopback groups are measured by the host
//! checks (`host::iobench`, `host::loopback`), without a GPU, a plan or a child process. A
//! `GpuGroup` is also a word of the protocol between parent and child (`"pcie"`,
//! `"rehearse"`) and of `gpuaudit bench NAME`, which the catalog has no need of. Each maps to
//! its catalog group ([`GpuGroup::figures`]), and a test holds the two lists in step: every
//! catalog group is a `GpuGroup` or measured on the host, in the catalog's order.

use gpuaudit_core::figures;
use serde::{Deserialize, Serialize};

/// A group measured on the GPUs: one check's worth of measurements, planned by its module's
/// `plan` (`measure::<group>::plan`) and run by its `run` (in the measurement child; context
/// creation in processes of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuGroup {
    Context,
    Pcie,
    Memory,
    Gemm,
    P2p,
    Nccl,
    Burn,
    /// `gpuaudit rehearse`: the GPU stages of the training-shaped pipeline.
    Rehearse,
}

/// The catalog's groups measured on the host, not on the GPUs: they have no `GpuGroup`.
pub const HOST_GROUPS: [figures::Group; 2] = [figures::Group::Storage, figures::Group::Loopback];

impl GpuGroup {
    /// In the catalog's order ([`figures::Group::ALL`]).
    pub const ALL: [GpuGroup; 8] = [
        GpuGroup::Context,
        GpuGroup::Pcie,
        GpuGroup::Memory,
        GpuGroup::Gemm,
        GpuGroup::P2p,
        GpuGroup::Nccl,
        GpuGroup::Burn,
        GpuGroup::Rehearse,
    ];

    /// The catalog's group of these figures.
    pub fn figures(self) -> figures::Group {
        match self {
            GpuGroup::Context => figures::Group::Context,
            GpuGroup::Pcie => figures::Group::Pcie,
            GpuGroup::Memory => figures::Group::Memory,
            GpuGroup::Gemm => figures::Group::Gemm,
            GpuGroup::P2p => figures::Group::P2p,
            GpuGroup::Nccl => figures::Group::Nccl,
            GpuGroup::Burn => figures::Group::Burn,
            GpuGroup::Rehearse => figures::Group::Rehearsal,
        }
    }

    /// The name in the protocol and on `gpuaudit bench`'s command line.
    pub fn name(self) -> &'static str {
        match self {
            GpuGroup::Context => "context",
            GpuGroup::Pcie => "pcie",
            GpuGroup::Memory => "memory",
            GpuGroup::Gemm => "gemm",
            GpuGroup::P2p => "p2p",
            GpuGroup::Nccl => "nccl",
            GpuGroup::Burn => "burn",
            GpuGroup::Rehearse => "rehearse",
        }
    }

    /// The check that judges this group (the catalog's).
    pub fn check_id(self) -> &'static str {
        self.figures().check()
    }

    /// `gpuaudit bench NAME`: the group name or its check id (the rehearsal is a command of
    /// its own, `gpuaudit rehearse`).
    pub fn parse(s: &str) -> Option<GpuGroup> {
        let s = s.trim().to_ascii_lowercase();
        GpuGroup::BENCH
            .into_iter()
            .find(|g| g.name() == s || g.check_id() == s)
    }

    /// The groups `gpuaudit bench` names.
    pub const BENCH: [GpuGroup; 7] = [
        GpuGroup::Context,
        GpuGroup::Pcie,
        GpuGroup::Memory,
        GpuGroup::Gemm,
        GpuGroup::P2p,
        GpuGroup::Nccl,
        GpuGroup::Burn,
    ];

    /// Whether the group runs in the measurement child (all but context creation, which
    /// runs in processes of its own).
    pub fn in_child(self) -> bool {
        self != GpuGroup::Context
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_groups_are_the_catalogs_but_the_host_ones_in_its_order() {
        let gpu: Vec<figures::Group> = GpuGroup::ALL.iter().map(|g| g.figures()).collect();
        let catalog: Vec<figures::Group> = figures::Group::ALL
            .into_iter()
            .filter(|g| !HOST_GROUPS.contains(g))
            .collect();
        assert_eq!(gpu, catalog);
        assert!(HOST_GROUPS.iter().all(|g| figures::Group::ALL.contains(g)));
    }

    #[test]
    fn check_ids_and_protocol_names() {
        assert_eq!(GpuGroup::Rehearse.check_id(), "workload.pipeline");
        assert_eq!(GpuGroup::Gemm.check_id(), "compute.gemm");
        for g in GpuGroup::ALL {
            assert_eq!(
                serde_json::to_value(g).ok(),
                Some(serde_json::Value::String(g.name().into())),
                "{g:?}"
            );
        }
    }
}
