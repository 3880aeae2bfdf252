//! PCIe Advanced Error Reporting (AER) of the GPUs' paths to their root ports, and what the
//! kernel log says of PCIe errors and link bandwidth (pcie.aer).

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// What pcie.aer reads: the uptime the counters accumulated over, each GPU's path with the
/// AER counters of every function on it, and the kernel log's PCIe lines.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PcieErrorFacts {
    /// Seconds since boot (`/proc/uptime`): the AER counters count from boot.
    #[serde(default)]
    pub uptime_s: Reading<f64>,
    /// One path per NVIDIA GPU function of the PCI bus, in bus order.
    #[serde(default)]
    pub paths: Reading<Vec<AerPath>>,
    /// The AER and "limited by" lines of the kernel log.
    #[serde(default)]
    pub log: Reading<KernelLogPcie>,
}

impl PcieErrorFacts {
    pub fn unread(reason: &str) -> Self {
        PcieErrorFacts {
            uptime_s: Reading::unavailable(reason),
            paths: Reading::unavailable(reason),
            log: Reading::unavailable(reason),
        }
    }
}

/// A GPU and the PCI functions above it up to its root port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AerPath {
    /// The GPU's address, "0000:18:00.0".
    pub gpu: String,
    /// The GPU first, then each PCI function above it (switch downstream port, switch
    /// upstream port, ..., the root port last). Only the GPU where the path is not known.
    pub ports: Vec<AerPort>,
    /// Why the functions above the GPU are not known, where they are not (a snapshot
    /// collected before the path was, a VM whose GPU sits on the root bus has none to know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_unknown: Option<String>,
}

/// One PCI function's AER counters (sysfs `aer_dev_*`, and `aer_rootport_total_err_*` on a
/// root port), each counted since boot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AerPort {
    /// "0000:00:01.0".
    pub bus_id: String,
    /// The topmost function of the path (its parent is the host bridge, `pci0000:00`).
    pub root_port: bool,
    pub correctable: Reading<AerCounts>,
    pub nonfatal: Reading<AerCounts>,
    pub fatal: Reading<AerCounts>,
    /// ERR_COR, ERR_NONFATAL, ERR_FATAL messages reported to this root port from every
    /// device below it; `None` where the files are not there (not a root port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootport_totals: Option<RootPortTotals>,
}

/// `aer_rootport_total_err_cor`, `_nonfatal`, `_fatal`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootPortTotals {
    pub cor: u64,
    pub nonfatal: u64,
    pub fatal: u64,
}

/// One `aer_dev_*` file: each error's count ("RxErr 3") and the file's total
/// ("TOTAL_ERR_COR 3", which counts messages, so it may differ from the sum).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AerCounts {
    pub total: u64,
    /// Non-zero counts only, in the file's order.
    pub by_name: Vec<(String, u64)>,
}

/// The kernel log's PCIe lines, and which log they were read from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelLogPcie {
    /// "/dev/kmsg", "journalctl -k", "/var/log/kern.log", "cmd/kernel-log.txt (/dev/kmsg)".
    pub source: String,
    pub aer: Vec<AerLogEvent>,
    pub notices: Vec<LinkNotice>,
}

/// How bad an AER error is, as the kernel's "severity=" says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AerSeverity {
    /// "Corrected" (older kernels: "Correctable"): the link retried and the data arrived.
    Corrected,
    /// "Uncorrected (Non-Fatal)": a transaction was lost; the link is up.
    NonFatal,
    /// "Uncorrected (Fatal)": the link is not reliable; the kernel resets it.
    Fatal,
}

/// One "PCIe Bus Error: severity=..., type=..." report with the error names that follow it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AerLogEvent {
    /// The function the report is about, "0000:00:02.0".
    pub bus_id: String,
    pub severity: AerSeverity,
    /// "Physical Layer", "Data Link Layer", "Transaction Layer".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// "RxErr", "BadTLP", "Replay Timer Timeout", "Surprise Down Error", ... as written.
    pub errors: Vec<String>,
    /// The report line, trimmed and cut.
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Seconds since 1970 (UTC), where the line is dated with its year.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
}

/// The kernel's "X Gb/s available PCIe bandwidth, limited by S GT/s PCIe xW link at BDF
/// (capable of Y Gb/s with S2 GT/s PCIe xW2 link)" notice, written when a device is probed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkNotice {
    /// The device the notice is about, "0000:01:00.0".
    pub bus_id: String,
    /// The function at the upper end of the slowest link, "0000:00:01.0"; `None` where the
    /// kernel wrote "<unknown>".
    pub limited_at: Option<String>,
    pub gts: f64,
    pub width: u32,
    pub capable_gts: f64,
    pub capable_width: u32,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
}
