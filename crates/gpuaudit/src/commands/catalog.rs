//! `gpuaudit checks` and `gpuaudit explain ID`.

use crate::sink;
use anyhow::Result;
use gpuaudit_core::checks::{self, CheckKind};
use std::fmt::Write;

pub fn list() -> Result<u8> {
    let all = checks::all();
    let width = all.iter().map(|c| c.id.len()).max().unwrap_or(10);
    let mut out = String::new();
    for c in all {
        let kind = match c.kind {
            CheckKind::Facts => "facts   ",
            CheckKind::Measured => "measured",
        };
        let _ = writeln!(out, "{:<width$}  {kind}  {}", c.id, c.title);
    }
    let _ = writeln!(
        out,
        "\n{} checks. `gpuaudit explain ID` documents each.",
        all.len()
    );
    sink::print(out)?;
    Ok(0)
}

pub fn explain(id: &str) -> Result<u8> {
    let Some(c) = checks::find(&id.trim().to_ascii_lowercase()) else {
        let ids: Vec<&str> = checks::all().iter().map(|c| c.id).collect();
        anyhow::bail!("unknown check '{id}'; {}", did_you_mean(id, &ids));
    };
    let d = c.doc;
    let kind = match c.kind {
        CheckKind::Facts => "judged from facts (runs on snapshots too)",
        CheckKind::Measured => {
            "measured on the live machine (skipped on snapshots and with --facts-only)"
        }
    };
    let mut text = format!(
        "{} — {}\n({kind})\n\nWhat it looks at\n{}\n\nWhy it matters\n{}\n\nHow to verify by hand\n{}\n\nHow to fix\n{}",
        c.id,
        c.title,
        indent(d.what),
        indent(d.why),
        // As written, flush left: a person copies it whole into a shell, and an indented
        // heredoc neither ends (`  EOF`) nor runs (Python: "unexpected indent").
        d.verify.lines().map(str::trim_end).collect::<Vec<_>>().join("\n"),
        indent(d.fix)
    );
    if !c.profiles.is_empty() {
        text.push_str("\n\nWhat the profiles change");
        for p in c.profiles {
            let _ = write!(text, "\n  --profile {}: {}", p.profile, p.effect);
        }
    }
    text.push('\n');
    sink::print(text)?;
    Ok(0)
}

/// The most edits a typo may be from an id to be suggested: two (a letter swapped counts
/// one), or a quarter of the id's length where it is longer.
fn typo_distance(id: &str) -> usize {
    (id.chars().count() / 4).max(2)
}

/// The ids nearest to a mistyped one (Damerau-Levenshtein, case aside); else those of the
/// same area; else where to find them.
fn did_you_mean(id: &str, ids: &[&str]) -> String {
    let typed = id.trim().to_ascii_lowercase();
    let distance = |c: &str| strsim::damerau_levenshtein(&typed, c);
    let best = ids.iter().map(|c| distance(c)).min().unwrap_or(usize::MAX);
    let mut close: Vec<&str> = if best <= typo_distance(&typed) {
        ids.iter()
            .copied()
            .filter(|c| distance(c) == best)
            .collect()
    } else {
        Vec::new()
    };
    if close.is_empty() {
        let area = typed.split('.').next().unwrap_or(&typed);
        close = ids
            .iter()
            .copied()
            .filter(|c| c.split('.').next() == Some(area))
            .collect();
    }
    if close.is_empty() {
        "`gpuaudit checks` lists them".to_string()
    } else {
        format!("did you mean {}?", close.join(", "))
    }
}

/// Each line two spaces in, its own indentation kept.
fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {}", l.trim_end()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: &[&str] = &["pcie.link", "pcie.bandwidth", "power.limit", "gpu.present"];

    #[test]
    fn a_typo_gets_the_nearest_id() {
        assert_eq!(did_you_mean("pcie.lnik", IDS), "did you mean pcie.link?");
        assert_eq!(did_you_mean("PCIE.LINL", IDS), "did you mean pcie.link?");
        assert_eq!(did_you_mean("powr.limt", IDS), "did you mean power.limit?");
        // Nothing near: the ids of the same area, else where the ids are listed.
        assert_eq!(
            did_you_mean("pcie.nope", IDS),
            "did you mean pcie.link, pcie.bandwidth?"
        );
        assert_eq!(did_you_mean("zzz", IDS), "`gpuaudit checks` lists them");
    }

    #[test]
    fn how_far_a_typo_may_be() {
        // Up to 11 characters two edits, then a quarter of the length.
        assert_eq!(typo_distance("pcie.link"), 2);
        assert_eq!(typo_distance("abcdefghijk"), 2);
        assert_eq!(typo_distance("abcdefghijkl"), 3);
        assert_eq!(typo_distance("gpu.driver-binding"), 4);
        // Two edits away is suggested, three is not (for an id of 9 characters).
        assert_eq!(did_you_mean("pcie.lixx", IDS), "did you mean pcie.link?");
        assert_eq!(
            did_you_mean("pcie.xxxx", IDS),
            "did you mean pcie.link, pcie.bandwidth?"
        );
    }
}
