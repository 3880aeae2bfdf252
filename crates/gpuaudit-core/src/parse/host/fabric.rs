//! /sys/class/infiniband port files and /sys/class/net attributes.

/// "400 Gb/sec (4X NDR)" -> 400.0; "2.5 Gb/sec (1X SDR)" -> 2.5.
pub fn parse_rate_gbps(text: &str) -> Option<f64> {
    let t = text.trim();
    let (num, rest) = t.split_once(' ')?;
    if !rest.trim_start().starts_with("Gb/sec") {
        return None;
    }
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

/// "4: ACTIVE" -> "ACTIVE"; "5: LinkUp" -> "LinkUp"; "ACTIVE" -> "ACTIVE".
pub fn parse_port_state(text: &str) -> Option<String> {
    let t = text.trim();
    let s = match t.split_once(':') {
        Some((_, s)) => s.trim(),
        None => t,
    };
    (!s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .then(|| s.to_string())
}

/// /sys/class/net/IF/speed: Mb/s, or `None` for "-1" / unknown (common on virtual NICs).
pub fn parse_speed_mbps(text: &str) -> Option<u32> {
    let v: i64 = text.trim().parse().ok()?;
    u32::try_from(v).ok().filter(|v| *v > 0 && *v != u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ib_files() {
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)\n"), Some(400.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("garbage"), None);
        assert_eq!(parse_port_state("4: ACTIVE\n").as_deref(), Some("ACTIVE"));
        assert_eq!(parse_port_state("5: LinkUp").as_deref(), Some("LinkUp"));
        assert_eq!(parse_port_state("\u{0}\u{1}"), None);
        assert_eq!(parse_speed_mbps("100000\n"), Some(100000));
        assert_eq!(parse_speed_mbps("-1"), None);
        assert_eq!(parse_speed_mbps("x"), None);
    }
}
