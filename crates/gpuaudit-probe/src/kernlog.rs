//! The one reader of the kernel log for every kernel-log check (health.xid, pcie.aer): the
//! lines [`gpuaudit_core::parse::kernlog::keep`] keeps, dated in ISO form where the source
//! allows, the last [`LOOKBACK_DAYS`] days where dated, bounded in lines and bytes (the newest
//! kept). Live: /dev/kmsg, else `journalctl -k`, else /var/log/kern.log (with kern.log.1),
//! /var/log/messages, /var/log/syslog. A snapshot holds the extract as [`EXTRACT`].

use crate::command;
use crate::root::{io_reason, RootFs};
use gpuaudit_core::parse::kernlog::keep;
use gpuaudit_core::parse::xid::iso;
use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

/// The snapshot's file of the extract (DESIGN's snapshot format).
pub const EXTRACT: &str = "cmd/kernel-log.txt";
/// The snapshot file of gpuaudit before [`EXTRACT`]: Xid lines only.
pub const OLD_EXTRACT: &str = "cmd/dmesg-xid.txt";
/// At most this many lines are kept: the newest.
pub const MAX_LINES: usize = 20_000;
/// At most this many bytes of lines are kept: the newest.
pub const MAX_BYTES: usize = 4 << 20;
/// Dated lines older than this many days before now are left out (health.xid's lookback).
pub const LOOKBACK_DAYS: i64 = 7;
/// The tail of a log file that is read (kern.log grows to gigabytes on a noisy machine).
pub const TAIL_BYTES: u64 = 32 << 20;
/// The journal's newest lines asked for (`journalctl -n`), so its output stays under the
/// command runner's cap.
pub const JOURNAL_LINES: u32 = 100_000;
/// The first line of [`EXTRACT`]: which log the lines came from.
const HEADER: &str = "# gpuaudit kernel log extract; source: ";
/// The log files read where /dev/kmsg and the journal are not, in order; a pair is read
/// oldest first.
pub const LOG_FILES: &[&[&str]] = &[
    &["var/log/kern.log.1", "var/log/kern.log"],
    &["var/log/messages"],
    &["var/log/syslog"],
];

/// The lines kept and which log they came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extract {
    /// "/dev/kmsg", "journalctl -k", "/var/log/kern.log".
    pub source: String,
    /// Oldest first, each cut to the parser's line length.
    pub lines: Vec<String>,
}

impl Extract {
    pub fn text(&self) -> String {
        let mut t = self.lines.join("\n");
        if !t.is_empty() {
            t.push('\n');
        }
        t
    }

    /// The snapshot file: a header naming the source, then the lines.
    pub fn to_file(&self) -> String {
        format!(
            "{HEADER}{}\n{}",
            self.source.replace('\n', " "),
            self.text()
        )
    }

    /// [`to_file`](Self::to_file)'s text read back (a file without the header: its lines,
    /// source `fallback`).
    pub fn from_file(text: &str, fallback: &str) -> Extract {
        let (source, body) = match text.strip_prefix(HEADER) {
            Some(rest) => {
                let (first, body) = rest.split_once('\n').unwrap_or((rest, ""));
                (first.trim().to_string(), body)
            }
            None => (fallback.to_string(), text),
        };
        let mut k = Keeper::new(None);
        for l in body.lines() {
            k.push(l.to_string(), None);
        }
        Extract {
            source,
            lines: k.lines.into(),
        }
    }
}

/// The newest lines, bounded in count and bytes, the dated ones within the lookback.
struct Keeper {
    lines: VecDeque<String>,
    bytes: usize,
    /// Dated lines before this (seconds since 1970) are left out.
    since: Option<i64>,
}

impl Keeper {
    fn new(since: Option<i64>) -> Keeper {
        Keeper {
            lines: VecDeque::new(),
            bytes: 0,
            since,
        }
    }

    /// `at`: the line's time where the caller knows it; else the ISO stamp it starts with.
    fn push(&mut self, line: String, at: Option<i64>) {
        let line: String = line
            .trim_end()
            .chars()
            .take(gpuaudit_core::parse::kernlog::MAX_LINE_CHARS)
            .collect();
        let at = at.or_else(|| line.split_whitespace().next().and_then(iso).map(|t| t.1));
        // The kernel's bandwidth notice is written once, when the device is probed (at
        // boot): it says how the link is, not when something happened, so no lookback.
        let notice = line.contains("available PCIe bandwidth, limited by");
        if let (Some(s), Some(a), false) = (self.since, at, notice) {
            if a < s {
                return;
            }
        }
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.lines.len() > MAX_LINES || self.bytes > MAX_BYTES {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len() + 1,
                None => break,
            }
        }
    }
}

/// "2026-12-02T17:35:00.123456+00:00" for microseconds since 1970.
fn iso_micros(us: i64) -> Option<String> {
    let t = jiff::Timestamp::from_microsecond(us).ok()?;
    Some(t.strftime("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
}

/// The boot time, seconds since 1970 (the `btime` line of /proc/stat).
pub fn boot_time(stat: &str) -> Option<i64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// /dev/kmsg's records dated: boot time plus each record's microseconds since boot.
///
/// The clock caveat (as `dmesg -T`'s): the record's stamp is the kernel's local clock,
/// which stops while the machine is suspended, and btime is the wall clock at boot as the
/// kernel knows it now (NTP steps after boot move it); on a machine that suspended, or whose
/// clock was set after boot, the dates are off by that much. Servers do neither in practice;
/// the lookback of a week is not sensitive to seconds.
pub fn dated_kmsg(records: &[(u64, String)], btime: i64, since: Option<i64>) -> Vec<String> {
    let mut k = Keeper::new(since);
    for (usec, msg) in records {
        let us = btime.saturating_mul(1_000_000).saturating_add(*usec as i64);
        match iso_micros(us) {
            Some(t) => k.push(format!("{t} {msg}"), Some(us / 1_000_000)),
            None => k.push(msg.clone(), None),
        }
    }
    k.lines.into()
}

/// The kept lines of a text (a journal's output, a log file's tail).
fn kept_lines(text: &str, since: Option<i64>) -> Vec<String> {
    let mut k = Keeper::new(since);
    for l in text.lines().filter(|l| keep(l)) {
        k.push(l.to_string(), None);
    }
    k.lines.into()
}

/// What `journalctl -k` printed, or why it gave nothing: a user outside the groups adm and
/// systemd-journal sees no kernel messages (only "-- No entries --"), which is not "no Xid".
pub fn journal_lines(
    out: &str,
    root_user: bool,
    since: Option<i64>,
) -> Result<Vec<String>, String> {
    let any = out
        .lines()
        .any(|l| !l.trim().is_empty() && !l.starts_with("-- ") && !l.starts_with("Hint:"));
    if !any && !root_user {
        return Err("journalctl -k: no kernel messages visible to this user (outside the groups adm and systemd-journal the journal shows none; run as root)".into());
    }
    Ok(kept_lines(out, since))
}

/// The last [`TAIL_BYTES`] of a live log file.
fn tail(path: &str) -> Result<String, String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{path}: {}", io_reason(&e)))?;
    let len = f
        .metadata()
        .map_err(|e| format!("{path}: {}", io_reason(&e)))?
        .len();
    if !f
        .metadata()
        .map(|m| m.file_type().is_file())
        .unwrap_or(false)
    {
        return Err(format!("{path}: not a regular file: not read"));
    }
    let from = len.saturating_sub(TAIL_BYTES);
    f.seek(SeekFrom::Start(from))
        .map_err(|e| format!("{path}: {}", io_reason(&e)))?;
    let mut buf = Vec::new();
    f.take(TAIL_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{path}: {}", io_reason(&e)))?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    // A tail starts inside a line: drop that part line.
    Ok(if from > 0 {
        text.split_once('\n')
            .map(|x| x.1.to_string())
            .unwrap_or_default()
    } else {
        text
    })
}

/// The log files of [`LOG_FILES`] under `read` (a live tail, a snapshot's file): the first
/// group that has a readable file, or each one's reason.
fn from_files(
    read_file: impl Fn(&str) -> Result<Option<String>, String>,
    since: Option<i64>,
    reasons: &mut Vec<String>,
) -> Option<Extract> {
    for group in LOG_FILES {
        let mut text = String::new();
        let mut read: Vec<String> = Vec::new();
        for f in group.iter() {
            match read_file(f) {
                Ok(Some(t)) => {
                    text.push_str(&t);
                    if !t.ends_with('\n') {
                        text.push('\n');
                    }
                    read.push(format!("/{f}"));
                }
                Ok(None) => {
                    // kern.log.1 is there only after a rotation: only the main file's absence
                    // is said.
                    if f == group.last().unwrap_or(f) {
                        reasons.push(format!("/{f}: no such file"));
                    }
                }
                Err(e) => reasons.push(e),
            }
        }
        if !read.is_empty() {
            return Some(Extract {
                source: read.join(" + "),
                lines: kept_lines(&text, since),
            });
        }
    }
    None
}

/// The kernel log of the live machine, `now` seconds since 1970 (the lookback's end).
pub fn read_live(now: i64, timeout: Duration) -> Result<Extract, String> {
    let since = Some(now - LOOKBACK_DAYS * 86_400);
    let root = RootFs::live();
    let mut reasons = Vec::new();
    match root.kernel_log_records(keep, MAX_LINES) {
        Ok(records) => {
            let stat = root.read("proc/stat");
            match stat.as_deref().ok().and_then(boot_time) {
                Some(btime) => {
                    return Ok(Extract {
                        source: "/dev/kmsg".into(),
                        lines: dated_kmsg(&records, btime, since),
                    })
                }
                None => {
                    // Undated: seconds after boot as dmesg writes them.
                    let mut k = Keeper::new(None);
                    for (usec, msg) in &records {
                        k.push(
                            format!("[{:>5}.{:06}] {msg}", usec / 1_000_000, usec % 1_000_000),
                            None,
                        );
                    }
                    return Ok(Extract {
                        source: "/dev/kmsg (undated: /proc/stat has no btime)".into(),
                        lines: k.lines.into(),
                    });
                }
            }
        }
        Err(e) => reasons.push(e),
    }
    let since_arg = format!("--since=-{LOOKBACK_DAYS}d");
    let lines_arg = format!("--lines={JOURNAL_LINES}");
    match command::run(
        "journalctl",
        &[
            "-k",
            &since_arg,
            "-o",
            "short-iso",
            "--no-pager",
            &lines_arg,
        ],
        timeout,
    ) {
        Ok(out) => {
            // SAFETY: geteuid cannot fail.
            let root_user = unsafe { libc::geteuid() } == 0;
            match journal_lines(&out, root_user, since) {
                Ok(lines) => {
                    return Ok(Extract {
                        source: "journalctl -k".into(),
                        lines,
                    })
                }
                Err(e) => reasons.push(e),
            }
        }
        Err(e) => reasons.push(e),
    }
    let read = |f: &str| -> Result<Option<String>, String> {
        let path = format!("/{f}");
        match tail(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.ends_with("no such file") => Ok(None),
            Err(e) => Err(e),
        }
    };
    if let Some(x) = from_files(read, since, &mut reasons) {
        return Ok(x);
    }
    Err(reasons.join("; "))
}

/// The kernel log of a snapshot: [`EXTRACT`], else the old [`OLD_EXTRACT`] (Xid lines only:
/// `xid_only`), else a copied /var/log/kern.log, messages or syslog. `None`: none is there.
pub fn read_snapshot(root: &RootFs) -> Option<Result<(Extract, bool), String>> {
    match root.read_text(EXTRACT) {
        Ok(Some(t)) => return Some(Ok((Extract::from_file(&t, EXTRACT), false))),
        Ok(None) => {}
        Err(e) => return Some(Err(e)),
    }
    match root.read_text(OLD_EXTRACT) {
        Ok(Some(t)) => return Some(Ok((Extract::from_file(&t, OLD_EXTRACT), true))),
        Ok(None) => {}
        Err(e) => return Some(Err(format!("kernel log extract not read: {e}"))),
    }
    let mut reasons = Vec::new();
    let read = |f: &str| root.read_text(f);
    let x = from_files(read, None, &mut reasons);
    match x {
        Some(mut x) => {
            x.source = format!("{} (in the snapshot)", x.source);
            Some(Ok((x, false)))
        }
        None if reasons.iter().all(|r| r.ends_with("no such file")) => None,
        None => Some(Err(reasons.join("; "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmsg_records_are_dated_from_the_boot_time() {
        assert_eq!(
            crate::root::kmsg_record(
                "6,1234,5107644336,-;NVRM: Xid (PCI:0000:00:07): 79, x\n SUBSYSTEM=pci\n"
            ),
            Some((5_107_644_336, "NVRM: Xid (PCI:0000:00:07): 79, x"))
        );
        assert_eq!(crate::root::kmsg_record("garbage"), None);
        assert_eq!(crate::root::kmsg_record("6,1,x,-;m"), None);
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1796032800\nprocesses 9\n"),
            Some(1_796_032_800)
        );
        assert_eq!(boot_time("cpu 1 2\n"), None);
        let recs = vec![
            (1_000_000, "NVRM: Xid (PCI:0000:00:07): 79, old".to_string()),
            (
                8 * 86_400 * 1_000_000 + 500,
                "NVRM: Xid (PCI:0000:00:07): 13, new".to_string(),
            ),
        ];
        // Booted 2026-11-30T10:00:00Z; now 9 days later: the first record is 9 days old.
        let btime = 1_796_032_800;
        let now = btime + 9 * 86_400;
        let lines = dated_kmsg(&recs, btime, Some(now - LOOKBACK_DAYS * 86_400));
        assert_eq!(
            lines,
            vec!["2026-12-08T10:00:00.000500+00:00 NVRM: Xid (PCI:0000:00:07): 13, new"]
        );
        let all = dated_kmsg(&recs, btime, None);
        assert_eq!(
            all[0],
            "2026-11-30T10:00:01.000000+00:00 NVRM: Xid (PCI:0000:00:07): 79, old"
        );
        // The dated line reads back with its date (health.xid's lookback applies to it).
        let x = gpuaudit_core::parse::xid::parse_xids(&all.join("\n"));
        assert_eq!(x[0].at, Some(btime + 1));
    }

    #[test]
    fn the_newest_lines_are_kept_within_the_bounds() {
        let mut k = Keeper::new(None);
        for i in 0..MAX_LINES + 10 {
            k.push(format!("NVRM: Xid (PCI:0000:00:07): 13, {i}"), None);
        }
        assert_eq!(k.lines.len(), MAX_LINES);
        assert!(k.lines[0].ends_with(", 10"), "{}", k.lines[0]);
        let mut k = Keeper::new(None);
        let long = "y".repeat(400);
        for i in 0..MAX_BYTES / 200 {
            k.push(format!("{i} {long}"), None);
        }
        assert!(k.bytes <= MAX_BYTES);
        assert_eq!(k.bytes, k.lines.iter().map(|l| l.len() + 1).sum::<usize>());
        assert!(k.lines.len() < MAX_BYTES / 200);
        assert!(k.lines.iter().all(|l| l.chars().count() <= 400));
        // The lookback drops dated lines only.
        let mut k = Keeper::new(Some(1_796_032_800));
        k.push("2026-11-30T09:59:59+00:00 a".into(), None);
        k.push("2026-11-30T10:00:00+00:00 b".into(), None);
        k.push("May 18 19:02:39 c".into(), None);
        assert_eq!(
            k.lines,
            vec!["2026-11-30T10:00:00+00:00 b", "May 18 19:02:39 c"]
        );
    }

    #[test]
    fn the_journal_of_a_user_who_sees_no_kernel_messages_is_a_reason() {
        let e = journal_lines("-- No entries --\n", false, None).unwrap_err();
        assert!(e.contains("no kernel messages visible to this user"), "{e}");
        assert_eq!(journal_lines("-- No entries --\n", true, None), Ok(vec![]));
        let out = "2026-11-30T10:00:00+0000 h kernel: NVRM: Xid (PCI:0000:00:07): 79, x\n2026-11-30T10:00:01+0000 h kernel: usb 1-1: new device\n";
        assert_eq!(journal_lines(out, false, None).unwrap().len(), 1);
        let since = Some(1_796_032_801);
        assert!(journal_lines(out, false, since).unwrap().is_empty());
    }

    #[test]
    fn the_extract_file_reads_back() {
        let x = Extract {
            source: "/dev/kmsg".into(),
            lines: vec!["a".into(), "b".into()],
        };
        let f = x.to_file();
        assert!(f.starts_with("# gpuaudit kernel log extract; source: /dev/kmsg\na\nb\n"));
        assert_eq!(Extract::from_file(&f, "x"), x);
        let old = Extract::from_file("NVRM: Xid a\n", OLD_EXTRACT);
        assert_eq!(old.source, OLD_EXTRACT);
        assert_eq!(old.lines, vec!["NVRM: Xid a"]);
        let empty = Extract {
            source: "journalctl -k".into(),
            lines: vec![],
        };
        assert_eq!(Extract::from_file(&empty.to_file(), "x"), empty);
    }

    #[test]
    fn a_snapshot_reads_the_extract_the_old_file_or_copied_logs() {
        let d = tempfile::tempdir().unwrap();
        let root = RootFs::new(d.path());
        assert_eq!(read_snapshot(&root), None);
        std::fs::create_dir_all(d.path().join("var/log")).unwrap();
        std::fs::write(
            d.path().join("var/log/kern.log"),
            "May 18 19:02:39 h kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\nMay 18 19:02:40 h kernel: other\n",
        )
        .unwrap();
        let (x, xid_only) = read_snapshot(&root).unwrap().unwrap();
        assert!(!xid_only);
        assert_eq!(x.source, "/var/log/kern.log (in the snapshot)");
        assert_eq!(x.lines.len(), 1);
        // The rotated file is read first (older lines), without a final line feed too.
        std::fs::write(
            d.path().join("var/log/kern.log.1"),
            "May 17 10:00:00 h kernel: pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Corrected, type=Physical Layer",
        )
        .unwrap();
        let (x, _) = read_snapshot(&root).unwrap().unwrap();
        assert_eq!(x.lines.len(), 2);
        assert!(x.lines[0].starts_with("May 17"), "{:?}", x.lines);
        assert_eq!(
            x.source,
            "/var/log/kern.log.1 + /var/log/kern.log (in the snapshot)"
        );
        // Only kern.log.1 there: still read.
        std::fs::remove_file(d.path().join("var/log/kern.log")).unwrap();
        let (x, _) = read_snapshot(&root).unwrap().unwrap();
        assert_eq!(
            (x.source.as_str(), x.lines.len()),
            ("/var/log/kern.log.1 (in the snapshot)", 1)
        );
        std::fs::remove_file(d.path().join("var/log/kern.log.1")).unwrap();
        std::fs::write(
            d.path().join("var/log/syslog"),
            "NVRM: Xid (PCI:0000:00:07): 13, x\n",
        )
        .unwrap();
        let (x, _) = read_snapshot(&root).unwrap().unwrap();
        assert_eq!(x.source, "/var/log/syslog (in the snapshot)");
        std::fs::create_dir_all(d.path().join("cmd")).unwrap();
        std::fs::write(
            d.path().join(OLD_EXTRACT),
            "NVRM: Xid (PCI:0000:00:07): 13, x\n",
        )
        .unwrap();
        let (x, xid_only) = read_snapshot(&root).unwrap().unwrap();
        assert!(xid_only);
        assert_eq!(x.source, OLD_EXTRACT);
        std::fs::write(
            d.path().join(EXTRACT),
            Extract {
                source: "/dev/kmsg".into(),
                lines: vec![],
            }
            .to_file(),
        )
        .unwrap();
        let (x, xid_only) = read_snapshot(&root).unwrap().unwrap();
        assert!(!xid_only);
        assert_eq!(x.source, "/dev/kmsg");
        std::fs::write(
            d.path().join(EXTRACT),
            format!(
                "{}/dev/kmsg: permission denied\n",
                crate::root::UNREADABLE_MARK
            ),
        )
        .unwrap();
        assert_eq!(
            read_snapshot(&root),
            Some(Err("/dev/kmsg: permission denied".into()))
        );
    }
}
