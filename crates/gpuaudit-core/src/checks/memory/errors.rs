//! memory.errors: uncorrectable ECC errors, retired pages, remapped rows and XID errors per GPU.
//! A counter that could not be read is not a zero: the finding says which were not read and
//! why.

use crate::checks::common::{per_gpu_many, plural, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{ComputeCapability, Facts, GpuFacts, XidEvent};
use crate::finding::{Cause, Evidence, Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "memory.errors";

// Each threshold written once, as a literal the constants and the texts are built from.
macro_rules! retired_pages_limit {
    () => {
        63
    };
}
/// Calls `$then!` with the fault XIDs, so the list and its text come from one place.
macro_rules! fault_xids {
    ($then:ident) => {
        $then!(48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 121, 140)
    };
}
macro_rules! as_slice {
    ($($x:literal),*) => {
        &[$($x),*]
    };
}
macro_rules! as_text {
    ($first:literal $(, $x:literal)*) => {
        concat!($first $(, ", ", $x)*)
    };
}

/// Retired pages (single- plus double-bit) from which the GPU should be replaced. NVIDIA's
/// GPU Memory Error Management note: page retirement "supported a maximum of 64 retirements
/// for the frame buffer" (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/, "Row
/// Remapping", the table against legacy page retirement), and a threshold of retirements was
/// the RMA criterion; NVIDIA's DCGM fails a GPU at 63 retired pages,
/// `DCGM_LIMIT_MAX_RETIRED_PAGES` "updated to match the field diag" (NVIDIA/DCGM,
/// common/DcgmGPUHardwareLimits.h, commit 28bfbd4c97413d4aec249cdd9543a67d24f95b78; 60 in
/// older DCGM). gpuaudit uses the field diagnostic's 63: one retirement short of a full table.
pub const RETIRED_PAGES_LIMIT: u64 = retired_pages_limit!();
/// The frame buffer's capacity for retired pages (the same NVIDIA note).
pub const RETIRED_PAGES_MAX: u64 = 64;
/// XIDs that point at the hardware, its memory or firmware, or the driver, not at the
/// application: those NVIDIA's XID catalog (https://docs.nvidia.com/deploy/xid-errors/,
/// "Analyzing Xid Errors with the Xid Catalog") resolves with a GPU reset, a reboot or the
/// hardware: 48 double-bit ECC error, 61/62 internal micro-controller breakpoint/halt, 63/64
/// page retirement or row remapping event/failure, 74 NVLink error, 79 fallen off the bus,
/// 92 high single-bit ECC error rate, 94/95 contained/uncontained ECC error, 119/120 GSP
/// timeout/error, 121 C2C link error, 140 unrecovered ECC error. Any other XID is counted as
/// an application error.
pub const FAULT_XIDS: &[u32] = fault_xids!(as_slice);
/// Row remapping replaces page retirement from Ampere on (NVIDIA GPU Memory Error Management,
/// "Row Remapping": "a replacement for the page retirement scheme used in prior generation
/// GPUs"): the GPUs of compute capability 8.0 and later.
pub const ROW_REMAPPING_FROM: ComputeCapability = ComputeCapability { major: 8, minor: 0 };

pub const CHECK: Check = Check {
    id: ID,
    title: "Uncorrectable ECC errors, retired pages, remapped rows, XID errors",
    looks_at: concat!(
        "uncorrectable ECC, retired pages (pending, or ",
        retired_pages_limit!(),
        " and more), remapped rows pending or failed, XID errors where the kernel log is \
         readable"
    ),
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "Uncorrectable ECC error counts (volatile and lifetime), retired pages (before \
             Ampere: pending, or ",
            retired_pages_limit!(),
            " and more, NVIDIA's field-diagnostic limit, one short of the frame buffer's \
             maximum of 64), row remapping (Ampere and later: pending or failed), and XID \
             errors in the kernel log where it is readable. A counter that could not be read \
             (N/A under MIG or in a guest, not kept with ECC off) is not a zero: the finding \
             names what was not read and why, and is information, not a pass; where nothing \
             could be read it skips."
        ),
        why: concat!(
            "Uncorrectable errors kill the process that hit them; a pending remap or \
             retirement takes effect only after a reset; a failed remap or too many retired \
             pages mean the GPU should be replaced. XID ",
            fault_xids!(as_text),
            " are hardware, memory, firmware or driver faults in NVIDIA's XID catalog; other \
             XIDs are application errors."
        ),
        verify: "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER\nsudo dmesg | grep -i xid",
        fix: concat!(
            "Pending remap/retirement: reset the GPU (`sudo nvidia-smi -r -i N` with nothing \
             running) or reboot. Remap failure, ",
            retired_pages_limit!(),
            "+ retired pages, repeated uncorrectable errors or XID 79: replace the GPU (ask \
             the provider for another host)."
        ),
    },
    profiles: &[],
    run: errors,
};

fn xid_is_fault(code: u32) -> bool {
    FAULT_XIDS.contains(&code)
}

/// "48" / "48, 63": codes once each, in the order seen.
fn codes(list: impl IntoIterator<Item = u32>) -> String {
    let mut seen: Vec<u32> = Vec::new();
    for c in list {
        if !seen.contains(&c) {
            seen.push(c);
        }
    }
    seen.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn errors(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let mut out = per_gpu_many(ID, facts, policy, |g| {
        let link = crate::checks::pcie::aer::uncorrected_on(facts, policy, g)
            .then(|| Cause::gpu(crate::checks::pcie::aer::CHECK.id, g.index));
        errors_one(g, &facts.xid_events, link)
    });
    // XIDs for GPUs the driver no longer lists (fallen off the bus) belong to the machine.
    if let Some(x) = facts.xid_events.value() {
        let orphan: Vec<&XidEvent> = x
            .iter()
            .filter(|e| {
                !e.switch
                    && e.bus_id.as_ref().is_some_and(|b| {
                        !facts
                            .gpu_list()
                            .iter()
                            .any(|g| bus_matches(&g.pci_bus_id, b))
                    })
            })
            .collect();
        if !orphan.is_empty() {
            let mut buses: Vec<&str> = orphan.iter().filter_map(|e| e.bus_id.as_deref()).collect();
            buses.dedup();
            out.push(
                Finding::fail(
                    ID,
                    format!(
                        "{} in the kernel log for {} the driver does not list: {}",
                        if orphan.len() == 1 { "An XID" } else { "XIDs" },
                        if buses.len() == 1 { "a GPU" } else { "GPUs" },
                        orphan.iter().map(|e| format!("XID {} at {}", e.code, e.bus_id.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(", ")
                    ),
                )
                .with("xids", orphan.iter().map(|e| &e.text).collect::<Vec<_>>())
                .fix("A GPU that fell off the bus (XID 79) needs a reset or power cycle; on a cloud instance, ask for another host.")
                // Each one a GPU on the PCI bus that the driver does not list: gpu.present's
                // problem, which these events explain.
                .caused_by_opt(
                    buses
                        .iter()
                        .all(|b| {
                            facts.pci_gpus.value().is_some_and(|p| {
                                p.iter().any(|f| bus_matches(&f.bus_id, b))
                            })
                        })
                        .then(|| Cause::check(crate::checks::gpu::present::CHECK.id)),
                ),
            );
        }
    }
    out
}

/// XID lines name the GPU as "PCI:0000:00:06" (no function) or with the function; both sides
/// normalised (domain to 4 digits, lower case) before they are compared whole.
fn bus_matches(gpu_bus: &str, xid_bus: &str) -> bool {
    crate::checks::causes::xid_names(gpu_bus, xid_bus)
}

/// Which memory repair this GPU has: `Some(true)` row remapping, `Some(false)` page
/// retirement, `None` where its compute capability is not known.
fn remaps_rows(g: &GpuFacts) -> Option<bool> {
    g.compute_capability
        .value()
        .copied()
        .or_else(|| spec_of(g).and_then(|s| s.compute_capability()))
        .map(|cc| cc >= ROW_REMAPPING_FROM)
}

/// What one GPU's counters say, and what could not be read.
#[derive(Default)]
struct Tally {
    /// The problems, with their status.
    problems: Vec<(Status, String)>,
    /// What was read and is clean, in words ("no uncorrectable ECC errors").
    clean: Vec<String>,
    /// Counters not read, with the reason.
    unread: Vec<String>,
    /// Counters that are not kept here (ECC off), said as such.
    not_kept: Vec<String>,
    read_any: bool,
    /// The kernel log's fault Xids on the GPU are all ones a failed PCIe link explains
    /// (`LINK_XIDS`).
    link_xids_only: bool,
}

/// Fault Xids that follow from the PCIe link failing (Xid 79, "GPU has fallen off the bus",
/// after a surprise link down or an uncorrected AER error): where pcie.aer reports an
/// uncorrected error on the GPU's path, the link is the cause, not the GPU's memory.
pub const LINK_XIDS: &[u32] = &[79];

fn ecc_counters(g: &GpuFacts, ev: &mut Evidence, t: &mut Tally) {
    ev.insert_readings(&[
        ("volatile_uncorrected", &g.ecc.volatile_uncorrected),
        ("aggregate_uncorrected", &g.ecc.aggregate_uncorrected),
        ("volatile_corrected", &g.ecc.volatile_corrected),
        ("aggregate_corrected", &g.ecc.aggregate_corrected),
    ]);
    let vu = g.ecc.volatile_uncorrected.value().copied();
    let au = g.ecc.aggregate_uncorrected.value().copied();
    if vu.is_none() && au.is_none() {
        let why = g
            .ecc
            .volatile_uncorrected
            .reason()
            .unwrap_or("not reported");
        if g.ecc.current.value() == Some(&false) {
            t.not_kept
                .push("ECC is off, so no ECC error is counted (see memory.ecc)".into());
        } else {
            t.unread.push(format!("the ECC error counters ({why})"));
        }
        return;
    }
    t.read_any = true;
    match (vu, au) {
        (Some(v), _) if v > 0 => t.problems.push((
            Status::Fail,
            format!(
                "{} since the driver loaded",
                plural(
                    v as usize,
                    "uncorrectable ECC error",
                    "uncorrectable ECC errors"
                )
            ),
        )),
        (_, Some(a)) if a > 0 => t.problems.push((
            Status::Warn,
            format!(
                "{} in its lifetime",
                plural(
                    a as usize,
                    "uncorrectable ECC error",
                    "uncorrectable ECC errors"
                )
            ),
        )),
        _ => t.clean.push("no uncorrectable ECC errors".into()),
    }
    if vu.is_none() {
        t.unread.push(format!(
            "the volatile uncorrectable ECC counter ({})",
            g.ecc
                .volatile_uncorrected
                .reason()
                .unwrap_or("not reported")
        ));
    }
    if au.is_none() {
        t.unread.push(format!(
            "the lifetime uncorrectable ECC counter ({})",
            g.ecc
                .aggregate_uncorrected
                .reason()
                .unwrap_or("not reported")
        ));
    }
}

/// What a bare "N/A" (or NVML's "not supported on this GPU") means for the repair counters
/// of a GPU whose architecture keeps them (`remaps`: row remapping, Ampere and later; else page
/// retirement): not that the architecture has none, but that the driver did not report them
/// here. `None` for any other reason (missing, implausible, one that explains itself), which
/// stands as it is.
fn not_reported(g: &GpuFacts, remaps: bool, why: &str) -> Option<String> {
    if !(why.ends_with("N/A") || why.ends_with(crate::facts::NVML_NOT_SUPPORTED)) {
        return None;
    }
    Some(match g.mig.current.value() {
        Some(true) if remaps => format!("{why}: not reported with MIG on"),
        _ => format!("{why}: not reported by this driver or VM, or not kept on this board"),
    })
}

fn retired_pages(g: &GpuFacts, applies: bool, ev: &mut Evidence, t: &mut Tally) {
    let rp = match &g.retired_pages {
        Reading::Value(rp) => rp,
        Reading::Unavailable(why) => {
            if applies {
                let why = match remaps_rows(g) {
                    Some(false) => not_reported(g, false, why).unwrap_or_else(|| why.clone()),
                    _ => why.clone(),
                };
                t.unread.push(format!("retired pages ({why})"));
            }
            return;
        }
    };
    t.read_any = true;
    ev.insert("retired_pages", rp);
    let total = rp.single_bit + rp.double_bit;
    if total >= RETIRED_PAGES_LIMIT {
        t.problems.push((
            Status::Fail,
            format!(
                "{total} retired pages: at NVIDIA's limit for replacing the GPU ({RETIRED_PAGES_LIMIT}; the frame buffer retires {RETIRED_PAGES_MAX} at most)"
            ),
        ));
    } else if total > 0 {
        t.problems.push((
            Status::Info,
            format!(
                "{} (the replacement limit is {RETIRED_PAGES_LIMIT})",
                plural(total as usize, "retired page", "retired pages")
            ),
        ));
    }
    if rp.pending {
        t.problems.push((
            Status::Warn,
            "a page retirement is pending until the GPU is reset".into(),
        ));
    } else if total == 0 {
        t.clean.push("no retired page, none pending".into());
    }
}

fn remapped_rows(g: &GpuFacts, applies: bool, ev: &mut Evidence, t: &mut Tally) {
    let rr = match &g.remapped_rows {
        Reading::Value(rr) => rr,
        Reading::Unavailable(why) => {
            if applies {
                let why = match remaps_rows(g) {
                    Some(true) => not_reported(g, true, why).unwrap_or_else(|| why.clone()),
                    _ => why.clone(),
                };
                t.unread.push(format!("remapped rows ({why})"));
            }
            return;
        }
    };
    t.read_any = true;
    ev.insert("remapped_rows", rr);
    let before = t.problems.len();
    if rr.failure {
        t.problems.push((
            Status::Fail,
            "row remapping failed: the GPU should be replaced".into(),
        ));
    }
    if rr.pending {
        t.problems.push((
            Status::Warn,
            "a row remap is pending until the GPU is reset".into(),
        ));
    }
    if rr.uncorrectable > 0 && !rr.failure {
        t.problems.push((
            Status::Info,
            format!(
                "{} after uncorrectable errors",
                plural(rr.uncorrectable as usize, "row remapped", "rows remapped")
            ),
        ));
    }
    if rr.correctable > 0 {
        t.problems.push((
            Status::Info,
            format!(
                "{} after correctable errors",
                plural(rr.correctable as usize, "row remapped", "rows remapped")
            ),
        ));
    }
    if t.problems.len() == before {
        t.clean
            .push("no row remapped, none pending or failed".into());
    }
}

fn kernel_log(g: &GpuFacts, xids: &Reading<Vec<XidEvent>>, ev: &mut Evidence, t: &mut Tally) {
    let x = match xids {
        Reading::Value(x) => x,
        Reading::Unavailable(why) => {
            ev.insert("xid_events_unavailable", why);
            return;
        }
    };
    let mine: Vec<&XidEvent> = x
        .iter()
        .filter(|e| {
            !e.switch
                && e.bus_id
                    .as_ref()
                    .is_some_and(|b| bus_matches(&g.pci_bus_id, b))
        })
        .collect();
    if mine.is_empty() {
        t.clean.push("no XID in the kernel log".into());
        return;
    }
    ev.insert("xids", mine.iter().map(|e| e.code).collect::<Vec<_>>());
    let faults: Vec<u32> = mine
        .iter()
        .map(|e| e.code)
        .filter(|c| xid_is_fault(*c))
        .collect();
    if !faults.is_empty() {
        t.link_xids_only = faults.iter().all(|c| LINK_XIDS.contains(c));
        let list = codes(faults.iter().copied());
        let many = list.contains(", ");
        t.problems.push((
            Status::Fail,
            format!(
                "{} {list} in the kernel log: {}",
                if many { "XIDs" } else { "XID" },
                if many {
                    "hardware or driver faults"
                } else {
                    "a hardware or driver fault"
                }
            ),
        ));
    } else {
        t.problems.push((
            Status::Info,
            format!(
                "{} in the kernel log (application errors: XID {})",
                plural(mine.len(), "XID event", "XID events"),
                codes(mine.iter().map(|e| e.code))
            ),
        ));
    }
}

/// Whether memory.errors has a problem on `g`: health.xid reads the same fault Xids and names
/// this finding as their cause (memory.errors judges them with the ECC counters), so that one
/// cause is one problem.
pub fn gpu_has_problem(g: &GpuFacts, xids: &Reading<Vec<XidEvent>>) -> bool {
    errors_one(g, xids, None)
        .iter()
        .any(|f| matches!(f.status, Status::Fail | Status::Warn))
}

/// `link`: pcie.aer's finding on this GPU where it reports an uncorrected error on the GPU's
/// path; it is the cause where the only problem here is a Xid the link failing explains.
fn errors_one(g: &GpuFacts, xids: &Reading<Vec<XidEvent>>, link: Option<Cause>) -> Vec<Finding> {
    let mut ev = Evidence::new();
    let mut t = Tally::default();
    let rows = remaps_rows(g);
    ecc_counters(g, &mut ev, &mut t);
    // Where the compute capability is not known, either mechanism may apply: a missing one
    // counts as unread only if the other was not read either.
    let neither = !g.retired_pages.is_value() && !g.remapped_rows.is_value();
    retired_pages(g, rows.map_or(neither, |r| !r), &mut ev, &mut t);
    remapped_rows(g, rows.unwrap_or(neither), &mut ev, &mut t);
    kernel_log(g, xids, &mut ev, &mut t);
    if !t.unread.is_empty() {
        ev.insert("not_read", &t.unread);
    }

    if !t.read_any {
        let mut why = t.not_kept.clone();
        why.extend(t.unread.iter().cloned());
        return vec![Finding::skip(
            ID,
            format!(
                "{}: no memory error counter could be read: {}",
                g.label(),
                why.join("; ")
            ),
        )
        .evidence(ev)];
    }

    let worst = t.problems.iter().map(|p| p.0).max();
    let mut parts: Vec<String> = if t.problems.is_empty() {
        vec![t.clean.join(", ")]
    } else {
        t.problems.iter().map(|p| p.1.clone()).collect()
    };
    parts.extend(t.not_kept.iter().cloned());
    if !t.unread.is_empty() {
        parts.push(format!(
            "not read: {}, so what {} would show is not known",
            t.unread.join(", "),
            if t.unread.len() == 1 { "it" } else { "they" }
        ));
    }
    let status = match worst {
        Some(w) => w,
        None if t.unread.is_empty() => Status::Pass,
        None => Status::Info,
    };
    let mut f =
        Finding::new(ID, status, format!("{}: {}", g.label(), parts.join("; "))).evidence(ev);
    let link = link.filter(|_| t.link_xids_only && t.problems.len() == 1);
    if let Some(cause) = link {
        // The memory counters are clean: the GPU dropped off a failed link. pcie.aer's fix
        // (the slot, riser or upstream port) is the one to follow; no GPU replacement.
        f = f
            .fix(format!(
                "The PCIe link failed first (pcie.aer's finding on this GPU): follow its fix; then reset the GPU (`sudo nvidia-smi -r -i {}`) or reboot to bring it back.",
                g.index
            ))
            .caused_by(cause);
    } else if status > Status::Info {
        f = f.fix(format!(
            "Pending remaps/retirements: reset the GPU (`sudo nvidia-smi -r -i {}` with nothing running) or reboot. Failures or repeated uncorrectable errors: replace the GPU; on a cloud instance, ask for another host.",
            g.index
        ));
    } else if !t.unread.is_empty() {
        f = f.fix("Read them by hand where they are kept: `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER` (on the host, for a VM or a MIG instance).");
    }
    vec![f]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{RemappedRows, RetiredPages};
    use crate::testing::Machine;

    fn run(f: &Facts) -> Vec<Finding> {
        (CHECK.run)(f, &Policy::default())
    }

    fn one(key: &str, change: impl FnOnce(&mut GpuFacts)) -> Finding {
        run(&Machine::healthy(key, 1).gpu(0, change).build()).remove(0)
    }

    fn xid(bus: &str, code: u32) -> XidEvent {
        XidEvent {
            bus_id: Some(bus.into()),
            code,
            text: format!("NVRM: Xid (PCI:{bus}): {code}, ..."),
            ..Default::default()
        }
    }

    #[test]
    fn clean_counters_pass_and_say_what_was_read() {
        let x = one("h200-sxm-141gb", |_| {});
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.ends_with(
                "no uncorrectable ECC errors, no row remapped, none pending or failed, no XID in the kernel log"
            ),
            "{}",
            x.message
        );
        assert!(x.evidence.get("not_read").is_none());
        let x = one("v100-sxm2-32gb", |_| {});
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.contains("no retired page, none pending"),
            "{}",
            x.message
        );
    }

    #[test]
    fn uncorrectable_errors_fail_now_and_warn_from_the_past() {
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.volatile_uncorrected = Reading::Value(1)
        });
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message
                .contains("1 uncorrectable ECC error since the driver loaded"),
            "{}",
            x.message
        );
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.volatile_uncorrected = Reading::Value(3)
        });
        assert!(
            x.message.contains("3 uncorrectable ECC errors since"),
            "{}",
            x.message
        );
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.aggregate_uncorrected = Reading::Value(2)
        });
        assert_eq!(x.status, Status::Warn);
        assert!(x
            .message
            .contains("2 uncorrectable ECC errors in its lifetime"));
        assert!(x.fix.is_some());
    }

    #[test]
    fn retired_pages_at_the_limit_fail_and_below_it_are_information() {
        let pages = |n: u64, pending: bool| {
            one("v100-sxm2-32gb", move |g| {
                g.retired_pages = Reading::Value(RetiredPages {
                    single_bit: n / 2,
                    double_bit: n - n / 2,
                    pending,
                })
            })
        };
        let x = pages(RETIRED_PAGES_LIMIT, false);
        assert_eq!(x.status, Status::Fail);
        assert!(
            x.message.contains("63 retired pages: at NVIDIA's limit"),
            "{}",
            x.message
        );
        let x = pages(RETIRED_PAGES_LIMIT - 1, false);
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message
                .contains("62 retired pages (the replacement limit is 63)"),
            "{}",
            x.message
        );
        assert!(pages(1, false).message.contains("1 retired page (the"));
        let x = pages(0, true);
        assert_eq!(x.status, Status::Warn);
        assert!(x.message.contains("pending until the GPU is reset"));
        assert_eq!(pages(0, false).status, Status::Pass);
    }

    #[test]
    fn remapped_rows_failed_pending_and_counted() {
        let rows = |c: u64, u: u64, pending: bool, failure: bool| {
            one("h200-sxm-141gb", move |g| {
                g.remapped_rows = Reading::Value(RemappedRows {
                    correctable: c,
                    uncorrectable: u,
                    pending,
                    failure,
                })
            })
        };
        assert_eq!(rows(0, 0, false, true).status, Status::Fail);
        assert_eq!(rows(0, 0, true, false).status, Status::Warn);
        let x = rows(0, 2, false, false);
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("2 rows remapped after uncorrectable errors"),
            "{}",
            x.message
        );
        let x = rows(1, 0, false, false);
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("1 row remapped after correctable errors"),
            "{}",
            x.message
        );
        // A failure says so once, not also as a count.
        let x = rows(0, 8, false, true);
        assert!(!x.message.contains("after uncorrectable"), "{}", x.message);
    }

    #[test]
    fn unread_counters_are_not_zero_the_a100_mig_case() {
        // Counters read, remapped rows N/A under MIG: information, said which and why.
        let x = one("a100-sxm4-80gb", |g| {
            g.remapped_rows = Reading::unavailable("nvidia-smi: <remapped_rows> N/A");
            g.mig.current = Reading::Value(true);
        });
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message.contains("no uncorrectable ECC errors"),
            "{}",
            x.message
        );
        assert!(!x.message.contains("nothing pending"), "{}", x.message);
        // An A100 remaps rows: N/A is the driver's, not "row remapping is Ampere and later".
        assert!(
            x.message
                .contains("not read: remapped rows (nvidia-smi: <remapped_rows> N/A: not reported with MIG on), so what it would show is not known"),
            "{}",
            x.message
        );
        assert!(!x.message.contains("Ampere"), "{}", x.message);
        assert!(x.fix.as_deref().unwrap_or("").contains("ROW_REMAPPER"));
        assert_eq!(
            x.evidence.get("not_read").unwrap(),
            &serde_json::json!([
                "remapped rows (nvidia-smi: <remapped_rows> N/A: not reported with MIG on)"
            ])
        );
        // MIG off (or not read), or NVML's "not supported": the driver or the VM.
        for (why, mig) in [
            ("nvidia-smi: <remapped_rows> N/A", Reading::Value(false)),
            (
                "nvidia-smi: <remapped_rows> N/A",
                Reading::unavailable("N/A"),
            ),
            (crate::facts::NVML_NOT_SUPPORTED, Reading::Value(false)),
        ] {
            let x = one("a100-sxm4-80gb", |g| {
                g.remapped_rows = Reading::unavailable(why);
                g.mig.current = mig;
            });
            assert!(
                x.message.contains(&format!(
                    "remapped rows ({why}: not reported by this driver or VM, or not kept on this board)"
                )),
                "{}",
                x.message
            );
        }
        // A reason other than a bare N/A stands as it is.
        for why in [
            "nvidia-smi: <remapped_rows> missing",
            "N/A: no ECC on this board",
        ] {
            let x = one("a100-sxm4-80gb", |g| {
                g.remapped_rows = Reading::unavailable(why);
                g.mig.current = Reading::Value(true);
            });
            assert!(
                x.message.contains(&format!("remapped rows ({why})")),
                "{}",
                x.message
            );
        }
        // Before Ampere the same goes for retired pages; remapped rows do not apply there.
        let x = one("v100-sxm2-32gb", |g| {
            g.retired_pages = Reading::unavailable("N/A");
            g.mig.current = Reading::Value(true);
        });
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message.contains(
                "not read: retired pages (N/A: not reported by this driver or VM, or not kept on this board)"
            ),
            "{}",
            x.message
        );
        assert!(!x.message.contains("remapped rows"), "{}", x.message);
        // A GPU whose architecture is not known: the reason as the driver gave it.
        let x = one("v100-sxm2-32gb", |g| {
            g.retired_pages = Reading::unavailable("N/A");
            g.compute_capability = Reading::unavailable("not read");
            g.name = Reading::Value("Some GPU".into());
            g.pci_device_id = Reading::unavailable("not read");
        });
        assert!(x.message.contains("retired pages (N/A)"), "{}", x.message);
        // One of the two uncorrectable counters unread.
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.aggregate_uncorrected = Reading::unavailable("N/A")
        });
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("the lifetime uncorrectable ECC counter (N/A)"),
            "{}",
            x.message
        );
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.volatile_uncorrected = Reading::unavailable("N/A")
        });
        assert!(
            x.message
                .contains("the volatile uncorrectable ECC counter (N/A)"),
            "{}",
            x.message
        );
        // Several unread: "they".
        let x = one("h200-sxm-141gb", |g| {
            g.ecc.aggregate_uncorrected = Reading::unavailable("N/A");
            g.remapped_rows = Reading::unavailable("N/A");
        });
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message.contains(
                "remapped rows (N/A: not reported by this driver or VM, or not kept on this board), so what they would show"
            ),
            "{}",
            x.message
        );
    }

    #[test]
    fn ecc_off_keeps_no_counters_and_the_rows_still_speak() {
        // The RTX PRO 6000 / RTX 4000 Ada case: ECC off, counters N/A, remapped rows 0.
        let x = one("l40s", |g| {
            g.ecc.current = Reading::Value(false);
            g.ecc.volatile_uncorrected = Reading::unavailable("N/A");
            g.ecc.aggregate_uncorrected = Reading::unavailable("N/A");
        });
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        assert!(
            x.message
                .contains("no row remapped, none pending or failed"),
            "{}",
            x.message
        );
        assert!(
            x.message
                .contains("ECC is off, so no ECC error is counted (see memory.ecc)"),
            "{}",
            x.message
        );
        assert!(!x.message.contains("no uncorrectable"), "{}", x.message);
    }

    #[test]
    fn nothing_readable_skips_with_every_reason() {
        let x = one("rtx-2080", |g| {
            g.ecc.current = Reading::unavailable("N/A");
            g.ecc.volatile_uncorrected = Reading::unavailable("N/A: no ECC");
            g.ecc.aggregate_uncorrected = Reading::unavailable("N/A: no ECC");
            g.retired_pages = Reading::unavailable("N/A: GeForce");
        });
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message.contains(
                "no memory error counter could be read: the ECC error counters (N/A: no ECC); retired pages (N/A: GeForce)"
            ),
            "{}",
            x.message
        );
        // The compute capability not known: the mechanism that was read is the GPU's, the
        // other is not a gap.
        let x = one("v100-sxm2-32gb", |g| {
            g.compute_capability = Reading::unavailable("N/A");
            g.name = Reading::Value("NVIDIA Mystery".into());
            g.pci_device_id = Reading::unavailable("redacted");
            g.remapped_rows = Reading::unavailable("N/A");
        });
        assert_eq!(x.status, Status::Pass, "{}", x.message);
        // The compute capability not known and neither mechanism read: both named.
        let x = one("h200-sxm-141gb", |g| {
            g.compute_capability = Reading::unavailable("N/A");
            g.name = Reading::Value("NVIDIA Mystery".into());
            g.pci_device_id = Reading::unavailable("redacted");
            g.ecc.volatile_uncorrected = Reading::unavailable("N/A");
            g.ecc.aggregate_uncorrected = Reading::unavailable("N/A");
            g.retired_pages = Reading::unavailable("N/A");
            g.remapped_rows = Reading::unavailable("N/A");
        });
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message.contains("retired pages (N/A)") && x.message.contains("remapped rows (N/A)"),
            "{}",
            x.message
        );
    }

    #[test]
    fn xids_fault_application_unread_and_orphaned() {
        let bus = crate::testing::bus_id(0);
        let with = |x: Reading<Vec<XidEvent>>| {
            run(&Machine::healthy("h200-sxm-141gb", 1)
                .with(|f| f.xid_events = x)
                .build())
        };
        let out = with(Reading::Value(vec![xid(&bus[..12], 79)]));
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            out[0]
                .message
                .contains("XID 79 in the kernel log: a hardware or driver fault"),
            "{}",
            out[0].message
        );
        let out = with(Reading::Value(vec![
            xid(&bus, 48),
            xid(&bus, 63),
            xid(&bus, 48),
        ]));
        assert!(
            out[0]
                .message
                .contains("XIDs 48, 63 in the kernel log: hardware or driver faults"),
            "{}",
            out[0].message
        );
        let out = with(Reading::Value(vec![xid(&bus, 13), xid(&bus, 31)]));
        assert_eq!(out[0].status, Status::Info);
        assert!(
            out[0]
                .message
                .contains("2 XID events in the kernel log (application errors: XID 13, 31)"),
            "{}",
            out[0].message
        );
        // The kernel log not read: no claim about XIDs, the reason in the evidence.
        let out = with(Reading::unavailable("dmesg: permission denied"));
        assert_eq!(out[0].status, Status::Pass);
        assert!(!out[0].message.contains("XID"), "{}", out[0].message);
        assert_eq!(
            out[0].evidence.get("xid_events_unavailable").unwrap(),
            "dmesg: permission denied"
        );
        // An XID for a GPU the driver does not list.
        let out = with(Reading::Value(vec![xid("0000:00:07", 79)]));
        let m = out.iter().find(|f| f.gpu.is_none()).unwrap();
        assert_eq!(m.status, Status::Fail);
        // Not on the PCI bus either: nothing else explains it.
        assert_eq!(m.caused_by, None);
        // On the PCI bus and not listed: gpu.present's problem, which it explains.
        let lost = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                if let Reading::Value(g) = &mut f.gpus {
                    g.truncate(1);
                }
                f.xid_events = Reading::Value(vec![xid("0000:00:07", 79)]);
            })
            .build();
        let out = run(&lost);
        let m = out.iter().find(|f| f.gpu.is_none()).unwrap();
        assert_eq!(m.caused_by, Some(Cause::check("gpu.present")));
        assert!(
            m.message.contains(
                "An XID in the kernel log for a GPU the driver does not list: XID 79 at 0000:00:07"
            ),
            "{}",
            m.message
        );
        let out = with(Reading::Value(vec![
            xid("0000:00:07", 79),
            xid("0000:00:08", 79),
        ]));
        let m = out.iter().find(|f| f.gpu.is_none()).unwrap();
        assert!(
            m.message.starts_with("XIDs in the kernel log for GPUs"),
            "{}",
            m.message
        );
    }

    #[test]
    fn every_fault_xid_fails_and_the_texts_name_exactly_them() {
        for c in FAULT_XIDS {
            assert!(xid_is_fault(*c));
        }
        assert!(!xid_is_fault(13) && !xid_is_fault(31) && !xid_is_fault(43));
        let why = CHECK.doc.why;
        let listed = why
            .split_once("XID ")
            .and_then(|(_, rest)| rest.split_once(" are "))
            .map(|(list, _)| list)
            .unwrap_or_else(|| panic!("no XID list in: {why}"));
        let listed: Vec<u32> = listed.split(", ").map(|c| c.parse().unwrap()).collect();
        assert_eq!(listed, FAULT_XIDS);
        for text in [CHECK.looks_at, CHECK.doc.what, CHECK.doc.fix] {
            assert!(text.contains(&RETIRED_PAGES_LIMIT.to_string()), "{text}");
        }
    }

    #[test]
    fn bus_ids_match_with_or_without_the_function() {
        assert!(bus_matches("0000:00:06.0", "0000:00:06"));
        assert!(bus_matches("0000:00:06.0", "0000:00:06.0"));
        assert!(bus_matches("0000:3B:00.0", "0000:3b:00"));
        assert!(!bus_matches("0000:00:06.0", "0000:00:07"));
        assert!(bus_matches("0000:00:06.0", "00000000:00:06"));
        // Compared whole: a prefix of another address is not it.
        assert!(!bus_matches("0000:00:1e.0", "0000:00:1"));
        assert!(!bus_matches("0000:00:06.0", "0000:00:06.1"));
        assert!(!bus_matches("0001:00:06.0", "0000:00:06"));
    }
}
