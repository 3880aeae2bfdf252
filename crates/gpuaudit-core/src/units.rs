//! How figures are written in findings and tables: numbers to about three significant digits,
//! sizes in the binary unit that divides them.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// A measured figure: "789", "57.6", "6.00".
pub fn figure(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A buffer or message size: "1 GiB", "256 MiB", "4 KiB", "12 B" (the largest unit that
/// divides it exactly).
pub fn bytes(b: u64) -> String {
    if b >= GIB && b % GIB == 0 {
        format!("{} GiB", b / GIB)
    } else if b >= MIB && b % MIB == 0 {
        format!("{} MiB", b / MIB)
    } else if b >= KIB && b % KIB == 0 {
        format!("{} KiB", b / KIB)
    } else {
        format!("{b} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_keep_three_digits() {
        assert_eq!(figure(789.4), "789");
        assert_eq!(figure(100.0), "100");
        assert_eq!(figure(57.64), "57.6");
        assert_eq!(figure(10.0), "10.0");
        assert_eq!(figure(6.0), "6.00");
    }

    #[test]
    fn sizes_use_the_unit_that_divides_them() {
        assert_eq!(bytes(GIB), "1 GiB");
        assert_eq!(bytes(3 * GIB / 2), "1536 MiB");
        assert_eq!(bytes(256 * MIB), "256 MiB");
        assert_eq!(bytes(4 * KIB), "4 KiB");
        assert_eq!(bytes(1000), "1000 B");
        assert_eq!(bytes(8), "8 B");
    }
}
