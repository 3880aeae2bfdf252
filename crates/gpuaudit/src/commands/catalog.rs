//! `gpuaudit checks` and `gpuaudit explain ID`.

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
    print!("{out}");
    Ok(0)
}

pub fn explain(id: &str) -> Result<u8> {
    let Some(c) = checks::find(id) else {
        let close: Vec<&str> = checks::all()
            .iter()
            .map(|c| c.id)
            .filter(|c| c.starts_with(id.split('.').next().unwrap_or(id)))
            .collect();
        let hint = if close.is_empty() {
            "`gpuaudit checks` lists them".to_string()
        } else {
            format!("did you mean {}?", close.join(", "))
        };
        anyhow::bail!("no check '{id}': {hint}");
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
        indent(d.verify),
        indent(d.fix)
    );
    if !c.profiles.is_empty() {
        text.push_str("\n\nWhat the profiles change");
        for p in c.profiles {
            let _ = write!(text, "\n  --profile {}: {}", p.profile, p.effect);
        }
    }
    println!("{text}");
    Ok(0)
}

fn indent(s: &str) -> String {
    s.lines()
        .map(|l| format!("  {}", l.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}
