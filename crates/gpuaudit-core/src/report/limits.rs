//! The bounds a report read back is held to (`gpuaudit report`, `compare`, `fleet`): a file
//! someone else made may be of any size and shape. Each is far above what gpuaudit writes (a
//! full audit of 8 GPUs is a few hundred KiB, a few hundred findings, strings of at most a
//! few hundred bytes, nesting under 10 levels); past one the file is refused in one line that
//! names the bound, or, for a long text, the text is cut with a visible marker. DESIGN.md
//! ("Bounds on what is read") lists them.

use super::read::ReadError;
use std::borrow::Cow;

/// A report file larger than this is refused; reading stops there.
pub const MAX_REPORT_BYTES: u64 = 64 * 1024 * 1024;
/// Findings one report may hold.
pub const MAX_FINDINGS: usize = 100_000;
/// GPUs one report may list.
pub const MAX_GPUS: usize = 1_024;
/// Measurements one report may hold.
pub const MAX_MEASUREMENTS: usize = 100_000;
/// Arrays and objects inside one another (serde_json's own limit, 128, is never reached).
pub const MAX_DEPTH: usize = 64;
/// A string of the file (as written in it, escapes included) longer than this is cut to it,
/// with "… (N bytes cut)" in place of the rest.
pub const MAX_TEXT_BYTES: usize = 64 * 1024;
/// Report files one `gpuaudit fleet` reads (over all its arguments and directories).
pub const MAX_FLEET_FILES: usize = 100_000;

/// `text` with every string longer than [`MAX_TEXT_BYTES`] cut, or the nesting that is too
/// deep refused; one pass over the bytes, borrowed where nothing is cut. What is not JSON is
/// left for the parser to refuse.
pub(crate) fn bound_text(text: &str) -> Result<Cow<'_, str>, ReadError> {
    bound_text_to(text, MAX_TEXT_BYTES, MAX_DEPTH)
}

fn bound_text_to(text: &str, max_text: usize, max_depth: usize) -> Result<Cow<'_, str>, ReadError> {
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let start = i + 1;
                let mut j = start;
                let mut keep = None;
                let mut prev = start;
                while j < b.len() && b[j] != b'"' {
                    let step = match (b[j], b.get(j + 1)) {
                        (b'\\', Some(b'u')) => 6,
                        (b'\\', _) => 2,
                        _ => 1,
                    };
                    let next = (j + step).min(b.len());
                    if keep.is_none() && next - start > max_text {
                        keep = Some(cut_point(b, start, prev, j));
                    }
                    prev = j;
                    j = next;
                }
                if j >= b.len() {
                    // Not closed: not JSON, which the parser says.
                    break;
                }
                if let Some(k) = keep {
                    let o =
                        out.get_or_insert_with(|| String::with_capacity(text.len().min(1 << 20)));
                    o.push_str(text.get(copied..k).unwrap_or_default());
                    o.push_str(&format!("… ({} bytes cut)", j - k));
                    copied = j;
                }
                i = j + 1;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > max_depth {
                    return Err(ReadError::TooDeep(max_depth));
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(text.get(copied..).unwrap_or_default());
            Cow::Owned(o)
        }
    })
}

/// Where a string is cut whose unit at `at` (a character or an escape) passes the bound:
/// before that unit, on a character's first byte, and before a `\uD8xx` that would lose the
/// second half of its pair (`prev`: where the unit before `at` begins).
fn cut_point(b: &[u8], start: usize, prev: usize, at: usize) -> usize {
    let mut k = at;
    while k > start && (b[k] & 0xC0) == 0x80 {
        k -= 1;
    }
    let high_surrogate = |p: usize| {
        b.get(p..p + 6).is_some_and(|u| {
            u[0] == b'\\'
                && u[1] == b'u'
                && matches!(u[2], b'd' | b'D')
                && matches!(u[3], b'8' | b'9' | b'a' | b'b' | b'A' | b'B')
        })
    };
    if k == at && prev + 6 == at && high_surrogate(prev) {
        k = prev;
    }
    k
}

/// The report's lists held to their bounds.
pub(crate) fn check_counts(r: &super::Report) -> Result<(), ReadError> {
    for (what, n, max) in [
        ("findings", r.findings.len(), MAX_FINDINGS),
        ("GPUs", r.gpus.len(), MAX_GPUS),
        ("measurements", r.measurements.len(), MAX_MEASUREMENTS),
    ] {
        if n > max {
            return Err(ReadError::TooMany { what, n, max });
        }
    }
    Ok(())
}

/// `n` with thousands separated: "100,000".
pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_the_ones_design_lists() {
        // DESIGN "Bounds on what is read" and the CLI's one-line refusals name these.
        assert_eq!(MAX_REPORT_BYTES, 67_108_864);
        assert_eq!(MAX_TEXT_BYTES, 65_536);
        assert_eq!(MAX_FINDINGS, 100_000);
        assert_eq!(MAX_GPUS, 1_024);
        assert_eq!(MAX_MEASUREMENTS, 100_000);
        assert_eq!(MAX_DEPTH, 64);
        assert_eq!(MAX_FLEET_FILES, 100_000);
    }

    fn cut(t: &str, max: usize) -> String {
        bound_text_to(t, max, 8).unwrap().into_owned()
    }

    #[test]
    fn short_strings_are_borrowed_and_long_ones_cut_with_a_marker() {
        let t = r#"{"a": "short", "b": ["x"]}"#;
        assert!(matches!(bound_text(t).unwrap(), Cow::Borrowed(_)));
        assert_eq!(
            cut(r#"{"a": "abcdefgh"}"#, 3),
            r#"{"a": "abc… (5 bytes cut)"}"#
        );
        // Keys are strings too; what follows a cut string is kept.
        assert_eq!(
            cut(r#"{"abcdef": "abcdef", "x": 1}"#, 4),
            r#"{"abcd… (2 bytes cut)": "abcd… (2 bytes cut)", "x": 1}"#
        );
    }

    #[test]
    fn a_cut_keeps_characters_escapes_and_surrogate_pairs_whole() {
        for (t, max) in [
            ("\"aééééé\"", 4),
            ("\"a\\n\\\"\\u00e9bcd\"", 5),
            ("\"ab\\ud83d\\ude00cd\"", 9),
            ("\"ab\\uD83D\\uDE00cd\"", 12),
            ("\"\\\\ud83d\\\\\"", 4),
        ] {
            let out = cut(t, max);
            let v: String =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{t}: {out}: {e}"));
            assert!(v.contains("bytes cut)"), "{t} -> {v}");
        }
        assert_eq!(
            serde_json::from_str::<String>(&cut("\"ab\\ud83d\\ude00cd\"", 9)).unwrap(),
            "ab… (14 bytes cut)"
        );
    }

    #[test]
    fn nesting_past_the_bound_is_refused_and_strings_do_not_count() {
        assert_eq!(
            bound_text_to("[[[[1]]]]", 100, 3).unwrap_err(),
            ReadError::TooDeep(3)
        );
        assert!(bound_text_to("[[[1]]]", 100, 3).is_ok());
        assert!(bound_text_to(r#"["[[[[[[", "{{{{{"]"#, 100, 2).is_ok());
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(
            bound_text(&deep).unwrap_err(),
            ReadError::TooDeep(MAX_DEPTH)
        );
        // Not JSON: left to the parser.
        assert_eq!(cut("\"abc", 1), "\"abc");
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(100_000), "100,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
