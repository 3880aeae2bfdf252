//! What hardware can report, in one place: a reading outside these limits is a broken library
//! or a damaged file speaking, not a fact. [`filter_gpu`] turns each such reading into
//! `Unavailable("implausible value from NVML: PCIe generation 99 (...)")`, so no check judges
//! it ("PASS at gen99 x4294967295") and no report carries it as a figure.
//!
//! The limits are generous on purpose: they reject what no GPU can be, not what is merely
//! unusual.

use super::GpuFacts;
use crate::reading::Reading;
use std::fmt::Display;

/// A limit on one quantity: `ok` says whether a value is possible, `why` says what is.
pub struct Limit<T> {
    pub what: &'static str,
    pub ok: fn(T) -> bool,
    pub why: &'static str,
}

impl<T: Copy + Display> Limit<T> {
    /// `Some(v)` when possible.
    pub fn accept(&self, v: T) -> Option<T> {
        (self.ok)(v).then_some(v)
    }

    /// Why `v` is not possible, as a reading's reason; `None` when it is.
    pub fn reject(&self, v: T, source: &str) -> Option<String> {
        if (self.ok)(v) {
            None
        } else {
            Some(format!(
                "implausible value from {source}: {} {v} ({})",
                self.what, self.why
            ))
        }
    }

    /// The reading, or its value turned into the reason it is impossible.
    pub fn apply(&self, r: &mut Reading<T>, source: &str) {
        if let Reading::Value(v) = r {
            if let Some(why) = self.reject(*v, source) {
                *r = Reading::Unavailable(why);
            }
        }
    }
}

/// The most GPUs one machine can have; also the most a source is allowed to list before any
/// per-GPU memory is allocated.
pub const MAX_GPUS: u32 = 256;

pub const GPU_COUNT: Limit<u32> = Limit {
    what: "GPU count",
    ok: |n| n <= MAX_GPUS,
    why: "a machine has at most 256 GPUs",
};

pub const PCIE_GEN: Limit<u32> = Limit {
    what: "PCIe generation",
    ok: |g| (1..=6).contains(&g),
    why: "PCIe has generations 1 to 6",
};

pub const PCIE_WIDTH: Limit<u32> = Limit {
    what: "PCIe link width",
    ok: |w| matches!(w, 1 | 2 | 4 | 8 | 12 | 16 | 32),
    why: "a PCIe link is x1, x2, x4, x8, x12, x16 or x32",
};

/// Compute capability parts: 7.0 ... 12.1 today; 20 leaves room for a decade of new parts.
pub const CC_PART: Limit<u32> = Limit {
    what: "compute capability part",
    ok: |p| p <= 20,
    why: "compute capabilities are small numbers such as 9.0 or 12.1",
};

pub const POWER_W: Limit<f64> = Limit {
    what: "power (W)",
    ok: |w| w.is_finite() && (0.0..=5000.0).contains(&w),
    why: "no GPU draws or is limited to more than 5 kW",
};

pub const MEMORY_MIB: Limit<u64> = Limit {
    what: "memory (MiB)",
    ok: |m| m <= 4 << 20,
    why: "no GPU has more than 4 TiB of memory",
};

pub const CLOCK_MHZ: Limit<u32> = Limit {
    what: "clock (MHz)",
    ok: |c| c <= 10_000,
    why: "no GPU clock runs above 10 GHz",
};

/// Memory clocks are reported as the data rate's clock, far above the SM clock on GDDR parts:
/// an RTX 4090 (GDDR6X) reports 10501 MHz, an RTX PRO 6000 Blackwell (GDDR7) 14001 MHz
/// (fixtures/real/rtx-pro-6000-blackwell-maxq-r590). 40 GHz leaves room for GDDR7's faster
/// grades and nothing plausible beyond.
pub const MEMORY_CLOCK_MHZ: Limit<u32> = Limit {
    what: "memory clock (MHz)",
    ok: |c| c <= 40_000,
    why: "no GPU memory clock runs above 40 GHz",
};

/// An error or replay counter at 2^63 or more is a -1 or an uninitialised field, not a count.
pub const COUNTER: Limit<u64> = Limit {
    what: "counter",
    ok: |c| c < 1 << 63,
    why: "a counter this close to 2^64 is an error value",
};

/// The same for a counter the library reports in 32 bits (NVML's PCIe replay counter and
/// remapped rows): 2^31 and more is a -1, not a count.
pub const COUNTER_32: Limit<u32> = Limit {
    what: "counter",
    ok: |c| c < 1 << 31,
    why: "a 32-bit counter this close to 2^32 is an error value",
};

pub const TEMPERATURE_C: Limit<i32> = Limit {
    what: "temperature (°C)",
    ok: |t| (-50..=200).contains(&t),
    why: "a working GPU is between -50 and 200 °C",
};

pub const UTILIZATION_PCT: Limit<u32> = Limit {
    what: "utilization (%)",
    ok: |u| u <= 100,
    why: "utilization is a percentage",
};

/// The largest GPUs have 148 SMs (B200); 1024 leaves room.
pub const SM_COUNT: Limit<u32> = Limit {
    what: "SM count",
    ok: |n| (1..=1024).contains(&n),
    why: "a GPU has between 1 and 1024 SMs",
};

/// Every reading of one GPU held against the limits; `source` names who reported it
/// ("NVML", "nvidia-smi").
pub fn filter_gpu(g: &mut GpuFacts, source: &str) {
    let p = &mut g.pcie;
    for r in [
        &mut p.gen_current,
        &mut p.gen_max,
        &mut p.gen_max_gpu,
        &mut p.gen_max_host,
    ] {
        PCIE_GEN.apply(r, source);
    }
    for r in [&mut p.width_current, &mut p.width_max] {
        PCIE_WIDTH.apply(r, source);
    }
    COUNTER.apply(&mut p.replay_counter, source);

    if let Reading::Value(cc) = &g.compute_capability {
        let why = CC_PART
            .reject(cc.major, source)
            .or_else(|| CC_PART.reject(cc.minor, source));
        if let Some(why) = why {
            g.compute_capability =
                Reading::Unavailable(format!("{why}: {}.{}", cc.major, cc.minor));
        }
    }
    SM_COUNT.apply(&mut g.sm_count, source);

    let w = &mut g.power;
    for r in [
        &mut w.draw_w,
        &mut w.limit_w,
        &mut w.default_limit_w,
        &mut w.min_limit_w,
        &mut w.max_limit_w,
    ] {
        POWER_W.apply(r, source);
    }

    let m = &mut g.memory;
    for r in [
        &mut m.total_mib,
        &mut m.used_mib,
        &mut m.free_mib,
        &mut m.reserved_mib,
    ] {
        MEMORY_MIB.apply(r, source);
    }

    let c = &mut g.clocks;
    for r in [
        &mut c.sm_mhz,
        &mut c.sm_max_mhz,
        &mut c.app_sm_mhz,
        &mut c.default_app_sm_mhz,
    ] {
        CLOCK_MHZ.apply(r, source);
    }
    for r in [&mut c.mem_mhz, &mut c.mem_max_mhz, &mut c.app_mem_mhz] {
        MEMORY_CLOCK_MHZ.apply(r, source);
    }

    let e = &mut g.ecc;
    for r in [
        &mut e.volatile_corrected,
        &mut e.volatile_uncorrected,
        &mut e.aggregate_corrected,
        &mut e.aggregate_uncorrected,
    ] {
        COUNTER.apply(r, source);
    }
    if let Reading::Value(rp) = &g.retired_pages {
        if let Some(why) = [rp.single_bit, rp.double_bit]
            .into_iter()
            .find_map(|v| COUNTER.reject(v, source))
        {
            g.retired_pages = Reading::Unavailable(format!("{why} (retired pages)"));
        }
    }
    if let Reading::Value(rr) = &g.remapped_rows {
        if let Some(why) = [rr.correctable, rr.uncorrectable]
            .into_iter()
            .find_map(|v| COUNTER.reject(v, source))
        {
            g.remapped_rows = Reading::Unavailable(format!("{why} (remapped rows)"));
        }
    }
    TEMPERATURE_C.apply(&mut g.temperature_c, source);
    UTILIZATION_PCT.apply(&mut g.utilization_pct, source);
}

/// The GPU list of a source, held against [`GPU_COUNT`] and each GPU against the limits.
pub fn filter_gpus(gpus: Reading<Vec<GpuFacts>>, source: &str) -> Reading<Vec<GpuFacts>> {
    gpus.and_then(|mut list| {
        if let Some(why) = GPU_COUNT.reject(list.len().min(u32::MAX as usize) as u32, source) {
            return Reading::Unavailable(why);
        }
        for g in &mut list {
            filter_gpu(g, source);
        }
        Reading::Value(list)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{ComputeCapability, RemappedRows};

    fn gpu() -> GpuFacts {
        let mut g = GpuFacts::unread(0, "0000:00:06.0", "nvml", "not read");
        g.pcie.gen_current = Reading::Value(5);
        g.pcie.gen_max = Reading::Value(5);
        g.pcie.width_current = Reading::Value(16);
        g.pcie.width_max = Reading::Value(16);
        g.compute_capability = Reading::Value(ComputeCapability { major: 9, minor: 0 });
        g.power.limit_w = Reading::Value(700.0);
        g.memory.total_mib = Reading::Value(143_771);
        g.clocks.sm_max_mhz = Reading::Value(1980);
        g.ecc.aggregate_uncorrected = Reading::Value(0);
        g.temperature_c = Reading::Value(-5);
        g.sm_count = Reading::Value(132);
        g
    }

    #[test]
    fn real_values_pass_untouched() {
        let mut g = gpu();
        filter_gpu(&mut g, "NVML");
        assert_eq!(g.pcie.gen_current, Reading::Value(5));
        assert_eq!(g.pcie.width_max, Reading::Value(16));
        assert_eq!(g.power.limit_w, Reading::Value(700.0));
        assert_eq!(g.memory.total_mib, Reading::Value(143_771));
        assert_eq!(g.temperature_c, Reading::Value(-5));
        assert_eq!(g.sm_count, Reading::Value(132));
        assert!(g.compute_capability.is_value());
    }

    #[test]
    fn garbage_from_a_broken_library_becomes_a_reason() {
        let mut g = gpu();
        g.pcie.gen_current = Reading::Value(99);
        g.pcie.gen_max = Reading::Value(0);
        g.pcie.width_current = Reading::Value(u32::MAX);
        g.compute_capability = Reading::Value(ComputeCapability {
            major: 4294967291,
            minor: 2147483647,
        });
        g.power.limit_w = Reading::Value(4294967.295);
        g.power.draw_w = Reading::Value(f64::NAN);
        g.memory.total_mib = Reading::Value(u64::MAX >> 20);
        g.clocks.sm_max_mhz = Reading::Value(u32::MAX);
        g.ecc.aggregate_uncorrected = Reading::Value(u64::MAX);
        g.pcie.replay_counter = Reading::Value(1 << 63);
        g.temperature_c = Reading::Value(i32::MIN);
        g.utilization_pct = Reading::Value(101);
        g.remapped_rows = Reading::Value(RemappedRows {
            correctable: 0,
            uncorrectable: u64::MAX,
            pending: false,
            failure: false,
        });
        filter_gpu(&mut g, "NVML");
        assert_eq!(
            g.pcie.gen_current.reason(),
            Some("implausible value from NVML: PCIe generation 99 (PCIe has generations 1 to 6)")
        );
        assert!(g
            .pcie
            .gen_max
            .reason()
            .unwrap()
            .contains("PCIe generation 0"));
        assert!(g
            .pcie
            .width_current
            .reason()
            .unwrap()
            .contains("4294967295"));
        assert!(g
            .compute_capability
            .reason()
            .unwrap()
            .ends_with("4294967291.2147483647"));
        assert!(g.power.limit_w.reason().unwrap().contains("4294967.295"));
        assert!(g.power.draw_w.reason().is_some(), "NaN is no power");
        assert!(g.memory.total_mib.reason().is_some());
        assert!(g.clocks.sm_max_mhz.reason().is_some());
        assert!(g
            .ecc
            .aggregate_uncorrected
            .reason()
            .unwrap()
            .contains("18446744073709551615"));
        assert!(g.pcie.replay_counter.reason().is_some());
        assert!(g.temperature_c.reason().is_some());
        assert!(g.utilization_pct.reason().is_some());
        assert!(g.remapped_rows.reason().unwrap().contains("remapped rows"));
        // Untouched where the value is possible.
        assert_eq!(g.pcie.width_max, Reading::Value(16));
    }

    #[test]
    fn each_limit_sits_where_its_reason_says() {
        assert!(PCIE_GEN.accept(6).is_some() && PCIE_GEN.accept(7).is_none());
        assert!(PCIE_GEN.accept(1).is_some() && PCIE_GEN.accept(0).is_none());
        for w in [1, 2, 4, 8, 12, 16, 32] {
            assert!(PCIE_WIDTH.accept(w).is_some(), "x{w}");
        }
        for w in [0, 3, 6, 24, 64] {
            assert!(PCIE_WIDTH.accept(w).is_none(), "x{w}");
        }
        assert!(CC_PART.accept(20).is_some() && CC_PART.accept(21).is_none());
        assert!(POWER_W.accept(5000.0).is_some() && POWER_W.accept(5000.1).is_none());
        assert!(POWER_W.accept(-1.0).is_none() && POWER_W.accept(f64::INFINITY).is_none());
        assert!(MEMORY_MIB.accept(4 << 20).is_some() && MEMORY_MIB.accept((4 << 20) + 1).is_none());
        assert!(CLOCK_MHZ.accept(10_000).is_some() && CLOCK_MHZ.accept(10_001).is_none());
        assert!(MEMORY_CLOCK_MHZ.accept(14_001).is_some());
        assert!(
            MEMORY_CLOCK_MHZ.accept(40_000).is_some() && MEMORY_CLOCK_MHZ.accept(40_001).is_none()
        );
        assert!(COUNTER.accept((1 << 63) - 1).is_some() && COUNTER.accept(1 << 63).is_none());
        assert!(COUNTER_32.accept((1 << 31) - 1).is_some() && COUNTER_32.accept(1 << 31).is_none());
        assert!(TEMPERATURE_C.accept(-50).is_some() && TEMPERATURE_C.accept(-51).is_none());
        assert!(TEMPERATURE_C.accept(200).is_some() && TEMPERATURE_C.accept(201).is_none());
        assert!(UTILIZATION_PCT.accept(100).is_some() && UTILIZATION_PCT.accept(101).is_none());
        assert!(SM_COUNT.accept(1024).is_some() && SM_COUNT.accept(1025).is_none());
        assert!(SM_COUNT.accept(0).is_none());
        assert!(GPU_COUNT.accept(256).is_some() && GPU_COUNT.accept(257).is_none());
    }

    #[test]
    fn too_many_gpus_is_no_list() {
        let many: Vec<GpuFacts> = (0..257).map(|_| gpu()).collect();
        let r = filter_gpus(Reading::Value(many), "nvidia-smi");
        assert_eq!(
            r.reason(),
            Some(
                "implausible value from nvidia-smi: GPU count 257 (a machine has at most 256 GPUs)"
            )
        );
        let few = filter_gpus(Reading::Value(vec![gpu()]), "nvidia-smi");
        assert_eq!(few.value().map(Vec::len), Some(1));
    }
}
