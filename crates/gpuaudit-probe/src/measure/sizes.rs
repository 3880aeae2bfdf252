//! Byte units and the size sweeps the groups' plans share.

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Sizes from `from` to `to` (powers of two), `factor` apart, plus `extra`, sorted.
pub fn sweep(from: u64, to: u64, factor: u64, extra: &[u64]) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s = from;
    while s <= to {
        v.push(s);
        s = s.saturating_mul(factor.max(2));
    }
    v.extend_from_slice(extra);
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps() {
        assert_eq!(sweep(8, 128, 4, &[64]), vec![8, 32, 64, 128]);
        assert_eq!(sweep(4 * KIB, GIB, 4, &[]).len(), 10);
    }
}
