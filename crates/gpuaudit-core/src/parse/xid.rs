//! NVIDIA XID lines of the kernel log (`dmesg`, /dev/kmsg, journal).

use crate::facts::XidEvent;

/// Every "NVRM: Xid (PCI:<bus>): <code>, ..." line in `text`; other lines are ignored.
pub fn parse_xids(text: &str) -> Vec<XidEvent> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<XidEvent> {
    let at = line.find("NVRM: Xid")?;
    let rest = &line[at + "NVRM: Xid".len()..];
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
    Some(XidEvent {
        bus_id,
        code,
        text: line.trim().chars().take(400).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(x[1].code, 13);
    }

    #[test]
    fn odd_input_is_ignored() {
        for s in [
            "NVRM: Xid (",
            "NVRM: Xid (PCI:)",
            "NVRM: Xid (PCI:x): 99999999999999999999",
            "\u{0}\u{ffff}",
        ] {
            let _ = parse_xids(s);
        }
    }
}
