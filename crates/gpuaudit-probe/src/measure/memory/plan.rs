//! Device memory's plan: the kernels, their launch shapes, the buffer, how the GPUs are taken.

use crate::measure::budget::Budget;
use crate::measure::gate::{Gate, GpuOrder, Step};
use crate::measure::sizes::GIB;
use crate::measure::GpuGroup;
use serde::{Deserialize, Serialize};

/// A kernel launch shape for the bandwidth kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchShape {
    pub blocks_per_sm: u32,
    pub threads: u32,
}

impl LaunchShape {
    /// "4x512" (blocks per SM x threads per block).
    pub fn parse(s: &str) -> Option<LaunchShape> {
        let (b, t) = s.trim().split_once(['x', 'X'])?;
        let shape = LaunchShape {
            blocks_per_sm: b.trim().parse().ok()?,
            threads: t.trim().parse().ok()?,
        };
        let ok = (1..=64).contains(&shape.blocks_per_sm)
            && (32..=1024).contains(&shape.threads)
            && shape.threads % 32 == 0;
        ok.then_some(shape)
    }

    /// A comma-separated list, e.g. `GPUAUDIT_MEMBW_LAUNCH=4x512,8x256`.
    pub fn parse_list(s: &str) -> Option<Vec<LaunchShape>> {
        let v: Option<Vec<LaunchShape>> = s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(LaunchShape::parse)
            .collect();
        v.filter(|v| !v.is_empty())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryParams {
    /// Upper bound of each buffer; the child sizes down from free memory.
    pub max_buffer_bytes: u64,
    /// Repeats per kernel and shape (median taken).
    pub repeats: u32,
    pub shapes: Vec<LaunchShape>,
    /// The read kernel's shapes: `shapes` and at least one of 8 or more blocks per SM (the
    /// grid-stride read needs that many in flight to reach HBM's rate on an H200: 4451-4499
    /// GB/s at 8x256 against 3900 at 4 blocks per SM).
    #[serde(default)]
    pub read_shapes: Vec<LaunchShape>,
    /// Threads per block of the flat kernels (one 16-byte vector per thread, a grid covering
    /// the array), each tried; empty: no flat kernel.
    #[serde(default)]
    pub flat_threads: Vec<u32>,
    /// Also read, write, triad and add (the copy kernels and memcpy always run).
    pub all_kernels: bool,
    /// Both copy variants (default caching and streaming hints).
    pub both_copy_variants: bool,
    /// Every GPU at once (each HBM is its own: the figures are those of one GPU alone).
    #[serde(default)]
    pub gpus_at_once: bool,
    pub budget: Budget,
}

/// The grid-stride read's fewest blocks per SM that reach HBM's rate (measured on an H200).
pub const READ_MIN_BLOCKS_PER_SM: u32 = 8;

/// The read kernel's launch shapes: `shapes`, plus 8x256 when none of them has
/// [`READ_MIN_BLOCKS_PER_SM`] blocks per SM.
pub fn read_shapes(shapes: &[LaunchShape]) -> Vec<LaunchShape> {
    let mut v = shapes.to_vec();
    if !v.iter().any(|s| s.blocks_per_sm >= READ_MIN_BLOCKS_PER_SM) {
        v.push(LaunchShape {
            blocks_per_sm: READ_MIN_BLOCKS_PER_SM,
            threads: 256,
        });
    }
    v
}

/// The group's step: its params, or why it does not run (the gate's reasons first, then its
/// own).
pub fn plan(gate: &Gate) -> Step<MemoryParams> {
    if let Some(why) = gate.closed(GpuGroup::Memory) {
        return Step::Skip(why);
    }
    let (n, full) = (gate.gpu_count(), gate.full());
    let at_once = gate.order() == GpuOrder::AllAtOnce;
    let default_shapes = if full {
        vec![
            LaunchShape {
                blocks_per_sm: 4,
                threads: 512,
            },
            LaunchShape {
                blocks_per_sm: 8,
                threads: 256,
            },
            LaunchShape {
                blocks_per_sm: 2,
                threads: 1024,
            },
            LaunchShape {
                blocks_per_sm: 16,
                threads: 128,
            },
        ]
    } else {
        vec![LaunchShape {
            blocks_per_sm: 4,
            threads: 512,
        }]
    };
    let shapes = gate.opts.memory_launch.clone().unwrap_or(default_shapes);
    let read_shapes = read_shapes(&shapes);
    // The flat kernels: 256 threads was the best flat copy on an H200 (4291 GB/s against 4133
    // at 1024), the triad was as fast at 256 and 1024. The quick audit tries the flat copy at
    // 256 only (one more launch, ~10 ms).
    let flat_threads = if full {
        vec![256, 512, 1024]
    } else {
        vec![256]
    };
    let est_per_gpu = if full {
        400 + 60 * (shapes.len() as u64 * 6 + flat_threads.len() as u64 * 3)
    } else {
        160
    };
    let est = if at_once {
        est_per_gpu + 50 * n
    } else {
        n * est_per_gpu
    };
    Step::Run(MemoryParams {
        max_buffer_bytes: if full { 4 * GIB } else { GIB },
        repeats: if full { 10 } else { 5 },
        shapes,
        read_shapes,
        flat_threads,
        all_kernels: full,
        both_copy_variants: full,
        gpus_at_once: at_once,
        budget: gate.budget(est),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_sweep_always_has_eight_blocks_per_sm() {
        let sh = |b, t| LaunchShape {
            blocks_per_sm: b,
            threads: t,
        };
        // 4 blocks per SM only: 8x256 is added.
        assert_eq!(read_shapes(&[sh(4, 512)]), vec![sh(4, 512), sh(8, 256)]);
        // Just below the minimum: added.
        assert_eq!(read_shapes(&[sh(7, 256)]), vec![sh(7, 256), sh(8, 256)]);
        // At it, or above: the shapes as they are.
        assert_eq!(read_shapes(&[sh(8, 128)]), vec![sh(8, 128)]);
        assert_eq!(
            read_shapes(&[sh(2, 1024), sh(16, 128)]),
            vec![sh(2, 1024), sh(16, 128)]
        );
        assert_eq!(read_shapes(&[]), vec![sh(8, 256)]);
    }
}
