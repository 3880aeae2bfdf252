//! Facts for tests: a healthy machine of `n` GPUs of one model, changed one reading at a time.
//!
//! ```ignore
//! // (not a doctest: doctests build the library without `cfg(test)`; the test
//! // `one_reading_changes_one_verdict` runs this)
//! use gpuaudit_core::testing::Machine;
//! use gpuaudit_core::Reading;
//! let facts = Machine::healthy("h200-sxm-141gb", 2)
//!     .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
//!     .build();
//! assert_eq!(facts.gpu_list().len(), 2);
//! ```
//!
//! The GPUs, their PCI functions, the driver, the kernel modules, the topology matrix, the
//! toolkit and the machine are read and as they should be: every facts check about them
//! passes. The host around the GPUs (environment, libraries, Python, containers, mounts,
//! network, Jupyter, ssh) and `net.somaxconn` are left unread ("not read in this test"): a
//! test of a host check sets what it judges. Nothing is measured unless [`Machine::measured`]
//! is called. Built only for tests (`cfg(test)`) or with the `testing` feature.

pub mod measured;

use crate::facts::{
    ComputeCapability, CpuInfo, CudaVersion, Facts, GpuFacts, GpuProcess, KernelModule, Libc,
    MeasuredFacts, ModuleFlavor, NvLink, OsRelease, PciFunction, RemappedRows, RetiredPages,
    ThrottleReason, Toolkit, TopoLink, Topology, VirtualizationMode,
};
use crate::finding::{Finding, Status};
use crate::reading::Reading;
use crate::spec::{GpuSpec, SpecDb};

/// Why a reading of the builder's machine is missing.
pub const NOT_READ: &str = "not read in this test";
/// The driver every built machine runs: R580, CUDA 13.0 (that of the fixtures' H200s).
pub const DRIVER_VERSION: &str = "580.159.04";
pub const DRIVER_CUDA: CudaVersion = CudaVersion::new(13, 0);

/// A machine for a test, built from the spec database's entry of one model.
#[derive(Clone, Debug)]
pub struct Machine {
    facts: Facts,
}

impl Machine {
    /// `n` GPUs of the spec database's model `key` (e.g. "h200-sxm-141gb", "l4"), bare metal,
    /// every reading as the datasheet says it should be. Panics on a key the database does not
    /// have: that is a mistake in the test.
    pub fn healthy(key: &str, n: u32) -> Machine {
        let spec = SpecDb::embedded()
            .by_key(key)
            .unwrap_or_else(|| panic!("the spec database has no model '{key}'"));
        let mut f = Facts::empty(crate::facts::Origin::Live, NOT_READ);
        f.gpus = Reading::Value((0..n).map(|i| healthy_gpu(spec, i)).collect());
        f.pci_gpus = Reading::Value((0..n).map(|i| healthy_pci(spec, i)).collect());
        f.topology = Reading::Value(topology(spec, n));
        f.modules = Reading::Value(
            ["nvidia", "nvidia_uvm", "nvidia_modeset", "nvidia_drm"]
                .iter()
                .map(|m| KernelModule {
                    name: m.to_string(),
                    size: 1 << 20,
                    used_by: vec![],
                    state: "Live".into(),
                    taints: "OE".into(),
                })
                .collect(),
        );
        f.toolkit = Reading::Value(vec![Toolkit {
            path: "/usr/local/cuda".into(),
            version: "13.0.88".into(),
            cuda: DRIVER_CUDA,
            source: "version.json".into(),
            forward_compat: false,
        }]);
        f.xid_events = Reading::Value(vec![]);
        let d = &mut f.driver;
        d.query = Reading::Value("nvml".into());
        d.version = Reading::Value(DRIVER_VERSION.into());
        d.cuda_version = Reading::Value(DRIVER_CUDA);
        d.module_flavor = Reading::Value(ModuleFlavor::Open);
        d.proc_version = Reading::Value(format!(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {DRIVER_VERSION}  Release \
             Build  (dvs-builder@U22-I3-AE18-23-3)  Thu Jan  1 00:00:00 UTC 2026"
        ));
        let m = &mut f.machine;
        m.hostname = Reading::Value("test-host".into());
        m.os = Reading::Value(OsRelease {
            id: "ubuntu".into(),
            version_id: Some("24.04".into()),
            pretty_name: "Ubuntu 24.04.3 LTS".into(),
        });
        m.kernel = Reading::Value(
            "Linux version 6.8.0-60-generic (buildd@lcy02-amd64-001) (gcc 13.3.0) #63-Ubuntu SMP"
                .into(),
        );
        m.arch = Reading::Value("x86_64".into());
        m.cpu = Reading::Value(CpuInfo {
            model: "AMD EPYC 9654 96-Core Processor".into(),
            vendor: Some("AuthenticAMD".into()),
            logical_cpus: 32,
            sockets: Some(1),
            flags: vec!["sse4_2".into(), "avx2".into()],
        });
        m.memory_total_kib = Reading::Value(256 << 20);
        m.libc = Reading::Value(Libc::Glibc {
            version: Some("2.39".into()),
        });
        m.hypervisor = Reading::Value(false);
        Machine { facts: f }
    }

    /// Change GPU `index` (NVML index). Panics where the machine has no such GPU.
    pub fn gpu(mut self, index: u32, change: impl FnOnce(&mut GpuFacts)) -> Machine {
        let g = self
            .gpus_mut()
            .iter_mut()
            .find(|g| g.index == index)
            .unwrap_or_else(|| panic!("the machine has no GPU {index}"));
        change(g);
        self
    }

    /// Change every GPU the same way.
    pub fn gpus(mut self, change: impl Fn(&mut GpuFacts)) -> Machine {
        self.gpus_mut().iter_mut().for_each(change);
        self
    }

    /// Change the sysfs PCI function of GPU `index`.
    pub fn pci(mut self, index: u32, change: impl FnOnce(&mut PciFunction)) -> Machine {
        let bus = bus_id(index);
        let p = match &mut self.facts.pci_gpus {
            Reading::Value(p) => p.iter_mut().find(|p| p.bus_id == bus),
            Reading::Unavailable(_) => None,
        }
        .unwrap_or_else(|| panic!("the machine has no PCI function for GPU {index}"));
        change(p);
        self
    }

    /// Change anything else.
    pub fn with(mut self, change: impl FnOnce(&mut Facts)) -> Machine {
        change(&mut self.facts);
        self
    }

    /// The mount table, as /proc/mounts would give it. Panics on a line the parser refuses.
    pub fn mounts(mut self, table: &str) -> Machine {
        let mounts = crate::parse::host::mounts::parse_mounts(table)
            .unwrap_or_else(|e| panic!("mount table of the test: {e}"));
        self.facts.host.mounts = Reading::Value(mounts);
        self
    }

    /// Mark the measurements as run (`--full`), every group still "not measured in this
    /// test", then change them.
    pub fn measured(mut self, change: impl FnOnce(&mut MeasuredFacts)) -> Machine {
        let m = &mut self.facts.measured;
        if m.not_run.is_some() {
            m.not_run = None;
            m.mode = Some("full".into());
        }
        change(m);
        self
    }

    pub fn build(self) -> Facts {
        self.facts
    }

    fn gpus_mut(&mut self) -> &mut Vec<GpuFacts> {
        match &mut self.facts.gpus {
            Reading::Value(g) => g,
            Reading::Unavailable(_) => panic!("the machine's GPUs were made unreadable"),
        }
    }
}

/// The statuses of some findings, in order.
pub fn statuses(findings: &[Finding]) -> Vec<Status> {
    findings.iter().map(|f| f.status).collect()
}

/// The status of the (first) finding about GPU `gpu`; panics where there is none.
pub fn gpu_status(findings: &[Finding], gpu: u32) -> Status {
    findings
        .iter()
        .find(|f| f.gpu == Some(gpu))
        .unwrap_or_else(|| panic!("no finding about GPU {gpu}: {findings:#?}"))
        .status
}

/// "0000:00:06.0" for GPU 0, as on the fixtures' VMs.
pub fn bus_id(index: u32) -> String {
    format!("0000:00:{:02x}.0", 6 + index)
}

fn from_spec<T>(v: Option<T>, what: &str) -> Reading<T> {
    match v {
        Some(v) => Reading::Value(v),
        None => Reading::unavailable(format!("the datasheet gives no {what}")),
    }
}

fn healthy_gpu(spec: &GpuSpec, index: u32) -> GpuFacts {
    let mut g = GpuFacts::unread(index, &bus_id(index), "nvml", NOT_READ);
    g.name = Reading::Value(
        spec.nvml_names
            .first()
            .cloned()
            .unwrap_or_else(|| spec.name.clone()),
    );
    g.uuid = Reading::Value(format!("GPU-{index}aaa"));
    g.serial = Reading::Value(format!("165432100{index:04}"));
    g.pci_device_id = from_spec(spec.pci_device_ids.first().copied(), "PCI device id");
    g.architecture = Reading::Value(spec.architecture.clone());
    g.compute_capability = from_spec(spec.compute_capability(), "compute capability");
    // A healthy live machine reads it through NVML.
    g.compute_capability_source = g
        .compute_capability
        .value()
        .map(|_| crate::facts::ValueSource::Nvml);
    g.vbios = Reading::Value("96.00.AF.00.01".into());
    // Drivers show a little less than the label (memory the driver keeps).
    let total = spec.memory_mib().map(|m| (m * 0.995) as u64);
    g.memory.total_mib = from_spec(total, "memory size");
    g.memory.used_mib = Reading::Value(0);
    g.memory.free_mib = from_spec(total, "memory size");
    g.sm_count = from_spec(spec.sm_count, "SM count");
    let p = &mut g.pcie;
    p.gen_current = from_spec(spec.pcie_gen, "PCIe generation");
    p.gen_max = from_spec(spec.pcie_gen, "PCIe generation");
    p.gen_max_gpu = from_spec(spec.pcie_gen, "PCIe generation");
    p.gen_max_host = from_spec(spec.pcie_gen, "PCIe generation");
    p.width_current = from_spec(spec.pcie_width, "PCIe width");
    p.width_max = from_spec(spec.pcie_width, "PCIe width");
    p.replay_counter = Reading::Value(0);
    let w = &mut g.power;
    w.draw_w = Reading::Value(80.0);
    w.limit_w = from_spec(spec.tdp_w, "board power");
    w.default_limit_w = from_spec(spec.tdp_w, "board power");
    w.max_limit_w = from_spec(spec.tdp_w, "board power");
    w.min_limit_w = from_spec(spec.tdp_w.map(|t| (t * 0.4).round()), "board power");
    let c = &mut g.clocks;
    c.sm_mhz = Reading::Value(345);
    c.sm_max_mhz = from_spec(spec.boost_clock_mhz, "boost clock");
    c.app_sm_mhz = from_spec(spec.boost_clock_mhz, "boost clock");
    c.default_app_sm_mhz = from_spec(spec.boost_clock_mhz, "boost clock");
    g.throttle_reasons = Reading::Value(vec![ThrottleReason::GpuIdle]);
    g.performance_state = Reading::Value("P0".into());
    g.persistence_mode = Reading::Value(true);
    g.mig.current = Reading::Value(false);
    g.mig.pending = Reading::Value(false);
    g.virtualization = Reading::Value(VirtualizationMode::None);
    g.compute_mode = Reading::Value("Default".into());
    let e = &mut g.ecc;
    e.current = Reading::Value(true);
    e.pending = Reading::Value(true);
    e.volatile_corrected = Reading::Value(0);
    e.volatile_uncorrected = Reading::Value(0);
    e.aggregate_corrected = Reading::Value(0);
    e.aggregate_uncorrected = Reading::Value(0);
    // Ampere and later remap rows; older GPUs retire pages.
    let ampere_or_later = spec
        .compute_capability()
        .is_some_and(|cc| cc >= ComputeCapability { major: 8, minor: 0 });
    if ampere_or_later {
        g.remapped_rows = Reading::Value(RemappedRows {
            correctable: 0,
            uncorrectable: 0,
            pending: false,
            failure: false,
        });
        g.retired_pages = Reading::unavailable("N/A: this GPU remaps rows instead");
    } else {
        g.retired_pages = Reading::Value(RetiredPages {
            single_bit: 0,
            double_bit: 0,
            pending: false,
        });
        g.remapped_rows = Reading::unavailable("N/A: row remapping arrives with Ampere");
    }
    g.temperature_c = Reading::Value(30);
    g.utilization_pct = Reading::Value(0);
    g.processes = Reading::Value(Vec::<GpuProcess>::new());
    g.nvlinks = Reading::Value(match spec.nvlink.as_ref().filter(|n| !n.bridge) {
        Some(n) => (0..n.links.unwrap_or(0))
            .map(|link| NvLink {
                link,
                active: true,
                version: Some(n.version),
                speed_gbps: None,
                remote_bus_id: None,
            })
            .collect(),
        None => vec![],
    });
    g.fabric = Reading::unavailable("not an NVSwitch system");
    g
}

/// PCIe generation to the link speed sysfs reports, GT/s.
fn gen_gts(gen: u32) -> Option<f64> {
    [2.5, 5.0, 8.0, 16.0, 32.0, 64.0]
        .get(gen.checked_sub(1)? as usize)
        .copied()
}

fn healthy_pci(spec: &GpuSpec, index: u32) -> PciFunction {
    let gts = from_spec(spec.pcie_gen.and_then(gen_gts), "PCIe generation");
    PciFunction {
        bus_id: bus_id(index),
        vendor: 0x10de,
        device: spec.pci_device_ids.first().copied().unwrap_or(0),
        subsystem_vendor: Reading::Value(0x10de),
        subsystem_device: Reading::unavailable(NOT_READ),
        class: 0x030200,
        driver: Reading::Value(Some("nvidia".into())),
        current_link_gts: gts.clone(),
        current_link_width: from_spec(spec.pcie_width, "PCIe width"),
        max_link_gts: gts,
        max_link_width: from_spec(spec.pcie_width, "PCIe width"),
        numa_node: Reading::Value(0),
        local_cpulist: Reading::Value("0-31".into()),
    }
}

/// Every pair over NVLink where the model has it (not bridged), else through the host bridge.
fn topology(spec: &GpuSpec, n: u32) -> Topology {
    let between = match spec.nvlink.as_ref().filter(|l| !l.bridge) {
        Some(l) => TopoLink::NvLink(l.links.unwrap_or(1)),
        None => TopoLink::Phb,
    };
    let n = n as usize;
    Topology {
        gpus: (0..n).map(|i| format!("GPU{i}")).collect(),
        links: (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            TopoLink::Itself
                        } else {
                            between.clone()
                        }
                    })
                    .collect()
            })
            .collect(),
        nics: vec![],
        gpu_nic: vec![],
        nic_names: vec![],
        cpu_affinity: vec![Some("0-31".into()); n],
        numa_affinity: vec![Some("0".into()); n],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::{self, CheckKind};
    use crate::policy::Policy;

    /// Every facts check over the built machine: nothing to warn about. The host checks, whose
    /// facts the builder leaves unread, skip.
    fn assert_healthy(key: &str, n: u32) {
        let f = Machine::healthy(key, n).build();
        for c in checks::all() {
            let out = checks::run_one(c, &f, &Policy::default());
            for x in &out {
                assert!(
                    !matches!(x.status, Status::Warn | Status::Fail),
                    "{key} x{n}: {} {:?}: {}",
                    c.id,
                    x.status,
                    x.message
                );
                if c.kind == CheckKind::Measured {
                    assert_eq!(x.status, Status::Skip, "{key} x{n}: {}", c.id);
                }
            }
        }
        for id in [
            "gpu.present",
            "gpu.identity",
            "gpu.uniform",
            "gpu.virtualization",
            "gpu.driver-binding",
            "pcie.link",
            "power.limit",
            "clocks.throttle",
            "clocks.max",
            "cuda.driver",
            "cuda.toolkit-compat",
            "kernel.modules",
            "os.platform",
            "os.persistence",
            "os.numa",
            "memory.ecc",
            "memory.errors",
        ] {
            let c = checks::find(id).unwrap_or_else(|| panic!("{id}"));
            let out = checks::run_one(c, &f, &Policy::default());
            // A figure the datasheet lacks is one the builder cannot fill in: that skips.
            assert!(
                out.iter().all(|x| x.status == Status::Pass
                    || (x.status == Status::Skip && x.message.contains("the datasheet gives no"))),
                "{key} x{n}: {id}: {out:#?}"
            );
        }
    }

    #[test]
    fn healthy_machines_pass_every_facts_check() {
        assert_healthy("h200-sxm-141gb", 2);
        assert_healthy("h200-sxm-141gb", 8);
        assert_healthy("h100-sxm5-80gb", 1);
        assert_healthy("l4", 4);
        assert_healthy("v100-sxm2-32gb", 2);
    }

    #[test]
    fn one_reading_changes_one_verdict() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.pcie.width_current = Reading::Value(8))
            .build();
        let out = checks::run_one(
            checks::find("pcie.link").expect("registered"),
            &f,
            &Policy::default(),
        );
        assert_eq!(statuses(&out), vec![Status::Pass, Status::Fail]);
        assert_eq!(out[1].gpu, Some(1));
    }

    #[test]
    fn pci_and_measured_are_changed_in_place() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(0, |p| p.driver = Reading::Value(Some("vfio-pci".into())))
            .measured(|m| m.context = Reading::unavailable("child crashed"))
            .build();
        assert_eq!(
            f.pci_of(&f.gpu_list()[0])
                .and_then(|p| p.driver.value().cloned()),
            Some(Some("vfio-pci".to_string()))
        );
        assert!(f.measured.not_run.is_none());
        assert_eq!(f.measured.context.reason(), Some("child crashed"));
        assert_eq!(f.measured.memory.reason(), Some(NOT_READ));
    }
}
