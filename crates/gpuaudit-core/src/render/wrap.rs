//! Text wrapped for a terminal, by display width: every text gpuaudit prints for a person
//! (the audit's table, compare's cells, `explain`, `checks`, `models`, `rehearse`, `bench`)
//! goes through [`wrap`], so that they all keep to one set of rules:
//!
//! - no line is wider than the width (textwrap's optimal fit lets a line run a column over
//!   where that makes the paragraph more even; here an overflow costs more than any gap);
//! - a word is broken only where it is longer than a line, and then after a `-` or `/` of
//!   its own where it has one (`h200-x2-power-` / `capped`, a path by its directories), at
//!   the width only where no such place is left;
//! - a URL is never broken: split over two lines it can be neither clicked nor copied, so a
//!   URL longer than a line stands on a line of its own, past the width.

use textwrap::core::{display_width, Word};
use textwrap::wrap_algorithms::{wrap_first_fit, wrap_optimal_fit, Penalties};
use textwrap::WordSeparator;

/// Optimal fit, where running a line past the width costs more than any paragraph's gaps
/// (a gap of `g` columns costs `g²`: 500 columns at most, 250,000 per line).
const PENALTIES: Penalties = Penalties {
    nline_penalty: 1000,
    overflow_penalty: 1 << 40,
    short_last_line_fraction: 4,
    short_last_line_penalty: 25,
    hyphen_penalty: 25,
};

/// A word that is a URL (`https://…`, `http://…`), maybe in brackets or before punctuation.
fn is_url(word: &str) -> bool {
    let w = word.trim_start_matches(['(', '[', '<', '"', '\'', '`']);
    w.starts_with("https://") || w.starts_with("http://")
}

/// `word` in pieces of at most `width` columns: after its own `-` and `/` where it has them
/// (as many as fit on a line), at the width where not.
fn break_word<'a>(word: Word<'a>, width: usize, out: &mut Vec<Word<'a>>) {
    let width = width.max(1);
    let text = word.word;
    // The places after a '-' or '/' (not at the end): where a piece may end.
    let mut start = 0;
    while display_width(&text[start..]) > width {
        let rest = &text[start..];
        let mut cut = None;
        for (i, c) in rest.char_indices() {
            let end = i + c.len_utf8();
            if display_width(&rest[..end]) > width {
                break;
            }
            if (c == '-' || c == '/') && end < rest.len() {
                cut = Some(end);
            }
        }
        match cut {
            Some(end) => {
                let piece = &rest[..end];
                out.push(Word {
                    word: piece,
                    whitespace: "",
                    penalty: "",
                    width: display_width(piece),
                });
                start += end;
            }
            None => {
                // No '-' or '/' within the width: at the width (the rest goes round again).
                let first = Word::from(rest)
                    .break_apart(width)
                    .next()
                    .map(|w| w.word.len())
                    .unwrap_or(rest.len());
                let piece = &rest[..first];
                out.push(Word {
                    word: piece,
                    whitespace: "",
                    penalty: "",
                    width: display_width(piece),
                });
                start += first.max(1).min(rest.len());
                if first == 0 {
                    break;
                }
            }
        }
    }
    let piece = &text[start..];
    out.push(Word {
        word: piece,
        whitespace: word.whitespace,
        penalty: word.penalty,
        width: display_width(piece),
    });
}

/// `text` in lines of at most `width` columns, the first after `first` (a head or an
/// indent: its columns are taken from the first line), the others after `rest`; each line
/// returned with its `first` or `rest`. A line feed in `text` starts a new line (each line
/// wrapped on its own, with `rest`). An empty text is one line, `first` alone (trimmed).
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (n, line) in text.split('\n').enumerate() {
        let head = if n == 0 { first } else { rest };
        wrap_line(line.trim_end(), width, head, rest, &mut out);
    }
    out
}

fn wrap_line(line: &str, width: usize, first: &str, rest: &str, out: &mut Vec<String>) {
    let widths = [
        width.saturating_sub(display_width(first)).max(1),
        width.saturating_sub(display_width(rest)).max(1),
    ];
    let mut words: Vec<Word> = Vec::new();
    if !first.is_empty() {
        // As textwrap does: an empty first word lets the first real word go to the second
        // line when it fits there and not after the head.
        words.push(Word::from(""));
    }
    for w in WordSeparator::AsciiSpace.find_words(line) {
        if w.width > widths[1] && !is_url(w.word) {
            break_word(w, widths[1], &mut words);
        } else {
            words.push(w);
        }
    }
    let line_widths = [widths[0] as f64, widths[1] as f64];
    let lines = wrap_optimal_fit(&words, &line_widths, &PENALTIES)
        .unwrap_or_else(|_| wrap_first_fit(&words, &line_widths));
    let start = out.len();
    for ws in lines {
        let mut s = String::new();
        for (i, w) in ws.iter().enumerate() {
            s.push_str(w.word);
            if i + 1 < ws.len() {
                s.push_str(w.whitespace);
            } else {
                s.push_str(w.penalty);
            }
        }
        if s.is_empty() && out.len() == start && !first.is_empty() && ws.len() == 1 {
            // The empty first word alone: the first line is the head by itself.
            out.push(first.trim_end().to_string());
            continue;
        }
        let head = if out.len() == start { first } else { rest };
        out.push(format!("{head}{s}").trim_end().to_string());
    }
    if out.len() == start {
        out.push(first.trim_end().to_string());
    }
}

/// [`wrap`] joined, each line ended with a line feed.
pub fn wrapped(text: &str, width: usize, first: &str, rest: &str) -> String {
    let mut s = String::new();
    for l in wrap(text, width, first, rest) {
        s.push_str(&l);
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widest(lines: &[String]) -> usize {
        lines.iter().map(|l| display_width(l)).max().unwrap_or(0)
    }

    #[test]
    fn no_line_runs_past_the_width() {
        // textwrap's optimal fit put this line at 81 columns of 80 (a real finding's text).
        let text = "cuda.framework: torch 2.9.1+cu130 in /usr/local/lib/python3.12/dist-packages \
                    is built for CUDA 13.0 but the driver supports up to CUDA 12.4, and the \
                    forward-compatibility package in /usr/local/cuda-13.0/compat is on no \
                    library path";
        let lines = wrap(text, 80, "FAIL ", "     ");
        assert!(widest(&lines) <= 80, "{lines:#?}");
        assert!(lines[0].starts_with("FAIL cuda.framework: "));
        assert!(lines[1].starts_with("     "));
        for w in 40..=120 {
            assert!(widest(&wrap(text, w, "FAIL ", "     ")) <= w, "at {w}");
        }
    }

    #[test]
    fn a_url_stays_whole_on_a_line_of_its_own() {
        let url = "(https://docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html);";
        let text = format!("install the compat package {url} or upgrade the driver");
        let lines = wrap(&text, 80, "     fix: ", "          ");
        assert!(
            lines.iter().any(|l| l.trim() == url),
            "the URL is split: {lines:#?}"
        );
        // Only the URL's line is past the width.
        for l in &lines {
            assert!(display_width(l) <= 80 || l.contains(url), "{l}");
        }
    }

    #[test]
    fn a_long_word_breaks_after_its_hyphens_first() {
        let lines = wrap("h200-x2-power-capped", 16, "", "");
        assert_eq!(lines, vec!["h200-x2-power-", "capped"]);
        let lines = wrap("/usr/local/lib/python3.12/dist-packages/torch", 20, "", "");
        assert_eq!(
            lines,
            vec!["/usr/local/lib/", "python3.12/dist-", "packages/torch"]
        );
        // No hyphen: at the width.
        assert_eq!(wrap("abcdefghij", 4, "", ""), vec!["abcd", "efgh", "ij"]);
        // Every character kept, in order.
        let word = "6.18.44-fc-v657-gpu";
        assert_eq!(wrap(word, 16, "", "").concat(), word);
    }

    #[test]
    fn heads_indents_and_line_feeds() {
        assert_eq!(wrap("", 80, "  ", "  "), vec![""]);
        assert_eq!(wrap("", 80, "head: ", "  "), vec!["head:"]);
        assert_eq!(
            wrap("one two\nthree", 80, "* ", "  "),
            vec!["* one two", "  three"]
        );
        assert_eq!(
            wrap("aaa bbb ccc", 9, "> ", "  "),
            vec!["> aaa bbb", "  ccc"]
        );
        assert_eq!(wrapped("a b", 80, "", ""), "a b\n");
    }
}
