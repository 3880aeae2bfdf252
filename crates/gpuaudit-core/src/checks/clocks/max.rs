//! clocks.max: the maximum and application SM clocks against the datasheet boost clock.

use crate::checks::common::{pct, per_gpu, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;

const ID: &str = "clocks.max";

/// An application SM clock below this fraction of its default (or of the maximum) was set
/// down; gpuaudit's margin, not an NVIDIA figure.
pub const APP_CLOCK_FLOOR: f64 = 0.97;
/// A maximum SM clock below this fraction of the datasheet's boost clock: a VBIOS or a clock
/// lock keeps it lower; gpuaudit's margin.
pub const MAX_CLOCK_FLOOR: f64 = 0.97;

pub const CHECK: Check = Check {
    id: ID,
    title: "Maximum and application SM clocks against the datasheet boost clock",
    looks_at: "maximum and application SM clocks against the datasheet boost clock",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The GPU's maximum SM clock and its application (target) clocks, against the \
               datasheet's boost clock.",
        why: "Application clocks set below the maximum, or a VBIOS with a lower maximum, slow \
              every kernel by the same fraction.",
        verify: "nvidia-smi -q -d CLOCK",
        fix: "The owner resets application clocks with `sudo nvidia-smi -i N -rac` (gpuaudit \
              never does); a lower maximum clock is the VBIOS: ask the provider.",
    },
    profiles: &[],
    run: clocks_max,
};

fn clocks_max(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, clocks_max_one)
}

fn clocks_max_one(g: &GpuFacts) -> Finding {
    let c = &g.clocks;
    let mut ev = Evidence::new();
    ev.insert_readings(&[
        ("sm_max_mhz", &c.sm_max_mhz),
        ("app_sm_mhz", &c.app_sm_mhz),
        ("default_app_sm_mhz", &c.default_app_sm_mhz),
        ("mem_max_mhz", &c.mem_max_mhz),
    ]);
    let spec = spec_of(g);
    let boost = spec.and_then(|s| s.boost_clock_mhz.map(|b| (s, b)));
    if let Some((_, b)) = boost {
        ev.insert("spec_boost_mhz", b);
    }
    let Some(&max) = c.sm_max_mhz.value() else {
        return Finding::skip(
            ID,
            format!(
                "{}: maximum SM clock not read: {}",
                g.label(),
                c.sm_max_mhz.reason().unwrap_or("?")
            ),
        )
        .evidence(ev);
    };
    if let Some(&app) = c.app_sm_mhz.value() {
        let reference = c.default_app_sm_mhz.value().copied().unwrap_or(max);
        if (app as f64) < reference as f64 * APP_CLOCK_FLOOR {
            return Finding::warn(
                ID,
                format!(
                    "{}: application SM clock set to {app} MHz, below its default {reference} MHz: every kernel runs up to {} slower",
                    g.label(),
                    pct((reference - app) as f64, reference as f64)
                ),
            )
            .evidence(ev)
            .fix(format!("The owner resets it with `sudo nvidia-smi -i {} -rac` (gpuaudit never changes it).", g.index));
        }
    }
    if let Some((s, b)) = boost {
        if (max as f64) < b as f64 * MAX_CLOCK_FLOOR {
            return Finding::warn(
                ID,
                format!(
                    "{}: maximum SM clock {max} MHz, below the datasheet's {b} MHz boost for the {}",
                    g.label(),
                    s.name
                ),
            )
            .evidence(ev)
            .fix("A lower maximum comes from the VBIOS or a clock lock: check `nvidia-smi -q -d CLOCK`; ask the provider.");
        }
    }
    let vs = boost
        .map(|(_, b)| format!(" (datasheet boost {b} MHz)"))
        .unwrap_or_default();
    Finding::pass(ID, format!("{}: maximum SM clock {max} MHz{vs}", g.label())).evidence(ev)
}
