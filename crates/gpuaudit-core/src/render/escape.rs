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

/// What [`entities`] escapes besides `<` `>` `&`.
#[derive(Clone, Copy, Default)]
struct Marks {
    /// `"` and `'` as entities (inside HTML attributes).
    quotes: bool,
    /// `|` as `\|` (a Markdown table cell).
    pipe: bool,
    /// `\`, `[` and `]` with a backslash (Markdown): see [`markdown_cell`].
    links: bool,
    /// `` ` `` with a backslash (Markdown text that makes no code span).
    backticks: bool,
}

/// `<` `>` `&` as entities, and what `marks` asks for.
fn entities(s: &str, marks: Marks) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' if marks.quotes => o.push_str("&quot;"),
            '\'' if marks.quotes => o.push_str("&#39;"),
            '|' if marks.pipe => o.push_str("\\|"),
            '\\' | '[' | ']' if marks.links => {
                o.push('\\');
                o.push(ch);
            }
            '`' if marks.backticks => o.push_str("\\`"),
            c => o.push(c),
        }
    }
    o
}

/// HTML's special characters as entities (`<` `>` `&` `"` `'`).
pub fn html(s: &str) -> String {
    entities(
        s,
        Marks {
            quotes: true,
            ..Marks::default()
        },
    )
}

/// One table cell of Markdown: control characters as in [`escape_line`], `<` `>` `&` as
/// entities (a renderer would otherwise run `<script>` or `<img onerror>`, or link an
/// `<https://...>` autolink), `|` escaped so that a cell cannot open another, and `[`, `]`
/// and `\` with a backslash: every link and image of CommonMark and GitHub's Markdown
/// (inline `[x](url)`, `![](src)`, reference `[x][r]`, a definition `[r]: url`, a footnote
/// `[^1]`) begins with a `[`, so none can form from report text, and `(`, `)`, `!` need no
/// escape of their own; the backslash is escaped so that text cannot undo the escape of
/// what follows it (`\[` would be a backslash and a live `[`). GitHub's bare autolinks
/// (`https://host/...`, `www.host`, an e-mail address) stay: their text is their target, so
/// they show where they lead, and gpuaudit's own fixes name documentation so. Quotes stay
/// as they are, for the text to read as text.
pub fn markdown_cell(s: &str) -> String {
    entities(
        &escape_line(s),
        Marks {
            pipe: true,
            links: true,
            ..Marks::default()
        },
    )
}

/// A code span of Markdown (a check id), in a table cell where `cell`: the text as it is
/// between single backticks (CommonMark shows a span's content as written; `|` escaped in
/// a cell, as GitHub's tables need even there). Text with a backtick, a backslash or a
/// control character in it cannot be held by a single-backtick span: it is written as
/// [`markdown_cell`] / [`markdown_text`] writes it, without the span.
pub fn markdown_code(s: &str, cell: bool) -> String {
    let line = escape_line(s);
    if line.contains(['`', '\\']) || line.is_empty() {
        return if cell {
            markdown_cell(s)
        } else {
            markdown_text_plain(&line)
        };
    }
    if cell {
        format!("`{}`", line.replace('|', "\\|"))
    } else {
        format!("`{line}`")
    }
}

/// Markdown text with no code span: every mark escaped, backticks too.
fn markdown_text_plain(line: &str) -> String {
    entities(
        line,
        Marks {
            links: true,
            backticks: true,
            ..Marks::default()
        },
    )
}

/// One line of Markdown outside a table (a finding, a fix): as [`markdown_cell`] (`|` left
/// as it is), except that inside a `code span` (which CommonMark shows as text) `<` `>` `&`
/// `[` `]` stay as written, so that a command reads as the command. Spans are kept only
/// where nothing can change where they begin and end: single backticks that pair up, and no
/// backslash in the line (`` \` `` is not a span's edge); otherwise the backticks are escaped
/// and no span is made.
pub fn markdown_text(s: &str) -> String {
    let s = escape_line(s);
    let spans = s.matches('`').count() % 2 == 0 && !s.contains("``") && !s.contains('\\');
    if !spans {
        return markdown_text_plain(&s);
    }
    let outside = Marks {
        links: true,
        ..Marks::default()
    };
    let mut out = String::with_capacity(s.len() + 8);
    for (i, part) in s.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        if i % 2 == 1 {
            out.push_str(part);
        } else {
            out.push_str(&entities(part, outside));
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
            "&lt;script&gt;alert(1)&lt;/script&gt;\\|&lt;img src=x onerror=y&gt;&amp;\\\\r\\\\n"
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
        assert_eq!(
            markdown_text("\\`<script>\\`"),
            "\\\\\\`&lt;script&gt;\\\\\\`"
        );
        // A control character is written out with a backslash: no span either.
        assert_eq!(markdown_text("`<a>\n`"), "\\`&lt;a&gt;\\\\n\\`");
        assert_eq!(
            html("<a href='x'>\"&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&quot;&amp;&quot;&lt;/a&gt;"
        );
    }

    #[test]
    fn no_link_or_image_forms_from_markdown_text() {
        // Every link and image starts with `[`: escaped, with the backslash that could undo it.
        assert_eq!(
            markdown_cell("[x](javascript:alert(1)) ![](https://t.example/p.png)"),
            "\\[x\\](javascript:alert(1)) !\\[\\](https://t.example/p.png)"
        );
        assert_eq!(
            markdown_text("\\[x](javascript:y) [r]: https://e.example [^1]"),
            "\\\\\\[x\\](javascript:y) \\[r\\]: https://e.example \\[^1\\]"
        );
        // A code span keeps its text: CommonMark shows it as text.
        assert_eq!(
            markdown_text("run `ls [a](b)` then [c](d)"),
            "run `ls [a](b)` then \\[c\\](d)"
        );
        // Autolinks in angle brackets cannot open; bare URLs stay (their text is their target).
        assert_eq!(
            markdown_text("<https://e.example> see https://docs.nvidia.com/x"),
            "&lt;https://e.example&gt; see https://docs.nvidia.com/x"
        );
    }

    #[test]
    fn code_spans_hold_what_a_single_backtick_span_can() {
        assert_eq!(markdown_code("gpu.present", false), "`gpu.present`");
        assert_eq!(markdown_code("a|<b>[c]", true), "`a\\|<b>[c]`");
        assert_eq!(markdown_code("a|<b>[c]", false), "`a|<b>[c]`");
        // What would close the span, or undo an escape, is written as text instead.
        assert_eq!(markdown_code("x` <img>", true), "x` &lt;img&gt;");
        assert_eq!(markdown_code("x` [a](b)", false), "x\\` \\[a\\](b)");
        assert_eq!(markdown_code("x\u{1b}[1m", false), "x\\\\x1b\\[1m");
        assert_eq!(markdown_code("", true), "");
    }
}
