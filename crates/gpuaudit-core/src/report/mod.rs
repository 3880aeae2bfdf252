//! The report: `gpuaudit.report/1`, what every renderer and every script reads.

mod measurements;
mod series;

pub use measurements::measurements;
pub use series::{series, BurnTimeline, CopyCurve, Series, SizePoint};

use crate::checks;
use crate::facts::{Facts, GpuFacts, Libc, Measurement, Origin, VirtualizationMode};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::spec::SpecDb;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "gpuaudit.report/1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

/// How the audit was run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuditInfo {
    /// "live" or "snapshot".
    pub mode: String,
    /// The snapshot directory, for a snapshot audit.
    pub snapshot: Option<String>,
    pub profile: String,
    pub expect: Option<String>,
    pub full: bool,
    /// Why nothing was measured, where nothing was.
    pub measurements_not_run: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MachineSection {
    pub hostname: Option<String>,
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuSection {
    pub index: u32,
    pub name: Option<String>,
    pub pci_bus_id: String,
    pub uuid: Option<String>,
    pub memory_total_mib: Option<u64>,
    pub sm_count: Option<u32>,
    pub compute_capability: Option<String>,
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

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PcieSection {
    pub gen_current: Option<u32>,
    pub gen_max: Option<u32>,
    pub width_current: Option<u32>,
    pub width_max: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PowerSection {
    pub limit_w: Option<f64>,
    pub default_limit_w: Option<f64>,
    pub max_limit_w: Option<f64>,
    pub draw_w: Option<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpecRef {
    pub key: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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

impl Report {
    /// Run every check over the facts and gather the report.
    pub fn build(facts: &Facts, policy: &Policy) -> Report {
        let findings = checks::run_all(facts, policy);
        Self::from_findings(facts, policy, findings)
    }

    pub fn from_findings(facts: &Facts, policy: &Policy, findings: Vec<Finding>) -> Report {
        let summary = Summary::of(&findings);
        let (mode, snapshot) = match &facts.origin {
            Origin::Live => ("live".to_string(), None),
            Origin::Snapshot { path, .. } => ("snapshot".to_string(), Some(path.clone())),
        };
        Report {
            schema: SCHEMA.to_string(),
            tool: Tool {
                name: "gpuaudit".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            audit: AuditInfo {
                mode,
                snapshot,
                profile: policy.profile.to_string(),
                expect: policy.expect.as_ref().map(|e| match e.count {
                    Some(c) => format!("{}:{c}", e.model),
                    None => e.model.clone(),
                }),
                full: policy.full,
                measurements_not_run: facts.measured.not_run.clone(),
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
        memory_total_mib: g.memory.total_mib.value().copied(),
        sm_count: g.sm_count.value().copied(),
        compute_capability: g
            .compute_capability
            .value()
            .map(|c| c.to_string())
            .or_else(|| spec.map(|s| s.compute_capability.clone())),
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
