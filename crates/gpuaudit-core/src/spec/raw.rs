//! The shape of an entry in `data/gpus.toml`, and its conversion into a [`GpuSpec`].
//!
//! The file says `nvlink = { kind = "none" }`, `{ kind = "bridge", version = 3, ... }` and so
//! on, or nothing (the database does not know); [`GpuSpec`] keeps the kind apart from the
//! figures so that the checks reading `nvlink: Option<NvlinkSpec>` keep working. The conversion
//! is the only way a `GpuSpec` is deserialized, so the two never disagree.

use super::{GpuSpec, NvlinkKind, NvlinkSpec, Source, Tflops};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGpuSpec {
    key: String,
    name: String,
    family: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    aliases: Vec<String>,
    #[serde(default)]
    nvml_names: Vec<String>,
    pci_device_ids: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pci_subsystem_device_ids: Vec<u16>,
    architecture: String,
    compute_capability: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sm_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_gb: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_bandwidth_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tdp_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tdp_min_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    boost_clock_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_clock_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pcie_gen: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pcie_width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nvlink: Option<RawNvlink>,
    form_factor: String,
    tflops: Tflops,
    sources: Vec<Source>,
}

/// What the file may say about NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawNvlinkKind {
    None,
    Bridge,
    Direct,
    Switch,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNvlink {
    kind: RawNvlinkKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    version: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    links: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bandwidth_gbps: Option<f64>,
}

impl TryFrom<RawGpuSpec> for GpuSpec {
    type Error = String;

    fn try_from(r: RawGpuSpec) -> Result<GpuSpec, String> {
        let (nvlink_kind, nvlink) = match r.nvlink {
            None => (NvlinkKind::Unknown, None),
            Some(n) => nvlink_of(&r.key, n)?,
        };
        Ok(GpuSpec {
            key: r.key,
            name: r.name,
            family: r.family,
            aliases: r.aliases,
            nvml_names: r.nvml_names,
            pci_device_ids: r.pci_device_ids,
            pci_subsystem_device_ids: r.pci_subsystem_device_ids,
            architecture: r.architecture,
            compute_capability: r.compute_capability,
            sm_count: r.sm_count,
            memory_gb: r.memory_gb,
            memory_type: r.memory_type,
            memory_bandwidth_gbps: r.memory_bandwidth_gbps,
            tdp_w: r.tdp_w,
            tdp_min_w: r.tdp_min_w,
            boost_clock_mhz: r.boost_clock_mhz,
            base_clock_mhz: r.base_clock_mhz,
            pcie_gen: r.pcie_gen,
            pcie_width: r.pcie_width,
            nvlink,
            nvlink_kind,
            form_factor: r.form_factor,
            tflops: r.tflops,
            sources: r.sources,
        })
    }
}

fn nvlink_of(key: &str, n: RawNvlink) -> Result<(NvlinkKind, Option<NvlinkSpec>), String> {
    let kind = match n.kind {
        RawNvlinkKind::None => NvlinkKind::None,
        RawNvlinkKind::Bridge => NvlinkKind::Bridge,
        RawNvlinkKind::Direct => NvlinkKind::Direct,
        RawNvlinkKind::Switch => NvlinkKind::Switch,
    };
    let figures = match (n.version, n.bandwidth_gbps) {
        (Some(version), Some(bandwidth_gbps)) => Some(NvlinkSpec {
            version,
            links: n.links,
            bandwidth_gbps,
            bridge: kind == NvlinkKind::Bridge,
        }),
        (None, None) if n.links.is_none() => None,
        _ => {
            return Err(format!(
                "{key}: nvlink needs both version and bandwidth_gbps, or neither (and links only with them)"
            ))
        }
    };
    if kind == NvlinkKind::None && figures.is_some() {
        return Err(format!("{key}: nvlink kind \"none\" cannot have figures"));
    }
    Ok((kind, figures))
}

impl From<GpuSpec> for RawGpuSpec {
    fn from(g: GpuSpec) -> RawGpuSpec {
        let kind = match g.nvlink_kind {
            NvlinkKind::Unknown => None,
            NvlinkKind::None => Some(RawNvlinkKind::None),
            NvlinkKind::Bridge => Some(RawNvlinkKind::Bridge),
            NvlinkKind::Direct => Some(RawNvlinkKind::Direct),
            NvlinkKind::Switch => Some(RawNvlinkKind::Switch),
        };
        let nvlink = kind.map(|kind| RawNvlink {
            kind,
            version: g.nvlink.as_ref().map(|n| n.version),
            links: g.nvlink.as_ref().and_then(|n| n.links),
            bandwidth_gbps: g.nvlink.as_ref().map(|n| n.bandwidth_gbps),
        });
        RawGpuSpec {
            key: g.key,
            name: g.name,
            family: g.family,
            aliases: g.aliases,
            nvml_names: g.nvml_names,
            pci_device_ids: g.pci_device_ids,
            pci_subsystem_device_ids: g.pci_subsystem_device_ids,
            architecture: g.architecture,
            compute_capability: g.compute_capability,
            sm_count: g.sm_count,
            memory_gb: g.memory_gb,
            memory_type: g.memory_type,
            memory_bandwidth_gbps: g.memory_bandwidth_gbps,
            tdp_w: g.tdp_w,
            tdp_min_w: g.tdp_min_w,
            boost_clock_mhz: g.boost_clock_mhz,
            base_clock_mhz: g.base_clock_mhz,
            pcie_gen: g.pcie_gen,
            pcie_width: g.pcie_width,
            nvlink,
            form_factor: g.form_factor,
            tflops: g.tflops,
            sources: g.sources,
        }
    }
}
