//! The fleet in Markdown, for a ticket: the verdict heading, a table of the nodes, the
//! flagged figures, the drift, the checks failing on several nodes, and every figure folded.
//! Every string from a report is escaped (`render::escape::markdown_cell`).

use super::table::{headline, some_nodes, NAMED_NODES};
use super::{
    attainable_text, explained, how_worse, percent, rule_text, verdict_word, with_gpus, with_unit,
    Fleet,
};
use crate::render::escape::{markdown_cell, markdown_code};
use crate::render::overview::plural;
use std::fmt::Write;

fn cell(s: &str) -> String {
    markdown_cell(s)
}

pub fn markdown(f: &Fleet) -> String {
    let mut s = String::new();
    let icon = if f.fails() {
        "❌"
    } else if f.counts.warn > 0 || f.counts.flagged > 0 || f.counts.below_attainable > 0 {
        "⚠️"
    } else {
        "✅"
    };
    let _ = writeln!(s, "### {icon} {}\n", headline(f));
    let _ = writeln!(
        s,
        "gpuaudit {} · `{}` · {} (same GPUs)\n",
        f.tool.version,
        f.schema,
        rule_text(f)
    );

    let _ = writeln!(s, "| node | GPUs | verdict | failed checks |");
    let _ = writeln!(s, "|---|---|---|---|");
    for n in &f.nodes {
        let (gpus, verdict, checks) = match &n.not_read {
            Some(reason) => (
                String::new(),
                "not read".into(),
                format!(
                    "{}: {}",
                    cell(&super::table::file_name(&n.file)),
                    cell(reason)
                ),
            ),
            None => {
                let mut checks: Vec<String> = n
                    .failed_checks
                    .iter()
                    .map(|c| {
                        let quoted = |id: &str| markdown_code(id, true);
                        explained(with_gpus(&quoted(&c.check), &c.gpus), &c.explains, quoted)
                    })
                    .collect();
                if let Some(t) = super::node::same_hostname_text(n, cell) {
                    checks.push(t);
                }
                (cell(&n.gpu_label()), verdict_word(n), checks.join(", "))
            }
        };
        let _ = writeln!(s, "| {} | {gpus} | {verdict} | {checks} |", cell(&n.name));
    }

    let rules = f.rules();
    let rows = |s: &mut String, title: &str, pick: &dyn Fn(&super::Figure) -> &[super::Outlier]| {
        let any = f.figures.iter().any(|fig| !pick(fig).is_empty());
        if !any {
            return;
        }
        let _ = writeln!(s, "\n#### {title}\n");
        let _ = writeln!(s, "| figure | GPUs | node | value | median | how |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for fig in &f.figures {
            for o in pick(fig) {
                let on = o.gpu.map(|g| format!(" (GPU {g})")).unwrap_or_default();
                let _ = writeln!(
                    s,
                    "| {} | {} | {}{on} | {} | {} | {} |",
                    cell(&fig.label()),
                    cell(&fig.peers),
                    cell(&o.node),
                    cell(&with_unit(o.value, &fig.unit)),
                    cell(&with_unit(fig.median, &fig.unit)),
                    how_worse(fig, o)
                );
            }
        }
    };
    rows(&mut s, "Nodes that stand out from their peers", &|fig| {
        &fig.outliers
    });
    rows(
        &mut s,
        "To watch (within the threshold, far outside the noise)",
        &|fig| &fig.watch,
    );
    let below: Vec<&super::Figure> = f
        .figures
        .iter()
        .filter(|fig| fig.median_below_attainable(&rules) || !fig.below_attainable.is_empty())
        .collect();
    if !below.is_empty() {
        let _ = writeln!(s, "\n#### Below what the GPU model attains\n");
        for fig in below {
            let mut line = format!("- {} on {}", cell(&fig.label()), cell(&fig.peers));
            if let Some(t) = attainable_text(f, fig) {
                line.push_str(&format!(": {}", cell(&t)));
            }
            if !fig.below_attainable.is_empty() {
                let names: Vec<String> = fig
                    .below_attainable
                    .iter()
                    .map(|b| b.node.clone())
                    .collect();
                line.push_str(&format!(
                    "; {} {}% or more below it: {}",
                    plural(names.len(), "node", "nodes"),
                    percent(rules.threshold),
                    some_nodes(&names, NAMED_NODES, cell)
                ));
            }
            let _ = writeln!(s, "{line}");
        }
    }

    if !f.drift.is_empty() {
        let _ = writeln!(s, "\n#### Drift\n");
        let _ = writeln!(s, "| field | value | nodes |");
        let _ = writeln!(s, "|---|---|---|");
        for d in &f.drift {
            for v in &d.values {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} ({}) |",
                    cell(&d.field),
                    cell(&v.value),
                    v.nodes.len(),
                    some_nodes(&v.nodes, NAMED_NODES, cell)
                );
            }
            if !d.not_known.is_empty() {
                let _ = writeln!(
                    s,
                    "| {} | not known | {} ({}) |",
                    cell(&d.field),
                    d.not_known.len(),
                    some_nodes(&d.not_known, NAMED_NODES, cell)
                );
            }
        }
    }

    let several = f.failing_on_several();
    if !several.is_empty() {
        let _ = writeln!(s, "\n#### Failing on several nodes\n");
        let _ = writeln!(s, "| check | nodes | on |");
        let _ = writeln!(s, "|---|---|---|");
        for c in several {
            let on: Vec<String> = c
                .nodes
                .iter()
                .map(|n| with_gpus(&cell(&n.node), &n.gpus))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                markdown_code(&c.check, true),
                c.nodes.len(),
                on.join(", ")
            );
        }
    }

    if !f.figures.is_empty() {
        let _ = writeln!(
            s,
            "\n<details><summary>Every measured figure ({})</summary>\n",
            f.figures.len()
        );
        let _ = writeln!(
            s,
            "| figure | GPUs | nodes | median | MAD | flagged | watch |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|");
        for fig in &f.figures {
            let flagged = match &fig.not_judged {
                Some(why) => cell(why),
                None => fig.outliers.len().to_string(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {flagged} | {} |",
                cell(&fig.label()),
                cell(&fig.peers),
                fig.nodes,
                cell(&with_unit(fig.median, &fig.unit)),
                cell(&with_unit(fig.mad, &fig.unit)),
                fig.watch.len()
            );
        }
        let _ = writeln!(s, "\n</details>");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::Input;

    #[test]
    fn hostile_text_cannot_become_markup_or_open_a_cell() {
        let bad = Input {
            file: "x.json".into(),
            stem: "<img src=x onerror=alert(1)>|x".into(),
            report: Err("not JSON\n| forged | row |".into()),
        };
        let m = markdown(&Fleet::summarise(&[bad]));
        assert!(!m.contains("<img"), "{m}");
        assert!(m.contains("&lt;img src=x onerror=alert(1)&gt;\\|x"), "{m}");
        assert!(!m.contains("\n| forged"), "{m}");
        assert!(m.starts_with("### ❌ Fleet of 1 node"), "{m}");
    }
}
