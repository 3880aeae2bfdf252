//! Small sysfs attribute files: hex ids, link speeds, widths, NUMA nodes.
//!
//! Each returns `None` for anything it cannot read exactly (garbage, an empty file, a value
//! that does not fit the type): the caller turns that into an unavailable reading with the
//! file's path.

/// "0x10de\n" -> 0x10de. The "0x" prefix is optional; more than 16 bits is `None`.
pub fn parse_hex_u16(text: &str) -> Option<u16> {
    u16::from_str_radix(hex_digits(text)?, 16).ok()
}

/// "0x030200\n" -> 0x030200.
pub fn parse_hex_u32(text: &str) -> Option<u32> {
    u32::from_str_radix(hex_digits(text)?, 16).ok()
}

fn hex_digits(text: &str) -> Option<&str> {
    let t = text.trim();
    let digits = t
        .strip_prefix("0x")
        .or_else(|| t.strip_prefix("0X"))
        .unwrap_or(t);
    // from_str_radix would accept a leading '+'.
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_hexdigit())).then_some(digits)
}

/// "32.0 GT/s PCIe\n" (also "8 GT/s", "2.5 GT/s") -> 32.0. "Unknown" -> None.
pub fn parse_link_speed_gts(text: &str) -> Option<f64> {
    let mut it = text.split_whitespace();
    let number = it.next()?;
    if it.next()? != "GT/s" {
        return None;
    }
    // Rust's float parser takes "inf" and "NaN"; a link speed is a plain positive number.
    if !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// What firmware writes in a DMI string it was never given (AMI's and the SMBIOS
/// specification's defaults), compared without case; such a value names nothing.
pub const DMI_PLACEHOLDERS: &[&str] = &[
    "to be filled by o.e.m.",
    "default string",
    "system product name",
    "system manufacturer",
    "system version",
    "not specified",
    "not applicable",
    "none",
    "o.e.m.",
    "oem",
    "0",
];

/// One `/sys/class/dmi/id/*` string (already cut to its first line): the value, or why it
/// names nothing (a firmware placeholder, or nothing at all).
pub fn dmi_value(line: &str) -> Result<String, String> {
    let v = line.trim();
    if v.is_empty() {
        return Err("empty".into());
    }
    if DMI_PLACEHOLDERS.iter().any(|p| v.eq_ignore_ascii_case(p)) {
        return Err(format!("a firmware placeholder ('{v}')"));
    }
    Ok(v.to_string())
}

/// "16\n" -> 16.
pub fn parse_u32(text: &str) -> Option<u32> {
    let t = text.trim();
    t.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| t.parse().ok())
        .flatten()
}

/// "-1\n" -> -1.
pub fn parse_i32(text: &str) -> Option<i32> {
    let t = text.trim();
    let digits = t.strip_prefix('-').unwrap_or(t);
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| t.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dmi_strings_and_placeholders() {
        assert_eq!(dmi_value("Amazon EC2").unwrap(), "Amazon EC2");
        assert_eq!(dmi_value("  p5.48xlarge ").unwrap(), "p5.48xlarge");
        assert_eq!(
            dmi_value("To be filled by O.E.M.").unwrap_err(),
            "a firmware placeholder ('To be filled by O.E.M.')"
        );
        for p in DMI_PLACEHOLDERS {
            assert!(dmi_value(&p.to_uppercase()).is_err(), "{p}");
        }
        assert_eq!(dmi_value(" ").unwrap_err(), "empty");
        // A real name that starts like a placeholder is kept.
        assert!(dmi_value("Default String Co").is_ok());
    }

    #[test]
    fn hex() {
        assert_eq!(parse_hex_u16("0x10de\n"), Some(0x10de));
        assert_eq!(parse_hex_u16("0X2335"), Some(0x2335));
        assert_eq!(parse_hex_u16("10de"), Some(0x10de));
        assert_eq!(parse_hex_u16("0x10dee"), None);
        assert_eq!(parse_hex_u16("0x"), None);
        assert_eq!(parse_hex_u16("0x+1"), None);
        assert_eq!(parse_hex_u16(""), None);
        assert_eq!(parse_hex_u16("0xzz"), None);
        assert_eq!(parse_hex_u32("0x030200\n"), Some(0x030200));
        assert_eq!(parse_hex_u32("0xffffffff"), Some(u32::MAX));
        assert_eq!(parse_hex_u32("0x100000000"), None);
    }

    #[test]
    fn link_speed() {
        assert_eq!(parse_link_speed_gts("32.0 GT/s PCIe\n"), Some(32.0));
        assert_eq!(parse_link_speed_gts("16.0 GT/s PCIe"), Some(16.0));
        assert_eq!(parse_link_speed_gts("8 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed_gts("2.5 GT/s\r\n"), Some(2.5));
        assert_eq!(parse_link_speed_gts("Unknown"), None);
        assert_eq!(parse_link_speed_gts("Unknown speed"), None);
        assert_eq!(parse_link_speed_gts("inf GT/s"), None);
        assert_eq!(parse_link_speed_gts("0 GT/s"), None);
        assert_eq!(parse_link_speed_gts("32.0"), None);
        assert_eq!(parse_link_speed_gts(""), None);
    }

    #[test]
    fn integers() {
        assert_eq!(parse_u32("16\n"), Some(16));
        assert_eq!(parse_u32(" 0 "), Some(0));
        assert_eq!(parse_u32("+16"), None);
        assert_eq!(parse_u32("-1"), None);
        assert_eq!(parse_u32("4294967296"), None);
        assert_eq!(parse_u32(""), None);
        assert_eq!(parse_i32("-1\n"), Some(-1));
        assert_eq!(parse_i32("3"), Some(3));
        assert_eq!(parse_i32("-"), None);
        assert_eq!(parse_i32("--1"), None);
        assert_eq!(parse_i32("2147483648"), None);
        assert_eq!(parse_i32("1 2"), None);
    }
}
