//! The metric families of `gpuaudit serve`, from the latest report (DESIGN "gpuaudit serve").
//!
//! Encoded by prometheus-client (OpenMetrics text). Names are `gpuaudit_*` (nothing that
//! could meet dcgm-exporter's `DCGM_FI_*`), values in base units with the unit as suffix.
//! A reading the report does not have is no series (never a 0).

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

    let value = GaugeFamily::default();
    let ratio = GaugeFamily::default();
    let expected = GaugeFamily::default();
    for m in &r.measurements {
        let labels: Labels = vec![
            ("name", lv(m.name.as_str())),
            ("gpu", lv(m.gpu.map(|i| i.to_string()).unwrap_or_default())),
            (
                "peer",
                lv(m.peer.map(|i| i.to_string()).unwrap_or_default()),
            ),
            ("dtype", lv(m.dtype.clone().unwrap_or_default())),
            ("unit", lv(m.unit.as_str())),
        ];
        value.get_or_create(&labels).set(m.value);
        if let Some(x) = m.ratio {
            ratio.get_or_create(&labels).set(x);
        }
        if let Some(x) = m.expected {
            expected.get_or_create(&labels).set(x);
        }
    }
    registry.register(
        "gpuaudit_measurement",
        "The latest measured figure, in the unit its `unit` label names (the report's)",
        value,
    );
    registry.register(
        "gpuaudit_measurement_ratio",
        "The measured figure over its expectation (the datasheet's or what healthy GPUs reach; \
         for latencies above 1 is slower)",
        ratio,
    );
    registry.register(
        "gpuaudit_measurement_expected",
        "What the figure is held against, in the unit its `unit` label names",
        expected,
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
    use gpuaudit_core::facts::Measurement;
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
        assert!(
            text.contains(&format!(
                "gpuaudit_gpu_info{{gpu=\"0\",uuid=\"{}\",name=\"{name}\",pci_bus_id=\"{}\",driver=\"{driver}\"}} 1.0",
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

    #[test]
    fn measurements_with_their_ratio_and_expectation() {
        let mut r = report(Machine::healthy("h200-sxm-141gb", 2));
        r.measurements.push(Measurement {
            name: "gemm_tflops".into(),
            gpu: Some(0),
            peer: None,
            value: 700.5,
            unit: "TFLOPS".into(),
            expected: Some(989.0),
            ratio: Some(0.708),
            method: "test".into(),
            size_bytes: None,
            dtype: Some("bf16".into()),
            attainable: None,
            path: None,
        });
        r.measurements.push(Measurement {
            name: "p2p_bandwidth".into(),
            gpu: Some(0),
            peer: Some(1),
            value: 120.0,
            unit: "GB/s".into(),
            expected: None,
            ratio: None,
            method: "test".into(),
            size_bytes: None,
            dtype: None,
            attainable: None,
            path: None,
        });
        let text = encode_metrics(Some(&r), &ExporterState::default());
        let l = "{name=\"gemm_tflops\",gpu=\"0\",peer=\"\",dtype=\"bf16\",unit=\"TFLOPS\"}";
        assert!(
            text.contains(&format!("gpuaudit_measurement{l} 700.5")),
            "{text}"
        );
        assert!(text.contains(&format!("gpuaudit_measurement_ratio{l} 0.708")));
        assert!(text.contains(&format!("gpuaudit_measurement_expected{l} 989.0")));
        let p = "{name=\"p2p_bandwidth\",gpu=\"0\",peer=\"1\",dtype=\"\",unit=\"GB/s\"}";
        assert!(text.contains(&format!("gpuaudit_measurement{p} 120.0")));
        assert!(!text.contains(&format!("gpuaudit_measurement_ratio{p}")));
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
