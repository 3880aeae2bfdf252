//! Time: what a group is expected to take (the progress bar's length) and the hard limit the
//! parent holds it to, and what a process costs to start. Every group's plan gets its budget
//! through the gate ([`super::gate::Gate::budget`]), from its own estimate; what a group
//! fits to its time (context creation's runs, the P2P matrix's copy size, the host copies'
//! size beyond 4 GPUs) its plan decides, and how the GPUs are taken beyond 4 the gate
//! ([`super::gate::Gate::order`]).

use serde::{Deserialize, Serialize};

/// Expected run time (drives the progress bar) and hard limit of one group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub estimate_ms: u64,
    pub timeout_s: u64,
}

impl Budget {
    pub(super) fn new(estimate_ms: u64, override_s: Option<u64>) -> Budget {
        Budget::at_least(estimate_ms, override_s, 0)
    }

    /// Like [`Budget::new`], with a limit of at least `floor_s` (work whose worst case is far
    /// slower than its usual case).
    pub(super) fn at_least(estimate_ms: u64, override_s: Option<u64>, floor_s: u64) -> Budget {
        Budget {
            estimate_ms,
            timeout_s: override_s.unwrap_or((30 + estimate_ms * 4 / 1000).max(floor_s)),
        }
    }

    /// A limit of `limit_s` unless overridden (work of a length the user chose).
    pub(super) fn within(estimate_ms: u64, override_s: Option<u64>, limit_s: u64) -> Budget {
        Budget {
            estimate_ms,
            timeout_s: override_s.unwrap_or(limit_s),
        }
    }
}

/// cuInit on a machine with `gpus` GPUs, milliseconds. On the 2xH200 VM it took 100 ms with
/// one GPU visible and 326 ms (median of 10) with both; taken as linear in the GPU count,
/// which is what the planner assumes for 8 GPUs (1.7 s). Bare metal does better (an 8xV100
/// DGX: 80 ms for one GPU, 390 ms for eight), so on most machines this errs long.
pub fn cuinit_ms(gpus: u64) -> u64 {
    100 + 225 * gpus.saturating_sub(1)
}

/// A measurement child's start: process start, cuInit over the machine's `machine_gpus`,
/// then a context and the kernels on each of the `measured` GPUs (about 140 ms a GPU: the
/// primary context and first allocation took 111 ms on the H200s).
pub fn child_startup_ms(machine_gpus: u64, measured: u64) -> u64 {
    100 + cuinit_ms(machine_gpus) + 140 * measured
}

/// Limit for a child to start (cuInit, contexts, kernels loaded) before its first group.
pub fn startup_timeout_s(measured: u64) -> u64 {
    60 + 5 * measured
}
