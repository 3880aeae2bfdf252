//! clocks.max: the maximum and application SM clocks against the datasheet boost clock.

use crate::checks::common::{fraction, pct, per_gpu, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;

const ID: &str = "clocks.max";

macro_rules! app_clock_floor_pct {
    () => {
        97
    };
}
macro_rules! max_clock_floor_pct {
    () => {
        97
    };
}

/// An application SM clock below this fraction of its default (or of the maximum) was set
/// down; gpuaudit's margin, not an NVIDIA figure (the clock table steps are ~15 MHz, 1% of a
/// boost clock).
pub const APP_CLOCK_FLOOR: f64 = fraction(app_clock_floor_pct!());
/// A maximum SM clock below this fraction of the datasheet's boost clock: a VBIOS or a clock
/// lock keeps it lower; gpuaudit's margin.
pub const MAX_CLOCK_FLOOR: f64 = fraction(max_clock_floor_pct!());

pub const CHECK: Check = Check {
    id: ID,
    title: "Maximum and application SM clocks against the datasheet boost clock",
    looks_at: "maximum and application SM clocks against the datasheet boost clock",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The GPU's maximum SM clock and its application (target) clocks, against the \
             datasheet's boost clock: an application clock below ",
            app_clock_floor_pct!(),
            "% of its default warns, and so does a maximum below ",
            max_clock_floor_pct!(),
            "% of the boost clock. A maximum the driver reports as 0 MHz (vGPU guests) is not \
             a clock: skip."
        ),
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
    let max = match c.sm_max_mhz.value() {
        Some(&m) if m > 0 => m,
        // A vGPU guest reports 0 MHz: the host owns the clocks, the guest has no reading.
        Some(_) => {
            return Finding::skip(
                ID,
                format!(
                    "{}: maximum SM clock not available: the driver reports 0 MHz (a vGPU guest or a GPU that hides its clocks)",
                    g.label()
                ),
            )
            .evidence(ev)
        }
        None => {
            return Finding::skip(
                ID,
                format!(
                    "{}: maximum SM clock not read: {}",
                    g.label(),
                    c.sm_max_mhz.reason().unwrap_or("not reported")
                ),
            )
            .evidence(ev)
        }
    };
    if let Some(&app) = c.app_sm_mhz.value().filter(|a| **a > 0) {
        let (reference, of) = match c.default_app_sm_mhz.value().filter(|d| **d > 0) {
            Some(&d) => (d, "its default"),
            None => (max, "the maximum"),
        };
        if (app as f64) < reference as f64 * APP_CLOCK_FLOOR {
            return Finding::warn(
                ID,
                format!(
                    "{}: application SM clock set to {app} MHz, below {of} {reference} MHz: every kernel runs up to {} slower",
                    g.label(),
                    pct(reference.saturating_sub(app) as f64, reference as f64)
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
                    "{}: maximum SM clock {max} MHz, {} of the datasheet's {b} MHz boost for the {}",
                    g.label(),
                    pct(max as f64, b as f64),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::Machine;

    /// An H200 (boost 1980 MHz) with one change.
    fn h200(change: impl FnOnce(&mut GpuFacts)) -> Finding {
        let f = Machine::healthy("h200-sxm-141gb", 1).gpu(0, change).build();
        (CHECK.run)(&f, &Policy::default()).remove(0)
    }

    fn boost() -> u32 {
        crate::spec::SpecDb::embedded()
            .by_key("h200-sxm-141gb")
            .and_then(|s| s.boost_clock_mhz)
            .unwrap()
    }

    #[test]
    fn at_the_boost_clock_passes() {
        let x = h200(|_| {});
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message
                .contains(&format!("datasheet boost {} MHz", boost())),
            "{}",
            x.message
        );
    }

    #[test]
    fn application_clock_threshold_on_both_sides() {
        let def = boost();
        let floor = (def as f64 * APP_CLOCK_FLOOR).ceil() as u32;
        assert_eq!(
            h200(|g| g.clocks.app_sm_mhz = Reading::Value(floor)).status,
            Status::Pass
        );
        let x = h200(|g| g.clocks.app_sm_mhz = Reading::Value(floor - 1));
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(x.message.contains("below its default"), "{}", x.message);
        let x = h200(|g| g.clocks.app_sm_mhz = Reading::Value(1410));
        assert!(
            x.message.contains("every kernel runs up to 29% slower"),
            "{}",
            x.message
        );
        assert!(x.fix.as_deref().unwrap_or("").contains("-i 0 -rac"));
        // Exactly at the floor of a default (100 MHz x 97% is 97 MHz in f64): not below it.
        let at_floor = |app: u32| {
            h200(move |g| {
                g.clocks.default_app_sm_mhz = Reading::Value(100);
                g.clocks.app_sm_mhz = Reading::Value(app);
            })
        };
        assert_eq!(100.0 * APP_CLOCK_FLOOR, 97.0);
        assert_eq!(at_floor(97).status, Status::Pass);
        assert_eq!(at_floor(96).status, Status::Warn);
        // A default of 0 MHz is no default: held against the maximum.
        let x = h200(|g| {
            g.clocks.app_sm_mhz = Reading::Value(1410);
            g.clocks.default_app_sm_mhz = Reading::Value(0);
        });
        assert_eq!(x.status, Status::Warn);
        assert!(x.message.contains("below the maximum"), "{}", x.message);
        // No default application clock: held against the maximum.
        let x = h200(|g| {
            g.clocks.app_sm_mhz = Reading::Value(1410);
            g.clocks.default_app_sm_mhz = Reading::unavailable("deprecated");
        });
        assert_eq!(x.status, Status::Warn);
        assert!(x.message.contains("below the maximum"), "{}", x.message);
    }

    #[test]
    fn maximum_clock_threshold_on_both_sides() {
        let b = boost();
        let floor = (b as f64 * MAX_CLOCK_FLOOR).ceil() as u32;
        let at = |m: u32| {
            h200(move |g| {
                g.clocks.sm_max_mhz = Reading::Value(m);
                g.clocks.app_sm_mhz = Reading::unavailable("N/A");
            })
        };
        assert_eq!(at(floor).status, Status::Pass);
        let x = at(floor - 1);
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(
            x.message
                .contains(&format!("{b} MHz boost for the NVIDIA H200")),
            "{}",
            x.message
        );
        // Above the boost (a clock table maximum, RTX cards): pass.
        assert_eq!(at(b + 600).status, Status::Pass);
    }

    #[test]
    fn a_zero_or_unread_maximum_skips_with_the_reason() {
        let x = h200(|g| g.clocks.sm_max_mhz = Reading::Value(0));
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("reports 0 MHz"), "{}", x.message);
        assert!(!x.message.contains("maximum SM clock 0 MHz"));
        let x = h200(|g| g.clocks.sm_max_mhz = Reading::unavailable("N/A in a vGPU guest"));
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("N/A in a vGPU guest"), "{}", x.message);
        // A zero application clock is no setting either.
        let x = h200(|g| g.clocks.app_sm_mhz = Reading::Value(0));
        assert_eq!(x.status, Status::Pass, "{}", x.message);
    }

    #[test]
    fn a_model_without_a_boost_figure_is_judged_on_its_application_clock_only() {
        let f = Machine::healthy("rtx-3080", 1)
            .gpu(0, |g| {
                g.clocks.sm_max_mhz = Reading::Value(2100);
                g.clocks.app_sm_mhz = Reading::unavailable("N/A");
            })
            .build();
        let x = &(CHECK.run)(&f, &Policy::default())[0];
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.ends_with("maximum SM clock 2100 MHz"),
            "{}",
            x.message
        );
    }

    #[test]
    fn the_explain_text_carries_the_thresholds() {
        for t in [APP_CLOCK_FLOOR, MAX_CLOCK_FLOOR] {
            assert!(CHECK.doc.what.contains(&format!("{:.0}%", t * 100.0)));
        }
    }
}
