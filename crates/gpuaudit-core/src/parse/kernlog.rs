//! The kernel log's lines that the kernel-log checks read (health.xid, pcie.aer): which lines
//! an extract keeps, and the PCIe lines in it (AER reports, "limited by" bandwidth notices).
//! The Xid lines are [`super::xid`]'s.

use crate::facts::{AerCounts, AerLogEvent, AerSeverity, LinkNotice};
use std::collections::VecDeque;

/// What a line must contain for an extract of the kernel log to keep it: NVIDIA Xid and
/// NVSwitch SXid lines (health.xid), the driver's lost-GPU lines, AER reports ("PCIe Bus
/// Error", the root port's "AER: ... error received" lines and the error names under them)
/// and the kernel's "limited by" bandwidth notices (pcie.aer).
pub const NEEDLES: &[&str] = &[
    super::xid::NEEDLE,
    "fallen off the bus",
    "GPU requires reset",
    "PCIe Bus Error",
    "AER:",
    "available PCIe bandwidth, limited by",
];
/// At most this many AER reports and link notices are kept each: the last ones.
pub const MAX_EVENTS: usize = 10_000;
/// At most this many error names are kept per report (the kernel prints one line per bit
/// set: at most 16 correctable, 27 uncorrectable).
pub const MAX_NAMES: usize = 32;
/// A kept line is cut to this many characters.
pub const MAX_LINE_CHARS: usize = super::xid::MAX_LINE_CHARS;

/// Whether an extract of the kernel log keeps `line`: it holds one of [`NEEDLES`], or it is
/// one of the error-name lines the kernel prints under an AER report
/// ("pcieport 0000:00:1d.0:    [ 0] RxErr  (First)"), which older kernels print without
/// "AER:".
pub fn keep(line: &str) -> bool {
    NEEDLES.iter().any(|n| line.contains(n)) || error_name(line).is_some()
}

/// "0000:00:02.0" for a token that is a PCI address with its domain ("0000:00:02.0:" with the
/// colon the kernel writes after it); lower case.
pub fn bdf(token: &str) -> Option<String> {
    let t = token.trim_end_matches(':');
    let mut parts = t.split(':');
    let (d, b, df) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (dev, func) = df.split_once('.')?;
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    let ok = hex(d, 4) && hex(b, 2) && hex(dev, 2) && func.len() == 1 && hex(func, 1);
    ok.then(|| t.to_ascii_lowercase())
}

/// The device a kernel line is about ("pcieport 0000:00:02.0: ..." -> 0000:00:02.0), with
/// the text before it (the time stamp and driver name) and the message after it.
fn device(line: &str) -> Option<(String, &str, &str)> {
    let mut from = 0;
    for tok in line.split(' ') {
        let start = from;
        from += tok.len() + 1;
        if tok.ends_with(':') {
            if let Some(b) = bdf(tok) {
                let rest = line.get(start + tok.len()..).unwrap_or("");
                return Some((b, &line[..start], rest));
            }
        }
    }
    None
}

/// The error name of a line the kernel prints under an AER report: "[ 0] RxErr (First)" ->
/// "RxErr", "[12] Replay Timer Timeout" -> "Replay Timer Timeout".
fn error_name(line: &str) -> Option<(String, String)> {
    let (bus, _, msg) = device(line)?;
    let msg = msg.trim_start();
    let msg = msg.strip_prefix("AER:").unwrap_or(msg).trim_start();
    let inner = msg.strip_prefix('[')?;
    let close = inner.find(']')?;
    let bit = inner[..close].trim();
    if bit.is_empty() || bit.len() > 2 || !bit.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let name = inner[close + 1..].trim();
    let name = name.strip_suffix("(First)").unwrap_or(name).trim();
    if name.is_empty() {
        return None;
    }
    Some((bus, name.chars().take(60).collect()))
}

fn cut(line: &str) -> String {
    line.trim().chars().take(MAX_LINE_CHARS).collect()
}

/// The text after `key` up to the next ',' or '(' ("severity=Corrected, ..." -> "Corrected").
fn field<'a>(msg: &'a str, key: &str) -> Option<&'a str> {
    let at = msg.find(key)? + key.len();
    let rest = &msg[at..];
    let end = rest.find(',').unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// "Corrected", "Correctable" (older kernels), "Uncorrected (Non-Fatal)", "Uncorrected
/// (Fatal)".
pub fn severity(s: &str) -> Option<AerSeverity> {
    let l = s.to_ascii_lowercase();
    if l.contains("non-fatal") || l.contains("nonfatal") {
        Some(AerSeverity::NonFatal)
    } else if l.contains("fatal") {
        Some(AerSeverity::Fatal)
    } else if l.starts_with("correct") {
        Some(AerSeverity::Corrected)
    } else {
        None
    }
}

/// "8.0 GT/s PCIe x8 link" -> (8.0, 8).
fn speed_width(s: &str) -> Option<(f64, u32)> {
    let mut w = s.split_whitespace();
    let gts: f64 = w.next()?.parse().ok()?;
    if w.next()? != "GT/s" {
        return None;
    }
    let _pcie = w.next()?;
    let width: u32 = w.next()?.strip_prefix('x')?.parse().ok()?;
    (gts.is_finite() && gts > 0.0 && width > 0).then_some((gts, width))
}

fn notice(bus: String, prefix: &str, msg: &str, line: &str) -> Option<LinkNotice> {
    let rest = &msg[msg.find("limited by ")? + "limited by ".len()..];
    let (now, rest) = rest.split_once(" link at ")?;
    let (at, rest) = rest.split_once(" (capable of ")?;
    let (_, cap) = rest.split_once(" with ")?;
    let cap = cap.split(" link)").next()?;
    let (gts, width) = speed_width(&format!("{now} link"))?;
    let (capable_gts, capable_width) = speed_width(&format!("{cap} link"))?;
    let (time, _) = super::xid::stamp(prefix);
    Some(LinkNotice {
        bus_id: bus,
        limited_at: bdf(at.trim()),
        gts,
        width,
        capable_gts,
        capable_width,
        text: cut(line),
        time,
    })
}

/// The AER reports and the "limited by" notices of a kernel log (any of the forms
/// [`super::xid`] reads the time stamps of), the last [`MAX_EVENTS`] of each.
pub fn parse_pcie(text: &str) -> (Vec<AerLogEvent>, Vec<LinkNotice>) {
    let mut aer: VecDeque<AerLogEvent> = VecDeque::new();
    let mut notices: VecDeque<LinkNotice> = VecDeque::new();
    for line in text.lines() {
        if let Some((bus, name)) = error_name(line) {
            // The names belong to the newest report about the same function.
            if let Some(e) = aer.iter_mut().rev().take(4).find(|e| e.bus_id == bus) {
                if e.errors.len() < MAX_NAMES {
                    e.errors.push(name);
                }
            }
            continue;
        }
        let Some((bus, prefix, msg)) = device(line) else {
            continue;
        };
        if let Some(i) = msg.find("PCIe Bus Error:") {
            let report = &msg[i..];
            let Some(sev) = field(report, "severity=").and_then(severity) else {
                continue;
            };
            let (time, at) = super::xid::stamp(prefix);
            if aer.len() == MAX_EVENTS {
                aer.pop_front();
            }
            aer.push_back(AerLogEvent {
                bus_id: bus,
                severity: sev,
                layer: field(report, "type=")
                    .filter(|t| !t.is_empty())
                    .map(|t| t.chars().take(40).collect()),
                errors: Vec::new(),
                text: cut(line),
                time,
                at,
            });
        } else if msg.contains("available PCIe bandwidth, limited by") {
            if let Some(n) = notice(bus, prefix, msg, line) {
                if notices.len() == MAX_EVENTS {
                    notices.pop_front();
                }
                notices.push_back(n);
            }
        }
    }
    (aer.into(), notices.into())
}

/// One sysfs `aer_dev_correctable` / `aer_dev_nonfatal` / `aer_dev_fatal` file: lines of a
/// name and a count ("RxErr 0", "Receiver Error 2" in the kernel's documentation,
/// "TOTAL_ERR_COR 2"). `None` where it has no TOTAL_ line or a line that is not a count.
pub fn parse_aer_counts(text: &str) -> Option<AerCounts> {
    let mut out = AerCounts::default();
    let mut total = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (name, n) = line.rsplit_once(char::is_whitespace)?;
        let n: u64 = n.parse().ok()?;
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        if name.starts_with("TOTAL_ERR_") {
            total = Some(n);
        } else if n > 0 && out.by_name.len() < MAX_NAMES {
            out.by_name.push((name.chars().take(60).collect(), n));
        }
    }
    out.total = total?;
    Some(out)
}

#[cfg(test)]
mod tests;
