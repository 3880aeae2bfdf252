//! pcie.aer: PCIe Advanced Error Reporting of each GPU and of every port on its path to the
//! root port (sysfs counters since boot), the kernel log's AER reports, and the kernel's
//! "limited by" bandwidth notices.

use crate::checks::common::{count_of, no_gpu_reason, selected};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{
    normalize_bus_id, short_bus_id, AerCounts, AerLogEvent, AerPath, AerPort, AerSeverity, Facts,
    GpuFacts, KernelLogPcie, LinkNotice, Origin,
};
use crate::finding::{Cause, Finding, Status};
use crate::parse::xid::iso;
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use serde::Serialize;

const ID: &str = "pcie.aer";

macro_rules! corrected_per_day {
    () => {
        100
    };
}
macro_rules! log_corrected_warn {
    () => {
        10
    };
}
macro_rules! lookback_days {
    () => {
        7
    };
}

/// Corrected errors per day of uptime on one function of the path from which the check
/// warns. A healthy link counts none, or a handful in the seconds the link trains at boot
/// (the kernel's ABI text: errors "may be seen by the link partner"); each corrected error
/// is a retransmitted packet, so a steady stream is a link that is marginal now and loses
/// data later (uncorrected errors, Xid 79). NVIDIA's DCGM calls 8 PCIe replays a minute
/// (11,520 a day) the most the driver tolerates (`DCGM_LIMIT_MAX_PCIREPLAY_RATE`,
/// DcgmGPUHardwareLimits.h); 100 a day is two orders of magnitude below that: an early
/// warning, not noise from one boot. The uptime counts as at least one day, so that the
/// burst of a fresh boot has to reach 100 too. gpuaudit's choice.
pub const CORRECTED_PER_DAY: u64 = corrected_per_day!();
/// Corrected-error reports of the kernel log within the lookback, on the GPU's path, from
/// which the check warns: each printed report can stand for several errors ("Multiple
/// Corrected error received") and kernels rate-limit the prints, so the log undercounts;
/// ten reports in a week is a link that keeps failing, not a boot-time blip. Fewer inform.
pub const LOG_CORRECTED_WARN: usize = log_corrected_warn!();
/// How far back dated kernel-log lines count (health.xid's lookback).
pub const LOOKBACK_DAYS: i64 = lookback_days!();
/// At most this many log lines go into a finding's evidence (each escaped and cut).
pub const MAX_LINES_SHOWN: usize = 5;
/// At most this many problems are named in one finding's message.
pub const MAX_PARTS: usize = 4;

/// The correctable errors that are the electrical link's: a receiver error (bad symbols on
/// the wire), a bad TLP or DLLP (a packet's CRC failed), a replay number rollover and a
/// replay timer timeout (packets resent until the counter wrapped or the timer ran out).
/// Both the kernel's short names and the long ones of its ABI documentation.
const SIGNAL_INTEGRITY: &[&str] = &[
    "RxErr",
    "Receiver Error",
    "BadTLP",
    "Bad TLP",
    "BadDLLP",
    "Bad DLLP",
    "Rollover",
    "RELAY_NUM Rollover",
    "REPLAY_NUM Rollover",
    "Timeout",
    "Replay Timer Timeout",
];

pub const CHECK: Check = Check {
    id: ID,
    title: "PCIe AER errors of the GPU and the ports above it, and the kernel's link notices",
    looks_at: concat!(
        "PCIe Advanced Error Reporting counters of each GPU and every port up to its root port \
         (uncorrected errors fail; corrected ones warn from ",
        corrected_per_day!(),
        " a day of uptime), the kernel log's AER reports and its \"limited by\" bandwidth \
         notices"
    ),
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "For each GPU, the PCI functions from the GPU up to its root port (the GPU's \
             /sys/bus/pci/devices/BDF link resolved into /sys/devices/pci.../: every parent \
             that is a PCI function, such as a PCIe switch's downstream and upstream ports), \
             and of each its sysfs AER counters, counted since boot: aer_dev_correctable, \
             aer_dev_nonfatal, aer_dev_fatal (per error: RxErr, BadTLP, BadDLLP, Rollover, \
             Timeout, ..., and the TOTAL_ERR_ line), and aer_rootport_total_err_* on the root \
             port. The uptime (/proc/uptime) gives the corrected errors per day. The kernel \
             log (/dev/kmsg, else journalctl -k, else /var/log/kern.log, messages or syslog; \
             cmd/kernel-log.txt in a snapshot) gives the \"PCIe Bus Error: severity=...\" \
             reports about these functions with the error names under them (dated lines \
             for the last ",
            lookback_days!(),
            " days), and the kernel's \"N Gb/s available PCIe bandwidth, limited by S GT/s \
             PCIe xW link at BDF\" notice written when the GPU was probed."
        ),
        why: concat!(
            "An uncorrected error (non-fatal: a transaction lost; fatal: the link is reset) is \
             what precedes a GPU falling off the bus (Xid 79): it fails. Corrected errors are \
             retransmissions: a few over months are normal, a steady stream is a marginal \
             link; from ",
            corrected_per_day!(),
            " a day of uptime on one function (the uptime counted as at least a day), or ",
            log_corrected_warn!(),
            " corrected reports in the kernel log within the lookback, the check warns and \
             names where: at the GPU or the port just above it is the GPU's own link (the \
             GPU's seating, its riser, cable or slot), further up is the switch's or the root \
             port's link, shared by every device below it. Receiver errors, bad TLPs and \
             DLLPs, replay rollovers and timeouts are the electrical link's (signal \
             integrity). A \"limited by\" notice about the GPU's own link is pcie.link's \
             finding where it has one (one problem, named there); one naming a port further \
             up is said as such. Where the counters are not there (a kernel without AER \
             statistics, AER owned by the firmware, a VM) the check says what cannot be known; \
             where they cannot be read, it skips naming the path."
        ),
        verify: "# BUS_ID: the GPU's address as `lspci -D -d 10de:` lists it, e.g. 0000:18:00.0\n\
                 readlink -f /sys/bus/pci/devices/BUS_ID   # the ports above it, root port first\n\
                 for d in $(readlink -f /sys/bus/pci/devices/BUS_ID | tr / '\\n' | grep -E '^[0-9a-f]{4}:'); do echo \"== $d\"; grep -H . /sys/bus/pci/devices/$d/aer_dev_* /sys/bus/pci/devices/$d/aer_rootport_total_err_* 2>/dev/null | grep -v -e ' 0$' -e ':0$'; done\n\
                 cat /proc/uptime\n\
                 sudo dmesg -T | grep -e 'PCIe Bus Error' -e 'AER:' -e 'limited by'\n\
                 journalctl -k --since \"7 days ago\" | grep -e 'PCIe Bus Error' -e 'limited by'",
        fix: "Errors at the GPU or the port just above it: reseat the GPU, check or replace its \
              riser or cable, try another slot; on a server, ask the vendor (a retimer or the \
              board). Errors further up (a switch's upstream port, the root port): the switch \
              or the board, not this GPU: every device below that port is affected. Uncorrected \
              errors: drain the node and have the path checked; a BIOS setting that lowers the \
              link speed (PCIe Gen) can keep a marginal link up meanwhile.",
    },
    profiles: &[],
    run: check,
};

/// Where on the path a function is, as the finding says it.
fn place(path: &AerPath, i: usize) -> String {
    let p = &path.ports[i];
    let b = escape_line(short_bus_id(&p.bus_id)).into_owned();
    match i {
        0 => "at the GPU (its own link)".to_string(),
        1 if p.root_port => format!("at root port {b} just above the GPU (the GPU's own link)"),
        1 => format!("at port {b} just above the GPU (the GPU's own link)"),
        _ if p.root_port => format!(
            "at root port {b}, upstream of the GPU (the link to the CPU, shared by every device below it)"
        ),
        _ => format!(
            "at switch port {b}, upstream of the GPU (shared by every device below it)"
        ),
    }
}

/// "RxErr 120, BadTLP 3".
fn names(c: &AerCounts) -> String {
    c.by_name
        .iter()
        .take(MAX_PARTS)
        .map(|(n, k)| format!("{} {k}", escape_line(n)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn signal_integrity(name: &str) -> bool {
    SIGNAL_INTEGRITY.contains(&name.trim())
}

/// One thing the check found on the path.
#[derive(Serialize)]
struct Part {
    status: Status,
    text: String,
    #[serde(skip)]
    own_link: bool,
}

/// The uptime in days, and whether it was read (at least one day counts).
fn days(facts: &Facts) -> (f64, bool) {
    match facts.pcie_errors.uptime_s.value() {
        Some(s) if s.is_finite() && *s > 0.0 => ((s / 86_400.0).max(1.0), true),
        _ => (1.0, false),
    }
}

/// Per-day rate of `n` errors over `d` days, rounded down.
fn per_day(n: u64, d: f64) -> u64 {
    (n as f64 / d) as u64
}

/// The rate as a person reads it: "0.1" where the floor the judgment uses would say "0".
fn rate_text(n: u64, d: f64) -> String {
    let r = n as f64 / d;
    if r < 10.0 {
        format!("{r:.1}")
    } else {
        per_day(n, d).to_string()
    }
}

/// Where a port is, said once in full per finding: later mentions of the same port in the
/// message name it short ("at root port 00:03.0").
fn place_short(path: &AerPath, i: usize) -> String {
    let p = &path.ports[i];
    let b = escape_line(short_bus_id(&p.bus_id)).into_owned();
    match i {
        0 => "at the GPU".to_string(),
        _ if p.root_port => format!("at root port {b}"),
        1 => format!("at port {b}"),
        _ => format!("at switch port {b}"),
    }
}

/// `texts` with each port's long place kept at its first mention only.
fn shorten_places(path: &AerPath, texts: &mut [String]) {
    for i in 0..path.ports.len() {
        let long = place(path, i);
        let short = place_short(path, i);
        let mut seen = false;
        for t in texts.iter_mut() {
            if let Some(at) = t.find(&long) {
                if seen {
                    t.replace_range(at..at + long.len(), &short);
                }
                seen = true;
            }
        }
    }
}

/// What the counters of one function say.
fn counter_parts(path: &AerPath, i: usize, d: f64, out: &mut Vec<Part>) {
    let p = &path.ports[i];
    let own_link = i < 2;
    for (r, what) in [
        (&p.fatal, "uncorrected fatal"),
        (&p.nonfatal, "uncorrected non-fatal"),
    ] {
        if let Some(c) = r.value().filter(|c| c.total > 0) {
            let detail = if c.by_name.is_empty() {
                String::new()
            } else {
                format!(" ({})", names(c))
            };
            out.push(Part {
                status: Status::Fail,
                text: format!(
                    "{} {what} AER {}{detail} since boot {}",
                    c.total,
                    if c.total == 1 { "error" } else { "errors" },
                    place(path, i)
                ),
                own_link,
            });
        }
    }
    if let Some(c) = p.correctable.value().filter(|c| c.total > 0) {
        let rate = per_day(c.total, d);
        let si = c.by_name.iter().any(|(n, _)| signal_integrity(n));
        let kind = if si {
            ": signal integrity (the electrical link)"
        } else {
            ""
        };
        let detail = if c.by_name.is_empty() {
            String::new()
        } else {
            format!(" ({})", names(c))
        };
        let status = if rate >= CORRECTED_PER_DAY {
            Status::Warn
        } else {
            Status::Info
        };
        out.push(Part {
            status,
            text: format!(
                "{} corrected AER {}{detail} since boot {}, {} a day{}{kind}",
                c.total,
                if c.total == 1 { "error" } else { "errors" },
                place(path, i),
                rate_text(c.total, d),
                if status == Status::Warn {
                    format!(" (a warning from {CORRECTED_PER_DAY})")
                } else {
                    String::new()
                },
            ),
            own_link,
        });
    }
    if let Some(t) = &p.rootport_totals {
        let dev_uncorrected = path.ports.iter().any(|q| {
            q.fatal.value().is_some_and(|c| c.total > 0)
                || q.nonfatal.value().is_some_and(|c| c.total > 0)
        });
        let n = t.fatal + t.nonfatal;
        if n > 0 && !dev_uncorrected {
            out.push(Part {
                status: Status::Warn,
                text: format!(
                    "{} uncorrected error {} reported to root port {} since boot from a device below it (not necessarily this GPU: the devices' own counters show none)",
                    n,
                    if n == 1 { "message" } else { "messages" },
                    escape_line(short_bus_id(&p.bus_id))
                ),
                own_link: false,
            });
        }
    }
}

/// The index on the path of the function at `bus` (the GPU's other functions count as the
/// GPU: its audio function shares the link).
fn on_path(path: &AerPath, bus: &str) -> Option<usize> {
    let b = normalize_bus_id(bus);
    let device = |x: &str| x.rsplit_once('.').map(|(d, _)| d.to_string());
    path.ports
        .iter()
        .position(|p| p.bus_id == b)
        .or_else(|| (device(&path.gpu) == device(&b) && device(&b).is_some()).then_some(0))
}

/// The lookback's start where there is a date to count from: the snapshot's collection time,
/// else the newest dated report (a live extract keeps only the lookback already).
fn lookback_start(facts: &Facts, events: &[AerLogEvent]) -> Option<i64> {
    let collected = match &facts.origin {
        Origin::Snapshot { collected_at, .. } => collected_at.as_deref().and_then(iso).map(|t| t.1),
        Origin::Live => None,
    };
    let reference = collected.or_else(|| events.iter().filter_map(|e| e.at).max())?;
    Some(reference - LOOKBACK_DAYS * 86_400)
}

fn log_parts(
    facts: &Facts,
    path: &AerPath,
    log: &KernelLogPcie,
    out: &mut Vec<Part>,
) -> Vec<String> {
    let start = lookback_start(facts, &log.aer);
    let mine: Vec<(usize, &AerLogEvent)> = log
        .aer
        .iter()
        .filter(|e| !matches!((start, e.at), (Some(s), Some(at)) if at < s))
        .filter_map(|e| on_path(path, &e.bus_id).map(|i| (i, e)))
        .collect();
    for sev in [
        AerSeverity::Fatal,
        AerSeverity::NonFatal,
        AerSeverity::Corrected,
    ] {
        // Per function, the reports of this severity.
        for i in 0..path.ports.len() {
            let reps: Vec<&AerLogEvent> = mine
                .iter()
                .filter(|(j, e)| *j == i && e.severity == sev)
                .map(|(_, e)| *e)
                .collect();
            if reps.is_empty() {
                continue;
            }
            let mut errs: Vec<&str> = Vec::new();
            for e in &reps {
                for n in &e.errors {
                    if !errs.contains(&n.as_str()) && errs.len() < MAX_PARTS {
                        errs.push(n);
                    }
                }
            }
            let detail = if errs.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    errs.iter()
                        .map(|n| escape_line(n).into_owned())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let (status, what) = match sev {
                AerSeverity::Fatal => (Status::Fail, "uncorrected fatal"),
                AerSeverity::NonFatal => (Status::Fail, "uncorrected non-fatal"),
                AerSeverity::Corrected if reps.len() >= LOG_CORRECTED_WARN => {
                    (Status::Warn, "corrected")
                }
                AerSeverity::Corrected => (Status::Info, "corrected"),
            };
            let si = errs.iter().any(|n| signal_integrity(n));
            out.push(Part {
                status,
                text: format!(
                    "the kernel log has {} {what} AER {}{detail} {}{}",
                    reps.len(),
                    if reps.len() == 1 { "report" } else { "reports" },
                    place(path, i),
                    if si {
                        ": signal integrity (the electrical link)"
                    } else {
                        ""
                    }
                ),
                own_link: i < 2,
            });
        }
    }
    let skip = mine.len().saturating_sub(MAX_LINES_SHOWN);
    mine.iter()
        .skip(skip)
        .map(|(_, e)| escape_line(&e.text).into_owned())
        .collect()
}

/// The counters' evidence: each function with what it read.
#[derive(Serialize)]
struct PortEvidence<'a> {
    bus_id: &'a str,
    root_port: bool,
    correctable: &'a Reading<AerCounts>,
    nonfatal: &'a Reading<AerCounts>,
    fatal: &'a Reading<AerCounts>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rootport_totals: Option<crate::facts::RootPortTotals>,
}

/// Why none of the path's counters could be read, where none could: permission denied
/// (naming the path) or not there.
fn unreadable(path: &AerPath) -> Option<(bool, String)> {
    let mut denied: Option<String> = None;
    let mut missing: Option<String> = None;
    for p in &path.ports {
        for r in [&p.correctable, &p.nonfatal, &p.fatal] {
            match r {
                Reading::Value(_) => return None,
                Reading::Unavailable(why) if why.contains("permission denied") => {
                    denied.get_or_insert_with(|| why.clone());
                }
                Reading::Unavailable(why) => {
                    missing.get_or_insert_with(|| why.clone());
                }
            }
        }
    }
    match (denied, missing) {
        (Some(d), _) => Some((true, d)),
        (None, Some(m)) => Some((false, m)),
        (None, None) => Some((false, "no PCI function on the path".into())),
    }
}

/// Why the counters are not there, with what a missing file means.
fn missing_counters(why: &str) -> String {
    let w = escape_line(why);
    if why.ends_with("no such file") {
        format!("{w}: a kernel without AER statistics (before 4.19), AER handled by the firmware, or a VM that does not pass AER through")
    } else {
        w.into_owned()
    }
}

fn gpu_finding(facts: &Facts, g: &GpuFacts, path: Option<&AerPath>) -> Finding {
    let label = g.label();
    let Some(path) = path else {
        return Finding::skip(
            ID,
            format!("{label}: the GPU's PCI function was not found in sysfs, so its AER counters are not known"),
        )
        .gpu(g.index);
    };
    let (d, uptime_read) = days(facts);
    let mut parts: Vec<Part> = Vec::new();
    let counters = unreadable(path);
    if counters.is_none() {
        for i in 0..path.ports.len() {
            counter_parts(path, i, d, &mut parts);
        }
    }
    let mut lines = Vec::new();
    if let Some(log) = facts.pcie_errors.log.value() {
        lines = log_parts(facts, path, log, &mut parts);
    }
    parts.sort_by_key(|p| std::cmp::Reverse(p.status));
    let status = parts.iter().map(|p| p.status).max();
    let ports: Vec<PortEvidence> = path
        .ports
        .iter()
        .map(|p: &AerPort| PortEvidence {
            bus_id: &p.bus_id,
            root_port: p.root_port,
            correctable: &p.correctable,
            nonfatal: &p.nonfatal,
            fatal: &p.fatal,
            rootport_totals: p.rootport_totals,
        })
        .collect();
    let above = path.ports.len().saturating_sub(1);
    let span = match (&path.upstream_unknown, above) {
        (Some(why), _) => format!(
            "the GPU (the ports above it are not known: {})",
            escape_line(why)
        ),
        (None, 0) => "the GPU (on the root bus: no port above it, as in most VMs)".to_string(),
        (None, n) => format!("the GPU and the {} above it", count_of(n as u64, "port")),
    };
    let log_note = match &facts.pcie_errors.log {
        Reading::Value(l) => format!("the kernel log ({})", escape_line(&l.source)),
        Reading::Unavailable(why) => {
            format!("the kernel log not read: {}", escape_line(why))
        }
    };
    let uptime_note = if uptime_read {
        format!("over {:.1} days of uptime", d)
    } else {
        "the uptime not read, so counted as one day".to_string()
    };
    let mut f = match (status, &counters) {
        (Some(s), _) if s > Status::Pass => {
            let mut texts: Vec<String> = parts.iter().take(MAX_PARTS).map(|p| p.text.clone()).collect();
            shorten_places(path, &mut texts);
            if parts.len() > MAX_PARTS {
                texts.push(format!("and {} more (see the evidence)", parts.len() - MAX_PARTS));
            }
            let mut f = Finding::new(ID, s, format!("{label}: {}", texts.join("; ")));
            if s >= Status::Warn {
                let own = parts.iter().filter(|p| p.status == s).all(|p| p.own_link);
                f = f.fix(if own {
                    "The GPU's own link: reseat the GPU, check or replace its riser or cable, try another slot; on a server, have the vendor check the slot and its retimer. Uncorrected errors: drain the node first."
                } else {
                    "Upstream of the GPU (a switch port or the root port): the switch, the board or its retimers, not this GPU; every device below that port shares the link. Have the platform's vendor check it; uncorrected errors: drain the node first."
                });
            }
            f
        }
        (_, Some((true, why))) => Finding::skip(
            ID,
            format!(
                "{label}: the AER counters could not be read: {}",
                escape_line(why)
            ),
        ),
        (_, Some((false, why))) if facts.pcie_errors.log.value().is_none() => Finding::skip(
            ID,
            format!(
                "{label}: no AER counters ({}) and {log_note}: PCIe errors cannot be known",
                missing_counters(why)
            ),
        ),
        (_, Some((false, why))) => Finding::new(
            ID,
            Status::Info,
            format!(
                "{label}: no AER counters ({}), so errors since boot cannot be known; no AER report about it in {log_note}",
                missing_counters(why)
            ),
        ),
        _ => Finding::pass(
            ID,
            format!("{label}: no AER error on {span} since boot ({uptime_note}); none in {log_note}"),
        ),
    };
    f = f
        .gpu(g.index)
        .with("path", &ports)
        .with("uptime_days", (d * 10.0).round() / 10.0);
    if !parts.is_empty() {
        f = f.with("errors", &parts);
    }
    if !lines.is_empty() {
        f = f.with("lines", lines);
    }
    f
}

/// pcie.aer fails on GPU `g` (an uncorrected error on its path, counted or in the kernel
/// log): memory.errors names it as the cause of an Xid 79 with clean memory counters.
pub fn uncorrected_on(facts: &Facts, policy: &Policy, g: &GpuFacts) -> bool {
    check(facts, policy)
        .iter()
        .any(|f| f.gpu == Some(g.index) && f.status == Status::Fail && f.caused_by.is_none())
}

/// pcie.link's finding on GPU `g` is a problem (warn or fail): the GPU's own link is degraded.
fn link_problem(facts: &Facts, policy: &Policy, g: &GpuFacts) -> bool {
    (crate::checks::pcie::link::CHECK.run)(facts, policy)
        .iter()
        .any(|f| f.gpu == Some(g.index) && f.status >= Status::Warn)
}

/// A "limited by" notice about the GPU, judged by where the slowest link is.
fn notice_finding(
    facts: &Facts,
    policy: &Policy,
    g: &GpuFacts,
    path: Option<&AerPath>,
    n: &LinkNotice,
) -> Finding {
    let at = n.limited_at.as_deref();
    let index = path.and_then(|p| at.and_then(|a| on_path(p, a)));
    let own_link = match (index, path) {
        (Some(i), _) => i < 2,
        // Not on a known path: the GPU itself, or a path not known (a VM, an old snapshot).
        (None, Some(p)) => {
            at.is_none_or(|a| on_path(p, a) == Some(0)) || p.upstream_unknown.is_some()
        }
        (None, None) => true,
    };
    let narrower = n.width < n.capable_width;
    let link = format!(
        "{} GT/s x{} where the GPU is capable of {} GT/s x{}",
        n.gts, n.width, n.capable_gts, n.capable_width
    );
    let at_text = at
        .map(|a| escape_line(short_bus_id(a)).into_owned())
        .unwrap_or_else(|| "an unknown device".into());
    let mut f = if own_link {
        if link_problem(facts, policy, g) {
            Finding::new(
                ID,
                Status::Warn,
                format!(
                    "{}: the kernel noted the GPU's own link limited to {link} (at {at_text}): pcie.link's finding on this GPU",
                    g.label()
                ),
            )
            .caused_by(Cause::gpu(crate::checks::pcie::link::CHECK.id, g.index))
            .fix("Fix what pcie.link's finding on this GPU says (reseat the GPU, its riser or cable, another slot, the BIOS PCIe speed); the notice goes with it at the next boot.")
        } else {
            Finding::new(
                ID,
                Status::Info,
                format!(
                    "{}: the kernel noted the GPU's own link limited to {link} (at {at_text}) when it was probed; pcie.link finds the link as it should be now (an idle link trains down to save power)",
                    g.label()
                ),
            )
        }
    } else if narrower {
        Finding::new(
            ID,
            Status::Warn,
            format!(
                "{}: the kernel noted the bandwidth limited to {link} by the link at {at_text}, upstream of the GPU: every device below that port shares it (a switch's uplink or the root port's slot, not this GPU's)",
                g.label()
            ),
        )
        .fix("The upstream link trained narrower than the GPU's: the switch, its uplink cable or the board; check `sudo lspci -vv -s BDF | grep LnkSta` of that port, and ask the platform's vendor.")
    } else {
        Finding::new(
            ID,
            Status::Info,
            format!(
                "{}: the kernel noted the bandwidth limited to {link} by the link at {at_text}, upstream of the GPU, when it was probed (a slower generation only: an idle link trains down to save power)",
                g.label()
            ),
        )
    };
    f = f
        .gpu(g.index)
        .with("notice", escape_line(&n.text).into_owned());
    if let Some(t) = &n.time {
        f = f.with("time", escape_line(t).into_owned());
    }
    f
}

fn check(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let paths = match &facts.pcie_errors.paths {
        Reading::Value(p) => Some(p.as_slice()),
        Reading::Unavailable(_) => None,
    };
    let mut out = Vec::new();
    for g in selected(facts, policy) {
        let bus = normalize_bus_id(&g.pci_bus_id);
        let path = paths.and_then(|ps| ps.iter().find(|p| p.gpu == bus));
        if paths.is_none() && facts.pcie_errors.log.value().is_none() {
            let why = facts.pcie_errors.paths.reason().unwrap_or("not read");
            let log = facts.pcie_errors.log.reason().unwrap_or("not read");
            out.push(
                Finding::skip(
                    ID,
                    format!(
                        "{}: the AER counters are not known ({}) and the kernel log not either ({})",
                        g.label(),
                        escape_line(why),
                        escape_line(log)
                    ),
                )
                .gpu(g.index),
            );
            continue;
        }
        let fallback;
        let path = match path {
            Some(p) => Some(p),
            None if paths.is_none() => {
                // The counters were not read at all: the log alone, on the GPU.
                let why: Reading<AerCounts> = Reading::Unavailable(
                    facts
                        .pcie_errors
                        .paths
                        .reason()
                        .unwrap_or("not read")
                        .to_string(),
                );
                fallback = AerPath {
                    gpu: bus.clone(),
                    ports: vec![AerPort {
                        bus_id: bus.clone(),
                        root_port: false,
                        correctable: why.clone(),
                        nonfatal: why.clone(),
                        fatal: why,
                        rootport_totals: None,
                    }],
                    upstream_unknown: facts.pcie_errors.paths.reason().map(str::to_string),
                };
                Some(&fallback)
            }
            None => None,
        };
        out.push(gpu_finding(facts, g, path));
        if let Some(log) = facts.pcie_errors.log.value() {
            let mut seen: Vec<(Option<&str>, u32, u64)> = Vec::new();
            for n in log.notices.iter().filter(|n| {
                crate::checks::causes::xid_names(&g.pci_bus_id, &n.bus_id)
                    || path.is_some_and(|p| on_path(p, &n.bus_id) == Some(0))
            }) {
                // One finding per distinct notice (the kernel writes it at every probe).
                let key = (n.limited_at.as_deref(), n.width, (n.gts * 10.0) as u64);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                out.push(notice_finding(facts, policy, g, path, n));
            }
        }
    }
    if out.is_empty() {
        out.push(Finding::skip(ID, no_gpu_reason(facts)));
    }
    out
}

#[cfg(test)]
mod tests;
