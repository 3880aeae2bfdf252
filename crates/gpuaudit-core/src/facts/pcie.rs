//! The PCIe tree above the GPUs and the RDMA NICs: each device's path of bridges up to its
//! root port, the ACS registers of those bridges, and the IOMMU (pcie.acs, net.placement).

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PcieTree {
    /// The GPUs (NVIDIA display and 3D functions) and the RDMA NICs, in bus order.
    pub endpoints: Vec<PcieEndpoint>,
    /// Each bridge (root port, switch port) on an endpoint's path, once, in bus order.
    pub ports: Vec<PciePort>,
    pub iommu: Reading<Iommu>,
}

impl PcieTree {
    pub fn port(&self, bus_id: &str) -> Option<&PciePort> {
        self.ports
            .iter()
            .find(|p| p.bus_id.eq_ignore_ascii_case(bus_id))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EndpointRole {
    Gpu,
    /// An RDMA device of /sys/class/infiniband ("mlx5_0").
    Nic {
        device: String,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PcieEndpoint {
    /// "0000:1b:00.0", lower case.
    pub bus_id: String,
    pub role: EndpointRole,
    /// The PCI functions above the device, the root port first, as its sysfs path names them
    /// (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0 gives
    /// 0000:00:01.0, 0000:01:00.0, 0000:02:00.0). Empty: the device sits on a root bus (a VM's
    /// virtual root complex, or an integrated device).
    pub upstream: Reading<Vec<String>>,
    /// sysfs numa_node; -1 (the firmware gives no affinity) is kept as -1.
    pub numa_node: Reading<i32>,
}

impl PcieEndpoint {
    pub fn label(&self) -> String {
        match &self.role {
            EndpointRole::Gpu => format!("GPU {}", self.bus_id),
            EndpointRole::Nic { device } => format!("NIC {device} ({})", self.bus_id),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PciePort {
    pub bus_id: String,
    /// The machine path of its config space file (/sys/devices/.../config).
    pub config_path: String,
    /// The PCI Express capability's device/port type (4 root port, 5 switch upstream port, 6
    /// switch downstream port); unavailable where the config space could not be read that far.
    pub port_type: Reading<u8>,
    /// The ACS capability: `Value(None)` where the port has none, else its capability and
    /// control registers; unavailable with the reason where the extended config space could
    /// not be read (a reader without root gets 64 bytes).
    pub acs: Reading<Option<Acs>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acs {
    pub capability: u16,
    pub control: u16,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Iommu {
    /// Entries of /sys/class/iommu ("dmar0", "ivhd0"): the IOMMU units the kernel uses; empty
    /// where it uses none (off in the firmware or on the command line).
    pub units: Vec<String>,
    /// The IOMMU parameters of the kernel command line (iommu=pt, intel_iommu=on,
    /// amd_iommu=..., pcie_acs_override=...), where /proc/cmdline was read.
    pub cmdline: Reading<Vec<String>>,
}
