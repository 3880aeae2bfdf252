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

/// A node worse than the median by less than the threshold is still worth a look (`watch`)
/// when it is this many robust standard deviations out: where healthy nodes agree within 1%,
/// a node 6% slow is no noise, and in synchronous training the slowest node sets the pace.
/// 5, well past `ROBUST_Z`: a 64-node fleet of normal noise reaches it about once in 30,000
/// fleets.
pub const WATCH_Z: f64 = 5.0;

/// ...and at least this much worse (3%): nearer than that, a healthy machine's own
/// run-to-run noise (within 0.97 of its anchor, BENCHMARKS.md) could be all it is.
pub const WATCH_FLOOR: f64 = 0.03;

/// A temperature (an interval scale: 72 °C is not "12.7% more" than 64 °C) is judged in
/// degrees: flagged this many °C or more hotter than the median (10 °C: the distance between
/// a GPU that breathes and one whose fan or airflow failed, under the same load)...
pub const HOTTER_C: f64 = 10.0;

/// ...and to watch from this many °C hotter (with `WATCH_Z`).
pub const WATCH_HOTTER_C: f64 = 3.0;

/// The judge's settings: the threshold is `gpuaudit fleet --threshold` (default `SHORTFALL`),
/// a share of the median (of what the model attains, for `below_attainable`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Rules {
    pub threshold: f64,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            threshold: SHORTFALL,
        }
    }
}

/// How a figure is judged: which way it is better, on a log scale (a long-tailed figure
/// whose values are all positive) or in degrees (a temperature), else as shares of the
/// median.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scale {
    pub better: Better,
    pub log: bool,
    pub degrees: bool,
}

/// The fleet's yardstick of one figure: the median of the values, and the centre and MAD on
/// the scale it is judged on (of ln(value) on a log scale).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yardstick {
    pub median: f64,
    /// The centre in the figure's unit: the median; on a log scale exp(median of ln), which
    /// is the middle value (odd count) or the geometric mean of the two middle ones.
    pub centre_value: f64,
    pub centre: f64,
    pub mad: f64,
    pub scale: Scale,
}

/// The yardstick of `values`; `log` is asked for (a long-tailed figure) and granted only
/// where every value is positive. None where no value is finite.
pub fn yardstick(values: &[f64], better: Better, log: bool, degrees: bool) -> Option<Yardstick> {
    let median_value = median(values)?;
    let log = log && !degrees && values.iter().all(|v| *v > 0.0);
    let judged: Vec<f64> = if log {
        values.iter().map(|v| v.ln()).collect()
    } else {
        values.to_vec()
    };
    let centre = median(&judged)?;
    let centre_value = if log {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] * v[n / 2]).sqrt()
        }
    } else {
        median_value
    };
    Some(Yardstick {
        median: median_value,
        centre_value,
        centre,
        mad: mad(&judged, centre).unwrap_or(0.0),
        scale: Scale {
            better,
            log,
            degrees,
        },
    })
}

/// How far one node's value is on the worse side of its peers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Distance {
    /// A share: 0.12 is 12% worse (slower, or for a condition wrong either way, that far
    /// from the median either side); on a log scale exp(Δ)−1 of Δ = ln(value) − the median
    /// of ln (so it reads as "12% slower"). None in degrees.
    pub shortfall: Option<f64>,
    /// Degrees hotter (a temperature); None otherwise.
    pub degrees: Option<f64>,
    /// Robust standard deviations worse, on the judged scale; None where the MAD is 0.
    pub z: Option<f64>,
}

/// The distance of `value` from the yardstick; None for a value that is not finite (or not
/// positive on a log scale).
pub fn distance(value: f64, y: &Yardstick) -> Option<Distance> {
    if !value.is_finite() || (y.scale.log && value <= 0.0) {
        return None;
    }
    let x = if y.scale.log { value.ln() } else { value };
    let worse = match y.scale.better {
        Better::Higher => y.centre - x,
        Better::Lower => x - y.centre,
        Better::Neither => (x - y.centre).abs(),
    };
    let z = (y.mad > 0.0).then(|| worse / (MAD_TO_SIGMA * y.mad));
    if y.scale.degrees {
        return Some(Distance {
            shortfall: None,
            degrees: Some(worse),
            z,
        });
    }
    let share = if y.scale.log {
        // exp(Δ)−1, as ratios of the values (exact at a threshold's edge).
        let m = y.centre_value;
        match y.scale.better {
            Better::Higher => 1.0 - value / m,
            Better::Lower => value / m - 1.0,
            Better::Neither => (value / m).max(m / value) - 1.0,
        }
    } else {
        shortfall(value, y.median, y.scale.better)?
    };
    Some(Distance {
        shortfall: Some(share),
        degrees: None,
        z,
    })
}

/// Where a node stands on one figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// Stands out: the threshold (`HOTTER_C` in degrees) or more worse, and where the peers
    /// spread, `ROBUST_Z` or more robust deviations.
    Flagged,
    /// Within the threshold, but `WATCH_FLOOR` (`WATCH_HOTTER_C`) or more worse and
    /// `WATCH_Z` or more robust deviations (any distance, where the peers agree): far outside
    /// the fleet's noise. Not counted as flagged.
    Watch,
    Within,
}

/// The tier of a distance under `rules`.
pub fn tier(d: &Distance, rules: &Rules) -> Tier {
    let (worse, flag_at, watch_at) = match (d.degrees, d.shortfall) {
        (Some(deg), _) => (deg, HOTTER_C, WATCH_HOTTER_C),
        (None, Some(s)) => (s, rules.threshold, WATCH_FLOOR),
        (None, None) => return Tier::Within,
    };
    if worse >= flag_at && d.z.is_none_or(|z| z >= ROBUST_Z) {
        Tier::Flagged
    } else if worse >= watch_at && d.z.is_none_or(|z| z >= WATCH_Z) {
        Tier::Watch
    } else {
        Tier::Within
    }
}

/// Whether a node stands out on a linear scale under the default rules: `SHORTFALL` or more
/// worse than its peers' median, and (where the peers spread) `ROBUST_Z` or more robust
/// deviations worse.
pub fn stands_out(shortfall: Option<f64>, z: Option<f64>) -> bool {
    let d = Distance {
        shortfall,
        degrees: None,
        z,
    };
    tier(&d, &Rules::default()) == Tier::Flagged
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
        // The one far below beats the one just above; a tie keeps the first.
        assert_eq!(Better::Neither.worse(2.0, 11.0, 10.0), 2.0);
        assert_eq!(Better::Neither.worse(9.0, 11.0, 10.0), 9.0);
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

    fn share(s: f64, z: Option<f64>) -> Distance {
        Distance {
            shortfall: Some(s),
            degrees: None,
            z,
        }
    }

    fn deg(d: f64, z: Option<f64>) -> Distance {
        Distance {
            shortfall: None,
            degrees: Some(d),
            z,
        }
    }

    #[test]
    fn the_threshold_is_the_rules_both_sides() {
        let five = Rules { threshold: 0.05 };
        assert_eq!(tier(&share(0.05, None), &five), Tier::Flagged);
        assert_eq!(tier(&share(0.0499, None), &five), Tier::Watch);
        assert_eq!(tier(&share(0.05, Some(ROBUST_Z)), &five), Tier::Flagged);
        // Far enough, but too near the spread for either tier: within.
        assert_eq!(tier(&share(0.05, Some(3.49)), &five), Tier::Within);
        assert_eq!(Rules::default().threshold, SHORTFALL);
        assert_eq!(tier(&share(0.0999, None), &Rules::default()), Tier::Watch);
    }

    #[test]
    fn the_watch_tier_both_sides_of_its_z_and_floor() {
        let r = Rules::default();
        assert_eq!(tier(&share(0.06, Some(WATCH_Z)), &r), Tier::Watch);
        assert_eq!(tier(&share(0.06, Some(WATCH_Z - 0.01)), &r), Tier::Within);
        assert_eq!(tier(&share(WATCH_FLOOR, Some(9.0)), &r), Tier::Watch);
        assert_eq!(tier(&share(0.0299, Some(9.0)), &r), Tier::Within);
        // The peers agree (MAD 0): the floor alone.
        assert_eq!(tier(&share(0.03, None), &r), Tier::Watch);
        assert_eq!(tier(&share(0.0299, None), &r), Tier::Within);
        assert_eq!(tier(&share(-0.2, None), &r), Tier::Within);
        assert_eq!(WATCH_Z, 5.0);
        assert_eq!(WATCH_FLOOR, 0.03);
    }

    #[test]
    fn degrees_both_sides_of_hotter_c_and_its_watch() {
        let r = Rules::default();
        assert_eq!(tier(&deg(HOTTER_C, None), &r), Tier::Flagged);
        assert_eq!(tier(&deg(9.99, None), &r), Tier::Watch);
        assert_eq!(tier(&deg(12.0, Some(ROBUST_Z)), &r), Tier::Flagged);
        assert_eq!(tier(&deg(12.0, Some(3.49)), &r), Tier::Within);
        assert_eq!(tier(&deg(WATCH_HOTTER_C, Some(WATCH_Z)), &r), Tier::Watch);
        assert_eq!(tier(&deg(2.99, None), &r), Tier::Within);
        assert_eq!(HOTTER_C, 10.0);
        assert_eq!(WATCH_HOTTER_C, 3.0);
        // --threshold does not move the degrees.
        assert_eq!(
            tier(&deg(10.0, None), &Rules { threshold: 0.5 }),
            Tier::Flagged
        );
    }

    #[test]
    fn a_temperature_is_a_distance_in_degrees_never_a_share() {
        let y = yardstick(&[64.0, 64.0, 64.0, 65.0, 63.0], Better::Lower, false, true).unwrap();
        let d = distance(72.0, &y).unwrap();
        assert_eq!(d.degrees, Some(8.0));
        assert_eq!(d.shortfall, None);
        // A long-tailed temperature (none is) would still be in degrees.
        let y = yardstick(&[64.0, 64.0, 65.0], Better::Lower, true, true).unwrap();
        assert!(!y.scale.log);
    }

    #[test]
    fn a_long_tailed_figure_is_judged_on_ln() {
        let v = [100.0, 110.0, 90.0, 100.0, 121.0];
        let y = yardstick(&v, Better::Lower, true, false).unwrap();
        assert!(y.scale.log);
        assert_eq!(y.centre_value, 100.0);
        assert!((y.centre - 100f64.ln()).abs() < 1e-12);
        // |ln v − ln 100|: 0, .0953, .1054, 0, .1906 -> MAD .0953 (ln 1.1).
        assert!((y.mad - 1.1f64.ln()).abs() < 1e-12, "{}", y.mad);
        let d = distance(121.0, &y).unwrap();
        assert!((d.shortfall.unwrap() - 0.21).abs() < 1e-12);
        let z = d.z.unwrap();
        assert!((z - 2.0 / 1.4826).abs() < 1e-9, "{z}");
        // On a linear scale the same value is farther out (MAD 10: 21 / 14.8).
        let lin = yardstick(&v, Better::Lower, false, false).unwrap();
        assert!(!lin.scale.log);
        let zl = distance(121.0, &lin).unwrap().z.unwrap();
        assert!((zl - 21.0 / 14.826).abs() < 1e-9, "{zl}");
        // Even count: the centre is the geometric mean of the two middle values.
        let y = yardstick(&[1.0, 4.0, 16.0, 64.0], Better::Lower, true, false).unwrap();
        assert_eq!(y.centre_value, 8.0);
        // A value not positive leaves the figure linear.
        let y = yardstick(&[0.0, 1.0, 2.0], Better::Lower, true, false).unwrap();
        assert!(!y.scale.log);
    }

    #[test]
    fn power_is_a_share_either_side() {
        let y = yardstick(&[700.0, 700.0, 700.0], Better::Neither, false, false).unwrap();
        assert!((distance(574.0, &y).unwrap().shortfall.unwrap() - 0.18).abs() < 1e-12);
        assert!((distance(826.0, &y).unwrap().shortfall.unwrap() - 0.18).abs() < 1e-12);
        assert_eq!(distance(f64::NAN, &y), None);
    }
}
