//! What the memory group measured: device memory bandwidth, every kernel and launch shape.

use crate::figures::common::Verify;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryBandwidth {
    /// Size of each buffer.
    pub buffer_bytes: u64,
    /// gpuaudit's copy kernels, bytes read + written per second: the best launch whose output
    /// verified ([`best_verified`]); `None` when none did (the failures are in `verify`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_gbps: Option<f64>,
    /// `cuMemcpyDtoDAsync` within the GPU, bytes read + written per second; `None` when not
    /// measured or its copy did not verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcpy_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_gbps: Option<f64>,
    /// a = b + s·c over f32, 2 reads + 1 write per element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triad_gbps: Option<f64>,
    /// a = b + c over f32 (BabelStream's Add), 2 reads + 1 write per element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_gbps: Option<f64>,
    /// Every kernel and launch configuration tried, each with whether its output verified.
    #[serde(default)]
    pub sweep: Vec<KernelPoint>,
    /// One entry per kernel (and the memcpy): its output compared after every launch shape.
    #[serde(default)]
    pub verify: Vec<Verify>,
    /// e.g. "buffers only 3x the L2: figures may be inflated".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl MemoryBandwidth {
    /// The device copy figure: the better of the verified copy kernel and memcpy figures;
    /// `None` when neither verified.
    pub fn best_copy_gbps(&self) -> Option<f64> {
        match (self.copy_gbps, self.memcpy_gbps) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }
}

/// The copy kernels' names in [`KernelPoint::kernel`]: the 16-byte grid-stride copy, the same
/// with streaming (evict-first) stores, the eight-words-per-thread tile, and the flat copy (one
/// 16-byte vector per thread, a grid covering the array, as BabelStream's).
pub const COPY_KERNELS: [&str; 4] = ["copy", "copy_cs", "copy_tile8", "copy_flat"];
/// The triad kernels: grid-stride and flat.
pub const TRIAD_KERNELS: [&str; 2] = ["triad", "triad_flat"];
/// The add kernels (a = b + c): grid-stride and flat.
pub const ADD_KERNELS: [&str; 2] = ["add", "add_flat"];
/// The read kernel (XOR reduction, grid-stride).
pub const READ_KERNELS: [&str; 1] = ["read"];
/// The write kernel (pattern stores, grid-stride).
pub const WRITE_KERNELS: [&str; 1] = ["write"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelPoint {
    /// "read", "write", "copy", "copy_cs", "copy_tile8", "triad".
    pub kernel: String,
    pub blocks: u32,
    pub threads: u32,
    pub gbps: f64,
    /// The output of this launch shape was checked and right. A point that was not (or was
    /// measured before points were checked one by one) gives no figure.
    #[serde(default)]
    pub verified: bool,
}

/// The best figure among the points of `kernels` whose output verified; `None` when none did
/// (or none was measured). A fast launch whose output was wrong is never the figure.
pub fn best_verified(points: &[KernelPoint], kernels: &[&str]) -> Option<f64> {
    best_verified_point(points, kernels).map(|p| p.gbps)
}

/// The launch that gave [`best_verified`]'s figure (its kernel and shape, for the method).
pub fn best_verified_point<'a>(
    points: &'a [KernelPoint],
    kernels: &[&str],
) -> Option<&'a KernelPoint> {
    points
        .iter()
        .filter(|p| p.verified && kernels.contains(&p.kernel.as_str()) && p.gbps.is_finite())
        .max_by(|a, b| a.gbps.total_cmp(&b.gbps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(kernel: &str, gbps: f64, verified: bool) -> KernelPoint {
        KernelPoint {
            kernel: kernel.into(),
            blocks: 264,
            threads: 256,
            gbps,
            verified,
        }
    }

    /// Defect 12: the best of three copy kernels was reported while only the last one's
    /// output was checked. A figure comes only from a launch whose output verified.
    #[test]
    fn the_best_figure_is_the_best_verified_one() {
        let sweep = vec![
            point("copy", 3900.0, true),
            point("copy_cs", 4100.0, false),
            point("copy_tile8", 3950.0, true),
            point("read", 4500.0, true),
            point("write", 4400.0, false),
        ];
        assert_eq!(best_verified(&sweep, &COPY_KERNELS), Some(3950.0));
        assert_eq!(best_verified(&sweep, &["read"]), Some(4500.0));
        assert_eq!(best_verified(&sweep, &["write"]), None);
        assert_eq!(best_verified(&sweep, &["triad"]), None);
        assert_eq!(
            best_verified(&[point("copy", f64::NAN, true)], &["copy"]),
            None
        );
        // An old report without the per-point flag gives no figure from its points.
        let old: KernelPoint =
            serde_json::from_str(r#"{"kernel":"copy","blocks":1,"threads":1,"gbps":1.0}"#).unwrap();
        assert!(!old.verified);
    }

    #[test]
    fn the_best_verified_point_names_its_kernel_and_shape() {
        let pt = |kernel: &str, blocks, gbps, verified| KernelPoint {
            kernel: kernel.into(),
            blocks,
            threads: 256,
            gbps,
            verified,
        };
        let sweep = vec![
            pt("triad", 528, 4110.0, true),
            pt("triad_flat", 1 << 20, 4386.0, true),
            // Faster but wrong: never the figure.
            pt("triad_flat", 1 << 19, 4500.0, false),
            pt("add_flat", 1 << 20, 4390.0, true),
            pt("copy_flat", 1 << 20, f64::NAN, true),
        ];
        let best = best_verified_point(&sweep, &TRIAD_KERNELS).unwrap();
        assert_eq!((best.kernel.as_str(), best.blocks), ("triad_flat", 1 << 20));
        assert_eq!(best_verified(&sweep, &TRIAD_KERNELS), Some(4386.0));
        assert_eq!(best_verified(&sweep, &ADD_KERNELS), Some(4390.0));
        // A figure that is not finite is no figure.
        assert_eq!(best_verified(&sweep, &COPY_KERNELS), None);
        assert_eq!(best_verified_point(&sweep, &READ_KERNELS), None);
        assert!(COPY_KERNELS.contains(&"copy_flat"));
    }

    #[test]
    fn the_copy_figure_is_the_better_verified_one() {
        let mut m = MemoryBandwidth {
            buffer_bytes: 1 << 30,
            copy_gbps: Some(3980.0),
            memcpy_gbps: Some(4290.0),
            read_gbps: None,
            write_gbps: None,
            triad_gbps: None,
            add_gbps: None,
            sweep: vec![],
            verify: vec![],
            note: None,
        };
        assert_eq!(m.best_copy_gbps(), Some(4290.0));
        m.memcpy_gbps = None;
        assert_eq!(m.best_copy_gbps(), Some(3980.0));
        m.copy_gbps = None;
        assert_eq!(m.best_copy_gbps(), None);
        m.memcpy_gbps = Some(4290.0);
        assert_eq!(m.best_copy_gbps(), Some(4290.0));
        m.copy_gbps = Some(4300.0);
        assert_eq!(m.best_copy_gbps(), Some(4300.0));
        // A report of the earlier shape (a bare number) still reads.
        let j = serde_json::json!({"buffer_bytes": 1, "copy_gbps": 12.5});
        let back: MemoryBandwidth = serde_json::from_value(j).unwrap();
        assert_eq!(back.copy_gbps, Some(12.5));
    }
}
