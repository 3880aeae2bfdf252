//! What every group's `gpuaudit bench` tables are made of (each group's `bench.rs` builds its
//! own; `render::bench` puts them in the catalog's order).

use crate::reading::Reading;
use crate::units::figure;

/// A table: its title and its rows, the first row being the header.
pub(super) type Table = (String, Vec<Vec<String>>);

/// A reading's value, or "-" where it was not taken.
pub(super) fn cell<T: std::fmt::Display>(r: &Reading<T>) -> String {
    match r {
        Reading::Value(v) => v.to_string(),
        Reading::Unavailable(_) => "-".into(),
    }
}

/// A figure, or "-" where there is none.
pub(super) fn f(v: Option<f64>) -> String {
    v.map(figure).unwrap_or_else(|| "-".into())
}

pub(super) fn s(x: &str) -> String {
    x.to_string()
}

/// A group that did not run: a one-row table with its reason.
pub(super) fn not_measured(title: &str, reason: &str) -> Table {
    (
        title.to_string(),
        vec![vec!["not measured".into()], vec![reason.to_string()]],
    )
}
