//! The report's `series`: the measured curves behind the headline figures, for the charts of
//! the HTML report (and any script that wants to draw its own): host-copy bandwidth against
//! transfer size, and the burn's timeline. `measurements` keeps one figure per curve (its
//! largest size, its median); `series` keeps every point.

use crate::facts::{Facts, TelemetrySample};
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Series {
    /// One curve per GPU, direction and kind of host memory; empty where nothing was copied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_copy: Vec<CopyCurve>,
    /// One timeline per GPU that burned; empty where no burn ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub burn: Vec<BurnTimeline>,
}

impl Series {
    pub fn is_empty(&self) -> bool {
        self.host_copy.is_empty() && self.burn.is_empty()
    }
}

/// Host↔device copy bandwidth of one GPU against the size of the copy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CopyCurve {
    pub gpu: u32,
    /// "h2d" or "d2h".
    pub direction: String,
    /// "pinned" or "pageable".
    pub host_memory: String,
    /// By size, smallest first.
    pub points: Vec<SizePoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizePoint {
    pub size_bytes: u64,
    /// Median over the repeats, GB/s.
    pub gbps: f64,
}

/// One GPU during the burn: TFLOPS per window and NVML's samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BurnTimeline {
    pub gpu: u32,
    /// How long the burn ran, seconds.
    pub seconds: f64,
    /// TFLOPS of each window of about a second, in order (`seconds / len` apart).
    pub tflops: Vec<f64>,
    /// The sampling interval NVML was asked for, ms.
    pub interval_ms: Option<u32>,
    /// Clock, power, temperature and clock-event reasons, in order; empty where NVML was not
    /// sampled (the reason is `samples_unavailable`).
    pub samples: Vec<TelemetrySample>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_unavailable: Option<String>,
}

/// The series of the measured facts.
pub fn series(facts: &Facts) -> Series {
    let m = &facts.measured;
    let mut host_copy = Vec::new();
    if let Reading::Value(p) = &m.pcie {
        for g in &p.per_gpu {
            let Some(v) = g.result.value() else { continue };
            let mut curves: Vec<CopyCurve> = Vec::new();
            for pt in &v.points {
                let (dir, mem) = (pt.direction.label(), pt.host_memory.label());
                let point = SizePoint {
                    size_bytes: pt.size_bytes,
                    gbps: pt.gbps,
                };
                match curves
                    .iter_mut()
                    .find(|c| c.direction == dir && c.host_memory == mem)
                {
                    Some(c) => c.points.push(point),
                    None => curves.push(CopyCurve {
                        gpu: g.gpu,
                        direction: dir.into(),
                        host_memory: mem.into(),
                        points: vec![point],
                    }),
                }
            }
            for c in &mut curves {
                c.points.sort_by_key(|p| p.size_bytes);
            }
            host_copy.extend(curves);
        }
    }
    let mut burn = Vec::new();
    if let Reading::Value(b) = &m.burn {
        for g in &b.per_gpu {
            let Some(v) = g.result.value() else { continue };
            let (interval_ms, samples, samples_unavailable) = match &v.telemetry {
                Reading::Value(t) => (Some(t.interval_ms), t.series.clone(), None),
                Reading::Unavailable(r) => (None, Vec::new(), Some(r.clone())),
            };
            burn.push(BurnTimeline {
                gpu: g.gpu,
                seconds: b.seconds,
                tflops: v.tflops.clone(),
                interval_ms,
                samples,
                samples_unavailable,
            });
        }
    }
    Series { host_copy, burn }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{Burn, CopyPoint, Direction, GemmDtype, HostMemory, OnGpu, PcieBandwidth};
    use crate::testing::measured::{burn_gpu, burn_series, pcie_gpu};
    use crate::testing::Machine;
    use crate::units::{GIB, MIB};

    #[test]
    fn curves_by_direction_and_memory_sorted_by_size() {
        let mut g = pcie_gpu(55.0, 54.0);
        g.points.insert(
            0,
            CopyPoint {
                direction: Direction::H2d,
                host_memory: HostMemory::Pinned,
                size_bytes: MIB,
                gbps: 20.0,
                repeats: 5,
            },
        );
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                m.pcie = Reading::Value(PcieBandwidth {
                    per_gpu: vec![
                        OnGpu::new(0, Reading::Value(g)),
                        OnGpu::new(1, Reading::unavailable("busy")),
                    ],
                    all_at_once: Reading::unavailable("one GPU"),
                });
            })
            .build();
        let s = series(&f);
        // pinned h2d, pinned d2h, pageable h2d of GPU 0; GPU 1 was not measured.
        assert_eq!(s.host_copy.len(), 3);
        let h2d = &s.host_copy[0];
        assert_eq!(
            (h2d.gpu, &*h2d.direction, &*h2d.host_memory),
            (0, "h2d", "pinned")
        );
        let sizes: Vec<u64> = h2d.points.iter().map(|p| p.size_bytes).collect();
        assert_eq!(sizes, vec![MIB, GIB]);
        assert!(s.burn.is_empty());
    }

    #[test]
    fn burn_timeline_keeps_every_sample_or_says_why_not() {
        let mut with = burn_gpu(700.0, "x", vec![]);
        if let Reading::Value(t) = &mut with.telemetry {
            t.series = burn_series(10, None);
        }
        let mut without = burn_gpu(700.0, "x", vec![]);
        without.telemetry = Reading::unavailable("NVML not loaded");
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .measured(|m| {
                m.burn = Reading::Value(Burn {
                    seconds: 10.0,
                    dtype: GemmDtype::Bf16,
                    size: 8192,
                    per_gpu: vec![
                        OnGpu::new(0, Reading::Value(with)),
                        OnGpu::new(1, Reading::Value(without)),
                    ],
                });
            })
            .build();
        let s = series(&f);
        assert_eq!(s.burn.len(), 2);
        assert_eq!(s.burn[0].samples.len(), 50);
        assert_eq!(s.burn[0].interval_ms, Some(200));
        assert_eq!(s.burn[0].tflops.len(), 60);
        assert!(s.burn[1].samples.is_empty());
        assert_eq!(
            s.burn[1].samples_unavailable.as_deref(),
            Some("NVML not loaded")
        );
        // A snapshot audit has no series, and the JSON leaves it empty.
        let none = series(&Machine::healthy("h200-sxm-141gb", 2).build());
        assert!(none.is_empty());
        assert_eq!(serde_json::to_string(&none).unwrap(), "{}");
    }
}
