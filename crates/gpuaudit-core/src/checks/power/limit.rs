//! power.limit: the enforced power limit against the GPU's default and the datasheet.

use crate::checks::common::{fraction, pct, per_gpu, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;

const ID: &str = "power.limit";

// The thresholds as percent literals: the constants below and the explain text are built from
// these, so each number is written once.
macro_rules! below_default_warn_pct {
    () => {
        98
    };
}
macro_rules! below_default_fail_pct {
    () => {
        90
    };
}
macro_rules! below_datasheet_warn_pct {
    () => {
        95
    };
}
macro_rules! below_datasheet_fail_pct {
    () => {
        85
    };
}

/// The enforced limit against the GPU's own default limit. Below this fraction someone
/// lowered it (the owner or the provider); the 2% left is gpuaudit's margin for how the watts
/// are rounded, not an NVIDIA figure.
pub const BELOW_DEFAULT_WARN: f64 = fraction(below_default_warn_pct!());
/// Below this fraction of the default the cap costs sustained compute enough to fail:
/// gpuaudit's line. A GPU running dense math draws its limit, and its clocks fall with the
/// limit: 10% less power is a few percent less throughput, a 30% cut costs 10-30%.
pub const BELOW_DEFAULT_FAIL: f64 = fraction(below_default_fail_pct!());
/// The enforced limit against the datasheet's board power (the lowest configuration of a
/// configurable part): the board's default itself set low. gpuaudit's margins.
pub const BELOW_DATASHEET_WARN: f64 = fraction(below_datasheet_warn_pct!());
pub const BELOW_DATASHEET_FAIL: f64 = fraction(below_datasheet_fail_pct!());

pub const CHECK: Check = Check {
    id: ID,
    title: "Enforced power limit against the default, the maximum and the datasheet TDP",
    looks_at: "enforced power limit against default, maximum and the datasheet TDP",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The power limit the GPU enforces, against its default and maximum limit and the \
             datasheet's board power (TDP). Below ",
            below_default_warn_pct!(),
            "% of the default warns, below ",
            below_default_fail_pct!(),
            "% fails; where the default itself is below the datasheet's board power (the \
             lowest configuration of a configurable part), below ",
            below_datasheet_warn_pct!(),
            "% of it warns and below ",
            below_datasheet_fail_pct!(),
            "% fails."
        ),
        why: "Providers cap power to fit more GPUs in a rack: a GPU running dense math draws \
              its limit, so a GPU capped at 70% of its TDP loses 10-30% of its compute under \
              sustained load, with nothing on the spec sheet to show it.",
        verify: "nvidia-smi -q -d POWER\nnvidia-smi --query-gpu=index,power.limit,power.default_limit,power.max_limit --format=csv",
        fix: "The owner restores the default with `sudo nvidia-smi -i N -pl W`, W the \
              power.default_limit the query above prints (a finding gives the figure where it \
              knows it; gpuaudit never changes it); on a cloud instance the cap is the \
              provider's: ask for an uncapped host or a lower price.",
    },
    profiles: &[],
    run: limit,
};

fn limit(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, limit_one)
}

/// Fail below the fail line, warn below the warn line: the status of `value` against `of`.
fn below(value: f64, of: f64, warn: f64, fail: f64) -> Option<Status> {
    if value < of * fail {
        Some(Status::Fail)
    } else if value < of * warn {
        Some(Status::Warn)
    } else {
        None
    }
}

/// Whether the enforced limit is the GPU's default (or above it): used by clocks.throttle to
/// tell a GPU held at its default limit (expected under dense load) from a capped one.
/// `None` where neither the default nor a datasheet figure is known.
pub fn at_default(g: &GpuFacts) -> Option<bool> {
    let lim = *g.power.limit_w.value()?;
    if let Some(&def) = g.power.default_limit_w.value() {
        return Some(lim >= def * BELOW_DEFAULT_WARN);
    }
    let s = spec_of(g)?;
    let floor = s.tdp_min_w.or(s.tdp_w)?;
    Some(lim >= floor * BELOW_DATASHEET_WARN)
}

/// The command that lifts a cap, with the figure to set where gpuaudit knows it: the
/// GPU's default limit, else the datasheet's power (within the GPU's maximum limit).
fn restore_fix(g: &GpuFacts) -> String {
    let p = &g.power;
    let tail =
        "(gpuaudit never changes it); on a cloud instance, ask the provider for an uncapped host.";
    let datasheet = spec_of(g).and_then(|s| s.tdp_w);
    let (watts, what) = match (p.default_limit_w.value(), datasheet) {
        (Some(&d), _) => (d, "restores its default"),
        (None, Some(t)) => match p.max_limit_w.value() {
            Some(&max) if max < t => (max, "raises it to its maximum limit (below the datasheet's power)"),
            _ => (t, "raises it to the datasheet's power"),
        },
        (None, None) => {
            return format!(
                "The owner restores the default with `sudo nvidia-smi -i {} -pl W`, W the power.default_limit of `nvidia-smi --query-gpu=power.default_limit --format=csv -i {}` {tail}",
                g.index, g.index
            )
        }
    };
    format!(
        "The owner {what} with `sudo nvidia-smi -i {} -pl {watts:.0}` {tail}",
        g.index
    )
}

fn limit_one(g: &GpuFacts) -> Finding {
    let p = &g.power;
    let mut ev = Evidence::new();
    ev.insert_readings(&[
        ("limit_w", &p.limit_w),
        ("default_limit_w", &p.default_limit_w),
        ("min_limit_w", &p.min_limit_w),
        ("max_limit_w", &p.max_limit_w),
    ]);
    let spec = spec_of(g);
    if let Some(tdp) = spec.and_then(|s| s.tdp_w) {
        ev.insert("spec_tdp_w", tdp);
    }
    let Some(&lim) = p.limit_w.value() else {
        return Finding::skip(
            ID,
            format!(
                "{}: power limit not read: {}",
                g.label(),
                p.limit_w.reason().unwrap_or("not reported")
            ),
        )
        .evidence(ev);
    };
    let fix_cap = restore_fix(g);

    if let Some(&def) = p.default_limit_w.value() {
        if let Some(st) = below(lim, def, BELOW_DEFAULT_WARN, BELOW_DEFAULT_FAIL) {
            return Finding::new(
                ID,
                st,
                format!(
                    "{} is capped at {lim:.0} W, {} of its default {def:.0} W: sustained compute runs slower",
                    g.label(),
                    pct(lim, def)
                ),
            )
            .evidence(ev)
            .fix(fix_cap);
        }
    }
    if let Some((s, floor)) = spec.and_then(|s| Some((s, s.tdp_min_w.or(s.tdp_w)?))) {
        if let Some(st) = below(lim, floor, BELOW_DATASHEET_WARN, BELOW_DATASHEET_FAIL) {
            return Finding::new(
                ID,
                st,
                format!(
                    "{} enforces {lim:.0} W, {} of the datasheet's {floor:.0} W for the {}: the board's default is set low",
                    g.label(),
                    pct(lim, floor),
                    s.name
                ),
            )
            .evidence(ev)
            .fix(fix_cap);
        }
    }
    let of = match (p.default_limit_w.value(), spec) {
        (Some(d), _) if lim > *d => format!("above its default {d:.0} W: raised by the owner"),
        (Some(d), _) => format!("its default {d:.0} W"),
        (None, Some(s)) => match s.tdp_w {
            Some(tdp) => format!("default not read; the datasheet says {tdp:.0} W"),
            None => "default not read; no datasheet power figure to compare with".into(),
        },
        (None, None) => "default not read; the model is not in the spec database".into(),
    };
    Finding::pass(ID, format!("{} power limit {lim:.0} W ({of})", g.label())).evidence(ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;
    use crate::testing::Machine;

    /// An H200 (700 W default and TDP) with its enforced limit at `w`.
    fn h200_at(w: f64) -> Finding {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::Value(w))
            .build();
        (CHECK.run)(&f, &Policy::default()).remove(0)
    }

    #[test]
    fn the_default_thresholds_on_both_sides() {
        let x = h200_at(700.0);
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.ends_with("power limit 700 W (its default 700 W)"),
            "{}",
            x.message
        );
        assert_eq!(h200_at(700.0 * BELOW_DEFAULT_WARN).status, Status::Pass);
        assert_eq!(
            h200_at(700.0 * BELOW_DEFAULT_WARN - 0.5).status,
            Status::Warn
        );
        assert_eq!(h200_at(700.0 * BELOW_DEFAULT_FAIL).status, Status::Warn);
        let x = h200_at(700.0 * BELOW_DEFAULT_FAIL - 0.5);
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message
                .contains("is capped at 630 W, 90% of its default 700 W"),
            "{}",
            x.message
        );
        assert!(x.fix.as_deref().unwrap_or("").contains("-i 0 -pl"));
    }

    #[test]
    fn the_rtx_3090_capped_at_200_of_350_w_fails() {
        let f = Machine::healthy("rtx-3090", 1)
            .gpu(0, |g| {
                g.power.limit_w = Reading::Value(200.0);
                g.power.default_limit_w = Reading::Value(350.0);
            })
            .build();
        let x = &(CHECK.run)(&f, &Policy::default())[0];
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message.contains("200 W, 57% of its default 350 W"),
            "{}",
            x.message
        );
    }

    #[test]
    fn the_fix_gives_the_figure_to_set() {
        let fix = |key: &str, change: fn(&mut GpuFacts)| {
            let f = Machine::healthy(key, 1).gpu(0, change).build();
            restore_fix(&f.gpus.value().unwrap()[0])
        };
        // The default where it was read: an RTX 3090 capped at 200 of 350 W.
        let x = fix("rtx-3090", |g| {
            g.power.limit_w = Reading::Value(200.0);
            g.power.default_limit_w = Reading::Value(350.0);
        });
        assert!(
            x.starts_with(
                "The owner restores its default with `sudo nvidia-smi -i 0 -pl 350` (gpuaudit"
            ),
            "{x}"
        );
        // The datasheet's where the default is not read.
        let x = fix("h200-sxm-141gb", |g| {
            g.power.default_limit_w = Reading::unavailable("N/A");
            g.power.max_limit_w = Reading::unavailable("N/A");
        });
        assert!(
            x.contains("raises it to the datasheet's power with `sudo nvidia-smi -i 0 -pl 700`"),
            "{x}"
        );
        // Never above the GPU's maximum limit; at it, equal to the datasheet, the datasheet's.
        let x = fix("h200-sxm-141gb", |g| {
            g.power.default_limit_w = Reading::unavailable("N/A");
            g.power.max_limit_w = Reading::Value(600.0);
        });
        assert!(
            x.contains("its maximum limit (below the datasheet's power) with `sudo nvidia-smi -i 0 -pl 600`"),
            "{x}"
        );
        let x = fix("h200-sxm-141gb", |g| {
            g.power.default_limit_w = Reading::unavailable("N/A");
            g.power.max_limit_w = Reading::Value(700.0);
        });
        assert!(
            x.contains("the datasheet's power with `sudo nvidia-smi -i 0 -pl 700`"),
            "{x}"
        );
        // Neither known: where to read it.
        let x = fix("h200-sxm-141gb", |g| {
            g.name = Reading::Value("NVIDIA Quadro Nothing".into());
            g.pci_device_id = Reading::unavailable("redacted");
            g.power.default_limit_w = Reading::unavailable("N/A");
        });
        assert!(
            x.contains("`sudo nvidia-smi -i 0 -pl W`, W the power.default_limit"),
            "{x}"
        );
    }

    /// A GPU whose default is not read: judged against the datasheet's board power.
    fn against_datasheet(key: &str, w: f64) -> Finding {
        let f = Machine::healthy(key, 1)
            .gpu(0, |g| {
                g.power.limit_w = Reading::Value(w);
                g.power.default_limit_w = Reading::unavailable("N/A");
            })
            .build();
        (CHECK.run)(&f, &Policy::default()).remove(0)
    }

    #[test]
    fn the_datasheet_thresholds_on_both_sides() {
        assert_eq!(
            against_datasheet("h200-sxm-141gb", 700.0 * BELOW_DATASHEET_WARN).status,
            Status::Pass
        );
        assert_eq!(
            against_datasheet("h200-sxm-141gb", 700.0 * BELOW_DATASHEET_WARN - 0.5).status,
            Status::Warn
        );
        assert_eq!(
            against_datasheet("h200-sxm-141gb", 700.0 * BELOW_DATASHEET_FAIL).status,
            Status::Warn
        );
        let x = against_datasheet("h200-sxm-141gb", 700.0 * BELOW_DATASHEET_FAIL - 0.5);
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message
                .contains("of the datasheet's 700 W for the NVIDIA H200"),
            "{}",
            x.message
        );
        let x = against_datasheet("h200-sxm-141gb", 700.0);
        assert!(
            x.message
                .contains("default not read; the datasheet says 700 W"),
            "{}",
            x.message
        );
    }

    #[test]
    fn a_configurable_part_is_held_against_its_lowest_configuration() {
        // H100 NVL: 350-400 W. 350 W is its lowest configuration, not a cap.
        let s = crate::spec::SpecDb::embedded()
            .by_key("h100-nvl-94gb")
            .unwrap();
        let min = s.tdp_min_w.unwrap();
        assert!(min < s.tdp_w.unwrap());
        assert_eq!(against_datasheet("h100-nvl-94gb", min).status, Status::Pass);
        assert_eq!(
            against_datasheet("h100-nvl-94gb", min * BELOW_DATASHEET_WARN - 0.5).status,
            Status::Warn
        );
    }

    #[test]
    fn raised_unread_and_unknown_limits() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.power.limit_w = Reading::Value(750.0))
            .build();
        let x = &(CHECK.run)(&f, &Policy::default())[0];
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.contains("above its default 700 W"),
            "{}",
            x.message
        );

        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.power.limit_w = Reading::unavailable("N/A in a vGPU guest")
            })
            .build();
        let x = &(CHECK.run)(&f, &Policy::default())[0];
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("N/A in a vGPU guest"));

        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.name = Reading::Value("NVIDIA Quadro Nothing".into());
                g.pci_device_id = Reading::unavailable("redacted");
                g.power.default_limit_w = Reading::unavailable("N/A");
            })
            .build();
        let x = &(CHECK.run)(&f, &Policy::default())[0];
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.contains("not in the spec database"),
            "{}",
            x.message
        );
    }

    #[test]
    fn at_default_tells_a_capped_gpu_from_one_at_its_default() {
        let g = |lim: f64, def: Option<f64>| {
            let f = Machine::healthy("h200-sxm-141gb", 1)
                .gpu(0, |g| {
                    g.power.limit_w = Reading::Value(lim);
                    g.power.default_limit_w = match def {
                        Some(d) => Reading::Value(d),
                        None => Reading::unavailable("N/A"),
                    };
                })
                .build();
            at_default(&f.gpu_list()[0])
        };
        assert_eq!(g(700.0, Some(700.0)), Some(true));
        assert_eq!(g(700.0 * BELOW_DEFAULT_WARN, Some(700.0)), Some(true));
        assert_eq!(
            g(700.0 * BELOW_DEFAULT_WARN - 0.5, Some(700.0)),
            Some(false)
        );
        assert_eq!(g(700.0 * BELOW_DATASHEET_WARN, None), Some(true));
        assert_eq!(g(700.0 * BELOW_DATASHEET_WARN - 0.5, None), Some(false));
    }

    #[test]
    fn the_explain_text_carries_the_thresholds() {
        for t in [
            BELOW_DEFAULT_WARN,
            BELOW_DEFAULT_FAIL,
            BELOW_DATASHEET_WARN,
            BELOW_DATASHEET_FAIL,
        ] {
            let p = format!("{:.0}%", t * 100.0);
            assert!(CHECK.doc.what.contains(&p), "{p}: {}", CHECK.doc.what);
        }
    }
}
