//! The report as Markdown, for tickets and pull requests.

use super::{area_title, by_area, escape, fmt_value, headline, status_label};
use crate::report::Report;
use std::fmt::Write;

/// Text from the machine in a cell or a heading: see [`escape::markdown_cell`].
fn cell(s: &str) -> String {
    escape::markdown_cell(s)
}

pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let host = report.machine.hostname.as_deref().unwrap_or("unknown host");
    let _ = writeln!(out, "# gpuaudit report: {}\n", cell(host));
    let _ = writeln!(out, "{}\n", cell(&headline(report)));
    let m = &report.machine;
    let _ = writeln!(out, "| machine | |\n|---|---|");
    for (k, v) in [
        ("OS", m.os.clone()),
        ("kernel", m.kernel.clone()),
        ("CPU", m.cpu.clone()),
        ("virtualization", m.virtualization.clone()),
        ("driver", m.driver_version.clone()),
        ("CUDA (driver)", m.cuda_driver_version.clone()),
        (
            "audit",
            Some(format!(
                "{} · profile {}",
                report.audit.mode, report.audit.profile
            )),
        ),
    ] {
        let _ = writeln!(out, "| {k} | {} |", cell(v.as_deref().unwrap_or("-")));
    }
    for (area, findings) in by_area(&report.findings) {
        let _ = writeln!(out, "\n## {}\n", area_title(area));
        let _ = writeln!(
            out,
            "| status | check | GPU | finding | fix |\n|---|---|---|---|---|"
        );
        for f in findings {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} |",
                status_label(f.status),
                cell(&f.check),
                f.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
                cell(&f.message),
                cell(f.fix.as_deref().unwrap_or(""))
            );
        }
    }
    if !report.measurements.is_empty() {
        let _ = writeln!(out, "\n## Measurements\n");
        let _ = writeln!(out, "| name | GPU | value | unit | expected | ratio | method |\n|---|---|---|---|---|---|---|");
        for x in &report.measurements {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} |",
                cell(&x.name),
                match (x.gpu, x.peer) {
                    (Some(a), Some(b)) => format!("{a}→{b}"),
                    (Some(a), None) => a.to_string(),
                    _ => "-".into(),
                },
                fmt_value(x.value),
                cell(&x.unit),
                x.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
                x.ratio
                    .map(|r| format!("{:.0}%", r * 100.0))
                    .unwrap_or_else(|| "-".into()),
                cell(&x.method)
            );
        }
    }
    let s = &report.summary;
    let _ = writeln!(
        out,
        "\n**Summary:** {} pass, {} info, {} warn, {} fail, {} skip",
        s.pass, s.info, s.warn, s.fail, s.skip
    );
    out
}
