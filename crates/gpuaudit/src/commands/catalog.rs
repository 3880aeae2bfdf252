//! `gpuaudit checks` and `gpuaudit explain ID`.

use crate::sink;
use anyhow::Result;
use gpuaudit_core::checks::{self, CheckKind};
use gpuaudit_core::render::wrap::wrapped;

/// Every line of `checks` and `explain` is wrapped to the terminal (else `$COLUMNS`, else
/// 80), by the table's rules (`render::wrap`): they printed one line per paragraph, which a
/// terminal broke wherever the width fell, in the middle of words.
fn width() -> usize {
    crate::output::table_width(None)
}

pub fn list() -> Result<u8> {
    let all = checks::all();
    let w = width();
    let id_cols = all.iter().map(|c| c.id.len()).max().unwrap_or(10);
    let mut out = String::new();
    for c in all {
        let kind = match c.kind {
            CheckKind::Facts => "facts   ",
            CheckKind::Measured => "measured",
        };
        // The title wraps under itself, the id and kind columns kept clear.
        let head = format!("{:<id_cols$}  {kind}  ", c.id);
        let rest = " ".repeat(head.chars().count());
        out.push_str(&wrapped(c.title, w, &head, &rest));
    }
    out.push('\n');
    out.push_str(&wrapped(
        &format!(
            "{} checks. `gpuaudit explain ID` documents each.",
            all.len()
        ),
        w,
        "",
        "",
    ));
    sink::print(out)?;
    Ok(0)
}

pub fn explain(id: &str) -> Result<u8> {
    let Some(c) = checks::find(&id.trim().to_ascii_lowercase()) else {
        let ids: Vec<&str> = checks::all().iter().map(|c| c.id).collect();
        anyhow::bail!("unknown check '{id}'; {}", did_you_mean(id, &ids));
    };
    let w = width();
    let d = c.doc;
    let kind = match c.kind {
        CheckKind::Facts => "judged from facts (runs on snapshots too)",
        CheckKind::Measured => {
            "measured on the live machine (skipped on snapshots and with --facts-only)"
        }
    };
    let mut text = wrapped(&format!("{} — {}", c.id, c.title), w, "", "  ");
    text.push_str(&wrapped(&format!("({kind})"), w, "", " "));
    let section = |text: &mut String, title: &str, body: &str| {
        text.push('\n');
        text.push_str(title);
        text.push('\n');
        for line in body.lines() {
            // Each line two spaces in, its own indentation kept (and under it when wrapped).
            let line = line.trim_end();
            let own = line.len() - line.trim_start().len();
            let pad = " ".repeat(2 + own);
            text.push_str(&wrapped(line.trim_start(), w, &pad, &pad));
        }
    };
    section(&mut text, "What it looks at", d.what);
    section(&mut text, "Why it matters", d.why);
    text.push_str("\nHow to verify by hand\n");
    for line in d.verify.lines().map(str::trim_end) {
        // Flush left, as written: a person copies it whole into a shell, and an indented
        // heredoc neither ends (`  EOF`) nor runs (Python: "unexpected indent"). A command
        // is never wrapped (a line broken in two is two other commands); a comment of its
        // own is, each piece a comment.
        // A command too wide with a comment after it (`cmd   # why`): the comment goes
        // above it, wrapped.
        let (command, comment) = match line.strip_prefix("# ") {
            Some(c) => ("", Some(c)),
            None => match line.split_once("  # ") {
                Some((cmd, c)) if line.chars().count() > w => (cmd.trim_end(), Some(c.trim())),
                _ => (line, None),
            },
        };
        if let Some(c) = comment {
            text.push_str(&wrapped(c, w, "# ", "# "));
        }
        if !command.is_empty() || comment.is_none() {
            text.push_str(command);
            text.push('\n');
        }
    }
    section(&mut text, "How to fix", d.fix);
    if !c.profiles.is_empty() {
        text.push_str("\nWhat the profiles change\n");
        for p in c.profiles {
            let head = format!("  --profile {}: ", p.profile);
            text.push_str(&wrapped(p.effect, w, &head, "    "));
        }
    }
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
