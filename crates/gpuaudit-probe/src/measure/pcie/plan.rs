//! The host copies' plan: sizes, batches, the all-at-once copies and nvbandwidth's extras.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, Step};
use crate::measure::sizes::{sweep, GIB, KIB, MIB};
use crate::measure::GpuGroup;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieParams {
    pub sizes: Vec<u64>,
    pub pageable: bool,
    /// Bytes per timed batch at small sizes (a batch is one copy at the largest sizes).
    pub batch_bytes: u64,
    /// Timed batches per size (median taken).
    pub batches: u32,
    /// Size of the all-GPUs-at-once copies; `None`: not measured (one GPU).
    pub all_at_once_size: Option<u64>,
    /// Also, per GPU: both directions at once, copies by the SMs through mapped host memory,
    /// and the host <-> device latency (nvbandwidth's figures; `--full` and bench only).
    #[serde(default)]
    pub host_extras: bool,
    pub budget: Budget,
}

/// Milliseconds a GPU's host extras take (bidirectional copies at 1 GiB, SM copies, latency).
pub const HOST_EXTRAS_MS: u64 = 400;

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<PcieParams> {
    if let Some(why) = gate.closed(GpuGroup::Pcie) {
        return Step::Skip(why);
    }
    let (n, full) = (gate.gpu_count(), gate.full());
    // The quick audit copies one size per GPU, one GPU after the other (they share the host's
    // memory). Beyond 4 GPUs it copies 64 MiB instead of 256 MiB: a pinned copy still takes
    // over a millisecond at gen5 x16, against microseconds of start-up, and the pageable
    // copies, most of the time per GPU, take a quarter as long.
    let quick_size = if n > 4 { 64 * MIB } else { 256 * MIB };
    let (sizes, batches, est) = if full {
        (sweep(4 * KIB, GIB, 4, &[]), 5, 2500)
    } else {
        (vec![quick_size], 3, 30 + 320 * quick_size / (256 * MIB))
    };
    let all_at_once_size = (n >= 2).then_some(if full { GIB } else { quick_size });
    let all_est = if n >= 2 { est / 4 } else { 0 };
    // The host extras (both directions at once, SM copies, latency) take ~0.3 s a GPU at
    // 1 GiB over gen5 x16: full audit and bench only, the quick audit's 10 s stay.
    let extras_est = if full { HOST_EXTRAS_MS } else { 0 };
    Step::Run(PcieParams {
        sizes,
        pageable: true,
        batch_bytes: if full { 64 * MIB } else { quick_size },
        batches,
        all_at_once_size,
        host_extras: full,
        budget: gate.budget(n * (est + extras_est) + all_est),
    })
}
