//! The P2P matrix's plan: the pairs, the copy size fitted to the matrix, the patterns.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, Step};
use crate::measure::sizes::{GIB, MIB};
use crate::measure::GpuGroup;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pParams {
    pub size: u64,
    pub repeats: u32,
    /// Back-to-back 4-byte copies timed for the latency.
    pub latency_copies: u32,
    /// Also one-to-all and all-to-one copies from/to every GPU (nvbandwidth's patterns;
    /// `--full` and bench only).
    #[serde(default)]
    pub patterns: bool,
    pub budget: Budget,
}

/// Copies of the one-to-all and all-to-one patterns over `n` GPUs (each plus its warm-up):
/// 2n patterns of n - 1 copies, `repeats` + 1 times.
pub fn pattern_copies(n: usize, repeats: u32) -> u64 {
    if n < 2 {
        return 0;
    }
    2 * n as u64 * (n as u64 - 1) * (repeats as u64 + 1)
}

/// The ordered pairs of the P2P matrix, as positions in the list of GPUs measured: every GPU
/// to every other, n(n-1) of them.
pub fn ordered_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .collect()
}

/// The unordered pairs (a < b), each measured with copies both ways at once: n(n-1)/2.
pub fn unordered_pairs(n: usize) -> Vec<(usize, usize)> {
    (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect()
}

/// Copies of the P2P size the child makes for `n` GPUs: per ordered pair a warm-up, the timed
/// repeats and the verified one; per unordered pair a warm-up and the timed repeats, both
/// ways.
pub fn p2p_copies(n: usize, repeats: u32) -> u64 {
    let r = repeats.max(1) as u64;
    ordered_pairs(n).len() as u64 * (r + 2) + unordered_pairs(n).len() as u64 * 2 * (r + 1)
}

/// The largest power of two not above `x` (at least 1).
fn pow2_floor(x: u64) -> u64 {
    if x <= 1 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<P2pParams> {
    if let Some(why) = gate.closed(GpuGroup::P2p) {
        return Step::Skip(why);
    }
    if let Some(count) = gate.fewer_than_two() {
        return Step::Skip(format!("{count} GPU measured: GPU-to-GPU copies need two"));
    }
    let (n, full) = (gate.gpu_count(), gate.full());
    // The matrix grows as n²: 8 GPUs have 56 ordered pairs and 28 both-ways pairs, 1288
    // copies in the full plan, 28 times the 2-GPU matrix. Over NVLink (~400 GB/s) 1 GiB copies
    // would still take only ~3.5 s, but between GPUs without P2P the copies go through host
    // memory at ~10 GB/s: 1288 GiB would take over two minutes. So the size is the largest
    // power of two that keeps the copied volume under a cap (full 384 GiB: 1 GiB up to 4
    // GPUs, 256 MiB on 8; quick 48 GiB: 256 MiB up to 4 GPUs, 64 MiB on 8). 64 MiB still
    // takes 0.17 ms a copy at NVLink speed, against microseconds of start-up between
    // back-to-back copies.
    let (largest, repeats, cap) = if full {
        (GIB, 10, 384 * GIB)
    } else {
        (256 * MIB, 5, 48 * GIB)
    };
    let copies = p2p_copies(n as usize, repeats);
    let size = pow2_floor(cap / copies.max(1)).clamp(64 * MIB, largest);
    let volume = copies * size;
    let pairs = ordered_pairs(n as usize).len() as u64;
    // Peer access, syncs, verification and the 4-byte copies: ~15 ms a pair; the copies at
    // 200 GB/s (between NVLink and PCIe). The limit holds copies through host memory at
    // 10 GB/s.
    // The patterns (full only) copy n - 1 buffers for each of 2n patterns: 2 n (n - 1) copies
    // of `size` per repeat, as much again as the ordered pairs.
    let pattern_volume = if full {
        pattern_copies(n as usize, repeats) * size
    } else {
        0
    };
    let est = 200 + 15 * pairs + (volume + pattern_volume) / 200_000_000;
    Step::Run(P2pParams {
        size,
        repeats,
        latency_copies: 200,
        patterns: full,
        budget: gate.budget_at_least(est, 30 + (volume + pattern_volume) / 10_000_000_000),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_of_the_p2p_matrix() {
        assert_eq!(ordered_pairs(2), vec![(0, 1), (1, 0)]);
        assert_eq!(unordered_pairs(2), vec![(0, 1)]);
        assert!(ordered_pairs(1).is_empty() && unordered_pairs(1).is_empty());
        let o = ordered_pairs(8);
        assert_eq!(o.len(), 56);
        for i in 0..8 {
            for j in 0..8 {
                assert_eq!(o.contains(&(i, j)), i != j, "{i} -> {j}");
            }
        }
        let u = unordered_pairs(8);
        assert_eq!(u.len(), 28);
        assert!(u.iter().all(|&(a, b)| a < b && b < 8));
        // Per ordered pair: warm-up, repeats, the verified copy; per unordered pair: warm-up
        // and repeats, both ways.
        assert_eq!(p2p_copies(2, 10), 2 * 12 + 22);
        assert_eq!(p2p_copies(8, 10), 56 * 12 + 28 * 22);
        assert_eq!(p2p_copies(8, 5), 56 * 7 + 28 * 12);
    }
}
