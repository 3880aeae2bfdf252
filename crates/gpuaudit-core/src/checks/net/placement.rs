//! net.placement: GPU ↔ RDMA NIC ↔ NUMA node on multi-rail hosts. Each GPU should have a NIC
//! on its own PCIe switch, or at least on its own NUMA node: a GPU whose nearest NIC is across
//! the CPU sockets' interconnect sends its GPUDirect RDMA traffic through it.

use crate::checks::common::{count_of, gpu_count, no_gpu_reason};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{EndpointRole, Facts, TopoLink};
use crate::finding::Finding;
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use serde::Serialize;

const ID: &str = "net.placement";

/// A NUMA node holding at least this many NICs while a GPU elsewhere has none: one of them
/// could have been on the GPU's side (the rule: "while another socket has two").
pub const CROWDED_NICS: usize = 2;
/// At most this many GPUs or NICs are named in one message.
pub const MAX_NAMED: usize = 8;

pub const CHECK: Check = Check {
    id: ID,
    title: "GPU ↔ RDMA NIC ↔ NUMA placement on multi-rail hosts",
    looks_at: "where each GPU's nearest RDMA NIC sits: on its PCIe switch (PIX/PXB), its CPU (PHB/NODE) or across the sockets (SYS), from `nvidia-smi topo -m`'s NIC columns, else the sysfs NUMA nodes of GPUs and NICs",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "For each GPU, the nearest RDMA NIC and the path to it: the NIC columns of \
               `nvidia-smi topo -m` (PIX, PXB: one PCIe switch or several, no CPU; PHB: \
               through the CPU's host bridge; NODE: host bridges of one NUMA node; SYS: \
               across the CPU sockets' interconnect), else the NUMA nodes sysfs gives the GPU \
               (/sys/bus/pci/devices/BDF/numa_node) and the NIC \
               (/sys/class/infiniband/DEV/device/numa_node; -1: the firmware gives none, \
               so it is not known). Each NIC's NUMA node comes from sysfs, else from the GPUs \
               that reach it without SYS.",
        why: "GPUDirect RDMA moves data between GPU memory and the NIC over PCIe. On a NIC \
              behind the GPU's own PCIe switch the traffic never touches the CPU; a NIC on \
              the other socket takes every byte across the sockets' interconnect (UPI, \
              Infinity Fabric), which costs bandwidth and latency, and NVIDIA's GPUDirect \
              RDMA manual asks for the HCA and the GPU under one root complex for the best \
              performance. Multi-rail hosts (DGX, HGX) put one NIC beside each GPU for this. \
              One NIC for all GPUs is a design, not a fault (information); GPUs without a NIC \
              on their NUMA node while another node holds two or more warn: a NIC could be \
              moved.",
        verify: "nvidia-smi topo -m\n\
                 cat /sys/bus/pci/devices/*/numa_node\n\
                 for d in /sys/class/infiniband/*; do echo \"$d $(cat $d/device/numa_node)\"; done\n\
                 lspci -tv\n\
                 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET torchrun ... 2>&1 | grep -E 'NET/IB|GDR'",
        fix: "Put a NIC on each GPU's socket (the board manual's slot-to-CPU map), or one per \
              PCIe switch on multi-rail boards; on a cloud instance, choose a type whose NICs \
              are spread over the sockets. Until then, NCCL picks the nearest NIC per GPU by \
              itself (NCCL_IB_HCA only narrows the choice).",
    },
    profiles: &[],
    run: run_placement,
};

/// How near a NIC is: lower is nearer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Nearness {
    /// PIX or PXB: on the GPU's PCIe switch (or switches), no CPU in between.
    Switch,
    /// PHB: through the CPU's host bridge the GPU hangs off.
    HostBridge,
    /// NODE, or the same NUMA node in sysfs: the same socket.
    Node,
    /// SYS, or another NUMA node in sysfs: across the sockets.
    Sys,
}

impl Nearness {
    fn of(link: &TopoLink) -> Option<Nearness> {
        match link {
            TopoLink::Pix | TopoLink::Pxb => Some(Nearness::Switch),
            TopoLink::Phb => Some(Nearness::HostBridge),
            TopoLink::Node => Some(Nearness::Node),
            TopoLink::Sys => Some(Nearness::Sys),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
struct GpuPlace {
    gpu: String,
    numa_node: Option<i32>,
    /// The nearest NICs and how near, or why that is not known.
    nearest: Option<Nearness>,
    nics: Vec<String>,
    unknown: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
struct NicPlace {
    nic: String,
    numa_node: Option<i32>,
}

fn shown(name: &str) -> String {
    escape_line(&crate::parse::host::truncate(name, 40)).into_owned()
}

fn named(items: &[String]) -> String {
    let more = items.len().saturating_sub(MAX_NAMED);
    let list = items
        .iter()
        .take(MAX_NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if more > 0 {
        format!("{list} and {more} more")
    } else {
        list
    }
}

/// The sysfs NUMA node of a NIC by its device name, where known (not -1).
fn nic_numa_sysfs(facts: &Facts, device: &str) -> Option<i32> {
    facts
        .pcie_tree
        .value()?
        .endpoints
        .iter()
        .find_map(|e| match &e.role {
            EndpointRole::Nic { device: d } if d == device => {
                e.numa_node.value().copied().filter(|n| *n >= 0)
            }
            _ => None,
        })
}

/// From `nvidia-smi topo -m`: per GPU (matrix order) its nearest NICs; per NIC its NUMA node.
fn from_topology(facts: &Facts) -> Option<(Vec<GpuPlace>, Vec<NicPlace>)> {
    let topo = facts.topology.value()?;
    if topo.nics.is_empty() {
        return None;
    }
    let nic_name = |label: &str| -> String {
        topo.nic_names
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| label.to_string())
    };
    let gpu_numa: Vec<Option<i32>> = (0..topo.gpus.len())
        .map(|i| {
            topo.numa_affinity
                .get(i)
                .cloned()
                .flatten()
                .and_then(|n| n.trim().parse::<i32>().ok())
                .filter(|n| *n >= 0)
        })
        .collect();
    let mut gpus = Vec::new();
    for (i, label) in topo.gpus.iter().enumerate() {
        let row = topo.gpu_nic.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let best = row.iter().filter_map(Nearness::of).min();
        let nics: Vec<String> = row
            .iter()
            .enumerate()
            .filter(|(_, l)| best.is_some() && Nearness::of(l) == best)
            .filter_map(|(k, _)| topo.nics.get(k).map(|n| shown(&nic_name(n))))
            .collect();
        gpus.push(GpuPlace {
            gpu: label.clone(),
            numa_node: gpu_numa[i],
            nearest: best,
            nics,
            unknown: best
                .is_none()
                .then(|| "nvidia-smi topo -m names no PCIe path to any NIC".to_string()),
        });
    }
    let nics = topo
        .nics
        .iter()
        .enumerate()
        .map(|(k, label)| {
            let name = nic_name(label);
            let numa = nic_numa_sysfs(facts, &name).or_else(|| {
                // A GPU that reaches it within its NUMA node shares the node.
                topo.gpu_nic.iter().enumerate().find_map(|(i, row)| {
                    row.get(k)
                        .and_then(Nearness::of)
                        .filter(|n| *n <= Nearness::Node)
                        .and(gpu_numa.get(i).copied().flatten())
                })
            });
            NicPlace {
                nic: shown(&name),
                numa_node: numa,
            }
        })
        .collect();
    Some((gpus, nics))
}

/// From sysfs alone: GPUs and NICs by NUMA node (same node: Node, another: Sys).
fn from_numa(facts: &Facts) -> Option<(Vec<GpuPlace>, Vec<NicPlace>)> {
    let tree = facts.pcie_tree.value()?;
    let nics: Vec<(String, Reading<i32>)> = tree
        .endpoints
        .iter()
        .filter_map(|e| match &e.role {
            EndpointRole::Nic { device } => Some((shown(device), e.numa_node.clone())),
            EndpointRole::Gpu => None,
        })
        .collect();
    if nics.is_empty() {
        return None;
    }
    let known = |r: &Reading<i32>| r.value().copied().filter(|n| *n >= 0);
    let why = |what: &str, r: &Reading<i32>| match r {
        Reading::Value(_) => {
            format!("{what}: numa_node is -1 (the firmware gives no NUMA affinity)")
        }
        Reading::Unavailable(w) => format!("{what}: {w}"),
    };
    let mut gpus = Vec::new();
    for (i, e) in tree
        .endpoints
        .iter()
        .filter(|e| e.role == EndpointRole::Gpu)
        .enumerate()
    {
        let label = facts
            .gpu_list()
            .iter()
            .find(|g| crate::facts::normalize_bus_id(&g.pci_bus_id) == e.bus_id)
            .map(|g| format!("GPU{}", g.index))
            .unwrap_or_else(|| format!("GPU{i}"));
        let mine = known(&e.numa_node);
        let (nearest, near, unknown) = match mine {
            None => (
                None,
                vec![],
                Some(why(&format!("{label} ({})", e.bus_id), &e.numa_node)),
            ),
            Some(node) => {
                let same: Vec<String> = nics
                    .iter()
                    .filter(|(_, n)| known(n) == Some(node))
                    .map(|(d, _)| d.clone())
                    .collect();
                let other: Vec<String> = nics
                    .iter()
                    .filter(|(_, n)| known(n).is_some_and(|x| x != node))
                    .map(|(d, _)| d.clone())
                    .collect();
                if !same.is_empty() {
                    (Some(Nearness::Node), same, None)
                } else if other.len() == nics.len() {
                    (Some(Nearness::Sys), other, None)
                } else {
                    let (d, r) = nics
                        .iter()
                        .find(|(_, n)| known(n).is_none())
                        .map(|(d, r)| (d.clone(), r.clone()))
                        .unwrap_or_default();
                    (None, vec![], Some(why(&format!("NIC {d}"), &r)))
                }
            }
        };
        gpus.push(GpuPlace {
            gpu: label,
            numa_node: mine,
            nearest,
            nics: near,
            unknown,
        });
    }
    let nics = nics
        .iter()
        .map(|(d, n)| NicPlace {
            nic: d.clone(),
            numa_node: known(n),
        })
        .collect();
    Some((gpus, nics))
}

fn where_gpu(g: &GpuPlace) -> String {
    match g.numa_node {
        Some(n) => format!("{} (NUMA {n})", g.gpu),
        None => g.gpu.clone(),
    }
}

fn run_placement(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let n_gpus = match gpu_count(facts) {
        Some(n) if n > 0 => n,
        _ => return vec![Finding::skip(ID, no_gpu_reason(facts))],
    };
    let (gpus, nics, source) = match from_topology(facts) {
        Some((g, n)) => (g, n, "nvidia-smi topo -m"),
        None => match from_numa(facts) {
            Some((g, n)) => (g, n, "sysfs numa_node"),
            None => {
                return vec![match &facts.host.fabric.rdma {
                    Reading::Value(p) if p.is_empty() => Finding::info(
                        ID,
                        "no RDMA NIC: no GPU-to-NIC placement to judge (single-node work needs none)",
                    ),
                    Reading::Value(_) => Finding::skip(
                        ID,
                        "RDMA devices are present but where they sit is not known: nvidia-smi topo -m names no NIC and their sysfs paths were not read",
                    ),
                    Reading::Unavailable(r) => {
                        Finding::skip(ID, format!("the RDMA devices were not read: {r}"))
                    }
                }];
            }
        },
    };
    let ev = |f: Finding| {
        f.with("source", source)
            .with("gpus", &gpus)
            .with("nics", &nics)
    };
    let unknown: Vec<&GpuPlace> = gpus.iter().filter(|g| g.nearest.is_none()).collect();
    if unknown.len() == gpus.len() {
        let why = unknown
            .first()
            .and_then(|g| g.unknown.clone())
            .unwrap_or_else(|| "no GPU in the matrix".into());
        return vec![ev(Finding::skip(
            ID,
            format!("cannot tell where the GPUs' nearest NICs are: {why}"),
        ))];
    }
    let remote: Vec<&GpuPlace> = gpus
        .iter()
        .filter(|g| g.nearest == Some(Nearness::Sys))
        .collect();
    let nic_names: Vec<String> = nics.iter().map(|n| n.nic.clone()).collect();
    let remote_words = || named(&remote.iter().map(|g| where_gpu(g)).collect::<Vec<_>>());
    if nics.len() == 1 {
        let msg = if remote.is_empty() {
            format!(
                "one RDMA NIC ({}) for {}: a design (all GPUs share its bandwidth), not a fault; every GPU reaches it without crossing the sockets",
                nic_names[0],
                count_of(n_gpus as u64, "GPU")
            )
        } else {
            format!(
                "one RDMA NIC ({}) for {}: a design (all GPUs share its bandwidth), not a fault; {} reach it only across the CPU sockets' interconnect (SYS)",
                nic_names[0],
                count_of(n_gpus as u64, "GPU"),
                remote_words()
            )
        };
        return vec![ev(Finding::info(ID, msg))];
    }
    if !remote.is_empty() {
        let mut crowded: Vec<(i32, Vec<String>)> = Vec::new();
        for n in &nics {
            if let Some(node) = n.numa_node {
                match crowded.iter_mut().find(|(c, _)| *c == node) {
                    Some((_, v)) => v.push(n.nic.clone()),
                    None => crowded.push((node, vec![n.nic.clone()])),
                }
            }
        }
        crowded.retain(|(_, v)| v.len() >= CROWDED_NICS);
        crowded.sort();
        let sentence = format!(
            "{} {} no RDMA NIC on {} NUMA node: the nearest is across the CPU sockets' interconnect (SYS), so {} GPUDirect RDMA traffic crosses it (lower bandwidth, higher latency than a NIC on the same socket)",
            remote_words(),
            if remote.len() == 1 { "has" } else { "have" },
            if remote.len() == 1 { "its" } else { "their" },
            if remote.len() == 1 { "its" } else { "their" },
        );
        if crowded.is_empty() {
            return vec![ev(Finding::info(
                ID,
                format!(
                    "{sentence}; with {} for {} and no NUMA node holding {CROWDED_NICS} or more, that is how the host is built",
                    count_of(nics.len() as u64, "NIC"),
                    count_of(n_gpus as u64, "GPU")
                ),
            ))];
        }
        let crowd = crowded
            .iter()
            .map(|(node, v)| format!("NUMA {node} holds {} ({})", v.len(), named(v)))
            .collect::<Vec<_>>()
            .join("; ");
        return vec![ev(Finding::warn(ID, format!("{sentence}, while {crowd}"))
            .fix("move one of the NICs of the crowded NUMA node to a slot on the other socket (the board manual's slot-to-CPU map), or on a cloud instance ask the provider; NCCL already picks the nearest NIC per GPU"))];
    }
    if !unknown.is_empty() {
        return vec![ev(Finding::info(
            ID,
            format!(
                "the nearest NIC of {} is not known ({}); the other GPUs have one on their socket",
                named(&unknown.iter().map(|g| g.gpu.clone()).collect::<Vec<_>>()),
                unknown[0].unknown.clone().unwrap_or_default()
            ),
        ))];
    }
    let through_cpu: Vec<String> = gpus
        .iter()
        .filter(|g| g.nearest > Some(Nearness::Switch))
        .map(|g| {
            format!(
                "{} → {} ({})",
                g.gpu,
                named(&g.nics),
                match g.nearest {
                    Some(Nearness::HostBridge) => "PHB",
                    _ => "NODE",
                }
            )
        })
        .collect();
    if through_cpu.is_empty() {
        return vec![ev(Finding::pass(
            ID,
            format!(
                "each of the {} has an RDMA NIC on its own PCIe switch (PIX/PXB): GPUDirect RDMA stays off the CPU ({} in all)",
                count_of(n_gpus as u64, "GPU"),
                count_of(nics.len() as u64, "NIC")
            ),
        ))];
    }
    vec![ev(Finding::pass(
        ID,
        format!(
            "each GPU has an RDMA NIC on its own NUMA node; {} through the CPU's root complex, not a shared PCIe switch",
            named(&through_cpu)
        ),
    ))]
}

#[cfg(test)]
mod tests;
