//! The date and time a report or a snapshot carries: RFC 3339 in UTC, to the second
//! ("2026-12-01T10:24:13Z"), so that reports from machines in any time zone sort and compare.

use jiff::{Timestamp, Unit};

/// Where set, the time gpuaudit takes for now (an RFC 3339 time): reports and snapshots that
/// come out the same on every run, for tests and documentation examples.
pub const NOW_VARIABLE: &str = "GPUAUDIT_NOW";

/// Now, from the system clock.
pub fn now_rfc3339() -> String {
    format_utc(Timestamp::now())
}

/// Now, or the time [`NOW_VARIABLE`] gives; an error where it is set to something else.
pub fn now() -> Result<String, String> {
    match std::env::var(NOW_VARIABLE) {
        Ok(v) => normalize_rfc3339(&v).ok_or_else(|| {
            format!(
                "{NOW_VARIABLE}='{}': not an RFC 3339 time such as 2026-12-01T10:24:13Z",
                gpuaudit_core::parse::fact_line(&v)
            )
        }),
        Err(_) => Ok(now_rfc3339()),
    }
}

/// An RFC 3339 time from someone else (a snapshot's meta.json) in the same form, or `None`
/// where it is not one.
pub fn normalize_rfc3339(text: &str) -> Option<String> {
    text.trim().parse::<Timestamp>().ok().map(format_utc)
}

fn format_utc(t: Timestamp) -> String {
    // Rounding can only fail at the ends of jiff's range (years -9999 and 9999).
    t.round(Unit::Second).unwrap_or(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_to_the_second() {
        assert_eq!(
            normalize_rfc3339("2026-12-01T10:24:13.6+02:00").as_deref(),
            Some("2026-12-01T08:24:14Z")
        );
        assert_eq!(
            normalize_rfc3339(" 2026-12-01T10:24:13Z ").as_deref(),
            Some("2026-12-01T10:24:13Z")
        );
        for bad in ["", "2026-12-01", "10:24:13", "2026-12-01T10:24:13", "now"] {
            assert_eq!(normalize_rfc3339(bad), None, "{bad}");
        }
        let now = now_rfc3339();
        assert_eq!(normalize_rfc3339(&now).as_deref(), Some(now.as_str()));
        assert!(
            now.ends_with('Z') && now.len() == "2026-12-01T10:24:13Z".len(),
            "{now}"
        );
    }
}
