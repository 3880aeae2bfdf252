//! The fleet for a person at a terminal: the verdict line, one row per node, the figures
//! with nodes that stand out, the drift and the checks failing on several nodes. Every string
//! from a report is escaped (`render::escape`): a hostname is hostile input.

use super::{
    attainable_text, explained, how_worse, rule_text, verdict_word, with_gpus, with_unit, Fleet,
    Node, Verdict,
};
use crate::render::escape::escape_line;
use crate::render::overview::plural;
use owo_colors::{OwoColorize, Style};
use std::fmt::Write;
use textwrap::core::display_width;
use textwrap::{Options, WordSplitter};

/// The node column is at most this wide; a longer name wraps the row.
const NAME_COLS: usize = 24;
/// A drift value's nodes are named up to this many; beyond, counted.
pub(crate) const NAMED_NODES: usize = 6;
const MIN_WIDTH: usize = 40;

fn esc(s: &str) -> String {
    escape_line(s).into_owned()
}

fn pad(s: &str, cols: usize) -> String {
    let w = display_width(s);
    format!("{s}{}", " ".repeat(cols.saturating_sub(w)))
}

struct Out {
    s: String,
    width: usize,
    color: bool,
}

impl Out {
    /// `text` wrapped at the width, continuation lines indented by `indent` columns; escaped
    /// for the terminal here too (a reason, a figure's label: every string of a report is
    /// the file's), whatever the caller escaped.
    fn para(&mut self, text: &str, indent: usize) {
        let text = escape_line(text);
        let rest = " ".repeat(indent);
        let opts = Options::new(self.width.max(MIN_WIDTH))
            .subsequent_indent(&rest)
            .word_splitter(WordSplitter::NoHyphenation);
        for line in textwrap::wrap(&text, opts) {
            let _ = writeln!(self.s, "{line}");
        }
    }

    fn title(&mut self, t: &str) {
        let style = if self.color {
            Style::new().bold()
        } else {
            Style::new()
        };
        let _ = writeln!(self.s, "\n{}", escape_line(t).style(style));
    }

    fn verdict_style(&self, v: Verdict) -> Style {
        if !self.color {
            return Style::new();
        }
        match v {
            Verdict::Pass => Style::new().green(),
            Verdict::Warn => Style::new().yellow().bold(),
            Verdict::Fail | Verdict::NotRead => Style::new().red().bold(),
        }
    }
}

/// "a, b and 3 more" (escaped).
pub(crate) fn some_nodes(nodes: &[String], limit: usize, esc: impl Fn(&str) -> String) -> String {
    let named: Vec<String> = nodes.iter().take(limit).map(|n| esc(n)).collect();
    if nodes.len() > limit {
        format!("{} and {} more", named.join(", "), nodes.len() - limit)
    } else {
        named.join(", ")
    }
}

/// The verdict line of the fleet, shared by the views.
pub(crate) fn headline(f: &Fleet) -> String {
    let c = &f.counts;
    let mut parts = Vec::new();
    if c.fail + c.not_read > 0 {
        let mut s = format!("{} fail", c.fail + c.not_read);
        if c.not_read > 0 {
            s.push_str(&format!(" ({} not read)", c.not_read));
        }
        parts.push(s);
    }
    if c.warn > 0 {
        parts.push(format!("{} warn", c.warn));
    }
    parts.push(format!("{} pass", c.pass));
    let mut s = format!(
        "Fleet of {}: {}",
        plural(c.nodes, "node", "nodes"),
        parts.join(", ")
    );
    if c.slow > 0 {
        s.push_str(&format!(
            "; {} slower than {} peers",
            plural(c.slow, "node", "nodes"),
            if c.slow == 1 { "its" } else { "their" }
        ));
    }
    if c.anomalous > 0 {
        s.push_str(&format!(
            "; {} running unlike {} peers",
            plural(c.anomalous, "node", "nodes"),
            if c.anomalous == 1 { "its" } else { "their" }
        ));
    }
    if c.watch > 0 {
        s.push_str(&format!("; {} to watch", plural(c.watch, "node", "nodes")));
    }
    if c.below_attainable > 0 {
        s.push_str(&format!(
            "; {} below what {} GPUs attain",
            plural(c.below_attainable, "node", "nodes"),
            if c.below_attainable == 1 {
                "its"
            } else {
                "their"
            }
        ));
    }
    s
}

/// The last part of a file's path: what names a file not read in its row.
pub(crate) fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

fn node_row(out: &mut Out, n: &Node, cols: usize) {
    let name = esc(&n.name);
    let verdict = match &n.not_read {
        Some(reason) => format!("not read: {}: {}", esc(&file_name(&n.file)), esc(reason)),
        None => {
            let mut v = verdict_word(n);
            if !n.failed_checks.is_empty() {
                let ids: Vec<String> = n
                    .failed_checks
                    .iter()
                    .map(|c| explained(with_gpus(&esc(&c.check), &c.gpus), &c.explains, esc))
                    .collect();
                v.push_str(&format!(": {}", ids.join(", ")));
            }
            if let Some(t) = super::node::same_hostname_text(n, esc) {
                v.push_str(&format!("; {t}"));
            }
            v
        }
    };
    let gpus = if n.not_read.is_some() {
        String::new()
    } else {
        format!("{}  ", esc(&n.gpu_label()))
    };
    let head = if display_width(&name) > cols {
        // A long name has the row to itself, the rest under it.
        out.para(&format!("  {name}"), 4);
        format!("  {}", pad("", cols))
    } else {
        format!("  {}", pad(&name, cols))
    };
    // Colour after wrapping: the verdict word is the first word after the GPUs.
    let text = format!("{head}  {gpus}{verdict}");
    let indent = cols + 4;
    let start = out.s.len();
    out.para(&text, indent);
    if out.color {
        let style = out.verdict_style(n.verdict);
        let word = match n.verdict {
            Verdict::NotRead => "not read",
            Verdict::Fail => "FAIL",
            Verdict::Warn => "warn",
            Verdict::Pass => "pass",
        };
        // The name column is never wrapped: the word comes after it.
        let from = (start + head.len()).min(out.s.len());
        if let Some(at) = out
            .s
            .get(from..)
            .and_then(|r| r.find(word))
            .map(|i| i + from)
        {
            let painted = word.style(style).to_string();
            out.s.replace_range(at..at + word.len(), &painted);
        }
    }
}

/// The table, wrapped at `width` columns (40 at least), coloured where `color`.
pub fn table(f: &Fleet, width: usize, color: bool) -> String {
    let mut out = Out {
        s: String::new(),
        width,
        color,
    };
    out.para(&headline(f), 4);
    out.para(
        &format!(
            "gpuaudit {} · {} · {}",
            f.tool.version,
            f.schema,
            rule_text(f)
        ),
        4,
    );

    out.title("Nodes");
    let cols = f
        .nodes
        .iter()
        .map(|n| display_width(&esc(&n.name)))
        .max()
        .unwrap_or(0)
        .min(NAME_COLS);
    for n in &f.nodes {
        node_row(&mut out, n, cols);
    }

    out.title("Measured figures");
    if f.figures.is_empty() {
        out.para(
            "  no report has measurements (snapshot audits and --facts-only measure nothing)",
            4,
        );
    }
    let rules = f.rules();
    let mut quiet = 0;
    let mut not_judged = Vec::new();
    for fig in &f.figures {
        if let Some(why) = &fig.not_judged {
            not_judged.push(format!(
                "{} on {} ({why})",
                esc(&fig.label()),
                esc(&fig.peers)
            ));
            // Too few peers to judge a node by them; what the model attains needs none.
            if !fig.remarkable(&rules) {
                continue;
            }
        } else if !fig.remarkable(&rules) {
            quiet += 1;
            continue;
        }
        out.para(
            &format!(
                "  {} · {} · {}: median {}, MAD {}",
                esc(&fig.label()),
                esc(&fig.peers),
                plural(fig.nodes, "node", "nodes"),
                esc(&with_unit(fig.median, &fig.unit)),
                esc(&with_unit(fig.mad, &fig.unit))
            ),
            6,
        );
        let line = |o: &super::Outlier| {
            let on = o.gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default();
            format!(
                "{} {}{on}: {}",
                esc(&o.node),
                esc(&with_unit(o.value, &fig.unit)),
                how_worse(fig, o)
            )
        };
        for o in &fig.outliers {
            out.para(&format!("    {}", line(o)), 8);
        }
        for o in &fig.watch {
            let z = o
                .robust_z
                .map(|z| format!(", {z:.1} robust deviations"))
                .unwrap_or_default();
            out.para(
                &format!(
                    "    watch: {}{z} (within {})",
                    line(o),
                    match o.degrees {
                        Some(_) => format!("{} °C", super::stats::HOTTER_C),
                        None => format!("{}%", super::percent(rules.threshold)),
                    }
                ),
                8,
            );
        }
        if let Some(t) = attainable_text(f, fig) {
            out.para(&format!("    {}", esc(&t)), 6);
        }
        if !fig.below_attainable.is_empty() {
            let names: Vec<String> = fig
                .below_attainable
                .iter()
                .map(|b| b.node.clone())
                .collect();
            out.para(
                &format!(
                    "    {} {}% or more below what an {} attains: {}",
                    plural(names.len(), "node", "nodes"),
                    super::percent(rules.threshold),
                    esc(&fig.peers),
                    some_nodes(&names, NAMED_NODES, esc)
                ),
                6,
            );
        }
    }
    if quiet > 0 {
        out.para(
            &format!(
                "  {}: no node stands out",
                plural(quiet, "other figure", "other figures")
            ),
            4,
        );
    }
    if !not_judged.is_empty() {
        out.para(&format!("  not judged: {}", not_judged.join("; ")), 4);
    }

    out.title("Drift");
    if f.drift.is_empty() {
        out.para(
            "  every field read is the same on every node that has it",
            4,
        );
    }
    for d in &f.drift {
        let values: Vec<String> = d
            .values
            .iter()
            .map(|v| {
                format!(
                    "{} on {}",
                    esc(&v.value),
                    if v.nodes.len() > NAMED_NODES {
                        plural(v.nodes.len(), "node", "nodes")
                    } else {
                        some_nodes(&v.nodes, NAMED_NODES, esc)
                    }
                )
            })
            .collect();
        let mut line = format!("  {}: {}", esc(&d.field), values.join("; "));
        if !d.not_known.is_empty() {
            line.push_str(&format!(
                "; not known on {}",
                plural(d.not_known.len(), "node", "nodes")
            ));
        }
        out.para(&line, 6);
    }

    let several = f.failing_on_several();
    if !several.is_empty() {
        out.title("Failing on several nodes");
        for c in several {
            let on: Vec<String> = c
                .nodes
                .iter()
                .take(NAMED_NODES)
                .map(|n| with_gpus(&esc(&n.node), &n.gpus))
                .collect();
            let more = c.nodes.len().saturating_sub(NAMED_NODES);
            out.para(
                &format!(
                    "  {} on {}: {}{}",
                    esc(&c.check),
                    plural(c.nodes.len(), "node", "nodes"),
                    on.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
                6,
            );
        }
    }
    out.s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Input;

    #[test]
    fn hostile_names_are_written_out_and_lines_fit() {
        let bad = Input {
            file: "reports/x\x1b[2J.json".into(),
            stem: "evil\x1b]0;pwned\x07".into(),
            report: Err("not JSON (\u{9b}2J)".into()),
        };
        let t = table(&Fleet::summarise(&[bad]), 80, false);
        assert!(!t.contains('\x1b') && !t.contains('\u{9b}'), "{t}");
        assert!(t.contains("evil\\x1b]0;pwned\\x07"), "{t}");
        // The file not read is named by its last part, escaped too.
        assert!(
            t.contains("not read: x\\x1b[2J.json: not JSON (\\u{9b}2J)"),
            "{t}"
        );
        for l in t.lines() {
            assert!(display_width(l) <= 80, "{l}");
        }
        assert!(
            t.starts_with("Fleet of 1 node: 1 fail (1 not read), 0 pass"),
            "{t}"
        );
    }

    #[test]
    fn each_section_has_its_title_line_after_a_blank_line_bold_in_colour() {
        let bad = Input {
            file: "x.json".into(),
            stem: "x".into(),
            report: Err("not JSON".into()),
        };
        let f = Fleet::summarise(&[bad]);
        let plain = table(&f, 80, false);
        assert!(plain.contains("\n\nNodes\n"), "{plain}");
        assert!(plain.contains("\n\nMeasured figures\n"), "{plain}");
        let coloured = table(&f, 80, true);
        let bold_nodes = "Nodes".bold().to_string();
        assert_ne!(bold_nodes, "Nodes");
        assert!(
            coloured.contains(&format!("\n{bold_nodes}\n")),
            "{coloured}"
        );
    }

    #[test]
    fn hostile_measurement_names_and_units_are_written_out() {
        use crate::testing::{measured, Machine};
        use crate::{Policy, Reading, Report};
        let inputs: Vec<Input> = [1.0, 1.0, 1.0, 2.0]
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let facts = Machine::healthy("h200-sxm-141gb", 1)
                    .with(|f| f.machine.hostname = Reading::Value(format!("n{i}")))
                    .measured(|m| m.context = Reading::Value(measured::ctx(400.0 / k, true)))
                    .build();
                let mut r = Report::build(&facts, &Policy::default());
                for m in r.measurements.iter_mut() {
                    m.name = format!("{}\x1b[31m", m.name);
                    m.unit = "ms\u{9b}".into();
                }
                Input {
                    file: format!("n{i}.json"),
                    stem: format!("n{i}"),
                    report: Ok(r),
                }
            })
            .collect();
        // (A unit gpuaudit does not write is "higher is better": the 200 ms node stands out.)
        let t = table(&Fleet::summarise(&inputs), 80, false);
        assert!(t.contains("n3 200 ms\\u{9b}"), "{t}");
        assert!(!t.contains('\x1b') && !t.contains('\u{9b}'), "{t}");
        assert!(t.contains("context_create_ms\\x1b[31m"), "{t}");
    }

    #[test]
    fn some_nodes_counts_beyond_the_limit() {
        let n: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(some_nodes(&n, 2, |s| s.to_string()), "a, b and 1 more");
        assert_eq!(some_nodes(&n, 3, |s| s.to_string()), "a, b, c");
    }
}
