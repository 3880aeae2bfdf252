//! Facts: plain data read from the machine (live) or from a snapshot, before any judgement.
//!
//! Sources fill these structs; checks read them and never touch the machine. Every field that
//! comes from the machine is a [`Reading`], so a value that could not be read carries its reason.

mod aer;
mod gpu;
mod host;
mod measured;
mod pcie;
pub mod plausible;
mod system;

pub use crate::figures::results::*;
pub use aer::*;
pub use gpu::*;
pub use host::*;
pub use measured::*;
pub use pcie::*;
pub use system::*;

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// The reason of a reading NVML answered with NVML_ERROR_NOT_SUPPORTED: the GPU, in this
/// configuration, has no such thing (checks tell it from a reading that failed).
pub const NVML_NOT_SUPPORTED: &str = "NVML: not supported on this GPU";

/// Where the facts came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Origin {
    /// This machine, read while the audit ran.
    Live,
    /// A snapshot directory written by `gpuaudit collect` (or by hand).
    Snapshot {
        path: String,
        description: Option<String>,
        /// When `gpuaudit collect` wrote it (meta.json's `collected_at`, RFC 3339 UTC).
        #[serde(default)]
        collected_at: Option<String>,
    },
}

impl Origin {
    pub fn is_snapshot(&self) -> bool {
        matches!(self, Origin::Snapshot { .. })
    }
}

/// Everything gpuaudit knows about one machine.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Facts {
    pub origin: Origin,
    pub machine: MachineFacts,
    /// The NVIDIA driver as the management library (NVML or nvidia-smi) reports it.
    pub driver: DriverFacts,
    /// GPUs as the driver enumerates them (NVML order, which is PCI bus order). `Unavailable`
    /// when the driver could not be asked at all (no NVML, no nvidia-smi, driver not loaded).
    pub gpus: Reading<Vec<GpuFacts>>,
    /// NVIDIA display/3D PCI functions found in sysfs, whether or not a driver answers for them.
    pub pci_gpus: Reading<Vec<PciFunction>>,
    /// `nvidia-smi topo -m`.
    pub topology: Reading<Topology>,
    /// `/proc/modules`.
    pub modules: Reading<Vec<KernelModule>>,
    /// The CUDA toolkit(s) installed under the root.
    pub toolkit: Reading<Vec<Toolkit>>,
    pub net: NetFacts,
    /// NVIDIA XID events from the kernel log, where it is readable (root, or a snapshot).
    pub xid_events: Reading<Vec<XidEvent>>,
    /// NVSwitches and the fabric manager (nvlink.fabric).
    #[serde(default)]
    pub nvswitch: NvSwitchFacts,
    /// The PCIe paths above the GPUs and RDMA NICs, their bridges' ACS, the IOMMU.
    #[serde(default)]
    pub pcie_tree: Reading<PcieTree>,
    /// PCIe AER counters of each GPU's path and the kernel log's PCIe lines (pcie.aer).
    #[serde(default)]
    pub pcie_errors: PcieErrorFacts,
    /// The software stack and the host around the GPU (libraries, containers, storage, ...).
    pub host: HostFacts,
    /// What was measured on the GPUs (empty on a snapshot or a facts-only audit).
    pub measured: MeasuredFacts,
}

impl Facts {
    /// Facts with nothing read: every reading is `Unavailable(reason)`. Tests start from this.
    pub fn empty(origin: Origin, reason: &str) -> Facts {
        Facts {
            origin,
            machine: MachineFacts::unread(reason),
            driver: DriverFacts::unread(reason),
            gpus: Reading::unavailable(reason),
            pci_gpus: Reading::unavailable(reason),
            topology: Reading::unavailable(reason),
            modules: Reading::unavailable(reason),
            toolkit: Reading::unavailable(reason),
            net: NetFacts {
                somaxconn: Reading::unavailable(reason),
            },
            xid_events: Reading::unavailable(reason),
            nvswitch: NvSwitchFacts::unread(reason),
            pcie_tree: Reading::unavailable(reason),
            pcie_errors: PcieErrorFacts::unread(reason),
            host: HostFacts::unread(reason),
            measured: MeasuredFacts::not_run(reason),
        }
    }

    /// The GPUs the driver enumerated, or an empty slice.
    pub fn gpu_list(&self) -> &[GpuFacts] {
        self.gpus.value().map(Vec::as_slice).unwrap_or(&[])
    }

    /// How many InfiniBand/RoCE devices the host has, where that was read.
    pub fn host_ib_devices(&self) -> Option<usize> {
        let ports = self.host.fabric.rdma.value()?;
        let mut devices: Vec<&str> = ports.iter().map(|p| p.device.as_str()).collect();
        devices.sort_unstable();
        devices.dedup();
        Some(devices.len())
    }

    /// The sysfs PCI function of a GPU, matched by bus id.
    pub fn pci_of(&self, gpu: &GpuFacts) -> Option<&PciFunction> {
        self.pci_gpus
            .value()?
            .iter()
            .find(|p| p.bus_id.eq_ignore_ascii_case(&gpu.pci_bus_id))
    }
}
