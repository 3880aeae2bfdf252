//! Small sysfs attribute files: hex ids, link speeds, widths, NUMA nodes.

/// "0x10de\n" -> 0x10de.
pub fn parse_hex_u16(_text: &str) -> Option<u16> {
    None
}

/// "0x030200\n" -> 0x030200.
pub fn parse_hex_u32(_text: &str) -> Option<u32> {
    None
}

/// "32.0 GT/s PCIe\n" (also "8 GT/s", "2.5 GT/s") -> 32.0. "Unknown" -> None.
pub fn parse_link_speed_gts(_text: &str) -> Option<f64> {
    None
}

/// "16\n" -> 16.
pub fn parse_u32(_text: &str) -> Option<u32> {
    None
}

/// "-1\n" -> -1.
pub fn parse_i32(_text: &str) -> Option<i32> {
    None
}
