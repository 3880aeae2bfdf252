//! memory.errors: uncorrectable ECC errors, retired pages, remapped rows and XID errors per GPU.

use crate::checks::common::per_gpu_many;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{short_bus_id, Facts, GpuFacts, XidEvent};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "memory.errors";

/// Retired pages (single- plus double-bit) from which the GPU should be replaced: the limit
/// the finding cites as NVIDIA's advice. (The explain text says 60, DESIGN's catalog 63: issue
/// 8 asks for one cited source.)
pub const RETIRED_PAGES_LIMIT: u64 = 60;
/// XIDs that point at the hardware or the driver (not at the application).
pub const FAULT_XIDS: &[u32] = &[48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140];

pub const CHECK: Check = Check {
    id: ID,
    title: "Uncorrectable ECC errors, retired pages, remapped rows, XID errors",
    looks_at: "uncorrectable ECC, retired pages (pending, or 63 and more), remapped rows pending \
               or failed, XID errors where the kernel log is readable",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Uncorrectable ECC error counts (volatile and lifetime), retired pages (before \
               Ampere: pending, or 60 and more), row remapping (Ampere and later: pending or \
               failed), and XID errors in the kernel log where it is readable.",
        why: "Uncorrectable errors kill the process that hit them; a pending remap or \
              retirement takes effect only after a reset; a failed remap or too many retired \
              pages mean the GPU should be replaced. XID 48/63/64/79/92/94/95/119 are hardware \
              or driver faults.",
        verify: "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER\nsudo dmesg | grep -i xid",
        fix: "Pending remap/retirement: reset the GPU (`sudo nvidia-smi -r -i N` with nothing \
              running) or reboot. Remap failure, 60+ retired pages, repeated uncorrectable \
              errors or XID 79: replace the GPU (ask the provider for another host).",
    },
    profiles: &[],
    run: errors,
};

fn xid_is_fault(code: u32) -> bool {
    FAULT_XIDS.contains(&code)
}

fn errors(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let xids = facts.xid_events.value();
    let mut out = per_gpu_many(ID, facts, policy, |g| errors_one(g, xids));
    // XIDs for GPUs the driver no longer lists (fallen off the bus) belong to the machine.
    if let Some(x) = xids {
        let orphan: Vec<&XidEvent> = x
            .iter()
            .filter(|e| {
                e.bus_id.as_ref().is_some_and(|b| {
                    !facts
                        .gpu_list()
                        .iter()
                        .any(|g| bus_matches(&g.pci_bus_id, b))
                })
            })
            .collect();
        if !orphan.is_empty() {
            out.push(
                Finding::fail(
                    ID,
                    format!(
                        "XID errors for GPU(s) the driver does not list: {}",
                        orphan.iter().map(|e| format!("XID {} at {}", e.code, e.bus_id.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(", ")
                    ),
                )
                .with("xids", orphan.iter().map(|e| &e.text).collect::<Vec<_>>())
                .fix("A GPU that fell off the bus (XID 79) needs a reset or power cycle; on a cloud instance, ask for another host."),
            );
        }
    }
    out
}

/// XID lines name the GPU as "PCI:0000:00:06" (no function) or with the function.
fn bus_matches(gpu_bus: &str, xid_bus: &str) -> bool {
    let g = gpu_bus.to_ascii_lowercase();
    let x = xid_bus.to_ascii_lowercase();
    g == x || g.starts_with(&format!("{x}.")) || short_bus_id(&g).starts_with(short_bus_id(&x))
}

fn errors_one(g: &GpuFacts, xids: Option<&Vec<XidEvent>>) -> Vec<Finding> {
    let mut ev = Evidence::new();
    let mut bad: Vec<(Status, String)> = Vec::new();
    let mut read_any = ev.insert_readings(&[
        ("volatile_uncorrected", &g.ecc.volatile_uncorrected),
        ("aggregate_uncorrected", &g.ecc.aggregate_uncorrected),
        ("volatile_corrected", &g.ecc.volatile_corrected),
        ("aggregate_corrected", &g.ecc.aggregate_corrected),
    ]);
    let vu = g.ecc.volatile_uncorrected.value().copied().unwrap_or(0);
    let au = g.ecc.aggregate_uncorrected.value().copied().unwrap_or(0);
    if vu > 0 {
        bad.push((
            Status::Fail,
            format!("{vu} uncorrectable ECC error(s) since the driver loaded"),
        ));
    } else if au > 0 {
        bad.push((
            Status::Warn,
            format!("{au} uncorrectable ECC error(s) in its lifetime"),
        ));
    }

    if let Reading::Value(rp) = &g.retired_pages {
        read_any = true;
        ev.insert("retired_pages", rp);
        let total = rp.single_bit + rp.double_bit;
        if total >= RETIRED_PAGES_LIMIT {
            bad.push((
                Status::Fail,
                format!(
                    "{total} retired pages: at the limit where NVIDIA advises replacing the GPU"
                ),
            ));
        }
        if rp.pending {
            bad.push((
                Status::Warn,
                "a page retirement is pending until the GPU is reset".into(),
            ));
        }
    }
    if let Reading::Value(rr) = &g.remapped_rows {
        read_any = true;
        ev.insert("remapped_rows", rr);
        if rr.failure {
            bad.push((
                Status::Fail,
                "row remapping failed: the GPU should be replaced".into(),
            ));
        }
        if rr.pending {
            bad.push((
                Status::Warn,
                "a row remap is pending until the GPU is reset".into(),
            ));
        }
        if rr.uncorrectable > 0 && !rr.failure {
            bad.push((
                Status::Info,
                format!(
                    "{} row(s) remapped after uncorrectable errors",
                    rr.uncorrectable
                ),
            ));
        }
    }
    if let Some(x) = xids {
        let mine: Vec<&XidEvent> = x
            .iter()
            .filter(|e| {
                e.bus_id
                    .as_ref()
                    .is_some_and(|b| bus_matches(&g.pci_bus_id, b))
            })
            .collect();
        if !mine.is_empty() {
            ev.insert("xids", mine.iter().map(|e| e.code).collect::<Vec<_>>());
            let faults: Vec<u32> = mine
                .iter()
                .map(|e| e.code)
                .filter(|c| xid_is_fault(*c))
                .collect();
            if !faults.is_empty() {
                bad.push((
                    Status::Fail,
                    format!("XID error(s) {faults:?} in the kernel log: hardware or driver faults"),
                ));
            } else {
                bad.push((
                    Status::Info,
                    format!(
                        "{} XID event(s) in the kernel log (application errors)",
                        mine.len()
                    ),
                ));
            }
        }
    }

    if !read_any {
        return vec![Finding::skip(
            ID,
            format!(
                "{}: ECC counters not read: {}",
                g.label(),
                g.ecc.volatile_uncorrected.reason().unwrap_or("?")
            ),
        )];
    }
    if bad.is_empty() {
        return vec![Finding::pass(
            ID,
            format!("{}: no uncorrectable errors, nothing pending", g.label()),
        )
        .evidence(ev)];
    }
    let worst = bad.iter().map(|b| b.0).max().unwrap_or(Status::Info);
    let text = bad.into_iter().map(|b| b.1).collect::<Vec<_>>().join("; ");
    let mut f = Finding::new(ID, worst, format!("{}: {text}", g.label())).evidence(ev);
    if worst != Status::Info {
        f = f.fix(format!(
            "Pending remaps/retirements: reset the GPU (`sudo nvidia-smi -r -i {}` with nothing running) or reboot. Failures or repeated uncorrectable errors: replace the GPU; on a cloud instance, ask for another host.",
            g.index
        ));
    }
    vec![f]
}
