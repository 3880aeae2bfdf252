//! The report: `gpuaudit.report/1`, what every renderer and every script reads. Its JSON
//! Schema is generated from these types (`schema.rs`, published as docs/report.schema.json);
//! a saved report is read back by `read.rs`.

mod causes;
pub mod limits;
mod read;
mod redact;
#[cfg(test)]
mod robustness;
mod schema;
mod series;

pub use crate::figures::measurements;
pub use causes::Causes;
pub use read::{from_json, from_json_for_summary, ReadError};
pub use redact::{Kind as RedactedKind, RedactError, Redactor};
pub use schema::{json_schema, json_schema_text};
pub use series::{series, BurnTimeline, CopyCurve, Series, SizePoint};

use crate::checks;
use crate::facts::{Facts, GpuFacts, Libc, Measurement, Origin, ValueSource, VirtualizationMode};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::spec::SpecDb;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "gpuaudit.report/1";

/// A gpuaudit report: the machine, its GPUs, every finding and every measured figure.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Report {
    /// Always "gpuaudit.report/1"; a new field is added without changing it, a change of
    /// meaning changes it.
    #[schemars(extend("const" = SCHEMA))]
    pub schema: String,
    pub tool: Tool,
    pub audit: AuditInfo,
    pub machine: MachineSection,
    pub gpus: Vec<GpuSection>,
    pub findings: Vec<Finding>,
    pub measurements: Vec<Measurement>,
    /// The curves behind the measurements (host copies by size, the burn's timeline); `{}`
    /// where nothing was measured. Reports without it still read.
    #[serde(default)]
    pub series: Series,
    pub summary: Summary,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// How the audit was run.
#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct AuditInfo {
    /// When the audit ran (RFC 3339, UTC, to the second). Set by the gpuaudit command; null
    /// only in a report built without a clock (a library caller, a test).
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    pub audited_at: Option<String>,
    /// "live" or "snapshot".
    pub mode: String,
    /// The snapshot directory, for a snapshot audit.
    pub snapshot: Option<String>,
    /// The snapshot's description (its meta.json), for a snapshot audit.
    #[serde(default)]
    pub snapshot_description: Option<String>,
    /// When the snapshot was collected (its meta.json's `collected_at`, RFC 3339 UTC), for a
    /// snapshot audit of a snapshot that says.
    #[serde(default)]
    #[schemars(extend("format" = "date-time"))]
    pub snapshot_collected_at: Option<String>,
    pub profile: String,
    pub expect: Option<String>,
    pub full: bool,
    /// Why nothing was measured, where nothing was.
    pub measurements_not_run: Option<String>,
    /// True when `--redact` replaced the hostnames, IP and MAC addresses, serials, UUIDs and
    /// user names with placeholders (`report/redact.rs`); absent (false) otherwise, and in
    /// reports of a gpuaudit before it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct MachineSection {
    pub hostname: Option<String>,
    /// The firmware's system vendor (DMI sys_vendor): the maker, or the cloud ("Amazon EC2",
    /// "Google", "Microsoft Corporation").
    #[serde(default)]
    pub system_vendor: Option<String>,
    /// The firmware's product name (DMI product_name): the server model, or the cloud's
    /// ("p5.48xlarge" on AWS, "Google Compute Engine", "Virtual Machine" on Azure).
    #[serde(default)]
    pub system_product: Option<String>,
    /// DMI product_version.
    #[serde(default)]
    pub system_version: Option<String>,
    /// DMI board_vendor.
    #[serde(default)]
    pub board_vendor: Option<String>,
    /// DMI board_name.
    #[serde(default)]
    pub board_name: Option<String>,
    /// The cloud instance type, where the firmware names it (AWS); null elsewhere.
    #[serde(default)]
    pub instance_type: Option<String>,
    pub os: Option<String>,
    pub kernel: Option<String>,
    pub arch: Option<String>,
    pub cpu: Option<String>,
    pub cpus: Option<u32>,
    pub sockets: Option<u32>,
    pub memory_gib: Option<f64>,
    pub libc: Option<String>,
    /// "vm" (hypervisor flag or GPU pass-through/vGPU), "bare-metal", or null when unknown.
    pub virtualization: Option<String>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub toolkits: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct GpuSection {
    pub index: u32,
    pub name: Option<String>,
    pub pci_bus_id: String,
    pub uuid: Option<String>,
    /// The board's serial number (what NVIDIA and the provider ask for in an RMA).
    #[serde(default)]
    pub serial: Option<String>,
    #[serde(default)]
    pub board_part_number: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub sm_count: Option<u32>,
    pub compute_capability: Option<String>,
    /// Where `compute_capability` came from: "nvml", "nvidia-smi", "cuda" (read from the
    /// GPU) or "datasheet" (the identified model's entry in the spec database, not a reading).
    pub compute_capability_source: Option<ValueSource>,
    pub vbios: Option<String>,
    pub driver_binding: Option<String>,
    pub pcie: PcieSection,
    pub power: PowerSection,
    pub sm_clock_max_mhz: Option<u32>,
    pub persistence_mode: Option<bool>,
    pub mig: Option<bool>,
    pub virtualization: Option<VirtualizationMode>,
    pub ecc: Option<bool>,
    /// The matched model from the spec database.
    pub spec: Option<SpecRef>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct PcieSection {
    pub gen_current: Option<u32>,
    pub gen_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct PowerSection {
    pub limit_w: Option<f64>,
    pub default_limit_w: Option<f64>,
    pub max_limit_w: Option<f64>,
    pub draw_w: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, JsonSchema)]
pub struct SpecRef {
    pub key: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub pass: u32,
    pub info: u32,
    pub warn: u32,
    pub fail: u32,
    pub skip: u32,
}

impl Summary {
    pub fn of(findings: &[Finding]) -> Summary {
        let mut s = Summary::default();
        for f in findings {
            match f.status {
                Status::Pass => s.pass += 1,
                Status::Info => s.info += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::Skip => s.skip += 1,
            }
        }
        s
    }
}

/// The problems of a report counted as causes, as its verdict counts them: each root problem
/// once by the worst of it and what it explains, and one cause on several GPUs (the views'
/// groups: the same message about GPUs 0–7) once, so `compare`, `fleet` and `serve` count
/// what the table's first line counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProblemCounts {
    pub fail: u32,
    pub warn: u32,
}

impl ProblemCounts {
    pub fn of(report: &Report) -> ProblemCounts {
        let overview = crate::render::overview::Overview::of(report);
        let count = |s| u32::try_from(overview.count(s)).unwrap_or(u32::MAX);
        ProblemCounts {
            fail: count(Status::Fail),
            warn: count(Status::Warn),
        }
    }
}

impl Report {
    /// Run every check over the facts and gather the report.
    pub fn build(facts: &Facts, policy: &Policy) -> Report {
        let findings = checks::run_all(facts, policy);
        Self::from_findings(facts, policy, findings)
    }

    pub fn from_findings(facts: &Facts, policy: &Policy, findings: Vec<Finding>) -> Report {
        let summary = Summary::of(&findings);
        let (mode, snapshot, snapshot_description, snapshot_collected_at) = match &facts.origin {
            Origin::Live => ("live".to_string(), None, None, None),
            Origin::Snapshot {
                path,
                description,
                collected_at,
            } => (
                "snapshot".to_string(),
                Some(path.clone()),
                description.clone(),
                collected_at.clone(),
            ),
        };
        Report {
            schema: SCHEMA.to_string(),
            tool: Tool {
                name: "gpuaudit".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            audit: AuditInfo {
                audited_at: None,
                mode,
                snapshot,
                snapshot_description,
                snapshot_collected_at,
                profile: policy.profile.to_string(),
                expect: policy.expect.as_ref().map(|e| match e.count {
                    Some(c) => format!("{}:{c}", e.model),
                    None => e.model.clone(),
                }),
                full: policy.full,
                measurements_not_run: facts.measured.not_run.clone(),
                redacted: false,
            },
            machine: machine_section(facts),
            gpus: facts
                .gpu_list()
                .iter()
                .filter(|g| policy.selects(g.index))
                .map(|g| gpu_section(facts, g))
                .collect(),
            findings,
            measurements: measurements(facts),
            series: series(facts),
            summary,
        }
    }

    /// 0: no check failed; 1: at least one failed.
    pub fn exit_code(&self) -> i32 {
        if self.summary.fail > 0 {
            1
        } else {
            0
        }
    }
}

fn machine_section(facts: &Facts) -> MachineSection {
    let m = &facts.machine;
    let vm_by_gpu = facts.gpu_list().iter().any(|g| {
        matches!(
            g.virtualization.value(),
            Some(VirtualizationMode::PassThrough) | Some(VirtualizationMode::Vgpu)
        )
    });
    let virtualization = match (m.hypervisor.value(), vm_by_gpu) {
        (Some(true), _) | (_, true) => Some("vm".to_string()),
        (Some(false), false) => Some("bare-metal".to_string()),
        (None, false) => None,
    };
    MachineSection {
        hostname: m.hostname.value().cloned(),
        system_vendor: m.dmi.sys_vendor.value().cloned(),
        system_product: m.dmi.product_name.value().cloned(),
        system_version: m.dmi.product_version.value().cloned(),
        board_vendor: m.dmi.board_vendor.value().cloned(),
        board_name: m.dmi.board_name.value().cloned(),
        instance_type: m.dmi.instance_type().map(str::to_string),
        os: m.os.value().map(|o| o.pretty_name.clone()),
        kernel: m.kernel.value().cloned(),
        arch: m.arch.value().cloned(),
        cpu: m.cpu.value().map(|c| c.model.clone()),
        cpus: m.cpu.value().map(|c| c.logical_cpus),
        sockets: m.cpu.value().and_then(|c| c.sockets),
        memory_gib: m
            .memory_total_kib
            .value()
            .map(|k| (*k as f64 / (1024.0 * 1024.0) * 10.0).round() / 10.0),
        libc: m.libc.value().map(|l| match l {
            Libc::Glibc { version } => format!("glibc {}", version.as_deref().unwrap_or(""))
                .trim()
                .to_string(),
            Libc::Musl { version } => format!("musl {}", version.as_deref().unwrap_or(""))
                .trim()
                .to_string(),
        }),
        virtualization,
        driver_version: facts.driver.version.value().cloned(),
        cuda_driver_version: facts.driver.cuda_version.value().map(|v| v.to_string()),
        toolkits: facts
            .toolkit
            .value()
            .map(|t| {
                t.iter()
                    .map(|k| format!("{} ({})", k.version, k.path))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn gpu_section(facts: &Facts, g: &GpuFacts) -> GpuSection {
    let spec = SpecDb::embedded().identify_gpu(g);
    let pci = facts.pci_of(g);
    GpuSection {
        index: g.index,
        name: g.name.value().cloned(),
        pci_bus_id: g.pci_bus_id.clone(),
        uuid: g.uuid.value().cloned(),
        serial: g.serial.value().cloned(),
        board_part_number: g.board_part_number.value().cloned(),
        memory_total_mib: g.memory.total_mib.value().copied(),
        sm_count: g.sm_count.value().copied(),
        compute_capability: g
            .compute_capability
            .value()
            .map(|c| c.to_string())
            .or_else(|| spec.map(|s| s.compute_capability.clone())),
        compute_capability_source: match g.compute_capability.value() {
            Some(_) => g
                .compute_capability_source
                .or_else(|| ValueSource::of_facts(&g.source)),
            None => spec.map(|_| ValueSource::Datasheet),
        },
        vbios: g.vbios.value().cloned(),
        driver_binding: pci.and_then(|p| p.driver.value().cloned().flatten()),
        pcie: PcieSection {
            gen_current: g.pcie.gen_current.value().copied(),
            gen_max: g.pcie.gen_max.value().copied(),
            width_current: g.pcie.width_current.value().copied(),
            width_max: g.pcie.width_max.value().copied(),
        },
        power: PowerSection {
            limit_w: g.power.limit_w.value().copied(),
            default_limit_w: g.power.default_limit_w.value().copied(),
            max_limit_w: g.power.max_limit_w.value().copied(),
            draw_w: g.power.draw_w.value().copied(),
        },
        sm_clock_max_mhz: g.clocks.sm_max_mhz.value().copied(),
        persistence_mode: g.persistence_mode.value().copied(),
        mig: g.mig.current.value().copied(),
        virtualization: g.virtualization.value().cloned(),
        ecc: g.ecc.current.value().copied(),
        spec: spec.map(|s| SpecRef {
            key: s.key.clone(),
            name: s.name.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;
    use crate::testing::Machine;

    #[test]
    fn the_compute_capability_says_where_it_came_from() {
        let section = |f: &Facts| gpu_section(f, &f.gpu_list()[0]);
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let s = section(&f);
        assert_eq!(s.compute_capability.as_deref(), Some("9.0"));
        assert_eq!(s.compute_capability_source, Some(ValueSource::Nvml));
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.compute_capability_source = Some(ValueSource::Datasheet)
            })
            .build();
        assert_eq!(
            section(&f).compute_capability_source,
            Some(ValueSource::Datasheet)
        );
        // Not read, the model known: the datasheet's, said so.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.compute_capability = Reading::unavailable("nvidia-smi -q does not report it");
                g.compute_capability_source = None;
            })
            .build();
        let s = section(&f);
        assert_eq!(s.compute_capability.as_deref(), Some("9.0"));
        assert_eq!(s.compute_capability_source, Some(ValueSource::Datasheet));
        // A value with no recorded source is the facts' source's.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.source = "nvidia-smi".into();
                g.compute_capability_source = None;
            })
            .build();
        assert_eq!(
            section(&f).compute_capability_source,
            Some(ValueSource::NvidiaSmi)
        );
        // Neither read nor known.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.compute_capability = Reading::unavailable("not read");
                g.compute_capability_source = None;
                g.pci_device_id = Reading::unavailable("not read");
                g.name = Reading::unavailable("not read");
            })
            .build();
        let s = section(&f);
        assert_eq!(s.compute_capability, None);
        assert_eq!(s.compute_capability_source, None);
        let json = serde_json::to_value(&s).unwrap();
        assert!(json["compute_capability_source"].is_null());
    }
}
