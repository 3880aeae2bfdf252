//! The report as one self-contained HTML page, to send to a provider: the verdict and what
//! share of the datasheet the GPUs give, the problems with their evidence and fix, the
//! charts, the measured figures, every other check folded, the machine with its GPUs'
//! serials, date and version. `parts` (page shell, badges, tables) and `render::charts` are
//! the pieces other pages (a `compare` view) reuse.

mod charts;
pub mod parts;

use super::document::Document;
use super::group::{brief_evidence, evidence_source, Group};
use super::overview::{
    datasheet_name, figures, measurement_label, percent, KeyRatios, Overview, Problem,
};
use super::{area, area_title, fmt_value};
use crate::finding::Status;
use crate::report::Report;
use parts::{badge, class, esc, table, text};
use std::fmt::Write;

pub fn render(report: &Report) -> String {
    let o = Overview::of(report);
    let doc = Document::of(report);
    let mut b = String::from("<main>\n");

    verdict(&mut b, report, &o, &doc);

    let problems = o.problems();
    if !problems.is_empty() {
        let _ = writeln!(b, "<section id=problems><h2>Problems</h2>");
        for p in &problems {
            problem(&mut b, p);
        }
        b.push_str("</section>\n");
    }

    let infos = o.infos();
    if !infos.is_empty() {
        b.push_str("<section id=notes><h2>Worth knowing</h2><ul class=compact>\n");
        for g in infos {
            // A note can carry what to do about it too: every format carries every fix.
            let fix = g
                .fix
                .map(|f| format!("<br><span class=fix>fix: {}</span>", text(f)))
                .unwrap_or_default();
            let _ = writeln!(
                b,
                "<li>{} <span class=check>{}</span>: {}{fix}</li>",
                badge(g.status),
                esc(g.check),
                text(&g.message)
            );
        }
        b.push_str("</ul></section>\n");
    }

    b.push_str("<section id=measured><h2>Measured</h2>\n");
    b.push_str(&charts::section(report));
    measurements(&mut b, report);
    b.push_str("</section>\n");

    checks(&mut b, &o);
    machine(&mut b, &doc);

    let _ = writeln!(
        b,
        "<footer>gpuaudit {}{} · {} · the JSON of this report (<code>--format json</code>) \
         holds every finding's evidence and every measurement's method.</footer>",
        esc(&report.tool.version),
        doc.audited_at()
            .map(|d| format!(" · audited {}", esc(&d)))
            .unwrap_or_default(),
        esc(report.machine.hostname.as_deref().unwrap_or("unknown host")),
    );
    b.push_str("</main>\n");
    let title = format!(
        "gpuaudit: {} — {}",
        report.machine.hostname.as_deref().unwrap_or("unknown host"),
        o.problems_count()
    );
    parts::page(&title, &b)
}

fn verdict(b: &mut String, report: &Report, o: &Overview, doc: &Document) {
    let cls = match o.worst() {
        Some(Status::Fail) => " fail",
        Some(_) => " warn",
        None => "",
    };
    let _ = writeln!(b, "<header class=\"verdict{cls}\">");
    let _ = writeln!(
        b,
        "<h1>{}: {}</h1>",
        esc(&o.what_you_got(report)),
        esc(&o.problems_count())
    );
    let mut sub: Vec<String> = Vec::new();
    sub.push(esc(report
        .machine
        .hostname
        .as_deref()
        .unwrap_or("unknown host")));
    if let Some(d) = doc.audited_at() {
        sub.push(format!("audited {}", esc(&d)));
    }
    sub.push(match &report.audit.snapshot {
        Some(s) => format!("snapshot {}", esc(s)),
        None => "live".into(),
    });
    sub.push(format!("profile {}", esc(&report.audit.profile)));
    sub.push(format!("gpuaudit {}", esc(&report.tool.version)));
    let _ = writeln!(b, "<p class=sub>{}</p>", sub.join(" · "));
    if report.audit.redacted {
        let _ = writeln!(b, "<p class=sub>{}</p>", esc(crate::render::REDACTED_NOTE));
    }
    if let Some(nr) = o.not_run_sentence() {
        let _ = writeln!(b, "<p class=sub>{}</p>", esc(&nr));
    }
    headline(b, report);
    b.push_str("</header>\n");
}

/// "You are getting 99% of what a healthy NVIDIA H200 SXM 141GB reaches: memory bandwidth
/// 100%, bf16 98%", the datasheet's share beside it; where no figure has an attainable value,
/// "You are getting 82% of a datasheet ...". A healthy GPU reaches about 100% of the first
/// and never the datasheet's peak, so the first is what says whether the machine is right.
fn headline(b: &mut String, report: &Report) {
    let sheet = KeyRatios::of(report);
    let attained = KeyRatios::attained(report);
    let name = datasheet_name(report);
    let of = name
        .map(|n| format!("a datasheet {}", esc(n)))
        .unwrap_or_else(|| "the datasheet".into());
    let parts = |k: &KeyRatios| -> Vec<String> {
        k.parts()
            .iter()
            .map(|(l, r)| format!("{l} {}", percent(*r)))
            .collect()
    };
    // "the geometric mean of these 2 figures, each the lowest over the GPUs"; of one: "this
    // one figure, the lowest over the GPUs".
    let figures = |n: usize| {
        if n == 1 {
            "this one figure,".to_string()
        } else {
            format!("these {n} figures, each")
        }
    };
    match (attained.overall(), sheet.overall()) {
        (Some(a), sheet_n) => {
            let healthy = name
                .map(|n| format!("a healthy {}", esc(n)))
                .unwrap_or_else(|| "a healthy GPU of this model".into());
            let p = parts(&attained);
            let beside = match sheet_n {
                Some(n) => format!(
                    "Against the datasheet's peak: {} ({}), which no GPU quite reaches. ",
                    percent(n),
                    parts(&sheet).join(", ")
                ),
                None => String::new(),
            };
            let _ = writeln!(
                b,
                "<p class=headline id=headline>You are getting <b>{}</b> of what {healthy} \
                 reaches: {}.<span class=how>{beside}{} is the geometric mean of {} the \
                 lowest over the GPUs and measured against what healthy GPUs of the model \
                 reach when measured the same way (data/attainable.toml); 100% is a healthy \
                 GPU.</span></p>",
                percent(a),
                p.join(", "),
                percent(a),
                figures(p.len()),
            );
        }
        (None, Some(n)) => {
            let p = parts(&sheet);
            let _ = writeln!(
                b,
                "<p class=headline id=headline>You are getting <b>{}</b> of {of}: {}.\
                 <span class=how>{} is the geometric mean of {} the lowest over the \
                 GPUs and measured against the datasheet (the host link against the PCIe \
                 link's rate). 100% is the datasheet's peak, which a healthy GPU does not \
                 quite reach; no figure of this model has a measured attainable value.</span></p>",
                percent(n),
                p.join(", "),
                percent(n),
                figures(p.len()),
            );
        }
        (None, None) if report.gpus.is_empty() => {
            b.push_str(
                "<p class=headline id=headline>No GPU was found on this machine: there is no \
                 share of a datasheet to give. This page holds what the machine's facts say.</p>\n",
            );
        }
        (None, None) => {
            let why = report
                .audit
                .measurements_not_run
                .as_deref()
                .unwrap_or("memory bandwidth, bf16 GEMM and host copies were not measured");
            let _ = writeln!(
                b,
                "<p class=headline id=headline>What share of {of} these GPUs give is not \
                 known: {}. This page holds what the machine's facts say.</p>",
                esc(why)
            );
        }
    }
}

/// A problem's card: the root's sentence, evidence, fix and explain command, then what its
/// cause explains (without their fixes: the root's is the one to follow).
fn problem(b: &mut String, p: &Problem) {
    let (g, fix_repeated) = (p.root, p.fix_repeated);
    let _ = writeln!(b, "<article class=\"problem {}\">", class(p.status));
    let _ = writeln!(
        b,
        "<p class=what>{} <span class=check>{}</span> {}</p>",
        badge(g.status),
        esc(g.check),
        text(&g.message)
    );
    b.push_str("<dl>");
    let ev = brief_evidence(g);
    if !ev.is_empty() {
        let mut line = ev
            .iter()
            .map(|(k, v)| format!("{}={}", esc(k), esc(v)))
            .collect::<Vec<_>>()
            .join(", ");
        if let Some(src) = evidence_source(g) {
            let _ = write!(line, " (from {})", esc(src));
        }
        let _ = write!(b, "<dt>evidence</dt><dd>{line}</dd>");
    }
    if let Some(fix) = g.fix {
        let shown = if fix_repeated {
            "the same as above".to_string()
        } else {
            text(fix)
        };
        let _ = write!(b, "<dt>fix</dt><dd>{shown}</dd>");
    }
    if !p.consequences.is_empty() {
        let items: Vec<String> = p
            .consequences
            .iter()
            .map(|c| {
                format!(
                    "<li>{} <span class=check>{}</span>: {}</li>",
                    badge(c.status),
                    esc(c.check),
                    text(&c.message)
                )
            })
            .collect();
        let _ = write!(
            b,
            "<dt>what it causes</dt><dd><ul class=causes>{}</ul></dd>",
            items.join("")
        );
    }
    let _ = write!(
        b,
        "<dt>more</dt><dd><code>gpuaudit explain {}</code></dd>",
        esc(g.check)
    );
    b.push_str("</dl></article>\n");
}

fn measurements(b: &mut String, report: &Report) {
    if report.measurements.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = figures(report)
        .iter()
        .map(|f| {
            vec![
                esc(&f.label),
                format!("{} {}", esc(&f.value_text()), esc(f.unit)),
                f.expected().map(fmt_value).unwrap_or_else(|| "-".into()),
                f.lowest()
                    .map(|(r, _)| percent(r))
                    .unwrap_or_else(|| "-".into()),
                esc(&f.lowest_where()),
            ]
        })
        .collect();
    b.push_str("<h3>The figures</h3>\n");
    b.push_str(&table(
        "figures",
        &["measurement", "measured", "expected", "ratio", "lowest on"],
        &rows,
        &[1, 2, 3],
    ));
    let rows: Vec<Vec<String>> = report
        .measurements
        .iter()
        .map(|m| {
            vec![
                esc(&measurement_label(m)),
                m.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
                // The other GPU of a pair: P2P rows are from GPU to peer.
                m.peer.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
                format!("{} {}", fmt_value(m.value), esc(&m.unit)),
                m.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
                m.ratio.map(percent).unwrap_or_else(|| "-".into()),
                esc(&m.method),
            ]
        })
        .collect();
    let _ = writeln!(
        b,
        "<details id=every-measurement><summary>Every measurement ({}), with its method</summary>",
        report.measurements.len()
    );
    b.push_str(&table(
        "measurements",
        &[
            "measurement",
            "GPU",
            "peer",
            "value",
            "expected",
            "ratio",
            "method",
        ],
        &rows,
        &[3, 4, 5],
    ));
    b.push_str("</details>\n");
}

fn checks(b: &mut String, o: &Overview) {
    let rest: Vec<&Group> = o.groups.iter().filter(|g| !g.is_problem()).collect();
    if rest.is_empty() {
        return;
    }
    let pass = rest.iter().filter(|g| g.status == Status::Pass).count();
    let info = rest.iter().filter(|g| g.status == Status::Info).count();
    let skip = rest.iter().filter(|g| g.status == Status::Skip).count();
    let _ = writeln!(b, "<section id=checks><h2>Everything else checked</h2>");
    let areas: Vec<String> = o
        .areas()
        .iter()
        .map(|a| format!("<li><b>{}</b>: {}</li>", esc(&a.title), esc(&a.sentence())))
        .collect();
    let _ = writeln!(b, "<ul class=\"compact areas\">{}</ul>", areas.join(""));
    let _ = writeln!(
        b,
        "<details id=passing><summary>{pass} passing, {info} to note, {skip} not run: each \
         check</summary>"
    );
    let rows: Vec<Vec<String>> = rest
        .iter()
        .map(|g| {
            vec![
                esc(area_title(area(g.check))),
                badge(g.status),
                format!("<span class=check>{}</span>", esc(g.check)),
                text(&g.message),
            ]
        })
        .collect();
    b.push_str(&table(
        "checks",
        &["area", "status", "check", "finding"],
        &rows,
        &[],
    ));
    b.push_str("</details></section>\n");
}

fn machine(b: &mut String, doc: &Document) {
    b.push_str("<section id=machine><h2>The machine</h2>\n");
    let rows: Vec<Vec<String>> = doc
        .machine_rows()
        .into_iter()
        .map(|(k, v)| vec![format!("<b>{}</b>", esc(k)), esc(&v)])
        .collect();
    // A key-value table: the first column is a label.
    let mut kv = String::from("<table class=kv><tbody>\n");
    for r in rows {
        let _ = writeln!(kv, "<tr><th>{}</th><td>{}</td></tr>", r[0], r[1]);
    }
    kv.push_str("</tbody></table>\n");
    b.push_str(&kv);
    let (header, rows) = doc.gpu_rows();
    if !rows.is_empty() {
        gpu_tables(b, &header, &rows);
    }
    b.push_str("</section>\n");
}

/// The GPUs as two tables: what each is (index, name, bus id, memory, PCIe, power limit,
/// VBIOS), then who it is (index, bus id, serial, UUID). As one table of nine columns it was
/// wider than a printed A4 or Letter page (the UUID was cut to "U") and, kept from wrapping,
/// than a 1280-px window; split, each fits with every identifier whole on one line, so that
/// it can be read off the paper and copied out of a PDF.
fn gpu_tables(b: &mut String, header: &[&str], rows: &[Vec<String>]) {
    const WHO: [&str; 2] = ["serial", "UUID"];
    // The columns of each table, by name: bus id and the index in both, to match rows by.
    let pick = |keep: &dyn Fn(&str) -> bool| -> (Vec<&str>, Vec<Vec<String>>) {
        let cols: Vec<usize> = (0..header.len()).filter(|i| keep(header[*i])).collect();
        let head = cols.iter().map(|i| header[*i]).collect();
        let body = rows
            .iter()
            .map(|r| {
                cols.iter()
                    .map(|i| {
                        let c = esc(r.get(*i).map(String::as_str).unwrap_or("-"));
                        // An identifier never breaks at its dots or dashes.
                        match matches!(header[*i], "bus id" | "VBIOS" | "serial" | "UUID") {
                            true => format!("<span class=id>{c}</span>"),
                            false => c,
                        }
                    })
                    .collect()
            })
            .collect();
        (head, body)
    };
    let (what_head, what) = pick(&|h| !WHO.contains(&h));
    let (who_head, who) = pick(&|h| matches!(h, "GPU" | "bus id") || WHO.contains(&h));
    let numeric: Vec<usize> = what_head
        .iter()
        .position(|h| *h == "memory")
        .into_iter()
        .collect();
    b.push_str("<h3>GPUs</h3>\n<div class=scroll>");
    b.push_str(&table("gpus", &what_head, &what, &numeric));
    b.push_str("</div>\n<h3>Their serials and UUIDs</h3>\n<div class=scroll>");
    b.push_str(&table("gpus ids", &who_head, &who, &[]));
    b.push_str("</div>\n");
}
