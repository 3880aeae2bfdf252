//! The pieces the HTML pages are made of: the page shell (one self-contained file: its own
//! style, no script, nothing fetched), status badges, tables, text with its code spans.
//! Every value from the machine goes through [`esc`] or [`text`].

use crate::finding::Status;
use crate::render::escape;
use crate::render::status_label;
use std::fmt::Write;

/// HTML's special characters as entities, and control characters written out as in the
/// terminal (`\x1b`, `\r`: a page shows them rather than swallowing them).
pub fn esc(s: &str) -> String {
    escape::html(&escape::escape_line(s))
}

/// Text with its `code spans` as `<code>` (gpuaudit's fixes write commands so); where the
/// backticks do not pair up as single ones, they stay as they are. Escaped first: a span's
/// content is text too.
pub fn text(s: &str) -> String {
    let e = esc(s);
    if e.matches('`').count() % 2 != 0 || e.contains("``") {
        return e;
    }
    let mut out = String::with_capacity(e.len() + 16);
    for (i, part) in e.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

pub fn class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Info => "info",
        Status::Warn => "warn",
        Status::Fail => "fail",
        Status::Skip => "skip",
    }
}

/// `<span class="badge fail">FAIL</span>`.
pub fn badge(s: Status) -> String {
    format!(
        "<span class=\"badge {}\">{}</span>",
        class(s),
        status_label(s)
    )
}

/// A table: header cells and rows of HTML (already escaped by the caller). `numeric`:
/// the columns to right-align.
pub fn table(class_name: &str, header: &[&str], rows: &[Vec<String>], numeric: &[usize]) -> String {
    let mut o = String::new();
    let _ = write!(o, "<table class=\"{class_name}\"><thead><tr>");
    for (i, h) in header.iter().enumerate() {
        let c = if numeric.contains(&i) {
            " class=num"
        } else {
            ""
        };
        let _ = write!(o, "<th{c}>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>\n");
    for r in rows {
        o.push_str("<tr>");
        for (i, cell) in r.iter().enumerate() {
            let c = if numeric.contains(&i) {
                " class=num"
            } else {
                ""
            };
            let _ = write!(o, "<td{c}>{cell}</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table>\n");
    o
}

/// A chart: its caption, the SVG (or the sentence why it is not drawn) and its legend.
pub fn figure(
    id: &str,
    caption: &str,
    svg: Result<String, String>,
    legend: &[(String, String)],
    note: &str,
) -> String {
    let mut o = String::new();
    match svg {
        Ok(svg) => {
            let _ = write!(
                o,
                "<figure class=chart id=\"{}\"><figcaption>{}</figcaption>\n{svg}\n",
                esc(id),
                esc(caption)
            );
            if !legend.is_empty() {
                o.push_str("<ul class=legend>");
                for (name, color) in legend {
                    let _ = write!(
                        o,
                        "<li><span class=swatch style=\"background:{}\"></span>{}</li>",
                        esc(color),
                        esc(name)
                    );
                }
                o.push_str("</ul>");
            }
            if !note.is_empty() {
                let _ = write!(o, "<p class=note>{}</p>", text(note));
            }
            o.push_str("</figure>\n");
        }
        Err(why) => {
            let _ = writeln!(
                o,
                "<p class=\"chart-omitted\" data-chart=\"{}\"><b>{}</b>: not drawn: {}.</p>",
                esc(id),
                esc(caption),
                text(why.trim_end_matches('.'))
            );
        }
    }
    o
}

/// The page: its title, its style and its body. No script runs and nothing is fetched: the
/// content security policy says so to the browser too, should any text ever get past the
/// escaping.
pub fn page(title: &str, body: &str) -> String {
    page_with_style(title, "", body)
}

/// [`page`] with rules of its own after the shared style (a `compare` page's highlights).
pub fn page_with_style(title: &str, extra_style: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>{}</title>\n<style>{STYLE}{extra_style}</style></head>\n<body>\n{body}</body></html>\n",
        esc(title)
    )
}

const STYLE: &str = "
:root{--fail:#cf222e;--warn:#9a6700;--pass:#1a7f37;--info:#0969da;--skip:#6e7781;--line:#d0d7de;--soft:#f6f8fa}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif;color:#1f2328;margin:0;background:#fff;line-height:1.45}
main{max-width:1100px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:1.6em;margin:0 0 6px}
h2{font-size:1.25em;margin:32px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:1.05em;margin:18px 0 6px}
.verdict{border-radius:8px;padding:18px 22px;margin:0 0 18px;border:1px solid var(--line);border-left:8px solid var(--pass);background:var(--soft)}
.verdict.fail{border-left-color:var(--fail)}.verdict.warn{border-left-color:var(--warn)}
.verdict .sub{color:#57606a;margin:4px 0 0}
.headline{font-size:1.15em;margin:10px 0 0}
.headline b{font-size:1.25em}
.headline .how{display:block;font-size:.8em;color:#57606a;margin-top:4px}
.badge{display:inline-block;min-width:3.6em;text-align:center;font-weight:700;font-size:.78em;letter-spacing:.04em;border-radius:4px;padding:2px 6px;color:#fff;vertical-align:1px}
.badge.fail{background:var(--fail)}.badge.warn{background:var(--warn)}.badge.pass{background:var(--pass)}.badge.info{background:var(--info)}.badge.skip{background:var(--skip)}
.problem{border:1px solid var(--line);border-left:6px solid var(--warn);border-radius:6px;padding:12px 16px;margin:10px 0}
.problem.fail{border-left-color:var(--fail)}
.problem .what{margin:0 0 8px}
.problem .check,.check{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.92em}
.problem dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;margin:0}
.problem dt{color:#57606a}
.problem dd{margin:0}
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);border:1px solid #eaeef2;border-radius:4px;padding:0 4px;font-size:.9em;word-break:break-word}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:.93em}
th,td{border-bottom:1px solid #eaeef2;padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.scroll{overflow-x:auto}
.id{white-space:nowrap}
table.kv th{width:11em;background:none;color:#57606a;font-weight:normal}
ul.compact{margin:6px 0;padding-left:1.2em}
ul.compact li{margin:3px 0}
ul.compact li .fix{color:#444;font-size:.95em}
ul.causes{margin:2px 0;padding-left:1.1em}
ul.causes li{margin:2px 0}
ul.areas{columns:3 16em;column-gap:2em}
ul.areas li{break-inside:avoid}
details{border:1px solid var(--line);border-radius:6px;padding:8px 14px;margin:10px 0}
summary{cursor:pointer;font-weight:600}
figure.chart{margin:16px 0 26px}
figure.chart figcaption{font-weight:600;margin-bottom:6px}
figure.chart svg{max-width:100%;height:auto;display:block}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:.88em}
.swatch{display:inline-block;width:14px;height:10px;border-radius:2px;margin-right:6px;vertical-align:0}
.note,.chart-omitted{color:#57606a;font-size:.9em}
footer{color:#57606a;font-size:.85em;margin-top:36px;border-top:1px solid var(--line);padding-top:10px}
@page{margin:12mm}
@media print{
body{font-size:10pt}
main{max-width:none;padding:0}
.scroll{overflow:visible}
table{font-size:8.5pt}
th,td{padding:3px 5px}
details{border:none;padding:0}
details>summary{list-style:none}
details>summary::-webkit-details-marker{display:none}
details::details-content{content-visibility:visible;display:contents}
section#measured,section#checks,section#machine{break-before:page}
h2,h3,figcaption,summary{break-after:avoid}
figure.chart,.problem,.verdict,tr{break-inside:avoid}
.badge,.swatch,.verdict,th,tr.differs{print-color-adjust:exact;-webkit-print-color-adjust:exact}
}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_spans_become_code_and_stay_escaped() {
        assert_eq!(
            text("run `a <b> | c` then"),
            "run <code>a &lt;b&gt; | c</code> then"
        );
        assert_eq!(text("one ` tick <x>"), "one ` tick &lt;x&gt;");
        assert_eq!(text("``<x>``"), "``&lt;x&gt;``");
        assert_eq!(
            badge(Status::Fail),
            "<span class=\"badge fail\">FAIL</span>"
        );
    }

    #[test]
    fn an_omitted_chart_says_why() {
        let o = figure(
            "p2p",
            "P2P <matrix>",
            Err("it needs two GPUs or more".into()),
            &[],
            "",
        );
        assert!(o.contains("not drawn: it needs two GPUs or more."), "{o}");
        assert!(o.contains("P2P &lt;matrix&gt;") && !o.contains("<svg"));
        let o = figure(
            "x",
            "c",
            Ok("<svg></svg>".into()),
            &[("GPU <0>".into(), "#000000".into())],
            "",
        );
        assert!(o.contains("<figure class=chart id=\"x\">") && o.contains("GPU &lt;0&gt;"));
    }
}
