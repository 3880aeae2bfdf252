//! pcie.link: the PCIe link each GPU trained at.

use crate::checks::common::{per_gpu, plural, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{pcie_gen_from_gts, pcie_link_gbps, Facts, GpuFacts, ThrottleReason};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;

const ID: &str = "pcie.link";

// Thresholds written once, as literals the explain text is built from too.
macro_rules! idle_utilization_pct {
    () => {
        5
    };
}

/// A GPU below this utilisation (percent) counts as idle even where NVML sets no idle reason:
/// an idle GPU lowers its link generation to save power (PCIe ASPM / the driver's dynamic
/// link speed), which is not a fault. gpuaudit's margin: a GPU that runs anything shows more.
pub const IDLE_UTILIZATION_PCT: u32 = idle_utilization_pct!();
macro_rules! narrow_fail_width {
    () => {
        4
    };
}
macro_rules! full_width {
    () => {
        16
    };
}

/// At this width or narrower, on a GPU that supports [`FULL_WIDTH`], the link fails whatever
/// the slot: x4 is a quarter of the host bandwidth (gen4 x4: 7.9 GB/s per direction), at
/// which every data loader starves, and no instance type, board lane split or x16 slot links
/// a x16 GPU so on purpose (the narrowest a platform wires one with is x8, which stays a
/// warning where the slot's width is not known). A laptop GPU (its name says "Laptop",
/// "Mobile" or "with Max-Q Design") is judged as before, and an external enclosure
/// (Thunderbolt links at x4 by design) is named in the finding, since the facts have no PCI
/// path that would tell one.
pub const NARROW_FAIL_WIDTH: u32 = narrow_fail_width!();
/// The width a GPU must support for [`NARROW_FAIL_WIDTH`] to fail it: a card built for x16.
pub const FULL_WIDTH: u32 = full_width!();

/// From this many PCIe replays (link-level retransmissions, counted since the driver loaded)
/// the finding says so. One counter read has no rate: NVIDIA's DCGM flags more than 8 replays
/// a minute (`DCGM_LIMIT_MAX_PCIREPLAY_RATE`, "the maximum recommended by RM", NVIDIA/DCGM
/// common/DcgmGPUHardwareLimits.h), which takes watching the counter under load; a count
/// read once is information, not a verdict.
pub const REPLAYS_NOTED: u64 = 1;

pub const CHECK: Check = Check {
    id: ID,
    title: "PCIe link width and generation against what the GPU and the slot support",
    looks_at: "current link width and generation against the maximum of GPU and slot; idle GPUs \
               lower their generation to save power, so a lower gen at idle is not a fault by \
               itself",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The current PCIe link width and generation of each GPU against the maximum of the \
             GPU and of the slot (NVML, cross-checked with sysfs), and the PCIe replay counter. \
             Idle GPUs (the idle clock reason, or below ",
            idle_utilization_pct!(),
            "% utilisation) lower their link generation to save power, so a lower generation \
             at idle is not a fault; a lower generation while busy warns. A narrower width fails \
             where the hardware shows the slot gives more: an SXM or superchip module (its board \
             is built for the full width) or an identical GPU of the same machine that trained \
             wider; x",
            narrow_fail_width!(),
            " or narrower on a GPU that supports x",
            full_width!(),
            " fails too, because no instance type, board or slot links such a GPU that narrow \
             on purpose, and every data loader starves at it (not a laptop GPU, whose name \
             says \"Laptop\", \"Mobile\" or \"with Max-Q Design\": it is judged as below; an \
             external Thunderbolt enclosure, x4 by design, cannot be told from these facts, and \
             the finding says so); otherwise a narrower width warns, because the driver does not \
             report the slot's width and an x8 slot or a board's x8/x8 lane split gives the same \
             reading. The bandwidth lost is given at the generation the link reaches (the lower \
             of the GPU's and the slot's maximum), not at the idle generation."
        ),
        why: "A link trained at x8 instead of x16, or a gen4 slot under a gen5 GPU, halves every \
              host↔device copy: data loading, checkpointing, CPU offload and multi-node traffic \
              that goes through the host. Replays are retransmissions after link errors: a \
              count that grows under load points at a marginal riser, slot or cable.",
        verify: "nvidia-smi -q | grep -A12 'GPU Link Info'\n\
                 # BUS_ID: the GPU's address as `lspci -D -d 10de:` lists it, e.g. 0000:18:00.0\n\
                 sudo lspci -vv -s BUS_ID | grep -e LnkCap -e LnkSta   # the GPU's link\n\
                 sudo lspci -vv -s \"$(basename \"$(dirname \"$(readlink -f /sys/bus/pci/devices/BUS_ID)\")\")\" | grep LnkCap   # the slot's width: the port above the GPU (a GPU on the root bus, as in many VMs, has none)\n\
                 # an idle link trains down to save power: look again while a copy runs (gpuaudit bench pcie)",
        fix: "Width below the maximum: reseat the card or move it to a full x16 slot, check the \
              riser; on a board that splits its lanes x8/x8 with two cards, that is the board; \
              on a cloud instance, ask for another host; in an external (Thunderbolt) enclosure, \
              x4 is the enclosure's link. Slot generation below the GPU's: a BIOS setting (PCIe \
              speed forced to a lower gen) or an older platform.",
    },
    profiles: &[],
    run: link,
};

fn link(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu(ID, facts, policy, |g| one(facts, g))
}

fn is_idle(g: &GpuFacts) -> bool {
    let idle_reason = g
        .throttle_reasons
        .value()
        .is_some_and(|r| r.contains(&ThrottleReason::GpuIdle));
    let low_util = g
        .utilization_pct
        .value()
        .is_some_and(|u| *u < IDLE_UTILIZATION_PCT);
    idle_reason || low_util
}

/// A one-direction link rate, honestly rounded: "7.9", "15.8", "31.5", "63.0", "121".
pub fn rate(gbps: f64) -> String {
    // Decided on the rounded figure, so 99.96 is "100", not "100.0".
    if gbps >= 99.95 {
        format!("{gbps:.0}")
    } else {
        format!("{gbps:.1}")
    }
}

/// How much of the host bandwidth a link of `now` lanes of `full` gives: "half the", "a
/// quarter of the", "an eighth of the", "a sixteenth of the", or "12/16 of the".
fn share(now: u32, full: u32) -> String {
    match [2, 4, 8, 16].iter().position(|d| now * d == full) {
        Some(0) => "half the".into(),
        Some(1) => "a quarter of the".into(),
        Some(2) => "an eighth of the".into(),
        Some(_) => "a sixteenth of the".into(),
        None => format!("{now}/{full} of the"),
    }
}

/// A laptop GPU, as its name says: "NVIDIA GeForce RTX 3080 Laptop GPU", "GeForce GTX 1060
/// Mobile", "Quadro P1000 with Max-Q Design" (not the desktop "Max-Q Workstation Edition").
/// One whose name does not say (the GTX 1050 of an HP laptop reports "NVIDIA GeForce GTX
/// 1050") is not told apart.
fn is_laptop_gpu(g: &GpuFacts) -> bool {
    g.name.value().is_some_and(|n| {
        let n = n.to_ascii_lowercase();
        ["laptop", "mobile", "with max-q design"]
            .iter()
            .any(|w| n.contains(w))
    })
}

/// The link as the sources tell it: NVML first, sysfs where NVML has nothing.
struct Link {
    gen_cur: Option<u32>,
    gen_src: String,
    w_cur: Option<u32>,
    w_max: Option<u32>,
    /// The most the GPU itself supports.
    gen_max_gpu: Option<u32>,
    /// The most the link can reach: the lower of the GPU's and the slot's maximum.
    gen_max_link: Option<u32>,
    gen_max_host: Option<u32>,
}

impl Link {
    fn read(facts: &Facts, g: &GpuFacts) -> Link {
        let sys = facts.pci_of(g);
        let sys_gen = |gts: Option<f64>| gts.and_then(pcie_gen_from_gts);
        let sys_gen_cur = sys_gen(sys.and_then(|p| p.current_link_gts.value().copied()));
        let sys_gen_max = sys_gen(sys.and_then(|p| p.max_link_gts.value().copied()));
        let (gen_cur, gen_src) = match (g.pcie.gen_current.value(), sys_gen_cur) {
            (Some(v), _) => (Some(*v), g.source.clone()),
            (None, Some(v)) => (Some(v), "sysfs".to_string()),
            _ => (None, String::new()),
        };
        Link {
            gen_cur,
            gen_src,
            w_cur: g
                .pcie
                .width_current
                .value()
                .copied()
                .or(sys.and_then(|p| p.current_link_width.value().copied())),
            w_max: g
                .pcie
                .width_max
                .value()
                .copied()
                .or(sys.and_then(|p| p.max_link_width.value().copied())),
            gen_max_gpu: g.pcie.gen_max_gpu.value().copied().or(sys_gen_max),
            gen_max_link: g.pcie.gen_max.value().copied(),
            gen_max_host: g.pcie.gen_max_host.value().copied(),
        }
    }

    /// The slot's generation cap, where the driver says.
    fn host_cap(&self) -> Option<u32> {
        self.gen_max_host.or(self.gen_max_link)
    }

    /// The generation this link reaches under load: the lower of the GPU's and the slot's
    /// maximum, as far as they are known; the current one where nothing else is.
    fn gen_reached(&self) -> Option<u32> {
        let caps = [self.gen_max_link, self.gen_max_host, self.gen_max_gpu];
        caps.iter().flatten().min().copied().or(self.gen_cur)
    }
}

/// Another GPU of the same model on this machine that trained wider: proof that the platform
/// gives more than this GPU got.
fn wider_sibling(facts: &Facts, g: &GpuFacts, width: u32) -> Option<(u32, u32)> {
    facts
        .gpu_list()
        .iter()
        .filter(|o| o.index != g.index && o.name.value() == g.name.value() && o.name.is_value())
        .filter_map(|o| {
            let w = o.pcie.width_current.value().copied().or(facts
                .pci_of(o)
                .and_then(|p| p.current_link_width.value().copied()))?;
            (w > width).then_some((o.index, w))
        })
        .max_by_key(|(_, w)| *w)
}

/// The link is part of a module's board (SXM, superchip, mezzanine), built for the full width.
fn on_a_board(g: &GpuFacts) -> bool {
    spec_of(g).is_some_and(|s| s.form_factor != "pcie")
}

fn one(facts: &Facts, g: &GpuFacts) -> Finding {
    let l = Link::read(facts, g);
    let sys = facts.pci_of(g);
    let mut ev = Evidence::new();
    for (k, v) in [
        ("gen_current", l.gen_cur),
        ("gen_max", l.gen_max_link),
        ("gen_max_gpu", l.gen_max_gpu),
        ("gen_max_host", l.gen_max_host),
        ("width_current", l.w_cur),
        ("width_max", l.w_max),
    ] {
        if let Some(v) = v {
            ev.insert(k, v);
        }
    }
    let sys_w = sys.and_then(|p| p.current_link_width.value().copied());
    let sys_gen = sys.and_then(|p| {
        p.current_link_gts
            .value()
            .copied()
            .and_then(pcie_gen_from_gts)
    });
    if let (Some(a), Some(b)) = (sys_w, sys_gen) {
        ev.insert("sysfs_current", format!("gen{b} x{a}"));
    }
    if !l.gen_src.is_empty() {
        ev.insert("source", &l.gen_src);
    }
    let replays = g.pcie.replay_counter.value().copied();
    if let Some(r) = replays {
        ev.insert("replay_counter", r);
    }

    let (Some(gc), Some(wc)) = (l.gen_cur, l.w_cur) else {
        let why = g
            .pcie
            .gen_current
            .reason()
            .or(g.pcie.width_current.reason())
            .unwrap_or("not reported");
        return Finding::skip(ID, format!("{}: PCIe link not read: {why}", g.label())).evidence(ev);
    };
    let now = format!("gen{gc} x{wc}");
    let reach = l.gen_reached().unwrap_or(gc);

    // Each problem the link has, with its status; one finding says them all.
    let mut problems: Vec<(Status, String)> = Vec::new();
    let mut fixes: Vec<&str> = Vec::new();

    if let Some(wm) = l.w_max.filter(|wm| wc < *wm) {
        let figures = pcie_link_gbps(reach, wc).zip(pcie_link_gbps(reach, wm));
        if let Some((now_gbps, full)) = figures {
            let cents = |v: f64| (v * 100.0).round() / 100.0;
            ev.insert("gbps_per_direction", cents(now_gbps));
            ev.insert("gbps_per_direction_at_full_width", cents(full));
        }
        let lost = figures
            .map(|(n, f)| {
                format!(
                    " (about {} instead of {} GB/s per direction at gen{reach}, the generation this link reaches)",
                    rate(n),
                    rate(f)
                )
            })
            .unwrap_or_default();
        let sibling = wider_sibling(facts, g, wc);
        let board = on_a_board(g);
        let too_narrow = wc <= NARROW_FAIL_WIDTH && wm >= FULL_WIDTH && !is_laptop_gpu(g);
        const SEATING: &str = "Reseat the card or move it to a full x16 slot, check the riser; on a cloud instance, ask for a host where it trains at full width.";
        // The verdict, why, what it is judged as (evidence), and the fix.
        let (status, why, judged, fix) = match (sibling, board) {
            (Some((o, w)), _) => (
                Status::Fail,
                format!(
                    "GPU {o}, the same model, trained at x{w} here: this slot, its riser or the card's seating gives less"
                ),
                "fault",
                SEATING,
            ),
            (None, true) => (
                Status::Fail,
                "the module's board is built for the full width: a fault of the board, its switch or retimer, or the seating".to_string(),
                "fault",
                SEATING,
            ),
            (None, false) if too_narrow => (
                Status::Fail,
                format!(
                    "at x{NARROW_FAIL_WIDTH} or narrower every data loader starves, and no instance type, board or slot links a x{FULL_WIDTH} GPU so on purpose: a narrow slot, a riser or extender, a failed lane or a badly seated card; only an external enclosure (Thunderbolt, x4 by design) is built so, which these facts cannot tell"
                ),
                "too narrow for any platform",
                "Reseat the card or move it to a full x16 slot, check the riser or extender; on a cloud instance, ask for a host where it trains at full width. In an external (Thunderbolt) enclosure, x4 is the enclosure's link: a slot inside the machine gives the card its width.",
            ),
            // NVML's maximum is the card's own capability (the fixtures' RTX 2080s on an
            // x8/x8 board and the A10G and T4 instances report x16 there at x8): the slot's
            // width is not known from the driver.
            (None, false) => (
                Status::Warn,
                "the driver does not report the slot's width: an x8 slot, a board that splits its lanes x8/x8, a cloud instance built that way, or a badly seated card or riser all read like this".to_string(),
                "slot not known",
                "See the slot's width with `sudo lspci -vv` on its port (LnkCap); if the slot is x16, reseat the card or check the riser; if it is x8 (or the board splits x8/x8), that is the platform; on a cloud instance, ask which width the instance type has.",
            ),
        };
        problems.push((
            status,
            format!(
                "trained at x{wc} of the x{wm} it supports: {} host bandwidth{lost}; {why}",
                share(wc, wm)
            ),
        ));
        ev.insert("width_judged_as", judged);
        fixes.push(fix);
    }

    // The slot caps the generation below what the GPU can do.
    if let (Some(gpu_max), Some(cap)) = (l.gen_max_gpu, l.host_cap()) {
        if cap < gpu_max {
            let width = l.w_max.unwrap_or(wc).max(wc);
            let figures = pcie_link_gbps(cap, width)
                .zip(pcie_link_gbps(gpu_max, width))
                .map(|(c, f)| {
                    format!(
                        " (about {} instead of {} GB/s per direction at x{width})",
                        rate(c),
                        rate(f)
                    )
                })
                .unwrap_or_default();
            problems.push((
                Status::Warn,
                format!(
                    "is in a gen{cap} slot though it supports PCIe gen{gpu_max}: host copies reach {} of what the GPU could do{figures}",
                    if gpu_max == cap + 1 { "about half".to_string() } else { format!("about 1/{}", 1u32 << (gpu_max - cap)) }
                ),
            ));
            fixes.push("Check the BIOS PCIe speed setting; on a cloud instance, the platform is older than the GPU: ask for a host that matches it.");
        }
    }

    let idle_low_gen = match l.gen_max_link.or(l.gen_max_gpu) {
        Some(gm) if gc < gm => {
            if is_idle(g) {
                Some(gm)
            } else {
                let figures = pcie_link_gbps(gc, wc)
                    .zip(pcie_link_gbps(gm, wc))
                    .map(|(n, f)| {
                        format!(
                            " (about {} instead of {} GB/s per direction)",
                            rate(n),
                            rate(f)
                        )
                    })
                    .unwrap_or_default();
                problems.push((
                    Status::Warn,
                    format!("runs at gen{gc} while busy; the link supports gen{gm}{figures}"),
                ));
                fixes.push("Run `gpuaudit bench pcie` to measure it under load; if it stays low, check the BIOS PCIe settings or reseat the card.");
                None
            }
        }
        _ => None,
    };

    let replay_note = replays.filter(|r| *r >= REPLAYS_NOTED).map(|r| {
        format!(
            "{} (link-level retransmissions) so far",
            plural(r as usize, "PCIe replay", "PCIe replays")
        )
    });

    if !problems.is_empty() {
        let worst = problems.iter().map(|p| p.0).max().unwrap_or(Status::Warn);
        let mut text: Vec<String> = problems.into_iter().map(|p| p.1).collect();
        text.extend(replay_note);
        return Finding::new(ID, worst, format!("{} {}", g.label(), text.join("; ")))
            .evidence(ev)
            .fix(fixes.join(" "));
    }

    let msg = match idle_low_gen {
        Some(gm) => format!(
            "{} at {now} while idle (the GPU lowers the generation to save power; it can reach gen{gm}); width is full",
            g.label()
        ),
        None => format!("{} at {now}, the most it supports", g.label()),
    };
    match replay_note {
        Some(note) => Finding::info(ID, format!("{msg}; {note}"))
            .evidence(ev)
            .fix("A count that keeps growing under load points at a bad riser, slot or cable: watch it during `gpuaudit bench pcie` (NVIDIA's DCGM flags more than 8 a minute) and reseat the card."),
        None => Finding::pass(ID, msg).evidence(ev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;
    use crate::testing::{gpu_status, Machine};

    fn run(f: &Facts) -> Vec<Finding> {
        (CHECK.run)(f, &Policy::default())
    }

    fn of(out: &[Finding], gpu: u32) -> &Finding {
        out.iter()
            .find(|f| f.gpu == Some(gpu))
            .unwrap_or_else(|| panic!("no finding for GPU {gpu}: {out:#?}"))
    }

    /// A PCIe card (the L4: gen4 x16) at `gen` x`width`, busy or idle.
    fn l4(n: u32, change: impl Fn(&mut GpuFacts)) -> Facts {
        Machine::healthy("l4", n).gpus(change).build()
    }

    #[test]
    fn full_link_passes() {
        let out = run(&Machine::healthy("h200-sxm-141gb", 2).build());
        assert!(out.iter().all(|f| f.status == Status::Pass), "{out:#?}");
        assert!(out[0].message.contains("gen5 x16, the most it supports"));
    }

    #[test]
    fn rates_are_written_with_honest_precision() {
        assert_eq!(rate(pcie_link_gbps(3, 8).unwrap()), "7.9");
        assert_eq!(rate(pcie_link_gbps(3, 16).unwrap()), "15.8");
        assert_eq!(rate(pcie_link_gbps(4, 16).unwrap()), "31.5");
        assert_eq!(rate(pcie_link_gbps(5, 16).unwrap()), "63.0");
        assert_eq!(rate(pcie_link_gbps(1, 8).unwrap()), "2.0");
        assert_eq!(rate(99.94), "99.9");
        assert_eq!(rate(99.96), "100");
        assert_eq!(rate(100.0), "100");
        assert_eq!(rate(pcie_link_gbps(6, 16).unwrap()), "121");
        assert_eq!(share(8, 16), "half the");
        assert_eq!(share(4, 16), "a quarter of the");
        assert_eq!(share(2, 16), "an eighth of the");
        assert_eq!(share(1, 16), "a sixteenth of the");
        assert_eq!(share(4, 8), "half the");
        assert_eq!(share(12, 16), "12/16 of the");
        assert_eq!(share(8, 8), "8/8 of the");
    }

    #[test]
    fn narrow_width_on_a_pcie_card_warns_with_the_bandwidth_at_the_generation_reached() {
        // The A10G case: x8 of x16, idling at gen1, the link reaches gen4.
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::Value(8);
                g.pcie.gen_current = Reading::Value(1);
            })
            .pci(0, |p| {
                p.current_link_width = Reading::Value(8);
                p.current_link_gts = Reading::Value(2.5);
            })
            .build();
        let out = run(&f);
        let x = of(&out, 0);
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(
            x.message
                .contains("about 15.8 instead of 31.5 GB/s per direction at gen4"),
            "{}",
            x.message
        );
        assert!(
            x.message.contains("half the host bandwidth"),
            "{}",
            x.message
        );
        assert!(
            x.message.contains("does not report the slot's width"),
            "{}",
            x.message
        );
        assert!(!x.message.contains(" 2 instead of 4"), "{}", x.message);
        assert_eq!(x.evidence.get("width_judged_as").unwrap(), "slot not known");
    }

    #[test]
    fn narrow_width_fails_where_a_sibling_trained_wider() {
        let f = Machine::healthy("l4", 2)
            .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
            .pci(1, |p| p.current_link_width = Reading::Value(8))
            .build();
        let out = run(&f);
        assert_eq!(gpu_status(&out, 0), Status::Pass);
        let x = of(&out, 1);
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(
            x.message.contains("GPU 0, the same model, trained at x16"),
            "{}",
            x.message
        );
    }

    #[test]
    fn a_sibling_of_another_model_or_as_narrow_proves_nothing() {
        // Both at x8 (a board that splits x8/x8): warn on both.
        let f = Machine::healthy("l4", 2)
            .gpus(|g| g.pcie.width_current = Reading::Value(8))
            .build();
        let out = run(&f);
        assert_eq!(gpu_status(&out, 0), Status::Warn);
        assert_eq!(gpu_status(&out, 1), Status::Warn);
        // The wider GPU is another model: warn.
        let f = Machine::healthy("l4", 2)
            .gpu(1, |g| {
                g.pcie.width_current = Reading::Value(8);
            })
            .gpu(0, |g| g.name = Reading::Value("NVIDIA L40S".into()))
            .build();
        assert_eq!(gpu_status(&run(&f), 1), Status::Warn);
        // A sibling whose name is not read proves nothing either.
        let f = Machine::healthy("l4", 2)
            .gpus(|g| g.name = Reading::unavailable("N/A"))
            .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
            .build();
        assert_eq!(gpu_status(&run(&f), 1), Status::Warn);
    }

    #[test]
    fn narrow_width_on_an_sxm_module_fails() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.pcie.width_current = Reading::Value(8))
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(
            x.message.contains("built for the full width"),
            "{}",
            x.message
        );
        assert!(
            x.message
                .contains("about 31.5 instead of 63.0 GB/s per direction at gen5"),
            "{}",
            x.message
        );
    }

    #[test]
    fn the_width_threshold_is_the_maximum_itself() {
        // At the maximum: pass; one lane below: a finding; a maximum below the current (a
        // confused reading) is not a narrow link.
        let at = l4(1, |g| g.pcie.width_current = Reading::Value(16));
        assert_eq!(run(&at)[0].status, Status::Pass);
        let below = l4(1, |g| g.pcie.width_current = Reading::Value(15));
        assert_eq!(run(&below)[0].status, Status::Warn);
        assert!(run(&below)[0]
            .message
            .contains("trained at x15 of the x16 it supports: 15/16 of the host bandwidth"));
        let above = l4(1, |g| g.pcie.width_max = Reading::Value(8));
        assert_eq!(run(&above)[0].status, Status::Pass);
    }

    #[test]
    fn sysfs_fills_what_nvml_did_not_read() {
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::unavailable("N/A");
                g.pcie.width_max = Reading::unavailable("N/A");
                g.pcie.gen_current = Reading::unavailable("N/A");
                g.pcie.gen_max_gpu = Reading::unavailable("N/A");
            })
            .pci(0, |p| p.current_link_width = Reading::Value(4))
            .build();
        let x = &run(&f)[0];
        // x4 of x16, read from sysfs, is judged as NVML's reading would be.
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(x.message.contains("x4 of the x16"), "{}", x.message);
        assert_eq!(x.evidence.get("source").unwrap(), "sysfs");
        assert_eq!(x.evidence.get("sysfs_current").unwrap(), "gen4 x4");
    }

    #[test]
    fn an_unread_link_skips_with_the_reason() {
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.gen_current = Reading::unavailable("N/A in a vGPU guest")
            })
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Skip);
        assert!(x.message.contains("N/A in a vGPU guest"), "{}", x.message);
    }

    #[test]
    fn a_slot_below_the_gpus_generation_warns_with_both_rates() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.pcie.gen_max_host = Reading::Value(4);
                g.pcie.gen_max = Reading::Value(4);
                g.pcie.gen_current = Reading::Value(4);
            })
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(
            x.message.contains(
                "(00:06.0) is in a gen4 slot though it supports PCIe gen5: host copies reach about half"
            ),
            "{}",
            x.message
        );
        assert!(
            x.message
                .contains("about 31.5 instead of 63.0 GB/s per direction at x16"),
            "{}",
            x.message
        );
        // Two generations down: a quarter; the same generation: nothing.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.pcie.gen_max_host = Reading::Value(3);
                g.pcie.gen_max = Reading::Value(3);
                g.pcie.gen_current = Reading::Value(3);
            })
            .build();
        assert!(
            run(&f)[0].message.contains("about 1/4"),
            "{}",
            run(&f)[0].message
        );
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.pcie.gen_max_host = Reading::Value(5))
            .build();
        assert_eq!(run(&f)[0].status, Status::Pass);
    }

    #[test]
    fn the_generation_the_link_reaches_is_the_lowest_maximum() {
        let l = Link {
            gen_cur: Some(1),
            gen_src: "nvml".into(),
            w_cur: Some(8),
            w_max: Some(16),
            gen_max_gpu: Some(5),
            gen_max_link: None,
            gen_max_host: Some(4),
        };
        assert_eq!(l.gen_reached(), Some(4));
        let l = Link {
            gen_max_gpu: None,
            gen_max_host: None,
            ..l
        };
        assert_eq!(l.gen_reached(), Some(1));
    }

    #[test]
    fn a_low_generation_is_judged_by_whether_the_gpu_is_idle() {
        let low = |util: u32, reasons: Vec<ThrottleReason>| {
            l4(1, move |g| {
                g.pcie.gen_current = Reading::Value(1);
                g.utilization_pct = Reading::Value(util);
                g.throttle_reasons = Reading::Value(reasons.clone());
            })
        };
        // Idle by the reason, whatever the utilisation.
        let x = &run(&low(90, vec![ThrottleReason::GpuIdle]))[0];
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        assert!(x.message.contains("while idle"), "{}", x.message);
        // Idle by the utilisation: just below the line is idle, at it is busy.
        let x = &run(&low(IDLE_UTILIZATION_PCT - 1, vec![]))[0];
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        let x = &run(&low(IDLE_UTILIZATION_PCT, vec![]))[0];
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(
            x.message
                .contains("runs at gen1 while busy; the link supports gen4 (about 4.0 instead of 31.5 GB/s per direction)"),
            "{}",
            x.message
        );
        // Neither read: nothing says the GPU is idle, so a low generation warns.
        let f = l4(1, |g| {
            g.pcie.gen_current = Reading::Value(3);
            g.utilization_pct = Reading::unavailable("N/A");
            g.throttle_reasons = Reading::unavailable("N/A");
        });
        assert_eq!(run(&f)[0].status, Status::Warn);
    }

    #[test]
    fn replays_are_counted_in_words_from_the_threshold() {
        let with = |n: u64| l4(1, move |g| g.pcie.replay_counter = Reading::Value(n));
        assert_eq!(run(&with(REPLAYS_NOTED - 1))[0].status, Status::Pass);
        let x = &run(&with(REPLAYS_NOTED))[0];
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(x.message.contains("; 1 PCIe replay (link"), "{}", x.message);
        let x = &run(&with(7))[0];
        assert!(x.message.contains("7 PCIe replays"), "{}", x.message);
        // On a finding with a problem, the replays are part of its message.
        let f = l4(1, |g| {
            g.pcie.replay_counter = Reading::Value(3);
            g.pcie.width_current = Reading::Value(8);
        });
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Warn);
        assert!(
            x.message
                .ends_with("3 PCIe replays (link-level retransmissions) so far"),
            "{}",
            x.message
        );
    }

    #[test]
    fn several_problems_make_one_finding_with_the_worst_status() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::Value(8);
                g.pcie.gen_max_host = Reading::Value(4);
                g.pcie.gen_max = Reading::Value(4);
                g.pcie.gen_current = Reading::Value(4);
            })
            .build();
        let out = run(&f);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Fail, "{}", out[0].message);
        assert!(out[0]
            .message
            .contains("at gen4, the generation this link reaches"));
        assert!(out[0].message.contains("; is in a gen4 slot"));
        assert_eq!(out[0].evidence.get("gbps_per_direction").unwrap(), 15.75);
    }

    /// An L4 (a PCIe card that supports x16) trained at `width`, with the sysfs reading alike.
    fn l4_at(width: u32, name: Option<&str>) -> Facts {
        let name = name.map(str::to_string);
        Machine::healthy("l4", 1)
            .gpu(0, move |g| {
                g.pcie.width_current = Reading::Value(width);
                if let Some(n) = &name {
                    g.name = Reading::Value(n.clone());
                }
            })
            .pci(0, move |p| p.current_link_width = Reading::Value(width))
            .build()
    }

    #[test]
    fn x4_or_narrower_on_a_x16_gpu_fails_whatever_the_slot() {
        for (width, share) in [
            (1, "a sixteenth of the"),
            (2, "an eighth of the"),
            (4, "a quarter of the"),
        ] {
            let x = &run(&l4_at(width, None))[0];
            assert_eq!(x.status, Status::Fail, "x{width}: {}", x.message);
            assert!(
                x.message.contains(&format!(
                    "trained at x{width} of the x16 it supports: {share} host bandwidth"
                )),
                "{}",
                x.message
            );
            assert!(
                x.message.contains(
                    "at x4 or narrower every data loader starves, and no instance type, board or slot links a x16 GPU so on purpose"
                ),
                "{}",
                x.message
            );
            // An enclosure cannot be told from the facts: the finding says so.
            assert!(
                x.message.contains(
                    "(Thunderbolt, x4 by design) is built so, which these facts cannot tell"
                ),
                "{}",
                x.message
            );
            assert_eq!(
                x.evidence.get("width_judged_as").unwrap(),
                "too narrow for any platform"
            );
            assert!(
                x.fix.as_deref().unwrap().contains("Thunderbolt"),
                "{:?}",
                x.fix
            );
        }
        // x8 with the slot's width unknown stays a warning.
        let x = &run(&l4_at(8, None))[0];
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert_eq!(x.evidence.get("width_judged_as").unwrap(), "slot not known");
        assert!(!x.fix.as_deref().unwrap().contains("Thunderbolt"));
        // The literal the explain text is built from is the constant.
        assert_eq!(NARROW_FAIL_WIDTH, 4);
        assert_eq!(FULL_WIDTH, 16);
        assert!(CHECK
            .doc
            .what
            .contains("x4 or narrower on a GPU that supports x16 fails"));
    }

    #[test]
    fn x4_of_a_gpu_that_supports_less_than_x16_is_not_too_narrow() {
        // x4 of x8: half, and a slot that may be x4: a warning, not the x16 rule.
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::Value(4);
                g.pcie.width_max = Reading::Value(8);
            })
            .pci(0, |p| {
                p.current_link_width = Reading::Value(4);
                p.max_link_width = Reading::Value(8);
            })
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert_eq!(x.evidence.get("width_judged_as").unwrap(), "slot not known");
        // A card built for x4 (the GT 1030) at x4 is at its full width.
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::Value(4);
                g.pcie.width_max = Reading::Value(4);
            })
            .pci(0, |p| {
                p.current_link_width = Reading::Value(4);
                p.max_link_width = Reading::Value(4);
            })
            .build();
        assert_eq!(run(&f)[0].status, Status::Pass, "{}", run(&f)[0].message);
    }

    #[test]
    fn a_laptop_gpu_at_x4_is_judged_as_any_narrow_link() {
        for name in [
            "NVIDIA GeForce RTX 3080 Laptop GPU",
            "GeForce GTX 1060 Mobile",
            "Quadro P1000 with Max-Q Design",
        ] {
            let x = &run(&l4_at(4, Some(name)))[0];
            assert_eq!(x.status, Status::Warn, "{name}: {}", x.message);
            assert!(
                x.message.contains("does not report the slot's width"),
                "{}",
                x.message
            );
        }
        // The desktop Max-Q card is no laptop GPU.
        let x = &run(&l4_at(
            4,
            Some("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"),
        ))[0];
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        // Nor is one whose name is not read.
        let f = Machine::healthy("l4", 1)
            .gpu(0, |g| {
                g.pcie.width_current = Reading::Value(4);
                g.name = Reading::unavailable("N/A");
            })
            .build();
        assert_eq!(run(&f)[0].status, Status::Fail);
    }

    #[test]
    fn a_sibling_or_a_board_still_explain_a_narrow_link_first() {
        // x4 next to an identical GPU at x16: the sibling is the evidence.
        let f = Machine::healthy("l4", 2)
            .gpu(1, |g| g.pcie.width_current = Reading::Value(4))
            .pci(1, |p| p.current_link_width = Reading::Value(4))
            .build();
        let x = of(&run(&f), 1).clone();
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message.contains("GPU 0, the same model, trained at x16"),
            "{}",
            x.message
        );
        assert_eq!(x.evidence.get("width_judged_as").unwrap(), "fault");
        // An SXM module at x4: its board.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.pcie.width_current = Reading::Value(4))
            .build();
        let x = &run(&f)[0];
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message.contains("built for the full width"),
            "{}",
            x.message
        );
    }
}
