//! Renderers: the report as a terminal table, JSON, Markdown or HTML. One file each.

pub mod bench;
pub mod charts;
pub mod document;
pub mod escape;
pub mod group;
pub(crate) mod html;
mod json;
mod markdown;
pub mod overview;
mod table;
pub mod wrap;

use crate::finding::Status;
use crate::report::Report;
use std::str::FromStr;

pub use table::TableOptions;

/// The line every view shows for a report `--redact` made (`audit.redacted`).
pub const REDACTED_NOTE: &str =
    "redacted: hosts, addresses, serials, UUIDs, users, paths and ids replaced";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Markdown,
    Html,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "table" | "text" => Ok(Format::Table),
            "json" => Ok(Format::Json),
            "md" | "markdown" => Ok(Format::Markdown),
            "html" => Ok(Format::Html),
            other => Err(format!(
                "unknown format '{other}': expected table, json, md or html"
            )),
        }
    }
}

pub fn render(report: &Report, format: Format, table: &TableOptions) -> String {
    match format {
        Format::Table => table::render(report, table),
        Format::Json => json::render(report),
        Format::Markdown => markdown::render(report),
        Format::Html => html::render(report),
    }
}

/// The area of a check id: "pcie.link" -> "pcie".
fn area(check: &str) -> &str {
    check.split('.').next().unwrap_or(check)
}

fn area_title(area: &str) -> &str {
    match area {
        "gpu" => "GPUs",
        "pcie" => "PCIe",
        "power" => "Power",
        "clocks" => "Clocks",
        "nvlink" => "NVLink",
        "p2p" => "Peer to peer",
        "nccl" => "NCCL",
        "cuda" => "CUDA stack",
        "kernel" => "Kernel",
        "os" => "Operating system",
        "memory" => "GPU memory",
        "health" => "Health history",
        "compute" => "Compute",
        "stability" => "Stability",
        "net" => "Network",
        "storage" => "Storage",
        "host" => "Host",
        "container" => "Container",
        "security" => "Security",
        "env" => "Environment",
        "workload" => "Workload",
        other => other,
    }
}

pub(crate) fn status_label(s: Status) -> &'static str {
    match s {
        Status::Pass => "PASS",
        Status::Info => "INFO",
        Status::Warn => "WARN",
        Status::Fail => "FAIL",
        Status::Skip => "SKIP",
    }
}

/// "2× NVIDIA H200", "1× NVIDIA A100 + 1× NVIDIA A30"; where the driver described none,
/// "2× NVIDIA GPU on the PCI bus (not described by the driver)", "... (the driver's report
/// could not be read)", "GPUs not known (the driver's report could not be read)" or "no GPU
/// found".
fn gpu_names(report: &Report) -> String {
    let mut names: Vec<(&str, usize)> = Vec::new();
    let mut at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for g in &report.gpus {
        let n = g.name.as_deref().unwrap_or("unknown GPU");
        match at.get(n) {
            Some(&i) => names[i].1 += 1,
            None => {
                at.insert(n, names.len());
                names.push((n, 1));
            }
        }
    }
    if !names.is_empty() {
        return names
            .iter()
            .map(|(n, c)| format!("{c}× {n}"))
            .collect::<Vec<_>>()
            .join(" + ");
    }
    // No GPU described: gpu.present's evidence says whether that is none, or GPUs the driver
    // did not describe.
    let present = report
        .findings
        .iter()
        .find(|f| f.check == crate::checks::gpu::present::CHECK.id);
    let evidence = |key: &str| present.and_then(|f| f.evidence.get(key));
    let on_bus = evidence("pci_functions")
        .and_then(|v| v.as_array())
        .map_or(0, Vec::len);
    let unreadable = evidence(crate::checks::gpu::present::REPORT_UNREADABLE).is_some();
    // The driver's report was there but could not be read: not known, not none.
    if unreadable && on_bus > 0 {
        format!("{on_bus}× NVIDIA GPU on the PCI bus (the driver's report could not be read)")
    } else if unreadable {
        "GPUs not known (the driver's report could not be read)".to_string()
    } else if on_bus > 0 {
        format!("{on_bus}× NVIDIA GPU on the PCI bus (not described by the driver)")
    } else {
        "no GPU found".to_string()
    }
}

/// A report's unit as a person reads it (the terminal and Markdown views): "°C" for the
/// report's "C", "µs" for "us", "IOPS" for "1/s"; a unit this build does not write, as it is.
/// The JSON keeps the report's ASCII units (scripts match on them).
pub fn unit_text(unit: &str) -> &str {
    match crate::figures::Unit::from_report(unit) {
        Some(u) => u.display(),
        None => unit,
    }
}

/// "64.0 °C", "0.02" (a ratio has no unit to write).
pub fn with_unit(value: &str, unit: &str) -> String {
    match unit_text(unit) {
        "" => value.to_string(),
        u => format!("{value} {u}"),
    }
}

/// A figure to about three significant digits: "789", "57.6", "6.00", "0.0480".
fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.2}")
    } else {
        let decimals = (2 - a.log10().floor() as i32).clamp(2, 12) as usize;
        format!("{v:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    /// Every area a registered check belongs to has a title of its own (a new area that
    /// fell through to its bare id showed as "workload" in the table).
    #[test]
    fn every_area_has_a_title() {
        for c in crate::checks::all() {
            let a = super::area(c.id);
            assert_ne!(super::area_title(a), a, "{}: area '{a}' has no title", c.id);
        }
    }

    /// A redacted report says so in every view (with -q too), a report that is not says
    /// nothing of it.
    #[test]
    fn every_view_says_when_the_report_was_redacted() {
        let facts = crate::testing::Machine::healthy("h200-sxm-141gb", 1).build();
        let plain = Report::build(&facts, &Policy::default());
        let redacted = crate::report::Redactor::new().redact(&plain).unwrap();
        let quiet = TableOptions {
            quiet: true,
            ..TableOptions::default()
        };
        for format in [Format::Table, Format::Markdown, Format::Html] {
            for opts in [TableOptions::default(), quiet.clone()] {
                assert!(
                    render(&redacted, format, &opts).contains(REDACTED_NOTE),
                    "{format:?}"
                );
                assert!(
                    !render(&plain, format, &opts).contains("redacted"),
                    "{format:?}"
                );
            }
        }
        assert!(render(&redacted, Format::Json, &quiet).contains("\"redacted\": true"));
    }

    /// One cause shown once in every view: the root first with its fix, what it causes under
    /// it without their fixes, counted as one problem; `-v` names each consequence's cause.
    #[test]
    fn every_view_shows_a_cause_with_what_it_causes_under_it() {
        use crate::finding::Cause;
        let facts = crate::testing::Machine::healthy("h200-sxm-141gb", 2).build();
        let findings = vec![
            Finding::fail("gpu.present", "SYMPTOM-PRESENT 00:07.0 is not listed")
                .caused_by(Cause::device("gpu.driver-binding", "00:07.0"))
                .fix("SYMPTOM-FIX"),
            Finding::fail("gpu.driver-binding", "ROOT 00:07.0 is bound to nouveau")
                .with("pci_bus_id", "0000:00:07.0")
                .fix("ROOT-FIX"),
            Finding::fail("kernel.modules", "SYMPTOM-MODULES nouveau is loaded")
                .caused_by(Cause::check("gpu.driver-binding"))
                .fix("SYMPTOM-FIX-2"),
        ];
        let r = Report::from_findings(&facts, &Policy::default(), findings);
        let quiet = TableOptions {
            quiet: true,
            ..TableOptions::default()
        };
        for (format, opts) in [
            (Format::Table, TableOptions::default()),
            (Format::Table, quiet),
            (Format::Markdown, TableOptions::default()),
            (Format::Html, TableOptions::default()),
        ] {
            let out = render(&r, format, &opts);
            let at = |s: &str| {
                out.find(s)
                    .unwrap_or_else(|| panic!("{format:?}: no {s}: {out}"))
            };
            assert!(out.contains("1 problem (1 failed)"), "{format:?}: {out}");
            assert!(
                at("ROOT") < at("what it causes") && at("what it causes") < at("SYMPTOM-PRESENT")
            );
            assert!(at("SYMPTOM-PRESENT") < at("SYMPTOM-MODULES"), "{format:?}");
            assert!(at("ROOT-FIX") < at("what it causes"), "{format:?}");
            assert!(
                !out.contains("SYMPTOM-FIX"),
                "{format:?}: a consequence's fix shown"
            );
        }
        let verbose = render(
            &r,
            Format::Table,
            &TableOptions {
                verbose: true,
                ..TableOptions::default()
            },
        );
        assert_eq!(
            verbose
                .matches("caused by: gpu.driver-binding (above)")
                .count(),
            2,
            "{verbose}"
        );
        // -v: a problem's fix is given once, above; a note's fix under it; a skip a cause
        // explains says its own reason, not the cause.
        let mut findings = r.findings.clone();
        findings.push(Finding::info("net.fabric", "NOTE-LINE").fix("NOTE-FIX"));
        findings.push(
            Finding::skip("compute.gemm", "SKIP-LINE")
                .caused_by(Cause::check("gpu.driver-binding")),
        );
        let r = Report::from_findings(&facts, &Policy::default(), findings);
        let verbose = render(
            &r,
            Format::Table,
            &TableOptions {
                verbose: true,
                ..TableOptions::default()
            },
        );
        assert_eq!(verbose.matches("ROOT-FIX").count(), 1, "{verbose}");
        assert_eq!(verbose.matches("NOTE-FIX").count(), 1, "{verbose}");
        let after_skip = &verbose[verbose.find("SKIP-LINE").unwrap()..];
        let next = after_skip.lines().nth(1).unwrap_or("");
        assert!(!next.contains("caused by"), "{verbose}");
        // Wrapped, the cause's line hangs under its text.
        let narrow = render(
            &r,
            Format::Table,
            &TableOptions {
                verbose: true,
                width: 40,
                ..TableOptions::default()
            },
        );
        let lines: Vec<&str> = narrow.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("     caused by: "))
            .unwrap_or_else(|| panic!("{narrow}"));
        assert!(
            lines[at + 1].starts_with(&" ".repeat(16))
                && !lines[at + 1].starts_with(&" ".repeat(17)),
            "{narrow}"
        );
    }

    use super::*;
    use crate::facts::Origin;
    use crate::finding::Finding;
    use crate::policy::Policy;
    use crate::reading::Reading;

    /// Text from the machine as a hostile snapshot would have it: an OSC title change, a
    /// screen clear, C1 CSI, a lone carriage return, a line feed that starts a forged line, HTML.
    const HOSTILE: &str =
        "n\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}1A\rPASS\n  PASS  gpu.present  <script>x</script>|";

    /// Hostile text everywhere a report carries text from the machine: the hostname, a
    /// GPU's product name, a finding's message, fix and evidence, a skip's reason, a
    /// measurement's name, unit and method, the snapshot path.
    fn report() -> Report {
        let mut facts = crate::testing::Machine::healthy("h200-sxm-141gb", 2)
            .gpu(0, |g| g.name = Reading::Value(HOSTILE.into()))
            .build();
        facts.origin = Origin::Snapshot {
            path: HOSTILE.into(),
            description: None,
            collected_at: None,
        };
        facts.machine.hostname = Reading::Value(HOSTILE.into());
        let findings = vec![
            Finding::fail("os.platform", HOSTILE)
                .fix(HOSTILE)
                .with("value", HOSTILE)
                .with("source", HOSTILE),
            Finding::warn("pcie.link", format!("GPU 0 (00:06.0) {HOSTILE}"))
                .gpu(0)
                .fix(format!("`{HOSTILE}`")),
            Finding::warn("pcie.link", format!("GPU 1 (00:07.0) {HOSTILE}"))
                .gpu(1)
                .fix(format!("`{HOSTILE}`")),
            Finding::info("net.fabric", HOSTILE),
            Finding::skip("cuda.env", HOSTILE),
            // What a cause explains is shown under it: escaped there too.
            Finding::warn("cuda.driver", HOSTILE)
                .caused_by(crate::finding::Cause::check("os.platform")),
        ];
        let mut r = Report::from_findings(&facts, &Policy::default(), findings);
        r.measurements.push(crate::facts::Measurement {
            name: HOSTILE.into(),
            gpu: Some(0),
            peer: Some(1),
            value: 1.0,
            unit: HOSTILE.into(),
            expected: Some(2.0),
            ratio: Some(0.5),
            method: HOSTILE.into(),
            size_bytes: None,
            dtype: Some(HOSTILE.into()),
            attainable: None,
            path: None,
        });
        r
    }

    fn raw_controls(s: &str) -> Vec<char> {
        s.chars()
            .filter(|&c| (c < ' ' && c != '\n' && c != '\t') || ('\u{7f}'..='\u{9f}').contains(&c))
            .collect()
    }

    #[test]
    fn every_format_keeps_hostile_text_as_text() {
        let r = report();
        let table = render(&r, Format::Table, &TableOptions::default());
        assert_eq!(raw_controls(&table), Vec::<char>::new(), "{table}");
        // The hostile line feed did not start a line of its own.
        assert!(!table.lines().any(|l| l.starts_with("  PASS")), "{table}");
        let md = render(&r, Format::Markdown, &TableOptions::default());
        assert_eq!(raw_controls(&md), Vec::<char>::new(), "{md}");
        assert!(
            !md.contains("<script>") && md.contains("&lt;script&gt;"),
            "{md}"
        );
        assert!(!md.lines().any(|l| l.starts_with("  PASS")), "{md}");
        // Colour codes are gpuaudit's own: still there when asked for, around escaped text.
        let coloured = render(
            &r,
            Format::Table,
            &TableOptions {
                color: true,
                ..TableOptions::default()
            },
        );
        assert!(coloured.contains("\u{1b}[") && coloured.contains("\\x1b]0;owned"));
        // HTML: every text as text; no element, attribute or entity from the machine.
        let html = render(&r, Format::Html, &TableOptions::default());
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"), "{html}");
        assert!(!html.contains("<x>") && !html.contains("onerror"), "{html}");
        assert_eq!(raw_controls(&html), Vec::<char>::new());
        assert!(html.contains("\\x1b]0;owned"), "{html}");
        // None of the machine's text turned into markup: one <title>, one <body>.
        assert_eq!(html.matches("<title>").count(), 1);
        assert_eq!(html.matches("<body>").count(), 1);
        // The grouped finding (one cause on two GPUs) and its fix in a code span stay text.
        let md = render(&r, Format::Markdown, &TableOptions::default());
        assert!(md.contains("GPUs 0, 1"), "{md}");
        assert!(!md.contains("<script>"), "{md}");
        // JSON keeps the text exactly (serde escapes it).
        let json = render(&r, Format::Json, &TableOptions::default());
        let back: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["machine"]["hostname"], HOSTILE);
    }
}
