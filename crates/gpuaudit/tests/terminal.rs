//! Issue 23, "The terminal": every command's text for a person keeps to the terminal's width
//! (here `COLUMNS=80`, as in an 80×24 pane): `checks`, `explain`, `models` and `rehearse`
//! printed a paragraph per line, which the terminal broke in the middle of words.

mod common;

use common::{gpuaudit, small_rehearsal_as_table};

fn at_80(args: &[&str]) -> String {
    let o = gpuaudit()
        .args(args)
        .env("COLUMNS", "80")
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every line within `width`, but a shell command of `explain` (never wrapped: a line broken
/// in two is two other commands) and a URL on a line of its own.
fn assert_within(what: &str, text: &str, width: usize, commands: &[&str]) {
    assert!(!text.is_empty(), "{what}: no output");
    for l in text.lines() {
        let ok = l.chars().count() <= width
            || l.trim_start().starts_with("https://")
            || l.trim_start().starts_with("(https://")
            || commands.contains(&l);
        assert!(ok, "{what}: {} columns: {l:?}", l.chars().count());
    }
}

#[test]
fn checks_and_explain_wrap_at_80_columns() {
    let list = at_80(&["checks"]);
    assert_within("checks", &list, 80, &[]);
    // A title wraps under itself.
    let at = list
        .lines()
        .position(|l| l.starts_with("gpu.present"))
        .unwrap();
    let next = list.lines().nth(at + 1).unwrap();
    assert!(
        next.starts_with(&" ".repeat(30)) && !next.trim().is_empty(),
        "{list}"
    );
    for c in gpuaudit_core::checks::all() {
        let t = at_80(&["explain", c.id]);
        // The commands as written (each a line of the doc's verify text).
        let commands: Vec<&str> = c.doc.verify.lines().map(str::trim_end).collect();
        let cut: Vec<String> = commands
            .iter()
            .filter_map(|l| {
                l.split_once("  # ")
                    .map(|(cmd, _)| cmd.trim_end().to_string())
            })
            .collect();
        let mut all: Vec<&str> = commands.clone();
        all.extend(cut.iter().map(String::as_str));
        assert_within(c.id, &t, 80, &all);
        // Prose is wrapped between words: every word of the doc's first paragraph is
        // still whole somewhere in the output.
        for w in c.doc.what.split_whitespace() {
            assert!(
                t.split_whitespace().any(|x| x == w),
                "{}: {w:?} broken:\n{t}",
                c.id
            );
        }
    }
}

#[test]
fn models_fits_80_columns() {
    let t = at_80(&["models"]);
    assert_within("models", &t, 80, &[]);
    let db = gpuaudit_core::spec::SpecDb::embedded();
    for g in &db.gpus {
        let at = t
            .lines()
            .position(|l| l.split_whitespace().next() == Some(g.key.as_str()))
            .unwrap_or_else(|| panic!("{} not listed", g.key));
        let block: Vec<&str> = t.lines().skip(at).take(4).collect();
        // The name beside the key (wrapped under itself where it is long).
        let joined = block
            .join(" ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(joined.contains(g.name.as_str()), "{block:?}");
        assert!(joined.contains("--expect accepts: "), "{block:?}");
        assert!(joined.contains(g.expect_names()[0].as_str()), "{block:?}");
    }
}

#[test]
fn rehearse_wraps_at_80_columns() {
    let tmp = tempfile::tempdir().unwrap();
    let args = small_rehearsal_as_table();
    let o = gpuaudit()
        .args(&args)
        .env("COLUMNS", "80")
        .env("TMPDIR", tmp.path())
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.starts_with("gpuaudit rehearse: batch"), "{t}");
    assert_within("rehearse", &t, 80, &[]);
}
