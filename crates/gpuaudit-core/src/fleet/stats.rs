//! Robust statistics of one figure over a fleet's nodes, and the rule that flags a node.
//!
//! A fleet's healthy nodes measure alike, but not exactly alike, and a fleet always has a few
//! bad nodes: the mean and the standard deviation are pulled by the very nodes they should
//! find. The median and the median absolute deviation (MAD) are not (up to half the fleet can
//! be off without moving them), which is why they are the yardstick here.

/// A node is flagged when its figure is this much worse than the median of its peers (10%):
/// well beyond the run-to-run noise of gpuaudit's measurements on one healthy machine (each
/// within 0.97 of its anchor, BENCHMARKS.md), and what a user notices in a job's step time;
/// it needs no datasheet figure, so a GPU gpuaudit has no spec entry for is judged too.
pub const SHORTFALL: f64 = 0.10;

/// ...and where the fleet's own spread is wide, only when its figure is also this many robust
/// standard deviations (1.4826 × MAD) worse than the median: 3.5, the modified z-score above
/// which Iglewicz and Hoaglin ("How to Detect and Handle Outliers", ASQC 1993) call a value an
/// outlier. A fleet whose nodes normally spread by ±5% (context creation, a shared network)
/// would otherwise flag its ordinary members; where the peers agree (MAD 0), the shortfall
/// alone decides.
pub const ROBUST_Z: f64 = 3.5;

/// Fewer peers than this flag nothing: with two nodes the median lies halfway between them,
/// and which of the two is the odd one cannot be told.
pub const MIN_PEERS: usize = 3;

/// 1 / Φ⁻¹(3/4): the MAD times this estimates the standard deviation of normal data.
const MAD_TO_SIGMA: f64 = 1.4826;

/// The median of `values` (finite ones only); None where there is none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The median absolute deviation of `values` from their median.
pub fn mad(values: &[f64], median_value: f64) -> Option<f64> {
    let dev: Vec<f64> = values.iter().map(|x| (x - median_value).abs()).collect();
    median(&dev)
}

/// Which way a figure is better: the figure catalog's.
pub use crate::figures::Better;

/// How far `value` is on the worse side of `median`, as a share of the median (0.12: 12%
/// worse); negative where it is better. None where the median is not positive.
pub fn shortfall(value: f64, median_value: f64, better: Better) -> Option<f64> {
    if median_value <= 0.0 || !value.is_finite() {
        return None;
    }
    Some(match better {
        Better::Higher => (median_value - value) / median_value,
        Better::Lower => (value - median_value) / median_value,
        Better::Neither => (value - median_value).abs() / median_value,
    })
}

/// The modified z-score on the worse side: how many robust standard deviations `value` is
/// worse than the median. None where the MAD is 0 (the peers agree: any distance is infinite).
pub fn robust_z(value: f64, median_value: f64, mad_value: f64, better: Better) -> Option<f64> {
    if mad_value <= 0.0 {
        return None;
    }
    let worse_by = match better {
        Better::Higher => median_value - value,
        Better::Lower => value - median_value,
        Better::Neither => (value - median_value).abs(),
    };
    Some(worse_by / (MAD_TO_SIGMA * mad_value))
}

/// Whether a node stands out: `SHORTFALL` or more worse than its peers' median, and (where the
/// peers spread) `ROBUST_Z` or more robust deviations worse.
pub fn stands_out(shortfall: Option<f64>, z: Option<f64>) -> bool {
    match shortfall {
        Some(s) if s >= SHORTFALL => z.is_none_or(|z| z >= ROBUST_Z),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::NAN, 5.0]), Some(5.0));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn mad_is_the_median_distance() {
        // |x - 3|: 2, 1, 0, 1, 97 -> median 1; the far value does not move it.
        assert_eq!(mad(&[1.0, 2.0, 3.0, 4.0, 100.0], 3.0), Some(1.0));
    }

    #[test]
    fn the_worse_of_two_values() {
        assert_eq!(Better::Higher.worse(1.0, 2.0, 0.0), 1.0);
        assert_eq!(Better::Lower.worse(1.0, 2.0, 0.0), 2.0);
        // Neither: the one farther from the centre, either side.
        assert_eq!(Better::Neither.worse(9.0, 12.0, 10.0), 12.0);
        assert_eq!(Better::Neither.worse(12.0, 7.0, 10.0), 7.0);
    }

    #[test]
    fn shortfall_is_signed_toward_worse() {
        assert_eq!(shortfall(88.0, 100.0, Better::Higher), Some(0.12));
        assert_eq!(shortfall(112.0, 100.0, Better::Higher), Some(-0.12));
        assert_eq!(shortfall(110.0, 100.0, Better::Lower), Some(0.1));
        assert_eq!(shortfall(1.0, 0.0, Better::Higher), None);
        assert_eq!(shortfall(f64::NAN, 1.0, Better::Higher), None);
    }

    #[test]
    fn the_shortfall_threshold_both_sides() {
        // Peers agree (no z): at 10% flagged, just below not, better never.
        assert!(stands_out(shortfall(90.0, 100.0, Better::Higher), None));
        assert!(!stands_out(shortfall(90.01, 100.0, Better::Higher), None));
        assert!(stands_out(shortfall(110.0, 100.0, Better::Lower), None));
        assert!(!stands_out(shortfall(109.99, 100.0, Better::Lower), None));
        assert!(!stands_out(shortfall(150.0, 100.0, Better::Higher), None));
        assert!(!stands_out(None, None));
    }

    #[test]
    fn the_robust_z_threshold_both_sides() {
        // 20% worse, but the fleet spreads: flagged from 3.5 robust deviations on.
        let s = Some(0.2);
        assert!(stands_out(s, Some(ROBUST_Z)));
        assert!(stands_out(s, Some(ROBUST_Z + 0.01)));
        assert!(!stands_out(s, Some(ROBUST_Z - 0.01)));
        // z is computed from the MAD: 1.4826 × MAD per deviation.
        let z = robust_z(80.0, 100.0, 4.0, Better::Higher).unwrap();
        assert!((z - 20.0 / (1.4826 * 4.0)).abs() < 1e-12, "{z}");
        assert_eq!(robust_z(80.0, 100.0, 0.0, Better::Higher), None);
        let z = robust_z(120.0, 100.0, 4.0, Better::Lower).unwrap();
        assert!(z > 0.0);
    }
}
