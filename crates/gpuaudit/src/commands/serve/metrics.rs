//! The metric families of `gpuaudit serve`, from the latest report (DESIGN "gpuaudit serve").
//!
//! Encoded by prometheus-client (OpenMetrics text). Names are `gpuaudit_*` (nothing that
//! could meet dcgm-exporter's `DCGM_FI_*`), values in base units with the unit as suffix.
//! A reading the report does not have is no series (never a 0).

use gpuaudit_core::figures::{Figure, FigureSpec, Unit as FigureUnit};
use gpuaudit_core::finding::Status;
use gpuaudit_core::report::{Causes, ProblemCounts};
use gpuaudit_core::Report;
use prometheus_client::encoding::{text::encode, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::AtomicU64;

/// The Content-Type of what [`encode_metrics`] writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Every status, in the order the state set lists them.
const STATUSES: [Status; 5] = [
    Status::Pass,
    Status::Info,
    Status::Warn,
    Status::Fail,
    Status::Skip,
];

/// A label value from the machine (a GPU's name, a check id, a UUID).
///
/// prometheus-client 0.24 writes label values as they are (prometheus/client_rust#151): a
/// `"`, `\` or line feed in a GPU's name would end the value early and make Prometheus refuse
/// the whole scrape. The OpenMetrics and Prometheus text formats escape exactly those three
/// as `\"`, `\\` and `\n`; this does it while prometheus-client encodes.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct LabelValue(pub String);

impl EncodeLabelValue for LabelValue {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

type Labels = Vec<(&'static str, LabelValue)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

fn lv(s: impl Into<String>) -> LabelValue {
    LabelValue(s.into())
}

/// What the exporter knows besides the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExporterState {
    /// When the latest audit finished (Unix seconds).
    pub last_audit_unix: Option<f64>,
    /// How long it took.
    pub audit_duration_seconds: Option<f64>,
    /// Audits that ended in an error since the exporter started.
    pub audit_errors_total: u64,
    /// When the measurements the report carries were taken (`--measure-every`).
    pub last_measurement_unix: Option<f64>,
}

/// `gpuaudit_*` families of `report` (none before the first audit) and `state`, as
/// OpenMetrics text ending in `# EOF`.
pub fn encode_metrics(report: Option<&Report>, state: &ExporterState) -> String {
    let mut registry = Registry::default();
    register_exporter(&mut registry, state);
    if let Some(r) = report {
        register_report(&mut registry, r);
    }
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a family we built wrong,
    // and an empty page says so to Prometheus rather than a half-written one.
    if encode(&mut out, &registry).is_err() {
        out.clear();
    }
    in_stable_order(&out)
}

/// The exposition with each family's samples sorted: prometheus-client keeps a family's
/// series in a hash map, so they came in another order at every scrape (a diff of two
/// scrapes, a test and a person reading /metrics all want one order). Families stay in
/// registration order; a sample line never starts with `#`.
fn in_stable_order(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_unstable();
        for l in samples.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}

fn gauge(registry: &mut Registry, name: &str, help: &str, value: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(value);
    registry.register(name, help, g);
}

fn gauge_with_unit(registry: &mut Registry, name: &str, help: &str, unit: Unit, value: f64) {
    let g: Gauge<f64, AtomicU64> = Gauge::default();
    g.set(value);
    registry.register_with_unit(name, help, unit, g);
}

fn register_exporter(registry: &mut Registry, s: &ExporterState) {
    let build = GaugeFamily::default();
    build
        .get_or_create(&vec![("version", lv(env!("CARGO_PKG_VERSION")))])
        .set(1.0);
    registry.register(
        "gpuaudit_build_info",
        "The gpuaudit that serves these metrics (value 1)",
        build,
    );
    if let Some(t) = s.last_audit_unix {
        gauge_with_unit(
            registry,
            "gpuaudit_last_audit_timestamp",
            "When the latest audit finished, in Unix time",
            Unit::Seconds,
            t,
        );
    }
    if let Some(d) = s.audit_duration_seconds {
        gauge_with_unit(
            registry,
            "gpuaudit_audit_duration",
            "How long the latest audit took",
            Unit::Seconds,
            d,
        );
    }
    let errors: Counter<u64> = Counter::default();
    errors.inc_by(s.audit_errors_total);
    registry.register(
        "gpuaudit_audit_errors",
        "Audits that could not be done since the exporter started (the reason is on /healthz)",
        errors,
    );
    if let Some(t) = s.last_measurement_unix {
        gauge_with_unit(
            registry,
            "gpuaudit_last_measurement_timestamp",
            "When the measurements shown were taken (--measure-every), in Unix time",
            Unit::Seconds,
            t,
        );
    }
}

fn register_report(registry: &mut Registry, r: &Report) {
    let uuid_of = |gpu: Option<u32>| -> String {
        gpu.and_then(|i| r.gpus.iter().find(|g| g.index == i))
            .and_then(|g| g.uuid.clone())
            .unwrap_or_default()
    };
    let gpu_label = |gpu: Option<u32>| gpu.map(|i| i.to_string()).unwrap_or_default();

    // One state set per check and GPU (or the machine): the worst of that check's findings
    // about it is 1, the other statuses 0.
    let mut worst: BTreeMap<(String, Option<u32>), Status> = BTreeMap::new();
    for f in &r.findings {
        let e = worst.entry((f.check.clone(), f.gpu)).or_insert(f.status);
        *e = (*e).max(f.status);
    }
    let status = GaugeFamily::default();
    for ((check, gpu), current) in &worst {
        for s in STATUSES {
            status
                .get_or_create(&vec![
                    ("check", lv(check.as_str())),
                    ("gpu", lv(gpu_label(*gpu))),
                    ("uuid", lv(uuid_of(*gpu))),
                    ("status", lv(s.as_str())),
                ])
                .set(if s == *current { 1.0 } else { 0.0 });
        }
    }
    registry.register(
        "gpuaudit_check_status",
        "Each check's verdict per GPU (gpu=\"\": the machine) as a state set: 1 for the current \
         status (the worst of its findings), 0 for the others",
        status,
    );

    let findings = GaugeFamily::default();
    for s in STATUSES {
        let n = match s {
            Status::Pass => r.summary.pass,
            Status::Info => r.summary.info,
            Status::Warn => r.summary.warn,
            Status::Fail => r.summary.fail,
            Status::Skip => r.summary.skip,
        };
        findings
            .get_or_create(&vec![("status", lv(s.as_str()))])
            .set(f64::from(n));
    }
    registry.register(
        "gpuaudit_findings",
        "Findings of the latest audit by status",
        findings,
    );
    register_causes(registry, r);
    gauge(
        registry,
        "gpuaudit_gpus",
        "GPUs the latest audit found",
        r.gpus.len() as f64,
    );

    let driver = r.machine.driver_version.clone().unwrap_or_default();
    // dcgm-exporter's `Hostname`, for a join on the machine as well as on the UUID.
    let hostname = r.machine.hostname.clone().unwrap_or_default();
    let info = GaugeFamily::default();
    let gen = GaugeFamily::default();
    let gen_max = GaugeFamily::default();
    let width = GaugeFamily::default();
    let width_max = GaugeFamily::default();
    let power = GaugeFamily::default();
    let power_default = GaugeFamily::default();
    let ecc = GaugeFamily::default();
    let memory = GaugeFamily::default();
    for g in &r.gpus {
        let id: Labels = vec![
            ("gpu", lv(g.index.to_string())),
            ("uuid", lv(g.uuid.clone().unwrap_or_default())),
        ];
        let mut labels = id.clone();
        labels.extend([
            ("name", lv(g.name.clone().unwrap_or_default())),
            ("pci_bus_id", lv(g.pci_bus_id.as_str())),
            ("driver", lv(driver.as_str())),
            ("hostname", lv(hostname.as_str())),
        ]);
        info.get_or_create(&labels).set(1.0);
        let set = |family: &GaugeFamily, v: Option<f64>| {
            if let Some(v) = v {
                family.get_or_create(&id).set(v);
            }
        };
        set(&gen, g.pcie.gen_current.map(f64::from));
        set(&gen_max, g.pcie.gen_max.map(f64::from));
        set(&width, g.pcie.width_current.map(f64::from));
        set(&width_max, g.pcie.width_max.map(f64::from));
        set(&power, g.power.limit_w);
        set(&power_default, g.power.default_limit_w);
        set(&ecc, g.ecc.map(|on| if on { 1.0 } else { 0.0 }));
        set(
            &memory,
            g.memory_total_mib.map(|mib| (mib as f64) * 1024.0 * 1024.0),
        );
    }
    registry.register(
        "gpuaudit_gpu_info",
        "A GPU's identity (value 1); driver is the machine's driver version",
        info,
    );
    registry.register(
        "gpuaudit_gpu_pcie_link_generation",
        "PCIe generation the GPU's link runs at now (idle GPUs lower it to save power)",
        gen,
    );
    registry.register(
        "gpuaudit_gpu_pcie_link_generation_max",
        "Highest PCIe generation of the GPU and its slot",
        gen_max,
    );
    registry.register(
        "gpuaudit_gpu_pcie_link_width",
        "PCIe lanes the GPU's link trained at",
        width,
    );
    registry.register(
        "gpuaudit_gpu_pcie_link_width_max",
        "PCIe lanes the GPU and its slot support",
        width_max,
    );
    registry.register_with_unit(
        "gpuaudit_gpu_power_limit",
        "Enforced power limit",
        Unit::Other("watts".into()),
        power,
    );
    registry.register_with_unit(
        "gpuaudit_gpu_power_default_limit",
        "Default power limit of the board",
        Unit::Other("watts".into()),
        power_default,
    );
    registry.register("gpuaudit_gpu_ecc_enabled", "ECC mode: 1 on, 0 off", ecc);
    registry.register_with_unit(
        "gpuaudit_gpu_memory_total",
        "Memory of the GPU",
        Unit::Bytes,
        memory,
    );

    register_figures(registry, r);
}

/// One family per figure of the catalog (`gpuaudit_core::figures`), in its base unit
/// (`gpuaudit_memory_copy_bandwidth_bytes_per_second`), with `_expected` and `_attainable`
/// beside it where known; `gpuaudit_figure_attainment_ratio{figure}` is every figure's share
/// of its expectation, above 1 better for a bandwidth and a latency alike. Per-GPU series
/// carry `gpu` and `uuid` (the join with dcgm-exporter's `UUID`), a pair `peer` and
/// `peer_uuid`; `dtype`, `size_bytes` and `path` where the figure has them. A figure this
/// build does not know (none: the report is this build's) is left out.
fn register_figures(registry: &mut Registry, r: &Report) {
    struct Families {
        spec: FigureSpec,
        value: GaugeFamily,
        expected: GaugeFamily,
        attainable: GaugeFamily,
        /// Whether any series went into `expected` and `attainable` (an empty family is
        /// left out).
        any: (bool, bool),
    }
    let uuid_of = |gpu: u32| -> String {
        r.gpus
            .iter()
            .find(|g| g.index == gpu)
            .and_then(|g| g.uuid.clone())
            .unwrap_or_default()
    };
    let mut by_figure: BTreeMap<Figure, Families> = BTreeMap::new();
    let attainment = GaugeFamily::default();
    for m in &r.measurements {
        let Some(figure) = Figure::of(m) else {
            continue;
        };
        let spec = figure.spec();
        let Some(unit) = FigureUnit::from_report(&m.unit).filter(|u| *u == spec.unit) else {
            continue;
        };
        let mut labels: Labels = Vec::new();
        if let Some(g) = m.gpu {
            labels.push(("gpu", lv(g.to_string())));
            labels.push(("uuid", lv(uuid_of(g))));
        }
        if let Some(p) = m.peer {
            labels.push(("peer", lv(p.to_string())));
            labels.push(("peer_uuid", lv(uuid_of(p))));
        }
        if let Some(d) = &m.dtype {
            labels.push(("dtype", lv(d.as_str())));
        }
        if let (Figure::Nccl(_), Some(size)) = (figure, m.size_bytes) {
            labels.push(("size_bytes", lv(size.to_string())));
        }
        if let Some(p) = &m.path {
            labels.push(("path", lv(p.as_str())));
        }
        let f = by_figure.entry(figure).or_insert_with(|| Families {
            spec,
            value: GaugeFamily::default(),
            expected: GaugeFamily::default(),
            attainable: GaugeFamily::default(),
            any: (false, false),
        });
        f.value.get_or_create(&labels).set(unit.to_base(m.value));
        if let Some(e) = m.expected.filter(|e| e.is_finite()) {
            f.expected.get_or_create(&labels).set(unit.to_base(e));
            f.any.0 = true;
            if let Some(x) = spec.attainment(m.value, e) {
                let mut l = vec![("figure", lv(spec.id))];
                l.extend(labels.iter().cloned());
                attainment.get_or_create(&l).set(x);
            }
        }
        if let Some(a) = m.attainable.filter(|a| a.is_finite()) {
            f.attainable.get_or_create(&labels).set(unit.to_base(a));
            f.any.1 = true;
        }
    }
    let suffix = |s: &FigureSpec| Unit::Other(s.unit.base_suffix().to_string());
    for f in by_figure.into_values() {
        let stem = format!("gpuaudit_{}", f.spec.metric_stem());
        let unit_words = f.spec.unit.base_suffix().replace('_', " ");
        registry.register_with_unit(
            &stem,
            format!("{} ({unit_words}), as measured", f.spec.plain_label()),
            suffix(&f.spec),
            f.value,
        );
        if f.any.0 {
            registry.register_with_unit(
                format!("{stem}_expected"),
                format!(
                    "What {} is held against (the datasheet's or the link's figure)",
                    f.spec.id
                ),
                suffix(&f.spec),
                f.expected,
            );
        }
        if f.any.1 {
            registry.register_with_unit(
                format!("{stem}_attainable"),
                format!("What healthy GPUs of the model reach in {}", f.spec.id),
                suffix(&f.spec),
                f.attainable,
            );
        }
    }
    registry.register(
        "gpuaudit_figure_attainment_ratio",
        "Share of its expectation a figure attains, above 1 better for every figure (a \
         latency's is expected / measured)",
        attainment,
    );
}

/// What the verdict counts (problems as causes: a GPU bound to nouveau is one problem, not
/// the three checks it fails), and which check's status another's cause explains, so that
/// one alert fires once for one cause.
fn register_causes(registry: &mut Registry, r: &Report) {
    let uuid_of = |gpu: Option<u32>| -> String {
        gpu.and_then(|i| r.gpus.iter().find(|g| g.index == i))
            .and_then(|g| g.uuid.clone())
            .unwrap_or_default()
    };
    let counts = ProblemCounts::of(r);
    let problems = GaugeFamily::default();
    for (s, n) in [(Status::Fail, counts.fail), (Status::Warn, counts.warn)] {
        problems
            .get_or_create(&vec![("status", lv(s.as_str()))])
            .set(f64::from(n));
    }
    registry.register(
        "gpuaudit_problems",
        "Problems of the latest audit counted as causes, as its verdict counts them: each \
         cause once, by the worst status of it and of what it explains",
        problems,
    );

    // Each check (per GPU) whose status, the worst of its findings, another check's cause
    // explains: 1, with that check as `caused_by`; an alert on gpuaudit_check_status leaves
    // them out with `unless on(check, gpu) gpuaudit_check_caused_by`.
    let causes = Causes::of(&r.findings);
    /// A check's worst status about one GPU (or the machine), and the cause that explains it.
    type Worst<'r> = BTreeMap<(&'r str, Option<u32>), (Status, Option<&'r str>)>;
    let mut worst: Worst = BTreeMap::new();
    for (i, f) in r.findings.iter().enumerate() {
        let cause = causes
            .is_consequence(i)
            .then(|| r.findings[causes.root_of(i)].check.as_str());
        let e = worst
            .entry((f.check.as_str(), f.gpu))
            .or_insert((f.status, cause));
        // The worst finding speaks for the check; of equals, one that is its own cause.
        if f.status > e.0 || (f.status == e.0 && cause.is_none()) {
            *e = (f.status, cause);
        }
    }
    let caused = GaugeFamily::default();
    for ((check, gpu), (status, cause)) in &worst {
        let Some(cause) = cause else { continue };
        if !matches!(status, Status::Fail | Status::Warn | Status::Info) {
            continue;
        }
        caused
            .get_or_create(&vec![
                ("check", lv(*check)),
                ("gpu", lv(gpu.map(|i| i.to_string()).unwrap_or_default())),
                ("uuid", lv(uuid_of(*gpu))),
                ("caused_by", lv(*cause)),
            ])
            .set(1.0);
    }
    registry.register(
        "gpuaudit_check_caused_by",
        "1 for each check (per GPU; gpu=\"\": the machine) whose current status another \
         check's cause explains, named in caused_by; no series where a check is its own cause",
        caused,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::testing::Machine;
    use gpuaudit_core::{Policy, Reading};

    fn report(machine: Machine) -> Report {
        Report::build(&machine.build(), &Policy::default())
    }

    /// The sample lines of `text` whose name and labels start with `prefix`.
    fn samples<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn check_status_is_one_state_set_per_check_and_gpu() {
        let r = report(Machine::healthy("h200-sxm-141gb", 2).gpu(1, |g| {
            g.pcie.width_current = Reading::Value(8);
        }));
        let text = encode_metrics(Some(&r), &ExporterState::default());
        let uuid1 = r.gpus[1].uuid.clone().unwrap_or_default();
        let line = |status: &str, v: &str| {
            format!(
                "gpuaudit_check_status{{check=\"pcie.link\",gpu=\"1\",uuid=\"{uuid1}\",status=\"{status}\"}} {v}"
            )
        };
        assert!(text.contains(&line("fail", "1.0")), "{text}");
        for s in ["pass", "info", "warn", "skip"] {
            assert!(text.contains(&line(s, "0.0")), "{s}: {text}");
        }
        let gpu0 = samples(&text, "gpuaudit_check_status{check=\"pcie.link\",gpu=\"0\"");
        assert_eq!(gpu0.len(), 5, "{gpu0:?}");
        assert_eq!(
            gpu0.iter()
                .filter(|l| l.ends_with(" 1.0") && l.contains("status=\"pass\""))
                .count(),
            1,
            "{gpu0:?}"
        );
        // Exactly one status is current in every state set.
        let mut current: BTreeMap<String, u32> = BTreeMap::new();
        for l in samples(&text, "gpuaudit_check_status{") {
            let key = l.split(",status=").next().unwrap_or_default().to_string();
            *current.entry(key).or_default() += u32::from(l.ends_with(" 1.0"));
        }
        assert!(!current.is_empty());
        assert!(current.values().all(|n| *n == 1), "{current:?}");
        // A check about the machine has an empty gpu label.
        assert!(
            text.contains("gpuaudit_check_status{check=\"os.platform\",gpu=\"\",uuid=\"\","),
            "{text}"
        );
        // Every check of the report is there.
        for f in &r.findings {
            assert!(
                text.contains(&format!("check=\"{}\"", f.check)),
                "{}",
                f.check
            );
        }
    }

    #[test]
    fn problems_are_counted_as_causes_and_what_a_cause_explains_is_marked() {
        use gpuaudit_core::finding::{Cause, Finding};
        let mut r = report(Machine::healthy("h200-sxm-141gb", 2));
        r.findings.retain(|f| {
            ![
                "gpu.present",
                "gpu.driver-binding",
                "kernel.modules",
                "os.persistence",
            ]
            .contains(&f.check.as_str())
        });
        r.findings.extend([
            Finding::fail("gpu.present", "00:07.0 is not listed")
                .caused_by(Cause::device("gpu.driver-binding", "00:07.0")),
            Finding::fail("gpu.driver-binding", "00:07.0 is bound to nouveau")
                .with("pci_bus_id", "0000:00:07.0"),
            Finding::fail("kernel.modules", "nouveau is loaded")
                .caused_by(Cause::check("gpu.driver-binding")),
            Finding::warn("os.persistence", "GPU 1 (00:07.0): off").gpu(1),
        ]);
        let text = encode_metrics(Some(&r), &ExporterState::default());
        assert!(
            text.contains("gpuaudit_problems{status=\"fail\"} 1.0"),
            "{text}"
        );
        assert!(
            text.contains("gpuaudit_problems{status=\"warn\"} 1.0"),
            "{text}"
        );
        for check in ["gpu.present", "kernel.modules"] {
            assert!(
                text.contains(&format!(
                    "gpuaudit_check_caused_by{{check=\"{check}\",gpu=\"\",uuid=\"\",caused_by=\"gpu.driver-binding\"}} 1.0"
                )),
                "{check}: {text}"
            );
        }
        assert_eq!(
            samples(&text, "gpuaudit_check_caused_by{").len(),
            2,
            "{text}"
        );
        // The check states stay each check's own verdict.
        assert!(text.contains(
            "gpuaudit_check_status{check=\"gpu.present\",gpu=\"\",uuid=\"\",status=\"fail\"} 1.0"
        ));
    }

    #[test]
    fn the_worst_finding_of_a_check_about_one_gpu_is_its_status() {
        use gpuaudit_core::finding::Finding;
        let mut r = report(Machine::healthy("h200-sxm-141gb", 1));
        r.findings.retain(|f| f.check != "env.ssh");
        r.findings
            .push(Finding::new("env.ssh", Status::Pass, "keys only"));
        r.findings
            .push(Finding::new("env.ssh", Status::Warn, "root may log in"));
        r.findings
            .push(Finding::new("env.ssh", Status::Skip, "no sshd_config"));
        let text = encode_metrics(Some(&r), &ExporterState::default());
        assert!(text.contains(
            "gpuaudit_check_status{check=\"env.ssh\",gpu=\"\",uuid=\"\",status=\"warn\"} 1.0"
        ));
        assert!(text.contains(
            "gpuaudit_check_status{check=\"env.ssh\",gpu=\"\",uuid=\"\",status=\"pass\"} 0.0"
        ));
    }

    #[test]
    fn gpu_facts_in_base_units_and_no_series_for_what_is_not_known() {
        let r = report(Machine::healthy("h200-sxm-141gb", 2).gpu(1, |g| {
            g.power.limit_w = Reading::unavailable("not supported");
            g.pcie.gen_current = Reading::unavailable("not read");
        }));
        let text = encode_metrics(Some(&r), &ExporterState::default());
        let g0 = &r.gpus[0];
        let id0 = format!(
            "{{gpu=\"0\",uuid=\"{}\"}}",
            g0.uuid.clone().unwrap_or_default()
        );
        let id1 = format!(
            "{{gpu=\"1\",uuid=\"{}\"}}",
            r.gpus[1].uuid.clone().unwrap_or_default()
        );
        let limit = g0.power.limit_w.expect("the healthy machine has a limit");
        assert!(
            text.contains(&format!("gpuaudit_gpu_power_limit_watts{id0} {limit:?}")),
            "{text}"
        );
        assert!(text.contains("# UNIT gpuaudit_gpu_power_limit_watts watts"));
        assert!(!text.contains(&format!("gpuaudit_gpu_power_limit_watts{id1}")));
        assert!(text.contains(&format!("gpuaudit_gpu_power_default_limit_watts{id1}")));
        assert!(
            text.contains(&format!("gpuaudit_gpu_pcie_link_width{id0} 16.0")),
            "{text}"
        );
        assert!(text.contains(&format!("gpuaudit_gpu_pcie_link_width_max{id0} 16.0")));
        assert!(text.contains(&format!("gpuaudit_gpu_pcie_link_generation_max{id1} 5.0")));
        assert!(!text.contains(&format!("gpuaudit_gpu_pcie_link_generation{id1}")));
        assert!(
            text.contains(&format!("gpuaudit_gpu_ecc_enabled{id0} 1.0")),
            "{text}"
        );
        let mib = g0.memory_total_mib.expect("memory");
        assert!(text.contains(&format!(
            "gpuaudit_gpu_memory_total_bytes{id0} {:?}",
            (mib * 1024 * 1024) as f64
        )));
        let name = g0.name.clone().unwrap_or_default();
        let driver = r.machine.driver_version.clone().unwrap_or_default();
        // dcgm-exporter's `Hostname`, for a join on the machine as well as on the UUID.
        let hostname = r.machine.hostname.clone().unwrap_or_default();
        assert!(
            text.contains(&format!(
                "gpuaudit_gpu_info{{gpu=\"0\",uuid=\"{}\",name=\"{name}\",pci_bus_id=\"{}\",driver=\"{driver}\",hostname=\"{hostname}\"}} 1.0",
                g0.uuid.clone().unwrap_or_default(),
                g0.pci_bus_id
            )),
            "{text}"
        );
        assert!(text.contains("gpuaudit_gpus 2.0"));
        let fails = r.summary.fail;
        assert!(text.contains(&format!(
            "gpuaudit_findings{{status=\"fail\"}} {:?}",
            f64::from(fails)
        )));
        assert!(text.ends_with("# EOF\n"));
    }

    /// A full audit of a 2×H200 (every group but the rehearsal, storage and loopback).
    fn measured_report() -> Report {
        use gpuaudit_core::testing::measured::full_run;
        report(Machine::healthy("h200-sxm-141gb", 2).measured(|m| full_run(m, 2)))
    }

    #[test]
    fn one_family_per_figure_in_base_units_with_the_uuid() {
        let r = measured_report();
        let text = encode_metrics(Some(&r), &ExporterState::default());
        // The report's GB/s as bytes per second, its ms as seconds, TFLOPS as FLOPS.
        let uuid0 = r.gpus[0].uuid.clone().unwrap();
        let uuid1 = r.gpus[1].uuid.clone().unwrap();
        let h2d = r
            .measurements
            .iter()
            .find(|m| m.name == "h2d_pinned_bandwidth" && m.gpu == Some(0))
            .unwrap();
        let line = samples(&text, "gpuaudit_h2d_pinned_bandwidth_bytes_per_second{")
            .into_iter()
            .find(|l| l.contains("gpu=\"0\""))
            .unwrap()
            .to_string();
        assert!(line.contains(&format!("uuid=\"{uuid0}\"")), "{line}");
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - h2d.value * 1e9).abs() < 1.0, "{line}");
        assert!(
            text.contains("# UNIT gpuaudit_h2d_pinned_bandwidth_bytes_per_second bytes_per_second")
        );
        let ctx = r
            .measurements
            .iter()
            .find(|m| m.name == "context_create_ms")
            .unwrap();
        let line = samples(&text, "gpuaudit_context_create_seconds{} ")[0];
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((v - ctx.value / 1e3).abs() < 1e-9, "{line}");
        let gemm = samples(&text, "gpuaudit_gemm_flops{");
        assert!(
            gemm.iter()
                .any(|l| l.contains("dtype=\"bf16\"") && l.contains(&uuid0)),
            "{gemm:?}"
        );
        // A pair names both GPUs by UUID.
        let p2p = samples(&text, "gpuaudit_p2p_bandwidth_bytes_per_second{");
        assert!(
            p2p.iter()
                .any(|l| l.contains("peer=\"1\"") && l.contains(&format!("peer_uuid=\"{uuid1}\""))),
            "{p2p:?}"
        );
        // The all-reduce at each size it has.
        assert_eq!(
            samples(&text, "gpuaudit_allreduce_busbw_bytes_per_second{").len(),
            2
        );
        // Expected and attainable beside the figure where the report has them, in base units.
        let copy = r
            .measurements
            .iter()
            .find(|m| m.name == "memory_copy_bandwidth" && m.gpu == Some(0))
            .unwrap();
        let att = samples(
            &text,
            "gpuaudit_memory_copy_bandwidth_attainable_bytes_per_second{",
        );
        assert!(
            att.iter()
                .any(|l| l.ends_with(&format!(" {:?}", copy.attainable.unwrap() * 1e9))),
            "{att:?}"
        );
        assert!(!text.contains("gpuaudit_memory_read_bandwidth_attainable"));
        assert!(
            !text.contains("gpuaudit_measurement"),
            "the old families are gone"
        );
        // No report unit in any family name.
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = l.split(' ').nth(2).unwrap();
            assert!(!name.ends_with("_tflops"), "{name}");
            for u in ["_ms", "_us", "_mhz", "_gbps", "_pct"] {
                assert!(
                    !name.ends_with(u) && !name.contains(&format!("{u}_")),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn attainment_is_better_above_one_for_a_bandwidth_and_a_latency() {
        let mut r = measured_report();
        r.measurements
            .retain(|m| m.name == "h2d_pinned_bandwidth" && m.gpu == Some(0));
        let mut lat = r.measurements[0].clone();
        (lat.name, lat.unit, lat.value, lat.expected) =
            ("host_round_trip_us".into(), "us".into(), 40.0, Some(20.0));
        r.measurements.push(lat);
        r.measurements[0].value = 50.0;
        r.measurements[0].expected = Some(62.5);
        let text = encode_metrics(Some(&r), &ExporterState::default());
        let got = samples(&text, "gpuaudit_figure_attainment_ratio{");
        assert!(
            got.iter()
                .any(|l| l.contains("figure=\"h2d_pinned_bandwidth\"") && l.ends_with(" 0.8")),
            "{got:?}"
        );
        // Twice the expected latency attains half of it.
        assert!(
            got.iter()
                .any(|l| l.contains("figure=\"host_round_trip_us\"") && l.ends_with(" 0.5")),
            "{got:?}"
        );
    }

    #[test]
    fn series_come_in_one_order_at_every_scrape() {
        let r = measured_report();
        let first = encode_metrics(Some(&r), &ExporterState::default());
        for _ in 0..20 {
            assert_eq!(encode_metrics(Some(&r), &ExporterState::default()), first);
        }
        // Within a family, sorted; the families in registration order, ending in # EOF.
        let gemm = samples(&first, "gpuaudit_gemm_flops{");
        let mut sorted = gemm.clone();
        sorted.sort_unstable();
        assert_eq!(gemm, sorted);
        assert!(first.ends_with("# EOF\n"), "{first}");
    }

    /// promtool (Prometheus' own linter) reads the exposition and finds nothing against its
    /// naming rules. Skipped without promtool, unless GPUAUDIT_REQUIRE_PROMETHEUS=1 (CI).
    #[test]
    fn promtool_finds_nothing_against_the_naming_rules() {
        let Some(promtool) = std::env::var_os("PATH").and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("promtool"))
                .find(|p| p.is_file())
        }) else {
            assert!(
                std::env::var("GPUAUDIT_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
                "GPUAUDIT_REQUIRE_PROMETHEUS=1 but no promtool on PATH"
            );
            eprintln!("SKIPPED: no promtool on PATH");
            return;
        };
        use std::io::Write as _;
        // promtool reads the Prometheus text format: the same families, with a counter's
        // HELP and TYPE under its sample's name (`_total`), no UNIT and no EOF.
        let open = encode_metrics(Some(&measured_report()), &ExporterState::default());
        let counters: Vec<String> = open
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.strip_suffix(" counter"))
            .map(str::to_string)
            .collect();
        let mut text = String::new();
        for l in open.lines() {
            if l.starts_with("# UNIT ") || l == "# EOF" {
                continue;
            }
            let mut l = l.to_string();
            for c in &counters {
                for head in ["# HELP ", "# TYPE "] {
                    if let Some(rest) = l.strip_prefix(&format!("{head}{c} ")) {
                        l = format!("{head}{c}_total {rest}");
                    }
                }
            }
            text.push_str(&l);
            text.push('\n');
        }
        let mut child = std::process::Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "{said}\n{text}"
        );
    }

    #[test]
    fn exporter_state_families() {
        let none = encode_metrics(None, &ExporterState::default());
        assert!(none.contains("gpuaudit_audit_errors_total 0"), "{none}");
        assert!(!none.contains("gpuaudit_last_audit_timestamp_seconds"));
        assert!(!none.contains("gpuaudit_check_status"));
        assert!(none.contains("gpuaudit_build_info{version=\""));
        let state = ExporterState {
            last_audit_unix: Some(1_764_584_653.5),
            audit_duration_seconds: Some(0.25),
            audit_errors_total: 3,
            last_measurement_unix: Some(1_764_580_000.0),
        };
        let text = encode_metrics(None, &state);
        assert!(
            text.contains("gpuaudit_last_audit_timestamp_seconds 1764584653.5"),
            "{text}"
        );
        assert!(text.contains("# UNIT gpuaudit_audit_duration_seconds seconds"));
        assert!(text.contains("gpuaudit_audit_duration_seconds 0.25"));
        assert!(text.contains("# TYPE gpuaudit_audit_errors counter"));
        assert!(text.contains("gpuaudit_audit_errors_total 3"));
        assert!(text.contains("gpuaudit_last_measurement_timestamp_seconds 1764580000.0"));
    }

    #[test]
    fn hostile_label_values_are_escaped() {
        let hostile = "H200 \"x\" \\ evil\n} 1\ngpuaudit_fake 9 # {a=\"b\"}\u{1b}[31m";
        let r = report(Machine::healthy("h200-sxm-141gb", 1).gpu(0, |g| {
            g.name = Reading::Value(hostile.to_string());
        }));
        let text = encode_metrics(Some(&r), &ExporterState::default());
        let info = samples(&text, "gpuaudit_gpu_info{");
        assert_eq!(info.len(), 1, "{text}");
        assert!(
            info[0].contains(
                "name=\"H200 \\\"x\\\" \\\\ evil\\n} 1\\ngpuaudit_fake 9 # {a=\\\"b\\\"}\u{1b}[31m\""
            ),
            "{}",
            info[0]
        );
        // No line was injected: every line is a comment or a gpuaudit_ sample.
        assert!(text
            .lines()
            .all(|l| l.starts_with('#') || l.starts_with("gpuaudit_")));
        assert!(!text.lines().any(|l| l.starts_with("gpuaudit_fake")));
    }

    #[test]
    fn label_value_escaping_of_each_character() {
        let mut out = String::new();
        let fam: Family<Labels, Gauge<f64, AtomicU64>> = Family::default();
        fam.get_or_create(&vec![("v", lv("a\\b\"c\nd\re"))])
            .set(1.0);
        let mut reg = Registry::default();
        reg.register("t", "t", fam);
        encode(&mut out, &reg).unwrap();
        assert!(out.contains("t{v=\"a\\\\b\\\"c\\nd\re\"} 1.0"), "{out}");
    }
}
