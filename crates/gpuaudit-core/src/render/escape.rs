//! Text from the machine on its way to a terminal or a Markdown document.
//!
//! A hostname, an os-release value, an environment variable or a GPU's product name can hold
//! escape sequences (set the window title, clear the screen, move the cursor to draw a forged
//! "PASS" line) or a lone carriage return that overwrites the line it is on. Everything that
//! reaches a terminal (the table, gpuaudit's messages on stderr) or a Markdown document goes
//! through here; JSON needs nothing (serde escapes control characters) and HTML has its own
//! escaping.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is a control character that must not reach a terminal raw: C0 (U+0000–U+001F)
/// but tab and line feed, DEL, and C1 (U+0080–U+009F, which many terminals act on as
/// escape sequences of their own: U+009B is CSI, U+009D is OSC).
fn is_unsafe(c: char, keep_newline: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => !keep_newline,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        _ => false,
    }
}

fn escape_with(s: &str, keep_newline: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c, keep_newline)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c, keep_newline) {
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if c == '\r' {
            out.push_str("\\r");
        } else if (c as u32) < 0x80 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Text for a terminal, lines kept: every other control character is written out visibly
/// (`\x1b`, `\r`, `\u{9b}`).
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_with(s, true)
}

/// One line for a terminal (a finding, a hostname, a message on stderr): like
/// [`escape_text`], and a line feed is written `\n`, so that text from the machine cannot
/// start a line of its own.
pub fn escape_line(s: &str) -> Cow<'_, str> {
    escape_with(s, false)
}

/// `<` `>` `&` as entities, and the quotes where `quotes` (inside HTML attributes); `|` as
/// `\|` where `pipe` (a Markdown table cell).
fn entities(s: &str, quotes: bool, pipe: bool) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' if quotes => o.push_str("&quot;"),
            '\'' if quotes => o.push_str("&#39;"),
            '|' if pipe => o.push_str("\\|"),
            c => o.push(c),
        }
    }
    o
}

/// HTML's special characters as entities (`<` `>` `&` `"` `'`).
pub fn html(s: &str) -> String {
    entities(s, true, false)
}

/// One table cell of Markdown: control characters as in [`escape_line`], `<` `>` `&` as
/// entities (a renderer would otherwise run `<script>` or `<img onerror>`), and `|` escaped so
/// that a cell cannot open another. Quotes stay as they are, for the text to read as text.
pub fn markdown_cell(s: &str) -> String {
    entities(&escape_line(s), false, true)
}

/// One line of Markdown outside a table (a finding, a fix): as [`markdown_cell`] (`|` left
/// as it is), except that inside a `code span` (which CommonMark shows as text) `<` `>` `&`
/// stay as written, so that a command reads as the command. Spans are kept only where
/// nothing can change where they begin and end: single backticks that pair up, and no
/// backslash in the line (`` \` `` is not a span's edge); otherwise the backticks are escaped
/// and no span is made.
pub fn markdown_text(s: &str) -> String {
    let s = escape_line(s);
    let spans = s.matches('`').count() % 2 == 0 && !s.contains("``") && !s.contains('\\');
    if !spans {
        return entities(&s, false, false).replace('`', "\\`");
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, part) in s.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&entities(part, false, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_written_out() {
        assert_eq!(
            escape_line("node\u{1b}]0;pwned\u{7}"),
            "node\\x1b]0;pwned\\x07"
        );
        assert_eq!(escape_line("a\rPASS"), "a\\rPASS");
        assert_eq!(escape_line("a\nb"), "a\\nb");
        assert_eq!(escape_text("a\nb\tc"), "a\nb\tc");
        assert_eq!(
            escape_line("\u{9b}2J\u{9d}x\u{7f}\u{0}"),
            "\\u{9b}2J\\u{9d}x\\x7f\\x00"
        );
        // Printable text above the C1 block is left alone.
        assert_eq!(escape_line("H200 ×2 — é \u{a0}"), "H200 ×2 — é \u{a0}");
        assert!(matches!(escape_line("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn nothing_unsafe_survives() {
        let all: String = (0u32..0x200).filter_map(char::from_u32).collect();
        let out = escape_line(&all);
        assert!(!out.chars().any(|c| is_unsafe(c, false) || c == '\n'));
        let out = escape_text(&all);
        assert!(out.contains('\n') && out.contains('\t'));
        assert!(!out.chars().any(|c| is_unsafe(c, true)));
    }

    #[test]
    fn markdown_cells_escape_html_and_pipes() {
        assert_eq!(
            markdown_cell("<script>alert(1)</script>|<img src=x onerror=y>&\r\n"),
            "&lt;script&gt;alert(1)&lt;/script&gt;\\|&lt;img src=x onerror=y&gt;&amp;\\r\\n"
        );
        assert_eq!(markdown_cell("'a' \"b\""), "'a' \"b\"");
        // Commands in code spans stay as written outside tables; a cell escapes everything.
        assert_eq!(
            markdown_cell("run `a | b <x>` & <y>"),
            "run `a \\| b &lt;x&gt;` &amp; &lt;y&gt;"
        );
        assert_eq!(
            markdown_text("run `a | b <x>` & <y>|"),
            "run `a | b <x>` &amp; &lt;y&gt;|"
        );
        // Backticks that do not pair up open no span: nothing stays raw.
        assert_eq!(markdown_text("a `b <script>"), "a \\`b &lt;script&gt;");
        assert_eq!(
            markdown_text("``<img onerror=x>``"),
            "\\`\\`&lt;img onerror=x&gt;\\`\\`"
        );
        // A backslash could change where a span ends (an escaped backtick is no edge):
        // no span, everything escaped.
        assert_eq!(markdown_text("\\`<script>\\`"), "\\\\`&lt;script&gt;\\\\`");
        // A control character is written out with a backslash: no span either.
        assert_eq!(markdown_text("`<a>\n`"), "\\`&lt;a&gt;\\n\\`");
        assert_eq!(
            html("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;"
        );
    }
}
