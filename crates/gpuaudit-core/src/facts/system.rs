//! Facts about the machine, the driver, the kernel and the installed toolkit.

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MachineFacts {
    pub hostname: Reading<String>,
    /// `PRETTY_NAME` of /etc/os-release.
    pub os: Reading<OsRelease>,
    /// /proc/version.
    pub kernel: Reading<String>,
    /// x86_64, aarch64, ...
    pub arch: Reading<String>,
    pub cpu: Reading<CpuInfo>,
    pub memory_total_kib: Reading<u64>,
    /// glibc or musl (the NVIDIA driver does not support musl).
    pub libc: Reading<Libc>,
    /// `hypervisor` CPU flag, DMI vendor: is this a virtual machine.
    pub hypervisor: Reading<bool>,
    /// What the firmware says the machine is (/sys/class/dmi/id). Snapshots written before
    /// it was collected have none: "not read".
    #[serde(default)]
    pub dmi: Dmi,
}

impl MachineFacts {
    pub fn unread(reason: &str) -> Self {
        MachineFacts {
            hostname: Reading::unavailable(reason),
            os: Reading::unavailable(reason),
            kernel: Reading::unavailable(reason),
            arch: Reading::unavailable(reason),
            cpu: Reading::unavailable(reason),
            memory_total_kib: Reading::unavailable(reason),
            libc: Reading::unavailable(reason),
            hypervisor: Reading::unavailable(reason),
            dmi: Dmi::unread(reason),
        }
    }
}

/// The firmware's (DMI/SMBIOS) description of the machine, from `/sys/class/dmi/id/*`: who
/// made it and which model it is, what a provider's ticket asks for. On a cloud VM the vendor
/// is the cloud ("Amazon EC2", "Google", "Microsoft Corporation"); on AWS Nitro instances the
/// product name is the instance type ("p5.48xlarge"), where GCP ("Google Compute Engine") and
/// Azure ("Virtual Machine") name no type. Firmware placeholders ("To be filled by O.E.M.")
/// are readings that could not be taken, not values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dmi {
    pub sys_vendor: Reading<String>,
    pub product_name: Reading<String>,
    pub product_version: Reading<String>,
    pub board_vendor: Reading<String>,
    pub board_name: Reading<String>,
}

/// The vendor AWS's Nitro firmware reports; its product name is the instance type.
pub const AWS_DMI_VENDOR: &str = "Amazon EC2";

impl Dmi {
    pub fn unread(reason: &str) -> Self {
        Dmi {
            sys_vendor: Reading::unavailable(reason),
            product_name: Reading::unavailable(reason),
            product_version: Reading::unavailable(reason),
            board_vendor: Reading::unavailable(reason),
            board_name: Reading::unavailable(reason),
        }
    }

    /// The cloud instance type, where the firmware names it: on AWS (vendor "Amazon EC2")
    /// the product name, when it has the form of one ("g5.xlarge"; Xen-era instances say
    /// "HVM domU"). Other clouds do not put it in DMI: `None`.
    pub fn instance_type(&self) -> Option<&str> {
        let vendor = self.sys_vendor.value()?;
        let product = self.product_name.value()?;
        let looks_like_type = product.contains('.')
            && !product.contains(char::is_whitespace)
            && !product.starts_with('.')
            && !product.ends_with('.');
        (vendor == AWS_DMI_VENDOR && looks_like_type).then_some(product.as_str())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsRelease {
    /// `ID` (ubuntu, rhel, debian, alpine, ...).
    pub id: String,
    pub version_id: Option<String>,
    pub pretty_name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuInfo {
    pub model: String,
    pub vendor: Option<String>,
    /// Logical CPUs (processor entries).
    pub logical_cpus: u32,
    /// Distinct `physical id` values; `None` where cpuinfo has none (some VMs, Arm).
    pub sockets: Option<u32>,
    pub flags: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Libc {
    Glibc { version: Option<String> },
    Musl { version: Option<String> },
}

/// The driver as NVML / nvidia-smi / /proc/driver/nvidia report it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DriverFacts {
    /// Whether the management library answered: `Value(source)` ("nvml" or "nvidia-smi"), or
    /// the error it gave ("NVIDIA-SMI has failed because it couldn't communicate with the
    /// NVIDIA driver", "libnvidia-ml.so.1: cannot open shared object file", ...).
    pub query: Reading<String>,
    /// e.g. "580.159.04".
    pub version: Reading<String>,
    /// The newest CUDA version this driver supports (NVML's CUDA driver version), e.g. 13.0.
    pub cuda_version: Reading<CudaVersion>,
    /// The kernel module flavour, from /proc/driver/nvidia/version.
    pub module_flavor: Reading<ModuleFlavor>,
    /// The first line of /proc/driver/nvidia/version.
    pub proc_version: Reading<String>,
    /// How many GPUs the driver says are attached (`<attached_gpus>` of `nvidia-smi -q -x`),
    /// read on its own: it can exceed the GPUs described (`nvidia-smi -q -x -i N`, a log cut
    /// down before publishing, or a GPU the driver could not describe).
    #[serde(default)]
    pub attached_gpus: Reading<u32>,
    /// Where the driver listed more GPUs than gpuaudit reads (`parse::nvsmi_xml::MAX_GPUS`):
    /// what was left out, in words ("nvidia-smi lists 700000 GPUs; the first 256 were read").
    #[serde(default)]
    pub gpus_left_out: Option<String>,
    /// Where the driver's report was there but could not be read: nvidia-smi's XML malformed,
    /// refused (an entity declared), empty, too large or not a regular file, NVML's answer
    /// garbled, a snapshot's `cmd/driver-error.txt` unreadable. Why, in words. The GPUs are
    /// then not known, which is not "no GPU found" (gpu.present says so).
    #[serde(default)]
    pub report_unreadable: Option<String>,
}

impl DriverFacts {
    pub fn unread(reason: &str) -> Self {
        DriverFacts {
            query: Reading::unavailable(reason),
            version: Reading::unavailable(reason),
            cuda_version: Reading::unavailable(reason),
            module_flavor: Reading::unavailable(reason),
            proc_version: Reading::unavailable(reason),
            attached_gpus: Reading::unavailable(reason),
            gpus_left_out: None,
            report_unreadable: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CudaVersion {
    pub major: u32,
    pub minor: u32,
}

impl CudaVersion {
    pub const fn new(major: u32, minor: u32) -> Self {
        CudaVersion { major, minor }
    }

    /// "12.4" (also "12.4.1": the patch is dropped).
    pub fn parse(s: &str) -> Option<CudaVersion> {
        let mut it = s.trim().split('.');
        let major = it.next()?.trim().parse().ok()?;
        let minor = it.next().map(|m| m.trim().parse()).unwrap_or(Ok(0)).ok()?;
        Some(CudaVersion { major, minor })
    }

    /// NVML / cuDriverGetVersion encoding: 1000 * major + 10 * minor.
    pub fn from_int(v: i32) -> Option<CudaVersion> {
        if v <= 0 {
            return None;
        }
        let v = v as u32;
        Some(CudaVersion {
            major: v / 1000,
            minor: (v % 1000) / 10,
        })
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModuleFlavor {
    /// "NVIDIA UNIX Open Kernel Module": required on Blackwell, recommended from Turing on.
    Open,
    /// The closed-source module.
    Proprietary,
}

/// A loaded kernel module, one line of /proc/modules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModule {
    pub name: String,
    pub size: u64,
    pub used_by: Vec<String>,
    /// Live, Loading, Unloading.
    pub state: String,
    /// Taint flags in parentheses, e.g. "O" (out of tree), "POE" (proprietary, out of tree,
    /// unsigned).
    pub taints: String,
}

/// An installed CUDA toolkit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolkit {
    /// The directory, relative to the root ("/usr/local/cuda", "/usr/local/cuda-12.4").
    pub path: String,
    /// Full version where known ("13.0.88"), else major.minor.
    pub version: String,
    pub cuda: CudaVersion,
    /// Where the version was read: "version.json", "version.txt", "nvcc --version",
    /// "include/cuda.h", "lib64/libcudart.so.*".
    pub source: String,
    /// A forward-compatibility package (`compat/libcuda.so.*`) ships with this toolkit.
    pub forward_compat: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NetFacts {
    /// /proc/sys/net/core/somaxconn.
    pub somaxconn: Reading<u32>,
}

/// `nvidia-smi topo -m`: how each pair of GPUs is connected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Row/column labels of the GPU part of the matrix ("GPU0", "GPU1", ...).
    pub gpus: Vec<String>,
    /// `links[i][j]`: the connection between GPU i and GPU j.
    pub links: Vec<Vec<TopoLink>>,
    /// Labels of NICs in the matrix ("NIC0", or "mlx5_0" in older drivers).
    pub nics: Vec<String>,
    /// `gpu_nic[i][k]`: between GPU i and NIC k.
    pub gpu_nic: Vec<Vec<TopoLink>>,
    /// NIC legend: label to device name ("NIC0" -> "mlx5_0").
    pub nic_names: Vec<(String, String)>,
    pub cpu_affinity: Vec<Option<String>>,
    pub numa_affinity: Vec<Option<String>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopoLink {
    /// "X": the GPU itself.
    Itself,
    /// "NV#": a bonded set of # NVLinks.
    NvLink(u32),
    /// At most one PCIe bridge.
    Pix,
    /// Several PCIe bridges, no host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU).
    Phb,
    /// Between host bridges within a NUMA node.
    Node,
    /// Across the SMP interconnect between NUMA nodes.
    Sys,
    /// Anything else, kept verbatim.
    Other(String),
}

impl TopoLink {
    pub fn label(&self) -> String {
        match self {
            TopoLink::Itself => "X".into(),
            TopoLink::NvLink(n) => format!("NV{n}"),
            TopoLink::Pix => "PIX".into(),
            TopoLink::Pxb => "PXB".into(),
            TopoLink::Phb => "PHB".into(),
            TopoLink::Node => "NODE".into(),
            TopoLink::Sys => "SYS".into(),
            TopoLink::Other(s) => s.clone(),
        }
    }
}

/// The NVSwitch side of an NVLink fabric: the switches the host sees and the NVIDIA Fabric
/// Manager that programs them (nvlink.fabric judges it with each GPU's fabric registration).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvSwitchFacts {
    /// NVSwitch PCI functions on the bus (vendor 0x10de, an NVSwitch device id), in bus order.
    #[serde(default)]
    pub switches: Reading<Vec<NvSwitch>>,
    /// The NVSwitch driver's device nodes (`/dev/nvidia-nvswitch0`, ...), names only.
    #[serde(default)]
    pub device_nodes: Reading<Vec<String>>,
    #[serde(default)]
    pub fabric_manager: FabricManager,
}

impl NvSwitchFacts {
    pub fn unread(reason: &str) -> Self {
        NvSwitchFacts {
            switches: Reading::unavailable(reason),
            device_nodes: Reading::unavailable(reason),
            fabric_manager: FabricManager {
                unit_file: Reading::unavailable(reason),
                enabled: Reading::unavailable(reason),
                running: Reading::unavailable(reason),
                nvlsm_running: Reading::unavailable(reason),
                version: Reading::unavailable(reason),
                log: Reading::unavailable(reason),
            },
        }
    }
}

/// One NVSwitch PCI function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvSwitch {
    /// "0000:05:00.0".
    pub bus_id: String,
    /// PCI device id (0x1af1: A100 generation; 0x22a3: H100 generation).
    pub device: u16,
}

/// The NVIDIA Fabric Manager (`nv-fabricmanager`, service `nvidia-fabricmanager`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricManager {
    /// Its systemd unit file, where one is installed (`Value(None)`: none of the unit
    /// directories has it).
    #[serde(default)]
    pub unit_file: Reading<Option<String>>,
    /// Whether the unit is enabled (a `*.wants/nvidia-fabricmanager.service` link).
    #[serde(default)]
    pub enabled: Reading<bool>,
    /// Whether an `nv-fabricmanager` process runs (from /proc/<pid>/comm).
    #[serde(default)]
    pub running: Reading<bool>,
    /// Whether the NVLink Subnet Manager runs (an `nvlsm` process): the fabric manager needs
    /// it on NVLink 5 boards (HGX/DGX B200, B300).
    #[serde(default)]
    pub nvlsm_running: Reading<bool>,
    /// Its version as `nv-fabricmanager --version` prints it ("550.90.07").
    #[serde(default)]
    pub version: Reading<String>,
    /// What its log (/var/log/fabricmanager.log) says, from a bounded head and tail.
    #[serde(default)]
    pub log: Reading<FabricManagerLog>,
}

/// The fabric manager's log, as far as it was read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricManagerLog {
    /// Lines read (the head and the tail of the file).
    pub lines: usize,
    /// The version the log names ("Fabric Manager version 550.90.07 ..."), the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The last version-mismatch line: (fabric manager's version, driver's version), from
    /// "fabric manager NVIDIA GPU driver interface version X don't match with driver
    /// version Y".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<(String, String)>,
    /// The last error lines ([ERROR], "failed", "fatal"), escaped and bounded, oldest first.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Error lines seen in all (beyond those kept).
    #[serde(default)]
    pub error_count: usize,
    /// Whether the log says the switches were configured ("Successfully configured all the
    /// available NVSwitches"), after its last error.
    #[serde(default)]
    pub configured: bool,
}

/// One NVIDIA XID line of the kernel log ("NVRM: Xid (PCI:0000:00:06): 79, pid=..., GPU has
/// fallen off the bus.").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidEvent {
    /// The PCI address as the line gives it ("0000:00:06" or "0000:00:06.0"), lower case.
    pub bus_id: Option<String>,
    pub code: u32,
    /// The line, trimmed.
    pub text: String,
    /// The line's time stamp as written ("2024-08-30T11:43:09+0000", "Fri Aug 30 11:43:09
    /// 2024", "5107.644336" seconds after boot, "May 18 19:02:39"); absent where it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// That time in seconds since 1970 (UTC), where the stamp names a date with its year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// An NVSwitch "SXid" line ("nvidia-nvswitch0: SXid (PCI:...): 12028, ..."), not a GPU's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub switch: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dmi(vendor: &str, product: &str) -> Dmi {
        Dmi {
            sys_vendor: Reading::Value(vendor.into()),
            product_name: Reading::Value(product.into()),
            ..Dmi::unread("not read")
        }
    }

    #[test]
    fn the_instance_type_is_named_where_the_firmware_names_it() {
        assert_eq!(
            dmi("Amazon EC2", "p5.48xlarge").instance_type(),
            Some("p5.48xlarge")
        );
        assert_eq!(
            dmi("Amazon EC2", "g4dn.xlarge").instance_type(),
            Some("g4dn.xlarge")
        );
        // Xen-era AWS instances and other clouds do not put the type in DMI.
        for (v, p) in [
            ("Amazon EC2", "HVM domU"),
            ("Amazon EC2", "Amazon EC2"),
            ("Amazon EC2", "p5."),
            ("Amazon EC2", ".p5"),
            ("Amazon EC2", "p5. 48xlarge"),
            ("Google", "Google Compute Engine"),
            ("Microsoft Corporation", "Virtual Machine"),
            ("Xen", "p5.48xlarge"),
        ] {
            assert_eq!(dmi(v, p).instance_type(), None, "{v} {p}");
        }
        let mut no_vendor = dmi("Amazon EC2", "p5.48xlarge");
        no_vendor.sys_vendor = Reading::unavailable("missing");
        assert_eq!(no_vendor.instance_type(), None);
        assert_eq!(Dmi::default().instance_type(), None);
    }

    #[test]
    fn unread_dmi_keeps_the_reason() {
        let m = MachineFacts::unread("snapshot: not collected");
        for r in [
            &m.dmi.sys_vendor,
            &m.dmi.product_name,
            &m.dmi.product_version,
            &m.dmi.board_vendor,
            &m.dmi.board_name,
        ] {
            assert_eq!(r.reason(), Some("snapshot: not collected"));
        }
    }
}
