//! The report's charts: what of the report each chart shows, and why one is not drawn.

use super::parts::figure;
use crate::facts::Measurement;
use crate::facts::ThrottleReason;
use crate::figures as catalog;
use crate::finding::Status;
use crate::render::charts::{self, gpu_color, Bar, Event, Line, Panel, Reference};
use crate::render::overview::{figures, percent};
use crate::report::Report;

/// Every chart of the report, or for each the sentence why it is not drawn; one sentence
/// for all where nothing was measured.
pub fn section(report: &Report) -> String {
    let nothing_measured = report.measurements.is_empty() && report.series.is_empty();
    if nothing_measured || report.gpus.is_empty() {
        return format!("<p class=chart-omitted>{}</p>\n", no_charts(report));
    }
    let mut o = String::new();
    o.push_str(&ratio_chart(report));
    o.push_str(&host_copy_charts(report));
    o.push_str(&p2p_chart(report));
    o.push_str(&burn_chart(report));
    o
}

/// Why the page has no chart at all, and what would draw them. Only a snapshot audit is
/// told to run gpuaudit on the machine itself: a live audit ran there (issue 23: a machine
/// without a GPU was told to).
fn no_charts(report: &Report) -> String {
    use super::parts::esc;
    let why = report.audit.measurements_not_run.as_deref();
    if report.audit.snapshot.is_some() {
        return format!(
            "No charts: nothing was measured ({}). Run gpuaudit on the machine itself for the \
             quick measurements, with <code>--full</code> for every chart.",
            esc(why.unwrap_or("a snapshot audit"))
        );
    }
    if report.gpus.is_empty() {
        return "No charts: there is no GPU on this machine to measure (the checks below say \
                what the driver and the PCI bus show)."
            .into();
    }
    match why {
        Some(why) if why.contains("facts-only") => format!(
            "No charts: nothing was measured ({}). gpuaudit without <code>--facts-only</code> \
             takes the quick measurements, with <code>--full</code> every chart.",
            esc(why)
        ),
        Some(why) => format!("No charts: nothing was measured ({}).", esc(why)),
        None => "No charts: no measurement gave a figure.".into(),
    }
}

/// Why the figures of `check` are missing: its skip message where it was skipped.
fn skipped_because(report: &Report, check: &str, otherwise: &str) -> String {
    report
        .findings
        .iter()
        .find(|f| f.check == check && f.status == Status::Skip)
        .map(|f| f.message.clone())
        .unwrap_or_else(|| otherwise.to_string())
}

/// The verdict of the check that judges `m`'s figure about its GPU (else about the machine):
/// the worst of its findings there, a skip aside.
fn verdict_of(report: &Report, m: &Measurement) -> Option<Status> {
    let check = catalog::Figure::of(m)?.group().check();
    report
        .findings
        .iter()
        .filter(|f| f.check == check && f.status != Status::Skip)
        .filter(|f| f.gpu.is_none() || m.gpu.is_none() || f.gpu == m.gpu)
        .map(|f| f.status)
        .max()
}

fn ratio_chart(report: &Report) -> String {
    let bars: Vec<Bar> = figures(report)
        .iter()
        .filter_map(|f| {
            let (r, m) = f.lowest()?;
            let at = f.lowest_where();
            // What healthy GPUs reach, on the datasheet's scale (attainable / expected).
            let attainable = m
                .attainable
                .zip(m.expected)
                .filter(|(_, e)| *e > 0.0)
                .map(|(a, e)| a / e);
            Some(Bar {
                label: f.label.clone(),
                ratio: r,
                note: if at.is_empty() {
                    percent(r)
                } else {
                    format!("{} (lowest: {at})", percent(r))
                },
                attainable,
                status: verdict_of(report, m),
            })
        })
        .collect();
    figure(
        "chart-ratios",
        "Measured against the datasheet",
        charts::ratio_bars(&bars),
        &[],
        "Each bar is the lowest GPU's figure divided by what the datasheet (or the PCIe or \
         NVLink link) promises; the dashed line is 100%, the solid tick on a bar what healthy \
         GPUs of the model reach (data/attainable.toml), and the bar's colour the verdict of \
         the check that judges it (green pass, orange warn, red fail, blue not judged). A \
         healthy GPU measures somewhat below its datasheet peak: `gpuaudit explain CHECK` \
         gives the fraction each check expects.",
    )
}

fn host_copy_charts(report: &Report) -> String {
    let curves = &report.series.host_copy;
    if curves.is_empty() {
        return figure(
            "chart-host-copy",
            "Host↔GPU copy bandwidth by size",
            Err(skipped_because(
                report,
                "pcie.bandwidth",
                "host copies were not measured",
            )),
            &[],
            "",
        );
    }
    let mut gpus: Vec<u32> = curves.iter().map(|c| c.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut o = String::new();
    for (dir, title) in [
        ("h2d", "Host→GPU copy bandwidth by size"),
        ("d2h", "GPU→host copy bandwidth by size"),
    ] {
        let mut lines = Vec::new();
        let mut legend: Vec<(String, String)> = Vec::new();
        for c in curves.iter().filter(|c| c.direction == dir) {
            let i = gpus.iter().position(|g| *g == c.gpu).unwrap_or(0);
            let color = gpu_color(i).to_string();
            let pinned = c.host_memory == "pinned";
            let name = format!("GPU {} {}", c.gpu, c.host_memory);
            let gpu = format!("GPU {}", c.gpu);
            if !legend.iter().any(|(n, _)| *n == gpu) {
                legend.push((gpu, color.clone()));
            }
            lines.push(Line {
                name,
                color,
                points: c
                    .points
                    .iter()
                    .map(|p| (p.size_bytes as f64, p.gbps))
                    .collect(),
                faint: !pinned,
            });
        }
        if lines.is_empty() {
            continue;
        }
        o.push_str(&figure(
            &format!("chart-host-copy-{dir}"),
            title,
            charts::by_size(&lines, "GB/s"),
            &legend,
            "Thick: pinned host memory, which should reach the link's rate at large sizes; thin: \
             pageable memory, which goes through the driver's staging buffers and stays below. \
             GPUs that measure alike lie on top of each other.",
        ));
    }
    o
}

fn p2p_chart(report: &Report) -> String {
    let cells: Vec<&crate::facts::Measurement> = report
        .measurements
        .iter()
        .filter(|m| {
            catalog::Figure::of(m) == Some(catalog::Figure::P2p(catalog::P2pFigure::Bandwidth))
                && m.gpu.is_some()
                && m.peer.is_some()
        })
        .collect();
    if cells.is_empty() {
        let why = if report.gpus.len() < 2 {
            "the machine has fewer than two GPUs".to_string()
        } else {
            skipped_because(
                report,
                "p2p.bandwidth",
                "GPU-to-GPU copies were not measured",
            )
        };
        return figure("chart-p2p", "GPU→GPU bandwidth (P2P)", Err(why), &[], "");
    }
    let mut gpus: Vec<u32> = cells
        .iter()
        .flat_map(|m| [m.gpu.unwrap_or(0), m.peer.unwrap_or(0)])
        .collect();
    gpus.sort_unstable();
    gpus.dedup();
    // Shade by the ratio to the link's rate where every pair has one, else by the value
    // against the best pair.
    let by_ratio = cells.iter().all(|m| m.ratio.is_some());
    let max = cells.iter().map(|m| m.value).fold(0.0f64, f64::max);
    let data: Vec<(u32, u32, f64, f64)> = cells
        .iter()
        .map(|m| {
            let shade = if by_ratio {
                m.ratio.unwrap_or(0.0)
            } else if max > 0.0 {
                m.value / max
            } else {
                0.0
            };
            (m.gpu.unwrap_or(0), m.peer.unwrap_or(0), m.value, shade)
        })
        .collect();
    let note = if by_ratio {
        "GB/s of one-direction copies from the row's GPU to the column's; the darker, the \
         closer to the link's rate."
    } else {
        "GB/s of one-direction copies from the row's GPU to the column's; the darker, the \
         closer to the best pair."
    };
    figure(
        "chart-p2p",
        "GPU→GPU bandwidth (P2P)",
        charts::heat_map(&gpus, &data),
        &[],
        note,
    )
}

/// What kind of clock event a reason is, for the timeline's strip: its name and colour.
/// Idle, sync boost and display clocks are not events of a loaded GPU.
fn event_kind(r: ThrottleReason) -> Option<(&'static str, &'static str)> {
    use ThrottleReason::*;
    match r {
        HwSlowdown | HwThermalSlowdown | HwPowerBrakeSlowdown => {
            Some(("hardware slowdown (a fault)", "#cf222e"))
        }
        // Pale, so that they do not read as a GPU's line colour.
        SwThermalSlowdown => Some(("thermal slowdown", "#f5b971")),
        SwPowerCap => Some(("at the power limit", "#b6c8dc")),
        ApplicationsClocksSetting => Some(("application clocks set low", "#c9b3e6")),
        GpuIdle | SyncBoost | DisplayClocksSetting => None,
    }
}

fn burn_chart(report: &Report) -> String {
    let burn = &report.series.burn;
    const CAPTION: &str = "The burn: clock, power, temperature, TFLOPS and clock events";
    if burn.is_empty() {
        return figure(
            "chart-burn",
            CAPTION,
            Err(skipped_because(report, "stability.burn", "no burn ran")),
            &[],
            "",
        );
    }
    let seconds = burn.iter().map(|b| b.seconds).fold(0.0f64, f64::max);
    let color = |i: usize| gpu_color(i).to_string();
    let line = |i: usize, gpu: u32, points: Vec<(f64, f64)>| Line {
        name: format!("GPU {gpu}"),
        color: color(i),
        points,
        faint: false,
    };
    let sample_line = |f: &dyn Fn(&crate::facts::TelemetrySample) -> Option<f64>| -> Vec<Line> {
        burn.iter()
            .enumerate()
            .map(|(i, b)| {
                line(
                    i,
                    b.gpu,
                    b.samples
                        .iter()
                        .filter_map(|s| f(s).map(|v| (s.t_ms as f64 / 1000.0, v)))
                        .collect(),
                )
            })
            .collect()
    };
    let gpus: Vec<u32> = burn.iter().map(|b| b.gpu).collect();
    let figure_of = |gpu: u32, f: catalog::BurnFigure| {
        report.measurements.iter().find(|m| {
            m.gpu == Some(gpu) && catalog::Figure::of(m) == Some(catalog::Figure::Burn(f))
        })
    };
    let gpu_facts = |gpu: u32| report.gpus.iter().find(|g| g.index == gpu);
    // The boost clock: the datasheet's (what the burn's clock is held against), else the
    // clock the driver says the GPU reaches.
    let boost = references(&gpus, "boost clock", "MHz", |g| {
        figure_of(g, catalog::BurnFigure::SmClock)
            .and_then(|m| m.expected)
            .or_else(|| gpu_facts(g).and_then(|f| f.sm_clock_max_mhz).map(f64::from))
    });
    let limit = references(&gpus, "power limit", "W", |g| {
        gpu_facts(g).and_then(|f| f.power.limit_w)
    });
    // TFLOPS: the datasheet's dense peak of the burn's dtype, and where the report has it
    // what a healthy GPU's GEMM of that dtype reaches (a short run's: a burn held at the
    // power limit for a minute reads below it, which the note says).
    let burn_tflops = |g: u32| figure_of(g, catalog::BurnFigure::Tflops);
    let mut tflops = references(&gpus, "datasheet peak", "TFLOPS", |g| {
        burn_tflops(g).and_then(|m| m.expected)
    });
    let healthy = references(&gpus, "healthy GPU's GEMM", "TFLOPS", |g| {
        let dtype = burn_tflops(g)?.dtype.clone()?;
        report
            .measurements
            .iter()
            .filter(|m| m.gpu == Some(g) && m.dtype.as_deref() == Some(dtype.as_str()))
            .filter(|m| {
                catalog::Figure::of(m) == Some(catalog::Figure::Gemm(catalog::GemmFigure::Tflops))
            })
            .find_map(|m| m.attainable)
    });
    let attainable_drawn = !healthy.is_empty();
    tflops.extend(healthy);
    let mut panels = vec![
        Panel {
            y_label: "SM clock (MHz)".into(),
            lines: sample_line(&|s| s.sm_clock_mhz.map(f64::from)),
            references: boost,
        },
        Panel {
            y_label: "power (W)".into(),
            lines: sample_line(&|s| s.power_w),
            references: limit,
        },
        Panel {
            y_label: "temperature (°C)".into(),
            lines: sample_line(&|s| s.temperature_c.map(f64::from)),
            references: Vec::new(),
        },
        Panel {
            y_label: "TFLOPS".into(),
            references: tflops,
            lines: burn
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let step = if b.tflops.is_empty() {
                        1.0
                    } else {
                        b.seconds / b.tflops.len() as f64
                    };
                    line(
                        i,
                        b.gpu,
                        b.tflops
                            .iter()
                            .enumerate()
                            .map(|(k, v)| ((k as f64 + 0.5) * step, *v))
                            .collect(),
                    )
                })
                .collect(),
        },
    ];
    panels.retain(|p| p.lines.iter().any(|l| !l.points.is_empty()));
    let rows: Vec<u32> = burn.iter().map(|b| b.gpu).collect();
    let mut events = Vec::new();
    let mut kinds_seen: Vec<(String, String)> = Vec::new();
    for b in burn {
        let step = b.interval_ms.unwrap_or(200) as f64 / 1000.0;
        for s in &b.samples {
            for r in &s.throttle {
                let Some((name, c)) = event_kind(*r) else {
                    continue;
                };
                let t = s.t_ms as f64 / 1000.0;
                // A reason held from one sample to the next is one span.
                match events.iter_mut().rev().find(|e: &&mut Event| {
                    e.row == b.gpu && e.color == c && (t - e.to_s) <= step * 1.5
                }) {
                    Some(e) => e.to_s = t + step,
                    None => events.push(Event {
                        row: b.gpu,
                        from_s: t,
                        to_s: t + step,
                        color: c.into(),
                    }),
                }
                if !kinds_seen.iter().any(|(n, _)| n == name) {
                    kinds_seen.push((name.into(), c.into()));
                }
            }
        }
    }
    let mut legend: Vec<(String, String)> = burn
        .iter()
        .enumerate()
        .map(|(i, b)| (format!("GPU {}", b.gpu), color(i)))
        .collect();
    legend.extend(
        kinds_seen
            .iter()
            .map(|(n, c)| (format!("event: {n}"), c.clone())),
    );
    let missing: Vec<String> = burn
        .iter()
        .filter_map(|b| {
            b.samples_unavailable
                .as_ref()
                .map(|r| format!("GPU {}: no NVML samples ({r})", b.gpu))
        })
        .collect();
    let mut note = String::from(
        "Lines: one per GPU (GPUs that run alike lie on top of each other); each axis starts \
         at 0. Dashed: the boost clock, the power limit and the datasheet's peak TFLOPS. The \
         strip at the bottom marks, per GPU, when NVML reported a clock-event reason: at the \
         power limit is how a GPU under full load runs; hardware slowdown is a fault.",
    );
    if attainable_drawn {
        note.push_str(
            " The healthy GPU's GEMM line is what a short GEMM of the burn's type reaches on a \
             healthy GPU of the model; a minute at the power limit runs somewhat below it.",
        );
    }
    if kinds_seen.is_empty() && burn.iter().any(|b| !b.samples.is_empty()) {
        note.push_str(" No clock event was reported during the burn.");
    }
    for m in missing {
        note.push(' ');
        note.push_str(&m);
        note.push('.');
    }
    figure(
        "chart-burn",
        CAPTION,
        charts::timeline(seconds, &panels, &rows, &events),
        &legend,
        &note,
    )
}

/// A panel's reference lines from a value per GPU: one per distinct value, "power limit
/// 700 W", with the GPUs it is of where they do not all share it ("power limit 650 W
/// (GPU 3)"); none where no GPU has a value.
fn references(
    gpus: &[u32],
    what: &str,
    unit: &str,
    value: impl Fn(u32) -> Option<f64>,
) -> Vec<Reference> {
    let mut levels: Vec<(f64, Vec<u32>)> = Vec::new();
    for g in gpus {
        let Some(v) = value(*g).filter(|v| charts::drawable(*v) && *v > 0.0) else {
            continue;
        };
        match levels
            .iter_mut()
            .find(|(l, _)| (l - v).abs() <= v.abs() * 1e-9)
        {
            Some((_, of)) => of.push(*g),
            None => levels.push((v, vec![*g])),
        }
    }
    let all = levels.len() == 1 && levels[0].1.len() == gpus.len();
    levels
        .into_iter()
        .map(|(v, of)| {
            let mut label = format!("{what} {} {unit}", crate::render::fmt_value(v));
            if !all {
                let names: Vec<String> = of.iter().map(|g| g.to_string()).collect();
                let s = if of.len() == 1 { "" } else { "s" };
                label.push_str(&format!(" (GPU{s} {})", names.join(", ")));
            }
            Reference { label, value: v }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::testing::{measured::full_run, Machine};

    fn report(n: u32, measured: bool) -> Report {
        let mut m = Machine::healthy("h200-sxm-141gb", n);
        if measured {
            m = m.measured(|m| full_run(m, n));
        }
        Report::build(&m.build(), &Policy::default())
    }

    /// Only a snapshot audit is told to run gpuaudit on the machine itself (issue 23: a live
    /// audit of a machine without a GPU was told so).
    #[test]
    fn a_page_without_charts_says_why_in_its_own_words() {
        let mut snapshot = report(2, false);
        snapshot.audit.snapshot = Some("fixtures/snapshots/x".into());
        snapshot.audit.measurements_not_run = Some("snapshot audit: nothing is measured".into());
        assert!(section(&snapshot).contains("Run gpuaudit on the machine itself"));
        let mut no_gpu = report(0, false);
        no_gpu.audit.snapshot = None;
        let s = section(&no_gpu);
        assert!(s.contains("there is no GPU on this machine"), "{s}");
        assert!(!s.contains("machine itself"), "{s}");
        // Live with a measurement that is not a GPU's (the loopback): still one sentence.
        no_gpu.measurements = report(1, true).measurements;
        no_gpu.measurements.retain(|m| m.gpu.is_none());
        assert!(section(&no_gpu).contains("there is no GPU on this machine"));
        let mut facts_only = report(2, false);
        facts_only.audit.snapshot = None;
        facts_only.measurements.clear();
        facts_only.audit.measurements_not_run = Some("facts-only audit".into());
        let s = section(&facts_only);
        assert!(s.contains("without <code>--facts-only</code>"), "{s}");
        assert!(!s.contains("machine itself"), "{s}");
    }

    /// The burn's panels carry the boost clock, the power limit and the datasheet's TFLOPS.
    #[test]
    fn the_burn_chart_marks_the_boost_clock_power_limit_and_peak() {
        let r = report(2, true);
        let s = burn_chart(&r);
        assert!(s.contains("boost clock 1980 MHz"), "{s}");
        assert!(s.contains("power limit 700 W"), "{s}");
        assert!(
            s.contains("datasheet peak 989.5 TFLOPS") || s.contains("datasheet peak 990 TFLOPS"),
            "{s}"
        );
        // Labels name the GPUs only where they differ.
        let levels = references(&[0, 1, 2], "power limit", "W", |g| match g {
            1 => Some(650.0),
            _ => Some(700.0),
        });
        let labels: Vec<&str> = levels.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["power limit 700 W (GPUs 0, 2)", "power limit 650 W (GPU 1)"]
        );
        let none = references(&[0], "boost clock", "MHz", |_| Some(f64::NAN));
        assert!(none.is_empty());
    }
}
