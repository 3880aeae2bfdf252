//! The HTML report in a real browser: headless Chromium loads the page of several fixtures
//! and of measured reports, the page loads without a console error, every chart is there
//! with its drawing, nothing from the machine became markup, and a screenshot is taken
//! (under the test's target directory; the path is printed). Reports are printed to PDF on A4
//! and Letter and read back with pdftotext (target/tmp/html-print/).
//!
//! Where no Chromium (or, for the printed pages, no pdftotext) is installed the tests say
//! SKIPPED on stderr and pass, unless `GPUAUDIT_REQUIRE_BROWSER=1` (CI sets it after
//! installing Debian's `chromium` and `poppler-utils`). Other binaries:
//! `GPUAUDIT_CHROMIUM=/path/to/chrome`, `GPUAUDIT_PDFTOTEXT=/path/to/pdftotext`.

mod common;
use common::*;
use gpuaudit_core::facts::{MeasuredFacts, ThrottleReason};
use gpuaudit_core::render::{self, Format, TableOptions};
use gpuaudit_core::Reading;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUAUDIT_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome", "chrome"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

/// Runs the browser on `page` with `args`, killed after a minute: (stdout, stderr).
fn browse(browser: &Path, profile: &Path, page: &Path, args: &[String]) -> (String, String) {
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", browser.display()));
    let deadline = Instant::now() + Duration::from_secs(60);
    // Read both pipes on threads so a chatty browser cannot block on a full pipe.
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let o = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut out, &mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} on {} took over a minute",
                    browser.display(),
                    page.display()
                );
            }
        }
    }
    (o.join().unwrap_or_default(), e.join().unwrap_or_default())
}

/// Console errors and uncaught exceptions in the browser's log.
fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("Uncaught") || l.contains(":CONSOLE") || l.contains("Refused to"))
        .collect()
}

/// Each `<figure class="chart" id=…>` of the DOM with its SVG's drawing elements counted.
fn charts_in(dom: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut rest = dom;
    while let Some(i) = rest.find("<figure class=\"chart\"") {
        rest = &rest[i..];
        let end = rest.find("</figure>").unwrap_or(rest.len());
        let fig = &rest[..end];
        let id = fig
            .split("id=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or("?")
            .to_string();
        let drawn = match (fig.find("<svg"), fig.find("</svg>")) {
            (Some(a), Some(b)) if a < b => {
                let svg = &fig[a..b];
                ["<rect", "<polyline", "<path", "<line", "<circle", "<text"]
                    .iter()
                    .map(|t| svg.matches(t).count())
                    .sum()
            }
            _ => 0,
        };
        out.push((id, drawn));
        rest = &rest[end..];
    }
    out
}

struct Page {
    name: &'static str,
    html: String,
    /// The charts it must show.
    charts: &'static [&'static str],
    /// The charts it must leave out, each with its sentence why.
    omitted: &'static [&'static str],
}

fn report_html(r: &gpuaudit_core::Report) -> String {
    render::render(r, Format::Html, &TableOptions::default())
}

fn pages() -> Vec<Page> {
    let fixture = |name: &'static str| {
        let (code, html) = render(name, "html", &[]);
        assert!(code == 0 || code == 1, "{name}: exit {code}");
        html
    };
    let mut hot = measured_report(8, |m: &mut MeasuredFacts| {
        // One GPU of eight runs hot: hardware thermal slowdown from 35 s on.
        if let Reading::Value(b) = &mut m.burn {
            if let Some(Reading::Value(g)) = b.per_gpu.get_mut(5).map(|g| &mut g.result) {
                if let Reading::Value(t) = &mut g.telemetry {
                    t.series = gpuaudit_core::testing::measured::burn_series(60, Some(35));
                    t.throttle.push(gpuaudit_core::facts::ThrottleSeen {
                        reason: ThrottleReason::HwThermalSlowdown,
                        samples: 125,
                    });
                }
            }
        }
    });
    // Text from the machine as a hostile snapshot would have it.
    hot.machine.hostname = Some("<script>alert(1)</script>".into());
    if let Some(g) = hot.gpus.get_mut(0) {
        g.name = Some("<img src=x onerror=alert(1)>".into());
    }
    const ALL: &[&str] = &[
        "chart-ratios",
        "chart-host-copy-h2d",
        "chart-host-copy-d2h",
        "chart-p2p",
        "chart-burn",
    ];
    // Two measured machines and a snapshot side by side, a hostile hostname among them.
    let compare_inputs: Vec<gpuaudit_core::compare::Input> = [
        ("a", measured_report(2, |_| {})),
        ("b", hot.clone()),
        ("c", {
            let (_, r) = common::audit("h200-x2-x8-link", &[]);
            serde_json::from_value(r).expect("a report")
        }),
    ]
    .into_iter()
    .map(|(stem, report)| gpuaudit_core::compare::Input {
        file: format!("{stem}.json"),
        stem: stem.into(),
        report,
    })
    .collect();
    let comparison = gpuaudit_core::compare::Comparison::build(&compare_inputs, &[])
        .expect("names for every column");
    vec![
        Page {
            name: "compare-3",
            html: gpuaudit_core::compare::html(&comparison),
            charts: &[
                "chart-pcie_link",
                "chart-h2d_pinned_bandwidth",
                "chart-d2h_pinned_bandwidth",
            ],
            // The two measured machines have the same value (the snapshot none): bars of
            // one length would look like a difference (issue 23).
            omitted: &[
                "chart-power_limit",
                "chart-context_create_ms",
                "chart-memory_copy_bandwidth",
                "chart-gemm_tflops_bf16",
                "chart-allreduce_busbw",
            ],
        },
        Page {
            name: "x8-link",
            html: fixture("h200-x2-x8-link"),
            charts: &[],
            omitted: &[],
        },
        Page {
            name: "x8-fabric-down",
            html: fixture("h200-x8-nvswitch-fabric-down"),
            charts: &[],
            omitted: &[],
        },
        Page {
            name: "snapshot-healthy",
            html: fixture("h200-x2-vm"),
            charts: &[],
            omitted: &[],
        },
        Page {
            name: "measured-2",
            html: report_html(&measured_report(2, |_| {})),
            charts: ALL,
            omitted: &[],
        },
        Page {
            name: "measured-8-hot-hostile",
            html: report_html(&hot),
            charts: ALL,
            omitted: &[],
        },
    ]
}

#[test]
fn html_reports_load_and_draw_in_a_real_browser() {
    let Some(browser) = chromium() else {
        let required = std::env::var("GPUAUDIT_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "GPUAUDIT_REQUIRE_BROWSER=1 but no chromium on PATH (or GPUAUDIT_CHROMIUM)"
        );
        eprintln!(
            "\n*** SKIPPED: html_reports_load_and_draw_in_a_real_browser: no chromium on PATH \
             (apt-get install --no-install-recommends chromium; CI installs it) ***\n"
        );
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-views");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the output directory");
    let profile = tempfile::tempdir().expect("a browser profile directory");
    for p in pages() {
        let file = dir.join(format!("{}.html", p.name));
        std::fs::write(&file, &p.html).expect("the page is written");
        let (dom, log) = browse(&browser, profile.path(), &file, &["--dump-dom".into()]);
        assert!(
            dom.contains("<main>") && dom.contains("</main>"),
            "{}: the browser gave no page: {log}",
            p.name
        );
        let errors = console_errors(&log);
        assert!(errors.is_empty(), "{}: console errors: {errors:#?}", p.name);
        // Nothing from the machine became an element.
        assert!(
            !dom.contains("<script") && !dom.contains("<img"),
            "{}: markup from the machine in the DOM",
            p.name
        );
        let charts = charts_in(&dom);
        for (id, drawn) in &charts {
            assert!(
                *drawn >= 5,
                "{}: chart {id} is empty ({drawn} elements)",
                p.name
            );
        }
        let ids: Vec<&str> = charts.iter().map(|(i, _)| i.as_str()).collect();
        for want in p.charts {
            assert!(
                ids.contains(want),
                "{}: no chart {want} (has {ids:?})",
                p.name
            );
        }
        for left_out in p.omitted {
            assert!(
                !ids.contains(left_out)
                    && dom.contains(&format!("data-chart=\"{left_out}\""))
                    && dom.contains("every machine with a value has the same one"),
                "{}: {left_out} is drawn, or left out without a sentence",
                p.name
            );
        }
        if p.charts.is_empty() && !p.name.starts_with("compare") {
            assert!(ids.is_empty(), "{}: charts without measurements", p.name);
            assert!(
                dom.contains("No charts: nothing was measured"),
                "{}",
                p.name
            );
        }
        let shot = dir.join(format!("{}.png", p.name));
        let (_, log) = browse(
            &browser,
            profile.path(),
            &file,
            &[
                format!("--screenshot={}", shot.display()),
                "--window-size=1280,2400".into(),
            ],
        );
        let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
        assert!(
            size > 10_000,
            "{}: no screenshot ({size} bytes): {log}",
            p.name
        );
        eprintln!("screenshot: {}", shot.display());
    }
}

/// `pdftotext` (poppler-utils), on PATH or `GPUAUDIT_PDFTOTEXT`.
fn pdftotext() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPUAUDIT_PDFTOTEXT") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("pdftotext"))
        .find(|p| p.is_file())
}

/// The pages a person prints: the redacted 1×H200 report of fixtures/reports (through
/// `gpuaudit report`) and a measured 8-GPU machine.
fn printed_pages() -> Vec<(&'static str, String, gpuaudit_core::Report)> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/reports/h200-x1-vm-full.json");
    let text = std::fs::read_to_string(&file).expect("the fixture report");
    let saved: gpuaudit_core::Report = serde_json::from_str(&text).expect("a report");
    let out = gpuaudit()
        .arg("report")
        .arg(&file)
        .args(["--format", "html"])
        .output()
        .expect("gpuaudit report runs");
    assert!(out.status.success(), "gpuaudit report: {out:?}");
    let mut eight = measured_report(8, |_| {});
    // Identifiers as long as real ones get: a 36-character UUID, a bus id with its 8-digit
    // domain, a power limit set below its default (the widest cell of its column).
    for g in &mut eight.gpus {
        g.uuid = Some(format!(
            "GPU-{:08x}-5e1f-4c1a-9d2e-{:012x}",
            g.index,
            0x7f3a_u64 + u64::from(g.index)
        ));
        g.pci_bus_id = format!("00000000:{:02x}:00.0", 0x18 + g.index * 0x10);
        g.power.limit_w = Some(650.0);
    }
    vec![
        (
            "h200-x1-vm-full",
            String::from_utf8_lossy(&out.stdout).into_owned(),
            saved,
        ),
        ("measured-8", report_html(&eight), eight),
    ]
}

/// Printed to PDF by Chromium on A4 and on Letter (the page's own `@page` margins; the
/// size as a print dialog sets it) and read back with pdftotext (issue 23: the GPU table ran
/// off the page and the UUID was cut to "U", the folded tables stayed folded): every GPU's
/// bus id, serial and UUID whole on one line, the folded tables printed open, and the
/// measured figures, the other checks and the machine each from the top of a page.
#[test]
fn printed_reports_fit_the_page_and_show_everything() {
    let (Some(browser), Some(pdftotext)) = (chromium(), pdftotext()) else {
        let required = std::env::var("GPUAUDIT_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "GPUAUDIT_REQUIRE_BROWSER=1 but no chromium (or GPUAUDIT_CHROMIUM) or no pdftotext \
             (poppler-utils; or GPUAUDIT_PDFTOTEXT) on PATH"
        );
        eprintln!(
            "\n*** SKIPPED: printed_reports_fit_the_page_and_show_everything: no chromium or no \
             pdftotext on PATH (apt-get install --no-install-recommends chromium \
             poppler-utils; CI installs them) ***\n"
        );
        return;
    };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("html-print");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the output directory");
    let profile = tempfile::tempdir().expect("a browser profile directory");
    for (name, html, report) in printed_pages() {
        // pdfinfo names the size it finds: "Page size: 594.96 x 841.92 pts (A4)".
        for (paper, named) in [("A4", "(A4)"), ("Letter", "(letter)")] {
            let file = dir.join(format!("{name}-{paper}.html"));
            let sized = html.replacen(
                "</head>",
                &format!("<style>@page{{size:{paper}}}</style></head>"),
                1,
            );
            std::fs::write(&file, sized).expect("the page is written");
            let pdf = dir.join(format!("{name}-{paper}.pdf"));
            let (_, log) = browse(
                &browser,
                profile.path(),
                &file,
                &[
                    format!("--print-to-pdf={}", pdf.display()),
                    "--no-pdf-header-footer".into(),
                ],
            );
            assert!(pdf.is_file(), "{name} {paper}: no PDF: {log}");
            let out = Command::new(&pdftotext)
                .args(["-layout"])
                .arg(&pdf)
                .arg("-")
                .output()
                .expect("pdftotext runs");
            assert!(out.status.success(), "pdftotext {}: {out:?}", pdf.display());
            let text = String::from_utf8_lossy(&out.stdout);
            let at = format!("{name} on {paper} ({})", pdf.display());
            // The paper asked for (pdfinfo comes with pdftotext in poppler-utils).
            if let Ok(info) = Command::new(pdftotext.with_file_name("pdfinfo"))
                .arg(&pdf)
                .output()
            {
                let info = String::from_utf8_lossy(&info.stdout);
                assert!(info.contains(named), "{at}: not {paper}: {info}");
            }
            let lines: Vec<&str> = text.lines().collect();
            assert!(!report.gpus.is_empty(), "{name}: no GPUs");
            for g in &report.gpus {
                let mut ids = vec![g.pci_bus_id.clone(), g.uuid.clone().unwrap_or_default()];
                ids.extend(g.serial.clone());
                for id in ids.iter().filter(|i| !i.is_empty()) {
                    assert!(
                        lines.iter().any(|l| l.contains(id.as_str())),
                        "{at}: GPU {}'s {id} is not on the paper whole:\n{text}",
                        g.index
                    );
                }
            }
            // Folded on screen, open on paper: every measurement with its method, each check.
            assert!(
                lines
                    .iter()
                    .any(|l| l.contains("peer") && l.contains("method")),
                "{at}: the table of every measurement is not printed:\n{text}"
            );
            assert!(
                text.contains("gpu.present"),
                "{at}: the table of each check is not printed:\n{text}"
            );
            // These sections each begin a page (pdftotext ends a page with a form feed).
            for heading in ["Measured", "Everything else checked", "The machine"] {
                let starts = text.split('\u{c}').any(|page| {
                    page.lines().map(str::trim).find(|l| !l.is_empty()) == Some(heading)
                });
                assert!(starts, "{at}: {heading:?} does not begin a page:\n{text}");
            }
            eprintln!("printed: {}", pdf.display());
        }
    }
}
