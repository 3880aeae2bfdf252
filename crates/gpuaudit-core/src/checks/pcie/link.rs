//! pcie.link: the PCIe link each GPU trained at.

use crate::checks::common::per_gpu;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{pcie_gen_from_gts, pcie_link_gbps, Facts, GpuFacts, ThrottleReason};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;

const ID: &str = "pcie.link";

/// A GPU below this utilisation (percent) counts as idle even where NVML sets no idle reason:
/// an idle GPU lowers its link generation to save power, which is not a fault.
pub const IDLE_UTILIZATION_PCT: u32 = 5;

pub const CHECK: Check = Check {
    id: ID,
    title: "PCIe link width and generation against what the GPU and the slot support",
    looks_at: "current link width and generation against the maximum of GPU and slot; idle GPUs \
               lower their generation to save power, so a lower gen at idle is not a fault by \
               itself",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The current PCIe link width and generation of each GPU against the maximum of the \
               GPU and of the slot (NVML, cross-checked with sysfs). Idle GPUs lower their link \
               generation to save power, so a lower generation at idle is not a fault by itself; \
               a narrower width is.",
        why: "A link trained at x8 instead of x16, or a gen4 slot under a gen5 GPU, halves every \
              host↔device copy: data loading, checkpointing, CPU offload and multi-node traffic \
              that goes through the host.",
        verify: "nvidia-smi -q | grep -A12 'GPU Link Info'\n\
                 sudo lspci -vv -s <bus-id> | grep -e LnkCap -e LnkSta\n\
                 (under load: run a copy, e.g. `gpuaudit bench pcie`, and look again)",
        fix: "Width below the maximum: reseat the card or move it to a full x16 slot, check the \
              riser; on a cloud instance, ask for another host. Slot generation below the GPU's: \
              a BIOS setting (PCIe speed forced to a lower gen) or an older platform.",
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

fn one(facts: &Facts, g: &GpuFacts) -> Finding {
    let sys = facts.pci_of(g);
    let mut ev = Evidence::new();

    // NVML first; sysfs where NVML has nothing (and as a cross-check in the evidence).
    let sys_gen_cur = sys.and_then(|p| {
        p.current_link_gts
            .value()
            .copied()
            .and_then(pcie_gen_from_gts)
    });
    let sys_gen_max = sys.and_then(|p| p.max_link_gts.value().copied().and_then(pcie_gen_from_gts));
    let sys_w_cur = sys.and_then(|p| p.current_link_width.value().copied());
    let sys_w_max = sys.and_then(|p| p.max_link_width.value().copied());

    let (gen_cur, gen_src) = match (g.pcie.gen_current.value(), sys_gen_cur) {
        (Some(v), _) => (Some(*v), g.source.as_str()),
        (None, Some(v)) => (Some(v), "sysfs"),
        _ => (None, ""),
    };
    let w_cur = g.pcie.width_current.value().copied().or(sys_w_cur);
    let w_max = g.pcie.width_max.value().copied().or(sys_w_max);
    let gen_max_gpu = g.pcie.gen_max_gpu.value().copied().or(sys_gen_max);
    let gen_max_link = g.pcie.gen_max.value().copied();
    let gen_max_host = g.pcie.gen_max_host.value().copied();

    for (k, v) in [
        ("gen_current", gen_cur),
        ("gen_max", gen_max_link),
        ("gen_max_gpu", gen_max_gpu),
        ("gen_max_host", gen_max_host),
        ("width_current", w_cur),
        ("width_max", w_max),
    ] {
        if let Some(v) = v {
            ev.insert(k, v);
        }
    }
    if let (Some(a), Some(b)) = (sys_w_cur, sys_gen_cur) {
        ev.insert("sysfs_current", format!("gen{b} x{a}"));
    }
    if !gen_src.is_empty() {
        ev.insert("source", gen_src);
    }
    if let Some(r) = g.pcie.replay_counter.value() {
        ev.insert("replay_counter", r);
    }

    let (Some(gc), Some(wc)) = (gen_cur, w_cur) else {
        let why = g
            .pcie
            .gen_current
            .reason()
            .or(g.pcie.width_current.reason())
            .unwrap_or("not reported");
        return Finding::skip(ID, format!("{}: PCIe link not read: {why}", g.label())).evidence(ev);
    };
    let now = format!("gen{gc} x{wc}");

    if let Some(wm) = w_max {
        if wc < wm {
            let lost = pcie_link_gbps(gc, wm).zip(pcie_link_gbps(gc, wc));
            let mut msg = format!(
                "{} trained at x{wc}; it supports x{wm}: {} of the host bandwidth",
                g.label(),
                if wm == 2 * wc {
                    "half".to_string()
                } else {
                    format!("{wc}/{wm}")
                }
            );
            if let Some((full, now_gbps)) = lost {
                msg.push_str(&format!(
                    " ({now_gbps:.0} instead of {full:.0} GB/s per direction)"
                ));
            }
            return Finding::fail(ID, msg)
                .evidence(ev)
                .fix("Reseat the card or move it to a full x16 slot, check the riser; on a cloud instance, ask for a host where it trains at x16.");
        }
    }

    // The slot caps the generation below what the GPU can do.
    let host_cap = gen_max_host.or(gen_max_link);
    if let (Some(gpu_max), Some(cap)) = (gen_max_gpu, host_cap) {
        if cap < gpu_max {
            return Finding::warn(
                ID,
                format!(
                    "{}: the GPU supports PCIe gen{gpu_max}, the slot only gen{cap}: host copies run at {} of what the GPU could do",
                    g.label(),
                    if gpu_max == cap + 1 { "half".to_string() } else { format!("1/{}", 1u32 << (gpu_max - cap)) }
                ),
            )
            .evidence(ev)
            .fix("Check the BIOS PCIe speed setting; on a cloud instance, the platform is older than the GPU: ask for a host that matches it.");
        }
    }

    let best_gen = gen_max_link.or(gen_max_gpu);
    if let Some(gm) = best_gen {
        if gc < gm {
            if is_idle(g) {
                return Finding::pass(
                    ID,
                    format!(
                        "{} at {now} while idle (the GPU lowers the generation to save power; it can reach gen{gm}); width is full",
                        g.label()
                    ),
                )
                .evidence(ev);
            }
            return Finding::warn(
                ID,
                format!("{} runs at gen{gc} while busy; the link supports gen{gm}", g.label()),
            )
            .evidence(ev)
            .fix("Run `gpuaudit bench pcie` to measure it under load; if it stays low, check the BIOS PCIe settings or reseat the card.");
        }
    }

    let mut f =
        Finding::pass(ID, format!("{} at {now}, the most it supports", g.label())).evidence(ev);
    if let Some(r) = g.pcie.replay_counter.value().copied().filter(|r| *r > 0) {
        f = Finding::new(
            ID,
            Status::Info,
            format!("{} at {now}; {r} PCIe replays (link-level retransmissions) so far", g.label()),
        )
        .evidence(f.evidence)
        .fix("A count that keeps growing under load points at a bad riser, slot or cable: reseat the card.");
    }
    f
}
