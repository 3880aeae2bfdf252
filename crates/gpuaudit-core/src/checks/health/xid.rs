//! health.xid: the Xid (and NVSwitch SXid) lines of the kernel log, each decoded with what
//! NVIDIA's Xid catalog (data/xid.toml) says it means and what to do, counted per GPU with the
//! first and last time where the lines carry one.

use crate::checks::causes::xid_names;
use crate::checks::common::selected;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, Origin, XidEvent};
use crate::finding::{Cause, Finding, Status};
use crate::parse::xid::iso;
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use crate::spec::xid::{XidCatalog, XidInfo, XidJudge};
use serde::Serialize;

const ID: &str = "health.xid";

macro_rules! repeat_limit {
    () => {
        10
    };
}
macro_rules! lookback_days {
    () => {
        7
    };
}

/// Events of one application-caused Xid (13, 31, 43, 45, 137) on one GPU within the lookback
/// from which it is a warning, not information. One such Xid is a program's bug and says
/// nothing about the GPU; ten in a week on the same GPU is a pattern someone should look at
/// (a job that keeps crashing, or a GPU that turns bad memory into "application" faults, which
/// NVIDIA's catalog names as the rare case for 13 and 31). gpuaudit's own choice.
pub const REPEAT_LIMIT: usize = repeat_limit!();
/// How far back events count, from the snapshot's collection time (else from the newest
/// event with a date), where the lines carry a date with its year. The default.
pub const LOOKBACK_DAYS: i64 = lookback_days!();
/// At most this many codes are named in one finding; the rest are "and N more".
pub const MAX_CODES_LISTED: usize = 4;
/// At most this many log lines go into a finding's evidence (each escaped and cut).
pub const MAX_LINES_SHOWN: usize = 5;

pub const CHECK: Check = Check {
    id: ID,
    title: "Xid errors in the kernel log, decoded with NVIDIA's Xid catalog",
    looks_at: concat!(
        "Xid and NVSwitch SXid lines of the kernel log (the last ",
        lookback_days!(),
        " days where the lines are dated), each decoded with NVIDIA's Xid catalog (meaning, \
         cause, resolution), counted per GPU with first and last time"
    ),
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The \"NVRM: Xid (PCI:...): CODE\" lines of the kernel log (live: /dev/kmsg, \
             dated from the boot time, else journalctl -k, else /var/log/kern.log, messages \
             or syslog; in a snapshot cmd/kernel-log.txt, or the older cmd/dmesg-xid.txt, \
             which may also hold journalctl -o short-iso or dmesg -T lines), matched to the GPU by their PCI address, each code decoded with \
             NVIDIA's Xid catalog (data/xid.toml: name, meaning, who causes it, NVIDIA's \
             immediate action, the resolution) and counted per GPU with the first and last \
             time the lines give. Lines dated with a year count for the last ",
            lookback_days!(),
            " days before the snapshot was collected (else before the newest dated line); \
             the kernel's ring buffer holds this boot only. One finding per GPU with the worst \
             verdict and every code; Xids at a PCI address the driver does not list, and \
             NVSwitch SXid lines, are findings of their own. Where the log could not be read \
             (dmesg_restrict, no CAP_SYSLOG) the check skips with the reason, never passes."
        ),
        why: concat!(
            "A node that logged Xid 79 an hour ago passes every check that reads the GPU as \
             it is now. Application Xids (13, 31, 43, 45, 137) are information, a warning from ",
            repeat_limit!(),
            " on one GPU within the lookback; codes NVIDIA resolves with a GPU reset, a \
             reboot or the hardware fail (48, 62, 64, 74, 79, 95, 109, 110, 136, 140, 143, \
             149, 158, and 154 where it names a reset or a reboot); 8, 32, 92, 94, 119, 120, \
             144-146, 156, 157 and 154 draining P2P warn; 63 and 121 inform. A code not in \
             the catalog warns: it is not known what it means. SXids warn, and fail where the \
             line says Fatal (the SXid catalog is not embedded)."
        ),
        verify: "sudo dmesg -T | grep -i xid\njournalctl -k --since \"7 days ago\" | grep -i xid\nnvidia-smi -q",
        fix: "Do what the finding's resolution says: restart the application, reset the GPU \
              (`sudo nvidia-smi -r -i N` with nothing running), reboot the machine, or drain \
              it and ask for the GPU to be replaced (RMA). Application Xids: debug the program \
              (`compute-sanitizer --tool memcheck ./app`).",
    },
    profiles: &[],
    run: check,
};

/// One code's events on one GPU (or address), as the finding says them.
#[derive(Serialize)]
struct CodeTally {
    code: u32,
    count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    immediate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last: Option<String>,
    status: Status,
    /// Why this status, in words.
    verdict: String,
    #[serde(skip)]
    resolution: Option<String>,
}

/// The lookback's start, in seconds since 1970, where there is a date to count from.
fn lookback_start(facts: &Facts, events: &[XidEvent]) -> Option<i64> {
    let collected = match &facts.origin {
        Origin::Snapshot { collected_at, .. } => collected_at.as_deref().and_then(iso).map(|t| t.1),
        Origin::Live => None,
    };
    let reference = collected.or_else(|| events.iter().filter_map(|e| e.at).max())?;
    Some(reference - LOOKBACK_DAYS * 86_400)
}

/// The events that count: within the lookback where they are dated (undated ones all count),
/// and how many were older.
fn in_lookback<'a>(facts: &Facts, events: &'a [XidEvent]) -> (Vec<&'a XidEvent>, usize) {
    let start = lookback_start(facts, events);
    let mut older = 0;
    let kept = events
        .iter()
        .filter(|e| match (start, e.at) {
            (Some(s), Some(at)) if at < s => {
                older += 1;
                false
            }
            _ => true,
        })
        .collect();
    (kept, older)
}

/// "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)": the action.
fn recovery_action(text: &str) -> Option<&str> {
    let after = &text[text.rfind(" to ")? + 4..];
    let open = after.find('(')?;
    let close = after[open..].find(')')? + open;
    Some(after[open + 1..close].trim())
}

fn judge(info: Option<&XidInfo>, code: u32, events: &[&XidEvent]) -> (Status, String) {
    let n = events.len();
    let Some(info) = info else {
        return (
            Status::Warn,
            format!("Xid {code} is not in the catalog: what it means is not known"),
        );
    };
    match info.judge {
        XidJudge::Application if n >= REPEAT_LIMIT => (
            Status::Warn,
            format!("an application error, repeated {n} times (warning from {REPEAT_LIMIT})"),
        ),
        XidJudge::Application => (
            Status::Info,
            format!("an application error (a warning from {REPEAT_LIMIT} on one GPU)"),
        ),
        XidJudge::Info => (Status::Info, "nothing to do now".into()),
        XidJudge::Warn => (Status::Warn, format!("NVIDIA's action: {}", info.immediate)),
        XidJudge::Fail => (Status::Fail, format!("NVIDIA's action: {}", info.immediate)),
        XidJudge::Recovery => {
            let action = events.last().and_then(|e| recovery_action(&e.text));
            match action {
                Some(a) if a.contains("Reboot") || a.contains("Reset") || a.contains("FLR") => (
                    Status::Fail,
                    format!("the driver asks for \"{}\"", escape_line(a)),
                ),
                Some(a) if a.contains("Drain") => (
                    Status::Warn,
                    format!("the driver asks for \"{}\"", escape_line(a)),
                ),
                Some("None") => (
                    Status::Info,
                    "the driver asks for no recovery action".into(),
                ),
                Some(a) => (
                    Status::Warn,
                    format!("recovery action \"{}\" not known", escape_line(a)),
                ),
                None => (
                    Status::Warn,
                    "the recovery action could not be read from the line".into(),
                ),
            }
        }
    }
}

/// Tally the events by code, in the order codes first appear; the worst first.
fn tally(events: &[&XidEvent]) -> Vec<CodeTally> {
    let catalog = XidCatalog::embedded();
    let mut codes: Vec<u32> = Vec::new();
    for e in events {
        if !codes.contains(&e.code) {
            codes.push(e.code);
        }
    }
    let mut out: Vec<CodeTally> = codes
        .into_iter()
        .map(|code| {
            let mine: Vec<&XidEvent> = events.iter().copied().filter(|e| e.code == code).collect();
            let info = catalog.get(code);
            let (status, verdict) = judge(info, code, &mine);
            let times: Vec<&str> = mine.iter().filter_map(|e| e.time.as_deref()).collect();
            CodeTally {
                code,
                count: mine.len(),
                name: info.map(|i| i.name.clone()),
                cause: info.map(|i| i.cause.clone()),
                immediate: info.map(|i| i.immediate.clone()),
                first: times.first().map(|t| escape_line(t).into_owned()),
                last: times.last().map(|t| escape_line(t).into_owned()),
                status,
                verdict,
                resolution: info.map(|i| i.resolution.clone()),
            }
        })
        .collect();
    out.sort_by_key(|c| std::cmp::Reverse(c.status));
    out
}

fn worst(t: &[CodeTally]) -> Status {
    t.iter().map(|c| c.status).max().unwrap_or(Status::Pass)
}

fn describe(c: &CodeTally) -> String {
    let catalog = XidCatalog::embedded();
    let when = match (&c.first, &c.last) {
        (Some(f), Some(l)) if c.count > 1 => format!(", first {f}, last {l}"),
        (Some(f), _) => format!(", at {f}"),
        _ => String::new(),
    };
    let times = if c.count == 1 {
        "once".to_string()
    } else {
        format!("{} times", c.count)
    };
    match catalog.get(c.code) {
        // The verdict starts a sentence after the catalog's meaning.
        Some(i) => format!(
            "Xid {} {} ({}{when}): {} {}; {}",
            c.code,
            times,
            i.name,
            i.meaning,
            sentence_case(&c.verdict),
            i.resolution
        ),
        None => format!("Xid {} {times}{when}: {}", c.code, c.verdict),
    }
}

fn codes_text(t: &[CodeTally]) -> String {
    let mut parts: Vec<String> = t.iter().take(MAX_CODES_LISTED).map(describe).collect();
    if t.len() > MAX_CODES_LISTED {
        parts.push(format!(
            "and {} more (see the evidence)",
            crate::checks::common::count_of((t.len() - MAX_CODES_LISTED) as u64, "code")
        ));
    }
    parts.join(" — ")
}

fn lines_shown(events: &[&XidEvent]) -> Vec<String> {
    let skip = events.len().saturating_sub(MAX_LINES_SHOWN);
    events
        .iter()
        .skip(skip)
        .map(|e| escape_line(&e.text).into_owned())
        .collect()
}

fn finding(subject: &str, events: &[&XidEvent], older: usize) -> (Finding, Status) {
    let t = tally(events);
    let status = worst(&t);
    let mut msg = format!("{subject}: {}", codes_text(&t));
    if older > 0 {
        msg.push_str(&format!(
            " ({} older than {LOOKBACK_DAYS} days not counted)",
            crate::checks::common::count_of(older as u64, "line")
        ));
    }
    let mut f = Finding::new(ID, status, msg)
        .with("xids", &t)
        .with("lines", lines_shown(events));
    if status > Status::Info {
        let fixes: Vec<&str> = t
            .iter()
            .filter(|c| c.status == status)
            .filter_map(|c| c.resolution.as_deref())
            .collect();
        if !fixes.is_empty() {
            let mut uniq: Vec<&str> = Vec::new();
            for x in fixes {
                if !uniq.contains(&x) {
                    uniq.push(x);
                }
            }
            f = f.fix(uniq.join(" "));
        } else {
            f = f.fix("Look the code up in NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/) and contact support.");
        }
    }
    (f, status)
}

fn on_gpu<'a>(g: &GpuFacts, events: &[&'a XidEvent]) -> Vec<&'a XidEvent> {
    events
        .iter()
        .copied()
        .filter(|e| {
            !e.switch
                && e.bus_id
                    .as_deref()
                    .is_some_and(|b| xid_names(&g.pci_bus_id, b))
        })
        .collect()
}

/// health.xid's status for one GPU, for the checks that judge the same lines (memory.errors):
/// `None` where the log was not read.
pub fn gpu_status(facts: &Facts, g: &GpuFacts) -> Option<Status> {
    let events = facts.xid_events.value()?;
    let (kept, _) = in_lookback(facts, events);
    Some(worst(&tally(&on_gpu(g, &kept))))
}

fn check(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let events = match &facts.xid_events {
        Reading::Value(v) => v,
        Reading::Unavailable(why) => {
            return vec![Finding::skip(
                ID,
                format!("the kernel log could not be read: {}", escape_line(why)),
            )
            .with("xid_events_unavailable", why)];
        }
    };
    let (kept, older) = in_lookback(facts, events);
    let window = if lookback_start(facts, events).is_some() {
        format!(" in the last {LOOKBACK_DAYS} days")
    } else {
        " (this boot's kernel log)".to_string()
    };
    let mut out = Vec::new();
    for g in selected(facts, policy) {
        let mine = on_gpu(g, &kept);
        if mine.is_empty() {
            out.push(
                Finding::pass(
                    ID,
                    format!("{}: no Xid in the kernel log{window}", g.label()),
                )
                .gpu(g.index),
            );
        } else {
            // Fault Xids memory.errors counts too, on a GPU where it has a problem: that
            // finding (the ECC counters with these lines) is the cause, this one what it says
            // of the log. A code it does not count (an application's, a newer one) keeps this
            // finding a problem of its own.
            let memory = crate::checks::memory::errors::CHECK.id;
            let explained = mine
                .iter()
                .all(|e| crate::checks::memory::errors::FAULT_XIDS.contains(&e.code))
                && crate::checks::memory::errors::gpu_has_problem(g, &facts.xid_events);
            out.push(
                finding(&g.label(), &mine, older)
                    .0
                    .gpu(g.index)
                    .caused_by_opt(explained.then(|| Cause::gpu(memory, g.index))),
            );
        }
    }
    // Xids at addresses the driver lists no GPU for (a GPU fallen off the bus), or at none.
    let gpus = facts.gpu_list();
    let mut buses: Vec<Option<&str>> = Vec::new();
    for e in kept.iter().filter(|e| !e.switch) {
        let b = e.bus_id.as_deref();
        let listed = b.is_some_and(|b| gpus.iter().any(|g| xid_names(&g.pci_bus_id, b)));
        if !listed && !buses.contains(&b) {
            buses.push(b);
        }
    }
    for b in buses {
        let mine: Vec<&XidEvent> = kept
            .iter()
            .copied()
            .filter(|e| !e.switch && e.bus_id.as_deref() == b)
            .collect();
        let subject = match b {
            Some(b) => format!("PCI {} (a GPU the driver does not list)", escape_line(b)),
            None => "Xid lines that name no PCI address".to_string(),
        };
        let (f, _) = finding(&subject, &mine, older);
        // A GPU on the PCI bus that the driver does not list is gpu.present's problem, which
        // these lines explain (as memory.errors says of the same lines).
        let on_bus = b.is_some_and(|b| {
            facts
                .pci_gpus
                .value()
                .is_some_and(|p| p.iter().any(|f| xid_names(&f.bus_id, b)))
        });
        out.push(
            f.caused_by_opt(on_bus.then(|| Cause::check(crate::checks::gpu::present::CHECK.id))),
        );
    }
    // NVSwitch SXids, per switch.
    let mut switches: Vec<Option<&str>> = Vec::new();
    for e in kept.iter().filter(|e| e.switch) {
        if !switches.contains(&e.bus_id.as_deref()) {
            switches.push(e.bus_id.as_deref());
        }
    }
    for s in switches {
        let mine: Vec<&XidEvent> = kept
            .iter()
            .copied()
            .filter(|e| e.switch && e.bus_id.as_deref() == s)
            .collect();
        let fatal = mine.iter().any(|e| e.text.contains(", Fatal"));
        let mut codes: Vec<u32> = Vec::new();
        for e in &mine {
            if !codes.contains(&e.code) {
                codes.push(e.code);
            }
        }
        let listed: Vec<String> = codes
            .iter()
            .take(MAX_CODES_LISTED)
            .map(u32::to_string)
            .collect();
        let more = codes.len().saturating_sub(MAX_CODES_LISTED);
        let status = if fatal { Status::Fail } else { Status::Warn };
        out.push(
            Finding::new(
                ID,
                status,
                format!(
                    "NVSwitch {}: {} (SXid {}{}){}: the SXid catalog is not embedded, so the codes are not decoded",
                    escape_line(s.unwrap_or("at no PCI address")),
                    crate::checks::common::count_of(mine.len() as u64, "SXid line"),
                    listed.join(", "),
                    if more > 0 { format!(" and {more} more") } else { String::new() },
                    if fatal { ", a fatal one among them" } else { "" },
                ),
            )
            .with("sxids", &codes)
            .with("lines", lines_shown(&mine))
            .fix("Look the SXids up in NVIDIA's catalog (https://docs.nvidia.com/deploy/xid-errors/) and the fabric manager's log; a fatal SXid needs the NVSwitch and its GPUs reset (a reboot)."),
        );
    }
    if out.is_empty() {
        out.push(Finding::skip(
            ID,
            crate::checks::common::no_gpu_reason(facts),
        ));
    }
    out
}

/// `s` with its first letter in upper case.
fn sentence_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests;
