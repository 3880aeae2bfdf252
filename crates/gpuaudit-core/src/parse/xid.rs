//! NVIDIA Xid lines of the kernel log (`dmesg`, /dev/kmsg, the journal, kern.log), and the
//! NVSwitch driver's SXid lines.

use crate::facts::XidEvent;
use std::collections::VecDeque;

/// What the kernel log's readers keep a line for: both "NVRM: Xid (" and "SXid (" lines.
pub const NEEDLE: &str = "Xid (";
/// At most this many events are kept: the last ones of the log (the newest matter most).
pub const MAX_EVENTS: usize = 10_000;
/// A line is kept (and shown) up to this many characters.
pub const MAX_LINE_CHARS: usize = 400;

/// Every "NVRM: Xid (PCI:<bus>): <code>, ..." and "SXid (PCI:<bus>): <code>, ..." line in
/// `text`, the last [`MAX_EVENTS`] of them; other lines are ignored.
pub fn parse_xids(text: &str) -> Vec<XidEvent> {
    let mut out = VecDeque::new();
    for e in text.lines().filter_map(parse_line) {
        if out.len() == MAX_EVENTS {
            out.pop_front();
        }
        out.push_back(e);
    }
    out.into()
}

fn parse_line(line: &str) -> Option<XidEvent> {
    let (at, len, switch) = if let Some(i) = line.find("NVRM: Xid") {
        (i, "NVRM: Xid".len(), false)
    } else {
        let i = line.find("SXid")?;
        (i, "SXid".len(), true)
    };
    let rest = line.get(at + len..)?;
    let rest = rest.trim_start();
    let (bus_id, rest) = match rest.strip_prefix('(') {
        Some(r) => {
            let close = r.find(')')?;
            let inside = &r[..close];
            let bus = inside
                .strip_prefix("PCI:")
                .unwrap_or(inside)
                .trim()
                .to_ascii_lowercase();
            (Some(bus).filter(|b| !b.is_empty()), &r[close + 1..])
        }
        None => (None, rest),
    };
    let rest = rest
        .trim_start()
        .strip_prefix(':')
        .unwrap_or(rest)
        .trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let code = digits.parse().ok()?;
    let (time, at_s) = stamp(&line[..at]);
    Some(XidEvent {
        bus_id,
        code,
        text: line.trim().chars().take(MAX_LINE_CHARS).collect(),
        time,
        at: at_s,
        switch,
    })
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The time stamp before the message, as written, and in seconds since 1970 where it names
/// a date with a year: journalctl's `-o short-iso` ("2024-08-30T11:43:09+0000", with or
/// without fraction and offset; no offset reads as UTC), `dmesg -T` ("[Fri Aug 30 11:43:09
/// 2024]", the machine's local time, read as UTC). Syslog's "May 18 19:02:39" (no year) and
/// dmesg's "[ 5107.644336]" (seconds after boot) are kept as text only.
pub(crate) fn stamp(prefix: &str) -> (Option<String>, Option<i64>) {
    let p = prefix.trim();
    if let Some(t) = p.split_whitespace().next().and_then(iso) {
        return (Some(t.0), Some(t.1));
    }
    if let Some(t) = ctime(p) {
        return (Some(t.0), Some(t.1));
    }
    let words: Vec<&str> = p.split_whitespace().take(3).collect();
    if words.len() == 3
        && MONTHS.contains(&words[0])
        && words[1].parse::<u32>().is_ok_and(|d| (1..=31).contains(&d))
        && hms(words[2]).is_some()
    {
        return (Some(words.join(" ")), None);
    }
    if let Some(open) = p.rfind('[') {
        if let Some(inner) = p[open + 1..].split(']').next() {
            let inner = inner.trim();
            // An empty or dotted-only inner part fails to parse: no test of its own.
            if inner.len() <= 20
                && inner.chars().all(|c| c.is_ascii_digit() || c == '.')
                && inner.parse::<f64>().is_ok()
            {
                return (Some(format!("{inner} s after boot")), None);
            }
        }
    }
    (None, None)
}

fn hms(s: &str) -> Option<(i64, i64, i64)> {
    let mut it = s.split(':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next()?.parse().ok()?;
    if it.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some((h, m, sec))
}

/// Days from 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn unix(y: i64, mo: i64, d: i64, (h, mi, s): (i64, i64, i64)) -> Option<i64> {
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&mo) || !(1..=31).contains(&d) {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// "2024-08-30T11:43:09+0000", "2024-08-30T11:43:09.123456+00:00", "2024-08-30T11:43:09Z".
pub fn iso(w: &str) -> Option<(String, i64)> {
    let (date, time) = w.split_once('T')?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let mo: i64 = d.next()?.parse().ok()?;
    let day: i64 = d.next()?.parse().ok()?;
    // A time shorter than hh:mm:ss fails at `get(..8)`.
    if d.next().is_some() {
        return None;
    }
    let clock = hms(time.get(..8)?)?;
    let mut rest = &time[8..];
    if let Some(r) = rest.strip_prefix('.') {
        rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let offset = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let digits: String = rest[1..].chars().filter(|c| *c != ':').collect();
            if digits.len() != 4 || !digits.chars().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let h: i64 = digits[..2].parse().ok()?;
            let m: i64 = digits[2..].parse().ok()?;
            sign * (h * 3600 + m * 60)
        }
    };
    Some((w.to_string(), unix(y, mo, day, clock)? - offset))
}

/// "[Fri Aug 30 11:43:09 2024]" (dmesg -T / --ctime), anywhere in the prefix.
fn ctime(p: &str) -> Option<(String, i64)> {
    let open = p.find('[')?;
    let inner = p[open + 1..].split(']').next()?.trim();
    let w: Vec<&str> = inner.split_whitespace().collect();
    if w.len() != 5 {
        return None;
    }
    let mo = MONTHS.iter().position(|m| *m == w[1])? as i64 + 1;
    let day: i64 = w[2].parse().ok()?;
    let y: i64 = w[4].parse().ok()?;
    Some((inner.to_string(), unix(y, mo, day, hms(w[3])?)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_iso_time_reads_its_offset_east_and_west_and_without_one_as_utc() {
        let at = |w: &str| iso(w).map(|x| x.1);
        assert_eq!(at("2024-08-30T11:43:09"), Some(1_725_018_189));
        assert_eq!(at("2024-08-30T11:43:09Z"), Some(1_725_018_189));
        assert_eq!(at("2024-08-30T11:43:09.5+0000"), Some(1_725_018_189));
        assert_eq!(
            at("2024-08-30T11:43:09-07:00"),
            Some(1_725_018_189 + 7 * 3600)
        );
        assert_eq!(
            at("2024-08-30T11:43:09+05:30"),
            Some(1_725_018_189 - 19_800)
        );
        assert_eq!(at("2024-08-30T11:43:09+5:30"), None);
        assert_eq!(at("2024-08-30T11:43:09*05:30"), None);
        assert_eq!(at("2024-08-30-01T11:43:09"), None);
        assert_eq!(at("2024-08-30T11:43"), None);
        assert_eq!(at("2024-08-30"), None);
    }

    #[test]
    fn a_clock_time_is_hours_minutes_seconds_with_a_leap_second() {
        assert_eq!(hms("23:59:60"), Some((23, 59, 60)));
        assert_eq!(hms("00:00:00"), Some((0, 0, 0)));
        assert_eq!(hms("24:00:00"), None);
        assert_eq!(hms("00:60:00"), None);
        assert_eq!(hms("00:00:61"), None);
        assert_eq!(hms("23:59"), None);
        assert_eq!(hms("1:2:3:4"), None);
    }

    #[test]
    fn dates_in_january_and_february_count_from_the_year_before_in_the_civil_algorithm() {
        assert_eq!(unix(2024, 1, 1, (0, 0, 0)), Some(1_704_067_200));
        assert_eq!(unix(2024, 2, 29, (12, 0, 0)), Some(1_709_208_000));
        assert_eq!(unix(2024, 3, 1, (0, 0, 0)), Some(1_709_251_200));
        assert_eq!(unix(1970, 1, 1, (0, 0, 1)), Some(1));
    }

    #[test]
    fn a_seconds_after_boot_stamp_is_digits_and_dots_of_twenty_characters_at_most() {
        assert_eq!(
            stamp("[ 5107.644336]"),
            (Some("5107.644336 s after boot".into()), None)
        );
        let twenty = "1".repeat(20);
        assert_eq!(
            stamp(&format!("[{twenty}]")).0,
            Some(format!("{twenty} s after boot"))
        );
        assert_eq!(stamp(&format!("[{twenty}1]")), (None, None));
        assert_eq!(stamp("[1e5]"), (None, None));
        assert_eq!(stamp("[1.2.3]"), (None, None));
        assert_eq!(stamp("[ ]"), (None, None));
    }

    #[test]
    fn reads_xid_lines() {
        let log = "[  12.3] random line\n\
                   [ 100.1] NVRM: Xid (PCI:0000:00:07): 79, pid=1234, GPU has fallen off the bus.\n\
                   [ 101.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=99, Graphics Exception\n\
                   NVRM: Xid garbage\n";
        let x = parse_xids(log);
        assert_eq!(x.len(), 2);
        assert_eq!(x[0].code, 79);
        assert_eq!(x[0].bus_id.as_deref(), Some("0000:00:07"));
        assert_eq!(x[0].time.as_deref(), Some("100.1 s after boot"));
        assert_eq!(x[0].at, None);
        assert!(!x[0].switch);
        assert_eq!(x[1].code, 13);
    }

    #[test]
    fn reads_the_time_stamps() {
        let one = |l: &str| parse_xids(l).remove(0);
        let x = one("2024-08-30T11:43:09+0000 host kernel: NVRM: Xid (PCI:0000:cb:00): 13, x");
        assert_eq!(x.at, Some(1_725_018_189));
        let x =
            one("2024-08-30T13:43:09.123456+02:00 host kernel: NVRM: Xid (PCI:0000:cb:00): 13, x");
        assert_eq!(x.at, Some(1_725_018_189));
        let x = one("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>'");
        assert_eq!(x.at, Some(1_725_018_189));
        assert_eq!(x.time.as_deref(), Some("Fri Aug 30 11:43:09 2024"));
        let x = one(
            "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        );
        assert_eq!((x.time.as_deref(), x.at), (Some("May 18 19:02:39"), None));
        let x = one("NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.");
        assert_eq!((x.time, x.at), (None, None));
        let x = one("2024-13-30T11:43:09Z NVRM: Xid (PCI:0000:cb:00): 13, x");
        assert_eq!(x.at, None);
    }

    #[test]
    fn reads_sxid_lines() {
        let x = parse_xids(
            "[ 9.1] nvidia-nvswitch3: SXid (PCI:0000:c5:00.0): 24007, Fatal, Link 55 sourcetrack timeout error (First)",
        );
        assert_eq!(x.len(), 1);
        assert!(x[0].switch);
        assert_eq!(x[0].code, 24007);
        assert_eq!(x[0].bus_id.as_deref(), Some("0000:c5:00.0"));
    }

    #[test]
    fn keeps_the_last_events_and_cuts_long_lines() {
        let mut log = String::new();
        for i in 0..MAX_EVENTS + 5 {
            log.push_str(&format!(
                "NVRM: Xid (PCI:0000:00:07): {}, {}\n",
                i % 7 + 1,
                "x".repeat(500)
            ));
        }
        let x = parse_xids(&log);
        assert_eq!(x.len(), MAX_EVENTS);
        assert_eq!(x[0].code, 6);
        assert!(x[0].text.chars().count() <= MAX_LINE_CHARS);
    }

    #[test]
    fn odd_input_is_ignored() {
        for s in [
            "NVRM: Xid (",
            "NVRM: Xid (PCI:)",
            "NVRM: Xid (PCI:x): 99999999999999999999",
            "\u{0}\u{ffff}",
            "[\u{e9}\u{e9} 1 2 3 4] NVRM: Xid (PCI:0000:00:07): 13,",
            "9999-99-99T99:99:99+9999 NVRM: Xid (PCI:0000:00:07): 13,",
            "2024-08-30T11:43:09+ NVRM: Xid 13,",
            "SXid",
        ] {
            let _ = parse_xids(s);
        }
    }
}
