//! Builders for the comparison's unit tests, and the tests of the rows and views.

use super::*;
use crate::facts::{LoopbackRtt, MeasuredFacts};
use crate::finding::Status;
use crate::fleet::stats::Better;
use crate::testing::{measured, Machine};
use crate::{Policy, Reading};

pub(crate) fn input(stem: &str, report: Report) -> Input {
    Input {
        file: format!("{stem}.json"),
        stem: stem.into(),
        report,
    }
}

/// A facts-only report of a healthy 2×H200 (nothing measured).
pub(crate) fn snapshot_report() -> Report {
    let f = Machine::healthy("h200-sxm-141gb", 2).build();
    let mut r = Report::build(&f, &Policy::default());
    r.audit.measurements_not_run = Some("snapshot audit: nothing is measured".into());
    r
}

/// A measured 2×H200 named `host`, after `change`.
pub(crate) fn measured_report(host: &str, change: impl FnOnce(&mut MeasuredFacts)) -> Report {
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| {
            f.machine.hostname = Reading::Value(host.into());
            f.host.loopback = Reading::Value(LoopbackRtt {
                round_trips: 1000,
                median_us: 20.0,
                p99_us: 25.0,
                max_us: 40.0,
                method: "test".into(),
            });
        })
        .measured(|m| {
            measured::full_run(m, 2);
            change(m);
        })
        .build();
    Report::build(
        &f,
        &Policy {
            full: true,
            ..Policy::default()
        },
    )
}

/// Device memory copies at `copy` GB/s on GPU 1 (GPU 0 1% faster).
pub(crate) fn copy_at(m: &mut MeasuredFacts, copy: f64) {
    if let Reading::Value(mem) = &mut m.memory {
        for (g, k) in [(0usize, 1.01), (1, 1.0)] {
            if let Reading::Value(b) = &mut mem[g].result {
                b.copy_gbps = Some(copy * k);
            }
        }
    }
}

fn cmp(reports: Vec<(&str, Report)>) -> Comparison {
    let inputs: Vec<Input> = reports.into_iter().map(|(s, r)| input(s, r)).collect();
    Comparison::build(&inputs, &[]).unwrap()
}

fn row<'a>(c: &'a Comparison, key: &str) -> &'a FigureRow {
    c.figures
        .iter()
        .find(|r| r.key == key)
        .unwrap_or_else(|| panic!("no row {key}"))
}

#[test]
fn the_key_figures_come_in_their_order() {
    let c = cmp(vec![
        ("a", measured_report("a", |_| {})),
        ("b", measured_report("b", |_| {})),
    ]);
    let keys: Vec<&str> = c.figures.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys,
        vec![
            "pcie_link",
            "h2d_pinned_bandwidth",
            "d2h_pinned_bandwidth",
            "power_limit",
            "nvlink",
            "context_create_ms",
            "loopback_rtt",
            "memory_copy_bandwidth",
            "memory_memcpy_bandwidth",
            "gemm_tflops_bf16",
            "allreduce_busbw",
        ]
    );
}

#[test]
fn the_worst_gpu_is_the_machines_value_with_its_share_of_the_datasheet() {
    let c = cmp(vec![
        ("a", measured_report("a", |m| copy_at(m, 4000.0))),
        ("b", measured_report("b", |m| copy_at(m, 3000.0))),
    ]);
    let r = row(&c, "memory_copy_bandwidth");
    assert_eq!(r.cells[0].value, Some(4000.0));
    assert_eq!(r.cells[0].gpu, Some(1));
    assert!(r.cells[0].best && !r.cells[1].best);
    assert!(r.differs);
    let ratio = r.cells[0].ratio.unwrap();
    assert!((ratio - 4000.0 / 4800.0).abs() < 1e-9, "{ratio}");
    assert_eq!(r.better, Some(Better::Higher));
    // A latency: the highest is the machine's, the lowest the best.
    let ctx = row(&c, "context_create_ms");
    assert_eq!(ctx.better, Some(Better::Lower));
    assert_eq!(ctx.unit, "ms");
}

#[test]
fn the_differs_threshold_both_sides() {
    let at = |share: f64| {
        let c = cmp(vec![
            ("a", measured_report("a", |m| copy_at(m, 4000.0))),
            ("b", measured_report("b", |m| copy_at(m, 4000.0 * share))),
        ]);
        row(&c, "memory_copy_bandwidth").differs
    };
    // Exactly 5% worse is within it; just beyond differs.
    assert!(!at(1.0 - DIFFERS));
    assert!(at(1.0 - DIFFERS - 0.001));
    assert!(!at(1.0 - DIFFERS + 0.001));
    assert!(!at(1.0));
}

#[test]
fn the_differs_threshold_of_a_latency_both_sides() {
    let at = |ms: f64| {
        let c = cmp(vec![
            (
                "a",
                measured_report("a", |m| {
                    m.context = Reading::Value(measured::ctx(400.0, true))
                }),
            ),
            (
                "b",
                measured_report("b", |m| m.context = Reading::Value(measured::ctx(ms, true))),
            ),
        ]);
        let r = row(&c, "context_create_ms").clone();
        r
    };
    let r = at(420.0);
    assert!(!r.differs, "5% slower is within");
    assert!(r.cells[0].best && !r.cells[1].best);
    assert!(at(420.5).differs);
    assert!(!at(419.5).differs);
}

#[test]
fn ties_are_all_best() {
    let c = cmp(vec![
        ("a", measured_report("a", |m| copy_at(m, 4000.0))),
        (
            "b",
            measured_report("b", |m| copy_at(m, 4000.0 * (1.0 - TIE))),
        ),
        (
            "c",
            measured_report("c", |m| copy_at(m, 4000.0 * (1.0 - 2.0 * TIE))),
        ),
    ]);
    let r = row(&c, "memory_copy_bandwidth");
    let best: Vec<bool> = r.cells.iter().map(|x| x.best).collect();
    assert_eq!(best, vec![true, true, false]);
}

#[test]
fn not_measured_is_never_zero_and_says_why() {
    let c = cmp(vec![
        ("m", measured_report("m", |_| {})),
        ("s", snapshot_report()),
    ]);
    let r = row(&c, "gemm_tflops_bf16");
    assert_eq!(r.cells[1].value, None);
    assert_eq!(r.cells[1].text, "not measured");
    assert_eq!(
        r.cells[1].not_measured.as_deref(),
        Some("snapshot audit: nothing is measured")
    );
    // One machine measured: nothing to differ from; it is the best.
    assert!(!r.differs && r.cells[0].best && !r.cells[1].best);
    let l = row(&c, "loopback_rtt");
    assert_eq!(l.cells[0].value, Some(20.0));
    assert_eq!(l.cells[1].value, None);
    // Without the audit's reason, the check's own skip says why.
    let mut one_gpu = measured_report("one", |_| {});
    one_gpu
        .measurements
        .retain(|m| !m.name.starts_with("allreduce"));
    for f in one_gpu
        .findings
        .iter_mut()
        .filter(|f| f.check == "nccl.allreduce")
    {
        f.status = Status::Skip;
        f.message = "not measured: it needs two GPUs".into();
    }
    // Another check's skip, listed first, is not the reason.
    one_gpu.findings.insert(
        0,
        crate::finding::Finding::skip("os.graphics", "not measured: no display"),
    );
    let c = cmp(vec![("a", one_gpu.clone()), ("b", one_gpu)]);
    let r = row(&c, "allreduce_busbw");
    assert_eq!(
        r.cells[0].not_measured.as_deref(),
        Some("it needs two GPUs")
    );
    assert!(!r.cells[0].best);
    // The optional rows are left out where no machine has them.
    let c = cmp(vec![("a", snapshot_report()), ("b", snapshot_report())]);
    assert!(c.figures.iter().all(|r| r.key != "memory_memcpy_bandwidth"));
    assert!(c.figures.iter().any(|r| r.key == "memory_copy_bandwidth"));
}

#[test]
fn the_link_power_and_nvlink_rows() {
    let x8 = {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| {
                g.pcie.width_current = Reading::Value(8);
                g.power.limit_w = Reading::Value(490.0);
            })
            .build();
        Report::build(&f, &Policy::default())
    };
    let c = cmp(vec![("ok", snapshot_report()), ("x8", x8)]);
    let link = row(&c, "pcie_link");
    assert_eq!(link.cells[0].text, "gen5 x16");
    assert_eq!(link.cells[1].text, "gen5 x8 of gen5 x16");
    assert_eq!(link.cells[1].gpu, Some(1));
    assert_eq!(link.cells[1].ratio, Some(0.5));
    assert!(link.differs && link.cells[0].best);
    let power = row(&c, "power_limit");
    assert_eq!(power.cells[1].value, Some(490.0));
    assert_eq!(power.cells[1].ratio, Some(0.7));
    assert!(power.differs && power.cells[0].best && !power.cells[1].best);
    let nv = row(&c, "nvlink");
    assert_eq!(nv.better, None);
    assert!(nv.cells[0].status.is_some());
    assert!(!nv.differs, "{:?}", nv.cells);
    assert!(nv.cells.iter().all(|x| x.best));
}

#[test]
fn nvlink_states_rank_pass_best() {
    let mut down = snapshot_report();
    for f in down
        .findings
        .iter_mut()
        .filter(|f| f.check == "nvlink.status")
    {
        f.status = Status::Fail;
    }
    let mut none = snapshot_report();
    none.findings.retain(|f| f.check != "nvlink.status");
    let c = cmp(vec![
        ("ok", snapshot_report()),
        ("down", down),
        ("old", none),
    ]);
    let nv = row(&c, "nvlink");
    assert_eq!(nv.cells[1].status, Some(Status::Fail));
    assert_eq!(nv.cells[2].text, "n/a");
    let best: Vec<bool> = nv.cells.iter().map(|x| x.best).collect();
    assert_eq!(best, vec![true, false, false]);
    assert!(nv.differs);
}

#[test]
fn check_rows_take_the_worst_status_and_its_gpus() {
    let x8 = {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
            .build();
        Report::build(&f, &Policy::default())
    };
    let mut old = snapshot_report();
    old.findings.retain(|f| f.check != "env.ssh");
    let c = cmp(vec![("ok", snapshot_report()), ("x8", x8), ("old", old)]);
    let link = c.checks.iter().find(|r| r.check == "pcie.link").unwrap();
    assert_eq!(link.cells[1].status, Some(Status::Fail));
    assert_eq!(link.cells[1].gpus, vec![1]);
    assert!(link.cells[0].gpus.is_empty());
    assert!(link.differs);
    assert_eq!(table::check_text(&link.cells[1]), "FAIL GPU 1");
    let ssh = c.checks.iter().find(|r| r.check == "env.ssh").unwrap();
    assert_eq!(ssh.cells[2].status, None);
    assert_eq!(table::check_text(&ssh.cells[2]), "n/a");
    assert!(
        !ssh.differs,
        "a report without the check says nothing of the machine"
    );
    let same = c.checks.iter().find(|r| r.check == "gpu.present").unwrap();
    assert!(!same.differs);
}

#[test]
fn a_check_row_differs_on_the_verdicts_of_the_machines_that_ran_it() {
    use crate::finding::Finding;
    let with = |status: Option<Status>| {
        let mut r = snapshot_report();
        r.findings.retain(|f| f.check != "env.ssh");
        if let Some(s) = status {
            r.findings.push(Finding::new("env.ssh", s, "sshd"));
        }
        r
    };
    let differs = |a: Option<Status>, b: Option<Status>, c: Option<Status>| {
        let x = cmp(vec![("a", with(a)), ("b", with(b)), ("c", with(c))]);
        x.checks
            .iter()
            .find(|r| r.check == "env.ssh")
            .unwrap()
            .differs
    };
    use Status::*;
    assert!(!differs(Some(Pass), Some(Skip), None), "pass, skip, n/a");
    assert!(!differs(Some(Skip), Some(Skip), Some(Pass)));
    assert!(
        differs(Some(Pass), Some(Skip), Some(Warn)),
        "pass against warn"
    );
    assert!(
        differs(Some(Skip), Some(Info), Some(Pass)),
        "info against pass"
    );
    assert!(!differs(Some(Fail), Some(Fail), None));
    assert!(!differs(Some(Skip), Some(Skip), Some(Skip)));
}

#[test]
fn fact_rows_differ_on_known_values_only() {
    let mut other = snapshot_report();
    other.machine.driver_version = Some("570.1".into());
    other.machine.kernel = None;
    let c = cmp(vec![("a", snapshot_report()), ("b", other)]);
    let f = |name: &str| c.facts.iter().find(|r| r.field == name).unwrap();
    assert!(f("driver").differs);
    assert!(!f("kernel").differs, "an unknown value does not differ");
    let mut built = snapshot_report();
    built.machine.kernel =
        Some("Linux version 6.8.0-45-generic (buildd@lcy02) (gcc 13) #45".into());
    let c2 = cmp(vec![("a", built), ("b", snapshot_report())]);
    let k = c2.facts.iter().find(|r| r.field == "kernel").unwrap();
    assert_eq!(
        k.cells[0].value.as_deref(),
        Some("6.8.0-45-generic"),
        "the release only"
    );
    assert_eq!(f("kernel").cells[1].value, None);
    assert_eq!(f("GPU").cells[0].value.as_deref(), Some("2× NVIDIA H200"));
    let fields: Vec<&str> = c.facts.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "driver",
            "CUDA (driver)",
            "kernel",
            "OS",
            "VBIOS",
            "GPU",
            "GPU memory",
            "memory",
            "CPU"
        ]
    );
}

#[test]
fn json_names_its_schema_and_fields() {
    let c = cmp(vec![
        ("a", measured_report("a", |_| {})),
        ("b", snapshot_report()),
    ]);
    let v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
    assert_eq!(v["schema"], "gpuaudit.compare/1");
    assert_eq!(v["columns"][0]["name"], "a");
    assert_eq!(v["columns"][1]["verdict"], "pass");
    let fig = &v["figures"][1];
    assert_eq!(fig["key"], "h2d_pinned_bandwidth");
    for k in ["label", "unit", "better", "ratio_of", "differs", "cells"] {
        assert!(fig.get(k).is_some(), "{k}");
    }
    for k in [
        "value",
        "text",
        "ratio",
        "gpu",
        "not_measured",
        "status",
        "best",
    ] {
        assert!(fig["cells"][0].get(k).is_some(), "{k}");
    }
    assert!(fig["cells"][1]["value"].is_null());
    assert!(v["checks"][0]["cells"][0].get("gpus").is_some());
    assert!(v["facts"][0]["cells"][0].get("value").is_some());
}

#[test]
fn the_table_marks_the_best_and_the_rows_that_differ() {
    let c = cmp(vec![
        ("a", measured_report("a", |m| copy_at(m, 4000.0))),
        ("b", measured_report("b", |m| copy_at(m, 3000.0))),
        ("s", snapshot_report()),
    ]);
    let t = table(&c, 80, false);
    for line in t.lines() {
        assert!(
            textwrap::core::display_width(line) <= 80,
            "wider than 80: {line:?}"
        );
    }
    let copy = t.lines().find(|l| l.contains("memory copy")).unwrap();
    assert!(copy.starts_with(table::DIFFERS_MARK), "{copy}");
    assert!(copy.contains("4000 (83%) ★"), "{copy}");
    assert!(copy.contains("not measured"), "{copy}");
    assert!(
        t.contains("test-host: snapshot audit: nothing is measured"),
        "{t}"
    );
    assert!(!t.contains("\x1b["));
    assert!(table(&c, 80, true).contains("\x1b["));
}

#[test]
fn hostile_names_stay_text_in_every_view() {
    let mut r = snapshot_report();
    r.machine.hostname = Some("<script>x</script>|\x1b[2J".into());
    let c = cmp(vec![("a", r), ("b", snapshot_report())]);
    let t = table(&c, 80, false);
    assert!(t.contains("\\x1b[2J") && !t.contains('\x1b'), "{t}");
    let md = markdown(&c);
    assert!(md.contains("&lt;script&gt;x&lt;/script&gt;\\|"), "{md}");
    let h = html(&c);
    assert!(
        h.contains("&lt;script&gt;x&lt;/script&gt;|") && !h.contains("<script"),
        "{h}"
    );
}

#[test]
fn the_html_draws_one_chart_per_measured_key_figure() {
    let c = cmp(vec![
        ("a", measured_report("a", |_| {})),
        ("b", measured_report("b", |m| copy_at(m, 3000.0))),
    ]);
    let h = html(&c);
    assert!(h.contains("id=\"chart-memory_copy_bandwidth\""), "{h}");
    // The figures both machines have alike: a sentence instead of two bars of one length
    // (issue 23).
    for key in [
        "h2d_pinned_bandwidth",
        "gemm_tflops_bf16",
        "allreduce_busbw",
        "pcie_link",
        "power_limit",
        "context_create_ms",
        "loopback_rtt",
    ] {
        assert!(!h.contains(&format!("id=\"chart-{key}\"")), "{key}");
        assert!(h.contains(&format!("data-chart=\"chart-{key}\"")), "{key}");
    }
    assert!(
        h.contains("every machine with a value has the same one, 700 W"),
        "{h}"
    );
    assert!(!h.contains("id=\"chart-nvlink\""));
    assert!(h.contains("<tr class=differs>"));
    let snap = cmp(vec![("a", snapshot_report()), ("b", snapshot_report())]);
    let h = html(&snap);
    // Two snapshots of one machine: the PCIe link (read, not measured) is alike, a sentence;
    // no GEMM was measured, no chart or sentence of it.
    assert!(h.contains("data-chart=\"chart-pcie_link\"") && !h.contains("id=\"chart-pcie_link\""));
    assert!(!h.contains("chart-gemm_tflops_bf16"));
}

#[test]
fn per_gpu_facts_show_each_distinct_value_once() {
    let mut mixed = snapshot_report();
    mixed.gpus[0].vbios = Some("96.00.A5.00.1A".into());
    mixed.gpus[1].vbios = Some("96.00.74.00.01".into());
    mixed.gpus[1].memory_total_mib = Some(81559);
    let mut same = snapshot_report();
    for g in &mut same.gpus {
        g.vbios = Some("96.00.A5.00.1A".into());
    }
    let mut none = snapshot_report();
    for g in &mut none.gpus {
        g.vbios = None;
    }
    let c = cmp(vec![("mixed", mixed), ("same", same), ("none", none)]);
    let f = |name: &str| c.facts.iter().find(|r| r.field == name).unwrap();
    let vbios: Vec<Option<&str>> = f("VBIOS")
        .cells
        .iter()
        .map(|c| c.value.as_deref())
        .collect();
    assert_eq!(
        vbios,
        vec![
            Some("96.00.A5.00.1A, 96.00.74.00.01"),
            Some("96.00.A5.00.1A"),
            None
        ]
    );
    assert!(f("VBIOS").differs);
    let mem = &f("GPU memory").cells[0].value;
    assert!(
        mem.as_deref()
            .is_some_and(|m| m.ends_with(", 81559 MiB") && m.matches("MiB").count() == 2),
        "{mem:?}"
    );
}

#[test]
fn of_gpus_alike_the_first_is_named() {
    // Two GPUs with the same link and the same limit: GPU 0 is the one named, not the last.
    let mut r = snapshot_report();
    for g in &mut r.gpus {
        g.power.limit_w = Some(500.0);
        g.power.default_limit_w = Some(700.0);
    }
    let c = cmp(vec![("a", r.clone()), ("b", r)]);
    assert_eq!(row(&c, "power_limit").cells[0].gpu, Some(0));
    assert_eq!(row(&c, "pcie_link").cells[0].gpu, Some(0));
}

#[test]
fn nvlink_names_the_gpu_with_the_smallest_share_of_its_links() {
    use crate::finding::Finding;
    let with_links = |links: [(u64, u64); 2]| {
        let mut r = snapshot_report();
        r.findings.retain(|f| f.check != "nvlink.status");
        for (gpu, (active, spec)) in links.iter().enumerate() {
            r.findings.push(
                Finding::fail("nvlink.status", "links down")
                    .gpu(gpu as u32)
                    .with("links_active", active)
                    .with("spec_links", spec),
            );
        }
        r
    };
    let cell = |links| {
        let c = cmp(vec![("a", with_links(links)), ("b", snapshot_report())]);
        let r = row(&c, "nvlink");
        (r.cells[0].text.clone(), r.cells[0].gpu)
    };
    // 12 of 18 is a smaller share than 4 of 4; 2 of 4 a smaller one than 12 of 18.
    assert_eq!(
        cell([(4, 4), (12, 18)]),
        ("fail · 12/18 links".into(), Some(1))
    );
    assert_eq!(
        cell([(2, 4), (12, 18)]),
        ("fail · 2/4 links".into(), Some(0))
    );
}

#[test]
fn units_come_from_the_reports_else_from_the_figures_name() {
    // No report measured anything: the unit each figure is written in.
    let c = cmp(vec![("a", snapshot_report()), ("b", snapshot_report())]);
    assert_eq!(row(&c, "context_create_ms").unit, "ms");
    assert_eq!(
        row(&c, "context_create_ms").better,
        Some(crate::fleet::stats::Better::Lower)
    );
    assert_eq!(row(&c, "gemm_tflops_bf16").unit, "TFLOPS");
    assert_eq!(row(&c, "memory_copy_bandwidth").unit, "GB/s");
    // Measured: the report's own unit, of the figure of that name.
    let c = cmp(vec![
        ("m", measured_report("m", |_| {})),
        ("s", snapshot_report()),
    ]);
    assert_eq!(row(&c, "memory_copy_bandwidth").unit, "GB/s");
    assert_eq!(row(&c, "context_create_ms").unit, "ms");
    assert_eq!(row(&c, "gemm_tflops_bf16").unit, "TFLOPS");
}

#[test]
fn a_default_limit_of_zero_gives_no_share() {
    let mut r = snapshot_report();
    for g in &mut r.gpus {
        g.power.limit_w = Some(500.0);
        g.power.default_limit_w = Some(0.0);
    }
    let c = cmp(vec![("a", r), ("b", snapshot_report())]);
    let p = row(&c, "power_limit");
    assert_eq!(p.cells[0].value, Some(500.0));
    assert_eq!(p.cells[0].ratio, None);
}

#[test]
fn a_figure_missing_from_a_quick_audit_says_so() {
    let full = measured_report("f", |_| {});
    let mut quick = measured_report("q", |_| {});
    quick.audit.full = false;
    quick
        .measurements
        .retain(|m| !m.name.starts_with("allreduce"));
    let c = cmp(vec![("f", full.clone()), ("q", quick)]);
    let r = row(&c, "allreduce_busbw");
    assert_eq!(r.cells[1].value, None);
    assert_eq!(
        r.cells[1].not_measured.as_deref(),
        Some("a quick audit: gpuaudit --full measures it")
    );
    // A full audit that lacks it says nothing it does not know.
    let mut other = full.clone();
    other
        .measurements
        .retain(|m| !m.name.starts_with("allreduce"));
    let c = cmp(vec![("f", full), ("o", other)]);
    let r = row(&c, "allreduce_busbw");
    assert_eq!(r.cells[1].not_measured.as_deref(), Some(""));
}

#[test]
fn a_link_or_limit_the_report_does_not_give_is_not_known() {
    let mut r = snapshot_report();
    for g in &mut r.gpus {
        g.pcie.width_current = None;
        g.power.limit_w = None;
    }
    let c = cmp(vec![("a", r), ("b", snapshot_report())]);
    for key in ["pcie_link", "power_limit"] {
        let cell = &row(&c, key).cells[0];
        assert_eq!(cell.value, None, "{key}");
        assert_eq!(cell.text, "not known", "{key}");
        assert_eq!(
            cell.not_measured.as_deref(),
            Some("the report does not say"),
            "{key}"
        );
    }
}

#[test]
fn a_check_whose_failure_another_cause_explains_names_it_and_counts_once() {
    use crate::finding::{Cause, Finding};
    let mut nouveau = snapshot_report();
    nouveau.findings.retain(|f| f.check != "gpu.present");
    nouveau.findings.push(
        Finding::fail("gpu.present", "00:07.0 is not listed")
            .caused_by(Cause::device("gpu.driver-binding", "00:07.0")),
    );
    nouveau.findings.push(
        Finding::fail("gpu.driver-binding", "00:07.0 is bound to nouveau")
            .with("pci_bus_id", "0000:00:07.0"),
    );
    // A failure of one check that another check of the same machine does not explain.
    nouveau
        .findings
        .push(Finding::fail("kernel.modules", "nouveau is loaded"));
    let c = cmp(vec![("ok", snapshot_report()), ("nouveau", nouveau)]);
    let present = c.checks.iter().find(|r| r.check == "gpu.present").unwrap();
    assert_eq!(
        present.cells[1].caused_by.as_deref(),
        Some("gpu.driver-binding")
    );
    assert_eq!(
        table::check_text(&present.cells[1]),
        "FAIL (cause: gpu.driver-binding)"
    );
    let binding = c
        .checks
        .iter()
        .find(|r| r.check == "gpu.driver-binding")
        .unwrap();
    assert_eq!(binding.cells[1].caused_by, None);
    let modules = c
        .checks
        .iter()
        .find(|r| r.check == "kernel.modules")
        .unwrap();
    assert_eq!(table::check_text(&modules.cells[1]), "FAIL");
    // Three failed findings, two problems.
    assert_eq!((c.columns[1].fail, c.columns[1].warn), (2, 0));
    assert_eq!(c.columns[1].verdict_label(), "2 fail");
}

/// The PCIe link's cells say "gen5 x16 (100%)": its label has no "GB/s" (issue 22).
#[test]
fn a_row_shows_its_unit_only_where_its_cells_show_numbers() {
    use super::model::{FigureCell, FigureRow};
    let cell = |v: f64, text: &str| FigureCell {
        value: Some(v),
        text: text.into(),
        ratio: Some(1.0),
        gpu: Some(0),
        not_measured: None,
        status: None,
        best: false,
        links: None,
    };
    let row = |cells: Vec<FigureCell>| FigureRow {
        key: "k".into(),
        label: "PCIe link".into(),
        unit: "GB/s".into(),
        better: None,
        ratio_of: Some("full width".into()),
        differs: false,
        cells,
    };
    let link = row(vec![
        cell(63.0, "gen5 x16"),
        cell(31.5, "gen5 x8 of gen5 x16"),
    ]);
    assert_eq!(
        super::table::figure_label(&link),
        "PCIe link (% of full width)"
    );
    let copy = row(vec![cell(55.3, "55.3"), cell(54.0, "54.0")]);
    assert_eq!(
        super::table::figure_label(&copy),
        "PCIe link (GB/s, % of full width)"
    );
}
