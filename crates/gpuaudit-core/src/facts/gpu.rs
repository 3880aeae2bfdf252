//! Facts about each GPU: from NVML (live) or `nvidia-smi -q -x` (snapshot, fallback), the
//! kernel module's procfs files (last fallback), and from sysfs (the PCI function).

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// One GPU as the driver reports it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuFacts {
    /// NVML index (PCI bus order).
    pub index: u32,
    /// Normalised PCI address, sysfs style: "0000:00:06.0" (lower case, 4-digit domain).
    pub pci_bus_id: String,
    /// Where these facts came from: "nvml", "nvidia-smi", or "procfs" (the kernel module's
    /// `/proc/driver/nvidia/gpus/*/information`, where neither of the others answered).
    pub source: String,
    pub name: Reading<String>,
    pub uuid: Reading<String>,
    pub serial: Reading<String>,
    /// PCI device id (0x2335 for an H200 SXM).
    pub pci_device_id: Reading<u16>,
    /// PCI subsystem id as NVML gives it: subsystem device << 16 | subsystem vendor.
    pub pci_subsystem_id: Reading<u32>,
    /// "Hopper", "Ampere", ...
    pub architecture: Reading<String>,
    /// The CUDA compute capability. nvidia-smi -q does not print it; where no source read it,
    /// gather fills it from the model's datasheet entry and says so in
    /// [`compute_capability_source`](Self::compute_capability_source).
    pub compute_capability: Reading<ComputeCapability>,
    /// Where [`compute_capability`](Self::compute_capability) came from; `None` while it is
    /// `Unavailable`. A datasheet value is the model's, not a reading of this GPU: a GPU
    /// identified as the wrong model gets the wrong one.
    #[serde(default)]
    pub compute_capability_source: Option<ValueSource>,
    pub vbios: Reading<String>,
    pub board_part_number: Reading<String>,
    pub memory: GpuMemory,
    pub sm_count: Reading<u32>,
    pub pcie: PcieLink,
    pub power: Power,
    pub clocks: Clocks,
    /// Clock event (throttle) reasons active when read, each decoded on its own.
    pub throttle_reasons: Reading<Vec<ThrottleReason>>,
    /// "P0" ... "P12".
    pub performance_state: Reading<String>,
    pub persistence_mode: Reading<bool>,
    pub mig: Mig,
    pub virtualization: Reading<VirtualizationMode>,
    pub compute_mode: Reading<String>,
    pub ecc: Ecc,
    pub retired_pages: Reading<RetiredPages>,
    pub remapped_rows: Reading<RemappedRows>,
    pub temperature_c: Reading<i32>,
    /// GPU utilisation (percent) when read.
    pub utilization_pct: Reading<u32>,
    /// Compute processes running on the GPU when read.
    pub processes: Reading<Vec<GpuProcess>>,
    /// NVLink links this GPU has (NVML, or `nvidia-smi nvlink -s` in a snapshot).
    pub nvlinks: Reading<Vec<NvLink>>,
    /// NVSwitch fabric registration (GPUs on NVSwitch systems); `Unavailable` elsewhere.
    pub fabric: Reading<Fabric>,
}

impl GpuFacts {
    /// A GPU with only its identity known; every other reading says `reason`.
    pub fn unread(index: u32, pci_bus_id: &str, source: &str, reason: &str) -> GpuFacts {
        GpuFacts {
            index,
            pci_bus_id: pci_bus_id.to_string(),
            source: source.to_string(),
            name: Reading::unavailable(reason),
            uuid: Reading::unavailable(reason),
            serial: Reading::unavailable(reason),
            pci_device_id: Reading::unavailable(reason),
            pci_subsystem_id: Reading::unavailable(reason),
            architecture: Reading::unavailable(reason),
            compute_capability: Reading::unavailable(reason),
            compute_capability_source: None,
            vbios: Reading::unavailable(reason),
            board_part_number: Reading::unavailable(reason),
            memory: GpuMemory {
                total_mib: Reading::unavailable(reason),
                used_mib: Reading::unavailable(reason),
                free_mib: Reading::unavailable(reason),
                reserved_mib: Reading::unavailable(reason),
            },
            sm_count: Reading::unavailable(reason),
            pcie: PcieLink {
                gen_current: Reading::unavailable(reason),
                gen_max: Reading::unavailable(reason),
                gen_max_gpu: Reading::unavailable(reason),
                gen_max_host: Reading::unavailable(reason),
                width_current: Reading::unavailable(reason),
                width_max: Reading::unavailable(reason),
                replay_counter: Reading::unavailable(reason),
            },
            power: Power {
                draw_w: Reading::unavailable(reason),
                limit_w: Reading::unavailable(reason),
                default_limit_w: Reading::unavailable(reason),
                min_limit_w: Reading::unavailable(reason),
                max_limit_w: Reading::unavailable(reason),
            },
            clocks: Clocks {
                sm_mhz: Reading::unavailable(reason),
                mem_mhz: Reading::unavailable(reason),
                sm_max_mhz: Reading::unavailable(reason),
                mem_max_mhz: Reading::unavailable(reason),
                app_sm_mhz: Reading::unavailable(reason),
                app_mem_mhz: Reading::unavailable(reason),
                default_app_sm_mhz: Reading::unavailable(reason),
            },
            throttle_reasons: Reading::unavailable(reason),
            performance_state: Reading::unavailable(reason),
            persistence_mode: Reading::unavailable(reason),
            mig: Mig {
                current: Reading::unavailable(reason),
                pending: Reading::unavailable(reason),
            },
            virtualization: Reading::unavailable(reason),
            compute_mode: Reading::unavailable(reason),
            ecc: Ecc {
                current: Reading::unavailable(reason),
                pending: Reading::unavailable(reason),
                volatile_corrected: Reading::unavailable(reason),
                volatile_uncorrected: Reading::unavailable(reason),
                aggregate_corrected: Reading::unavailable(reason),
                aggregate_uncorrected: Reading::unavailable(reason),
            },
            retired_pages: Reading::unavailable(reason),
            remapped_rows: Reading::unavailable(reason),
            temperature_c: Reading::unavailable(reason),
            utilization_pct: Reading::unavailable(reason),
            processes: Reading::unavailable(reason),
            nvlinks: Reading::unavailable(reason),
            fabric: Reading::unavailable(reason),
        }
    }

    /// "GPU 1 (0000:00:07.0)".
    pub fn label(&self) -> String {
        format!("GPU {} ({})", self.index, short_bus_id(&self.pci_bus_id))
    }
}

/// "0000:00:07.0" -> "00:07.0" (domain 0 is left out, as lspci does).
pub fn short_bus_id(id: &str) -> &str {
    id.strip_prefix("0000:").unwrap_or(id)
}

/// Normalise a PCI address to sysfs form: "00000000:00:06.0" (NVML/nvidia-smi) and
/// "0000:00:06.0" both become "0000:00:06.0"; hex digits in lower case.
pub fn normalize_bus_id(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    let mut parts: Vec<&str> = id.split(':').collect();
    if parts.len() == 2 {
        parts.insert(0, "0000");
    }
    if parts.len() != 3 {
        return id;
    }
    let domain = parts[0].trim_start_matches('0');
    let domain = format!("{:0>4}", domain);
    format!("{}:{}:{}", domain, parts[1], parts[2])
}

/// Where a GPU fact's value came from, for facts that are not always read from the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ValueSource {
    /// Read through NVML.
    Nvml,
    /// Read from `nvidia-smi`.
    NvidiaSmi,
    /// Read through the CUDA driver API (the measurement child's device attributes).
    Cuda,
    /// Not read: the figure of the model's entry in the spec database (data/gpus.toml).
    Datasheet,
}

impl ValueSource {
    /// The source a GPU's facts name ("nvml", "nvidia-smi"), where it is one of those.
    pub fn of_facts(source: &str) -> Option<ValueSource> {
        match source {
            "nvml" => Some(ValueSource::Nvml),
            "nvidia-smi" => Some(ValueSource::NvidiaSmi),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ValueSource::Nvml => "nvml",
            ValueSource::NvidiaSmi => "nvidia-smi",
            ValueSource::Cuda => "cuda",
            ValueSource::Datasheet => "datasheet",
        }
    }

    pub fn is_datasheet(self) -> bool {
        self == ValueSource::Datasheet
    }
}

impl std::fmt::Display for ValueSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GpuMemory {
    pub total_mib: Reading<u64>,
    pub used_mib: Reading<u64>,
    pub free_mib: Reading<u64>,
    /// Reserved by the driver (newer drivers report it).
    pub reserved_mib: Reading<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PcieLink {
    pub gen_current: Reading<u32>,
    /// The highest generation this link can reach: the lower of the GPU's and the host's.
    pub gen_max: Reading<u32>,
    /// What the GPU itself supports (`nvmlDeviceGetGpuMaxPcieLinkGeneration`).
    pub gen_max_gpu: Reading<u32>,
    /// What the host side (slot, switch) supports, where the driver says.
    pub gen_max_host: Reading<u32>,
    pub width_current: Reading<u32>,
    pub width_max: Reading<u32>,
    /// PCIe replay counter: link-level retransmissions (a bad riser or slot).
    pub replay_counter: Reading<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Power {
    pub draw_w: Reading<f64>,
    /// The enforced power limit.
    pub limit_w: Reading<f64>,
    pub default_limit_w: Reading<f64>,
    pub min_limit_w: Reading<f64>,
    pub max_limit_w: Reading<f64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Clocks {
    pub sm_mhz: Reading<u32>,
    pub mem_mhz: Reading<u32>,
    pub sm_max_mhz: Reading<u32>,
    pub mem_max_mhz: Reading<u32>,
    /// Application clocks (what the GPU targets under load).
    pub app_sm_mhz: Reading<u32>,
    pub app_mem_mhz: Reading<u32>,
    pub default_app_sm_mhz: Reading<u32>,
}

/// One clock event (throttle) reason, as NVML's bits and nvidia-smi's elements name them.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    /// Nothing runs: clocks are down to save power. Harmless.
    GpuIdle,
    /// Application clocks set below the maximum.
    ApplicationsClocksSetting,
    /// Software power cap: drawing at the power limit.
    SwPowerCap,
    /// Hardware slowdown (thermal or power brake, or an external signal): a fault.
    HwSlowdown,
    /// Synchronised boost with other GPUs.
    SyncBoost,
    /// Software thermal slowdown: above the target temperature.
    SwThermalSlowdown,
    /// Hardware thermal slowdown: too hot.
    HwThermalSlowdown,
    /// Hardware power brake: the power supply asserted the brake.
    HwPowerBrakeSlowdown,
    /// Display clock setting.
    DisplayClocksSetting,
}

impl ThrottleReason {
    /// NVML's `nvmlClocksEventReason*` bit for each reason.
    pub const BITS: [(u64, ThrottleReason); 9] = [
        (0x1, ThrottleReason::GpuIdle),
        (0x2, ThrottleReason::ApplicationsClocksSetting),
        (0x4, ThrottleReason::SwPowerCap),
        (0x8, ThrottleReason::HwSlowdown),
        (0x10, ThrottleReason::SyncBoost),
        (0x20, ThrottleReason::SwThermalSlowdown),
        (0x40, ThrottleReason::HwThermalSlowdown),
        (0x80, ThrottleReason::HwPowerBrakeSlowdown),
        (0x100, ThrottleReason::DisplayClocksSetting),
    ];

    /// Every reason whose bit is set, each on its own (a mask with two reasons gives two).
    pub fn decode(mask: u64) -> Vec<ThrottleReason> {
        Self::BITS
            .iter()
            .filter(|(bit, _)| mask & bit != 0)
            .map(|(_, r)| *r)
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            ThrottleReason::GpuIdle => "gpu_idle",
            ThrottleReason::ApplicationsClocksSetting => "applications_clocks_setting",
            ThrottleReason::SwPowerCap => "sw_power_cap",
            ThrottleReason::HwSlowdown => "hw_slowdown",
            ThrottleReason::SyncBoost => "sync_boost",
            ThrottleReason::SwThermalSlowdown => "sw_thermal_slowdown",
            ThrottleReason::HwThermalSlowdown => "hw_thermal_slowdown",
            ThrottleReason::HwPowerBrakeSlowdown => "hw_power_brake_slowdown",
            ThrottleReason::DisplayClocksSetting => "display_clocks_setting",
        }
    }

    /// A reason that means the hardware is protecting itself (a fault, not a policy).
    pub fn is_hardware_fault(self) -> bool {
        matches!(
            self,
            ThrottleReason::HwSlowdown
                | ThrottleReason::HwThermalSlowdown
                | ThrottleReason::HwPowerBrakeSlowdown
        )
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Mig {
    pub current: Reading<bool>,
    pub pending: Reading<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VirtualizationMode {
    /// Bare metal (NVML: NONE).
    None,
    /// The whole GPU passed through to a VM.
    PassThrough,
    /// A vGPU slice inside a VM.
    Vgpu,
    /// The host side of vGPU.
    HostVgpu,
    HostVsga,
    Other(String),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ecc {
    pub current: Reading<bool>,
    pub pending: Reading<bool>,
    pub volatile_corrected: Reading<u64>,
    pub volatile_uncorrected: Reading<u64>,
    pub aggregate_corrected: Reading<u64>,
    pub aggregate_uncorrected: Reading<u64>,
}

/// Pages retired after ECC errors (pre-Ampere GPUs; Ampere and later remap rows instead).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredPages {
    pub single_bit: u64,
    pub double_bit: u64,
    pub pending: bool,
}

/// Row remapping (Ampere and later).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemappedRows {
    pub correctable: u64,
    pub uncorrectable: u64,
    /// A remap waits for the next GPU reset.
    pub pending: bool,
    /// A remap failed: the GPU should be replaced.
    pub failure: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub name: Option<String>,
    pub used_mib: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub active: bool,
    /// NVLink version (2 on V100, 3 on A100, 4 on H100/H200, 5 on B200).
    pub version: Option<u32>,
    /// Per-link bandwidth as the driver reports it (GB/s), where it does.
    pub speed_gbps: Option<f64>,
    /// The PCI address of the other end ("FFFFFFFF:FF:FF.0" reads as an NVSwitch).
    pub remote_bus_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fabric {
    /// "Completed", "In Progress", "Not Started", "Not Supported".
    pub state: String,
    /// "Success" or an error.
    pub status: Option<String>,
    /// The NVLink partition (clique) the GPU belongs to, where the driver gives one
    /// (`CliqueId`; NVML `cliqueId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clique_id: Option<u32>,
    /// The fabric cluster's UUID (`ClusterUUID`), where it is not all zeros.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_uuid: Option<String>,
}

/// A fabric cluster UUID as the driver prints it, `None` where it is all zeros (no cluster:
/// a single-node NVSwitch board) or not a UUID's hex digits. Bounded: at most 64 characters.
pub fn fabric_cluster_uuid(text: &str) -> Option<String> {
    let t = text.trim();
    let hex = t.chars().filter(|c| *c != '-').collect::<String>();
    let valid = !hex.is_empty() && t.len() <= 64 && hex.chars().all(|c| c.is_ascii_hexdigit());
    (valid && hex.chars().any(|c| c != '0')).then(|| t.to_ascii_lowercase())
}

/// An NVIDIA PCI function seen in sysfs (`/sys/bus/pci/devices/<bus-id>`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PciFunction {
    /// "0000:00:06.0".
    pub bus_id: String,
    pub vendor: u16,
    pub device: u16,
    pub subsystem_vendor: Reading<u16>,
    pub subsystem_device: Reading<u16>,
    /// PCI class code, e.g. 0x030200 (3D controller) or 0x030000 (VGA).
    pub class: u32,
    /// The bound kernel driver: `Value(Some("nvidia"))`, `Value(None)` when none is bound.
    pub driver: Reading<Option<String>>,
    /// Link speed in GT/s and width, current and maximum, as the device reports them.
    pub current_link_gts: Reading<f64>,
    pub current_link_width: Reading<u32>,
    pub max_link_gts: Reading<f64>,
    pub max_link_width: Reading<u32>,
    /// -1 in sysfs (no affinity known) is kept as -1.
    pub numa_node: Reading<i32>,
    pub local_cpulist: Reading<String>,
}

/// PCIe generation for a link speed in GT/s (2.5 -> 1 ... 64 -> 6).
pub fn pcie_gen_from_gts(gts: f64) -> Option<u32> {
    const GENS: [(f64, u32); 7] = [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
        (128.0, 7),
    ];
    GENS.iter()
        .find(|(g, _)| (gts - g).abs() < 0.01)
        .map(|(_, n)| *n)
}

/// Usable bandwidth of one direction of a PCIe link, GB/s, after line encoding (8b/10b up to
/// gen 2, 128b/130b from gen 3, FLIT from gen 6 taken as 242/256), before protocol overhead.
pub fn pcie_link_gbps(gen: u32, width: u32) -> Option<f64> {
    let (gts, eff) = match gen {
        1 => (2.5, 0.8),
        2 => (5.0, 0.8),
        3 => (8.0, 128.0 / 130.0),
        4 => (16.0, 128.0 / 130.0),
        5 => (32.0, 128.0 / 130.0),
        6 => (64.0, 242.0 / 256.0),
        _ => return None,
    };
    Some(gts * eff * width as f64 / 8.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_normalise() {
        assert_eq!(normalize_bus_id("00000000:00:06.0"), "0000:00:06.0");
        assert_eq!(normalize_bus_id("0000:C1:00.0"), "0000:c1:00.0");
        assert_eq!(normalize_bus_id("00:07.0"), "0000:00:07.0");
        assert_eq!(normalize_bus_id("00000001:3B:00.0"), "0001:3b:00.0");
    }

    #[test]
    fn throttle_mask_decodes_each_bit() {
        assert_eq!(
            ThrottleReason::decode(0x4 | 0x40),
            vec![
                ThrottleReason::SwPowerCap,
                ThrottleReason::HwThermalSlowdown
            ]
        );
        assert!(ThrottleReason::decode(0).is_empty());
    }

    #[test]
    fn value_sources_are_named_as_the_report_writes_them() {
        for (s, name) in [
            (ValueSource::Nvml, "nvml"),
            (ValueSource::NvidiaSmi, "nvidia-smi"),
            (ValueSource::Cuda, "cuda"),
            (ValueSource::Datasheet, "datasheet"),
        ] {
            assert_eq!(serde_json::to_value(s).unwrap(), name);
            assert_eq!(s.as_str(), name);
            assert_eq!(s.to_string(), name);
            assert_eq!(s.is_datasheet(), name == "datasheet");
        }
        assert_eq!(ValueSource::of_facts("nvml"), Some(ValueSource::Nvml));
        assert_eq!(
            ValueSource::of_facts("nvidia-smi"),
            Some(ValueSource::NvidiaSmi)
        );
        assert_eq!(ValueSource::of_facts("unknown"), None);
    }

    #[test]
    fn pcie_rates() {
        assert_eq!(pcie_gen_from_gts(32.0), Some(5));
        assert_eq!(pcie_gen_from_gts(3.0), None);
        let g5 = pcie_link_gbps(5, 16).unwrap();
        assert!((g5 - 63.015).abs() < 0.01, "{g5}");
    }
}
