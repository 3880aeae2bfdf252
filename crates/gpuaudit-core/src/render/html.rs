//! The report as one self-contained HTML page.

use super::{area_title, by_area, fmt_value, headline, status_label};
use crate::finding::Status;
use crate::report::Report;
use std::fmt::Write;

fn esc(s: &str) -> String {
    super::escape::html(s)
}

fn class(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Info => "info",
        Status::Warn => "warn",
        Status::Fail => "fail",
        Status::Skip => "skip",
    }
}

pub fn render(report: &Report) -> String {
    let mut o = String::new();
    let host = report.machine.hostname.as_deref().unwrap_or("unknown host");
    let _ = write!(
        o,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuaudit: {}</title>\n\
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:80em}}table{{border-collapse:collapse;width:100%}}\
td,th{{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}}\
.pass{{color:#1a7f37}}.info{{color:#0969da}}.warn{{color:#9a6700;font-weight:bold}}.fail{{color:#cf222e;font-weight:bold}}.skip{{color:#777}}\
.fix{{color:#555;font-size:90%}}code{{background:#f4f4f4;padding:0 3px}}</style></head><body>\n",
        esc(host)
    );
    let _ = writeln!(
        o,
        "<h1>gpuaudit report: {}</h1>\n<p>{}</p>",
        esc(host),
        esc(&headline(report))
    );
    let s = &report.summary;
    let _ = writeln!(
        o,
        "<p><span class=pass>{} pass</span> · <span class=info>{} info</span> · <span class=warn>{} warn</span> · <span class=fail>{} fail</span> · <span class=skip>{} skip</span></p>",
        s.pass, s.info, s.warn, s.fail, s.skip
    );
    for (area, findings) in by_area(&report.findings) {
        let _ = writeln!(o, "<h2>{}</h2>\n<table><tr><th>status</th><th>check</th><th>GPU</th><th>finding</th></tr>", esc(area_title(area)));
        for f in findings {
            let fix = f
                .fix
                .as_ref()
                .filter(|_| matches!(f.status, Status::Fail | Status::Warn))
                .map(|x| format!("<div class=fix>fix: {}</div>", esc(x)))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "<tr><td class={}>{}</td><td><code>{}</code></td><td>{}</td><td>{}{}</td></tr>",
                class(f.status),
                status_label(f.status),
                esc(&f.check),
                f.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
                esc(&f.message),
                fix
            );
        }
        let _ = writeln!(o, "</table>");
    }
    if !report.measurements.is_empty() {
        let _ = writeln!(o, "<h2>Measurements</h2>\n<table><tr><th>name</th><th>GPU</th><th>value</th><th>unit</th><th>expected</th><th>ratio</th></tr>");
        for m in &report.measurements {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&m.name),
                m.gpu.map(|g| g.to_string()).unwrap_or_else(|| "-".into()),
                fmt_value(m.value),
                esc(&m.unit),
                m.expected.map(fmt_value).unwrap_or_else(|| "-".into()),
                m.ratio
                    .map(|r| format!("{:.0}%", r * 100.0))
                    .unwrap_or_else(|| "-".into())
            );
        }
        let _ = writeln!(o, "</table>");
    }
    let _ = writeln!(o, "</body></html>");
    o
}
