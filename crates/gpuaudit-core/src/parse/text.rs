//! Helpers shared by the line-oriented parsers.

/// Removes terminal escape sequences: nvidia-smi underlines and colours cells when its output
/// goes to a terminal, and a snapshot taken through `script` or a pager keeps them.
pub(crate) fn strip_ansi(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            // CSI: ESC [ parameters... final byte in 0x40..=0x7e.
            Some('[') => {
                chars.next();
                for c in chars.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            // OSC: ESC ] ... terminated by BEL or ESC \.
            Some(']') => {
                chars.next();
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                        chars.next();
                        break;
                    }
                }
            }
            // Other sequences: intermediate bytes (0x20..=0x2f) then one final byte, as in
            // "ESC 7" or "ESC ( B".
            Some(_) => {
                while chars
                    .next_if(|c| ('\u{20}'..='\u{2f}').contains(c))
                    .is_some()
                {}
                chars.next();
            }
            None => {}
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first non-blank line, trimmed and shortened, to quote in an error.
pub(crate) fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    shorten(line, 200)
}

/// The most characters a one-line fact read from the machine keeps (a hostname, the kernel
/// line, an os-release value): a snapshot's `proc/version` linked to `/dev/zero` or holding
/// megabytes must not reach the report.
pub const FACT_LINE_CHARS: usize = 256;

/// A one-line fact: the first line of `text`, trimmed, at most [`FACT_LINE_CHARS`] characters
/// with "…" where it was cut.
pub fn fact_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(FACT_LINE_CHARS) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_string(),
    }
}

/// At most `max` characters of `text`, with "..." when cut.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_escapes() {
        assert_eq!(strip_ansi("\u{1b}[4mGPU0\u{1b}[0m\tX"), "GPU0\tX");
        assert_eq!(strip_ansi("a\u{1b}]0;title\u{7}b"), "ab");
        assert_eq!(strip_ansi("a\u{1b}(Bb"), "ab");
        assert_eq!(strip_ansi("trailing\u{1b}"), "trailing");
        assert_eq!(strip_ansi("unterminated\u{1b}[12;3"), "unterminated");
        assert_eq!(strip_ansi("plain"), "plain");
    }

    #[test]
    fn shortens_on_char_boundaries() {
        assert_eq!(shorten("ééééé", 3), "ééé...");
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(first_line("\n  \n  hello \nworld"), "hello");
        assert_eq!(first_line(""), "");
    }

    #[test]
    fn fact_lines_are_one_capped_line() {
        assert_eq!(fact_line("  gpu-node-7 \nsecond line"), "gpu-node-7");
        assert_eq!(fact_line(""), "");
        let long = "é".repeat(FACT_LINE_CHARS + 1);
        let cut = fact_line(&long);
        assert_eq!(cut.chars().count(), FACT_LINE_CHARS + 1);
        assert!(cut.ends_with('…'));
        let exact = "x".repeat(FACT_LINE_CHARS);
        assert_eq!(fact_line(&exact), exact);
    }
}
