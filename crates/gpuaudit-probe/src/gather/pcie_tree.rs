//! The PCIe paths above the GPUs and the RDMA NICs, their bridges' ACS registers and the
//! IOMMU (pcie.acs, net.placement). The same code reads the live machine and a snapshot: a
//! recording reader keeps the sysfs links it follows (`sys/bus/pci/devices/<bdf>`,
//! `sys/class/infiniband/<hca>/device`) as relative links into `sys/devices/...`, and there
//! the files read (`config`, binary, copied byte for byte as read, and `numa_node`).

use crate::pcipath::{upstream_of_link as upstream, PciPath};
use crate::root::RootFs;
use gpuaudit_core::facts::{
    normalize_bus_id, Acs, EndpointRole, Iommu, PcieEndpoint, PciePort, PcieTree,
};
use gpuaudit_core::parse::{pci_config, sysfs};
use gpuaudit_core::Reading;

pub const PCI_DEVICES: &str = "sys/bus/pci/devices";
pub const IB: &str = "sys/class/infiniband";
pub const IOMMU: &str = "sys/class/iommu";
pub const CMDLINE: &str = "proc/cmdline";
/// The kernel parameters kept from /proc/cmdline (a snapshot holds these only).
pub const CMDLINE_KEYS: &[&str] = &[
    "iommu",
    "intel_iommu",
    "amd_iommu",
    "iommu.passthrough",
    "iommu.strict",
    "pcie_acs_override",
    "pci",
];
/// At most this many RDMA devices are followed.
const MAX_NICS: usize = 256;

/// The GPUs' bus ids (NVIDIA display and 3D functions, as `pci_gpus` lists them) and the RDMA
/// devices: (role, link to resolve, bus id where known before resolving).
fn endpoint_links(root: &RootFs, gpus: &[String]) -> Vec<(EndpointRole, String)> {
    let mut out: Vec<(EndpointRole, String)> = gpus
        .iter()
        .map(|g| (EndpointRole::Gpu, format!("{PCI_DEVICES}/{g}")))
        .collect();
    for dev in root.children(IB).into_iter().take(MAX_NICS) {
        out.push((
            EndpointRole::Nic {
                device: gpuaudit_core::parse::fact_line(&dev),
            },
            format!("{IB}/{dev}/device"),
        ));
    }
    out
}

fn config_reading(root: &RootFs, rel: &str) -> (Reading<u8>, Reading<Option<Acs>>) {
    let path = root.display(rel);
    let bytes = match root.read_bytes(rel) {
        Ok(Some(b)) => b,
        Ok(None) => {
            let why = format!("{path}: no such file");
            return (Reading::unavailable(&why), Reading::Unavailable(why));
        }
        Err(e) => return (Reading::unavailable(&e), Reading::Unavailable(e)),
    };
    let c = pci_config::parse(&bytes);
    let port_type = match c.port_type {
        Some(t) => Reading::Value(t),
        None if bytes.len() <= pci_config::UNPRIVILEGED_BYTES => Reading::unavailable(format!(
            "{path}: only the first {} bytes were readable: the capabilities need root (permission denied)",
            bytes.len()
        )),
        None => Reading::unavailable(format!("{path}: no PCI Express capability")),
    };
    let acs = if c.has_extended() {
        Reading::Value(c.acs.map(|(capability, control)| Acs {
            capability,
            control,
        }))
    } else if bytes.len() <= pci_config::UNPRIVILEGED_BYTES {
        Reading::unavailable(format!(
            "{path}: only the first {} bytes were readable: extended config space needs root (permission denied)",
            bytes.len()
        ))
    } else {
        Reading::unavailable(format!(
            "{path}: {} bytes, no extended config space (where ACS would be)",
            bytes.len()
        ))
    };
    (port_type, acs)
}

fn iommu(root: &RootFs) -> Reading<Iommu> {
    // The command line may hold anything (a password passed to an init script): a snapshot
    // keeps the parameters read, nothing else.
    let cmdline = match root.unrecorded().read_text(CMDLINE) {
        Ok(Some(t)) => {
            let kept = cmdline_params(&t);
            root.record(CMDLINE, format!("{}\n", kept.join(" ")));
            Reading::Value(kept)
        }
        Ok(None) => Reading::unavailable(format!("{}: no such file", root.display(CMDLINE))),
        Err(e) => {
            root.record_mark(CMDLINE, &e);
            Reading::Unavailable(e)
        }
    };
    // The directory is in a snapshot even where the machine has none (no IOMMU in use).
    root.record_dir(IOMMU);
    let units: Vec<String> = if root.exists(IOMMU) {
        match root.list(IOMMU) {
            Ok(u) => u
                .into_iter()
                .take(64)
                .map(|u| gpuaudit_core::parse::fact_line(&u))
                .collect(),
            Err(e) => return Reading::Unavailable(e),
        }
    } else if root.is_live() {
        Vec::new()
    } else {
        return Reading::unavailable("snapshot has no sys/class/iommu");
    };
    // A unit is its name: an empty directory in a snapshot.
    for u in &units {
        root.record_dir(&format!("{IOMMU}/{u}"));
    }
    Reading::Value(Iommu { units, cmdline })
}

/// The IOMMU and ACS parameters of a kernel command line, as written (at most 16, 120
/// characters each).
pub fn cmdline_params(text: &str) -> Vec<String> {
    text.split_whitespace()
        .filter(|t| {
            let key = t.split('=').next().unwrap_or("");
            CMDLINE_KEYS.contains(&key)
        })
        .take(16)
        .map(|t| gpuaudit_core::parse::host::truncate(t, 120))
        .collect()
}

/// When recording: every function on the path as the bus lists it,
/// `sys/bus/pci/devices/<bdf>`, a link into the path's directories (as sysfs has it), so that
/// the snapshot lists there what the machine lists and each function's files (its `vendor`,
/// which every reader of the bus reads) lie where the path walk finds them.
fn keep_bus_links(root: &RootFs, p: &PciPath) {
    if !root.is_recording() {
        return;
    }
    for (i, f) in p.functions.iter().enumerate() {
        let link = format!("{PCI_DEVICES}/{f}");
        if root.unrecorded().exists(&link) {
            root.real_path(&link);
        }
        if let Some(dir) = p.dir_of(i) {
            root.keep(&format!("{dir}/vendor"));
        }
    }
}

/// The tree above `gpus` (bus ids of the NVIDIA functions) and the RDMA devices.
pub fn read(root: &RootFs, gpus: &Reading<Vec<String>>) -> Reading<PcieTree> {
    // First: a snapshot keeps the IOMMU and the command line whether the GPUs are known or not.
    let iommu = iommu(root);
    let gpus = match gpus {
        Reading::Value(g) => g,
        Reading::Unavailable(r) => return Reading::Unavailable(r.clone()),
    };
    let mut tree = PcieTree {
        iommu,
        ..PcieTree::default()
    };
    for (role, link) in endpoint_links(root, gpus) {
        let path = upstream(root, &link);
        let bus_id = match (&path, &role) {
            (Ok(p), _) => p.functions.last().cloned().unwrap_or_default(),
            (Err(_), EndpointRole::Gpu) => {
                normalize_bus_id(link.rsplit('/').next().unwrap_or_default())
            }
            (Err(_), EndpointRole::Nic { .. }) => {
                root.link_name(&link).ok().flatten().unwrap_or_default()
            }
        };
        let numa_node = match root.read(&format!("{link}/numa_node")) {
            Ok(t) => sysfs::parse_i32(&t).map(Reading::Value).unwrap_or_else(|| {
                Reading::unavailable(format!(
                    "{}: unreadable value",
                    root.display(&format!("{link}/numa_node"))
                ))
            }),
            Err(e) => Reading::Unavailable(e),
        };
        if let Ok(p) = &path {
            keep_bus_links(root, p);
            for i in 0..p.functions.len().saturating_sub(1) {
                let f = &p.functions[i];
                if tree.port(f).is_some() {
                    continue;
                }
                let Some(dir) = p.dir_of(i) else { continue };
                let rel = format!("{dir}/config");
                let (port_type, acs) = config_reading(root, &rel);
                tree.ports.push(PciePort {
                    bus_id: f.clone(),
                    config_path: crate::root::abs(&rel),
                    port_type,
                    acs,
                });
            }
        }
        tree.endpoints.push(PcieEndpoint {
            bus_id,
            role,
            upstream: match path {
                Ok(mut p) => {
                    p.functions.pop();
                    Reading::Value(p.functions)
                }
                Err(e) => Reading::Unavailable(e),
            },
            numa_node,
        });
    }
    tree.ports.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
    Reading::Value(tree)
}

#[cfg(test)]
mod tests;
