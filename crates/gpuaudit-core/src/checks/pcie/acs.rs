//! pcie.acs: PCI Access Control Services on the PCIe switch ports between GPUs, and between a
//! GPU and an RDMA NIC. With P2P Request or Completion Redirect (or Egress Control) on a
//! switch's downstream port, traffic that could turn inside the switch goes up to the root
//! complex: slower, and blocked where the IOMMU rejects it.

use crate::checks::common::count_of;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{EndpointRole, Facts, PcieEndpoint, PcieTree, TopoLink};
use crate::finding::Finding;
use crate::parse::pci_config::{acs_bit_names, acs_lspci, port_type_name, ACS_CR, ACS_EC, ACS_RR};
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use serde::Serialize;

const ID: &str = "pcie.acs";

/// The control bits that send peer-to-peer traffic away from the switch: P2P Request
/// Redirect, P2P Completion Redirect, P2P Egress Control (PCIe Base Specification, ACS
/// Control Register; NCCL's troubleshooting guide clears the whole register).
pub const REDIRECT_BITS: u16 = ACS_RR | ACS_CR | ACS_EC;
/// At most this many ports and pairs are named in one finding (the evidence lists the ports,
/// at most [`MAX_PORTS_SHOWN`]).
pub const MAX_NAMED: usize = 4;
pub const MAX_PORTS_SHOWN: usize = 32;

pub const CHECK: Check = Check {
    id: ID,
    title: "PCI ACS redirect on the PCIe switch ports between GPUs and between GPU and NIC",
    looks_at: "PCI Access Control Services on the PCIe switch ports between GPUs and between a GPU and an RDMA NIC (P2P request/completion redirect, egress control), read from config space (root); the IOMMU; in a VM what cannot be seen",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Each GPU's and each RDMA NIC's (/sys/class/infiniband/*/device) path up to \
               its root port, from the sysfs link /sys/bus/pci/devices/BDF -> \
               /sys/devices/pciDDDD:BB/...: where two of them meet below the root port they \
               share a PCIe switch, and the switch's downstream ports on their two paths \
               decide whether traffic between them turns inside it. Of those ports it reads \
               the ACS extended capability (id 0x000D) from config space \
               (/sys/devices/.../config, beyond the first 256 bytes: root only; a reader \
               without root gets 64 bytes) and its control bits SV, TB, RR, CR, UF, EC, DT; \
               and the IOMMU (/sys/class/iommu, the iommu=, intel_iommu=, amd_iommu= \
               parameters of /proc/cmdline). GPU pairs that `nvidia-smi topo -m` joins with \
               NVLink are left aside: their traffic takes NVLink. In a VM (the CPU's \
               hypervisor flag) the host's switches are not visible: the check skips and \
               says so.",
        why: "With ACS P2P Request Redirect or Completion Redirect (or Egress Control) on a \
              switch's downstream port, GPU-to-GPU traffic over PCIe and GPUDirect RDMA \
              between a GPU and the NIC on the same switch is sent up to the root complex \
              instead of turning in the switch: lower bandwidth, and with the IOMMU \
              translating, NCCL can hang. NCCL's troubleshooting guide (PCI Access Control \
              Services, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html) \
              says to disable ACS on bare metal. Linux enables ACS redirect on switch ports \
              where the IOMMU is on, because that is what isolates devices into IOMMU groups \
              for VMs: a host that passes GPUs to VMs needs it. Where the config space \
              cannot be read the check skips; it never passes on what it did not read.",
        verify: "# the path above a GPU (each BDF between pciDDDD:BB and the GPU is a bridge)\n\
                 readlink -f /sys/bus/pci/devices/BUS_ID\n\
                 # ACS of one port (root): look for ReqRedir+ CmpltRedir+ EgressCtrl+\n\
                 sudo lspci -vvv -s BDF | grep -A2 'Access Control Services'\n\
                 sudo lspci -vvv | grep ACSCtl\n\
                 # the IOMMU\n\
                 ls /sys/class/iommu; tr ' ' '\\n' < /proc/cmdline | grep -i iommu\n\
                 nvidia-smi topo -m\n\
                 nvidia-smi topo -p2p r",
        fix: "On bare metal used for training: disable ACS on the PCIe switches in the BIOS \
              (an ACS or 'PCIe ACS control' setting, on some boards turned off together with \
              VT-d / IOMMU), or for the running boot clear each switch port's ACS control \
              register as NCCL's troubleshooting guide does: `sudo setpci -s BDF \
              ECAP_ACS+0x6.w=0000` (lost at reboot; a boot script redoes it). Keep ACS where \
              the host gives GPUs to VMs or relies on the IOMMU to isolate devices: without \
              it devices behind one switch fall into one IOMMU group and can reach each \
              other's memory.",
    },
    profiles: &[],
    run: run_acs,
};

/// Where two devices' paths part below a shared switch: the two downstream ports (either
/// may be absent where a device sits on the switch's own bus).
#[derive(Clone, Debug, PartialEq)]
struct Meeting<'a> {
    a: &'a PcieEndpoint,
    b: &'a PcieEndpoint,
    ports: Vec<String>,
}

/// The switch ports where `a`'s and `b`'s paths part, where they share a switch (their
/// paths have the root port and at least the switch's upstream port in common).
fn meeting<'a>(a: &'a PcieEndpoint, b: &'a PcieEndpoint) -> Option<Option<Meeting<'a>>> {
    let (ua, ub) = (a.upstream.value()?, b.upstream.value()?);
    let k = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    if k < 2 {
        return Some(None);
    }
    let ports: Vec<String> = [ua.get(k), ub.get(k)]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    Some(Some(Meeting { a, b, ports }))
}

fn name(e: &PcieEndpoint) -> String {
    match &e.role {
        EndpointRole::Gpu => format!("GPU {}", e.bus_id),
        EndpointRole::Nic { device } => {
            let d = crate::parse::host::truncate(device, 40);
            format!("{} ({})", escape_line(&d), e.bus_id)
        }
    }
}

/// "a, b, c and 2 more".
fn named(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(MAX_NAMED).map(String::as_str).collect();
    let more = items.len().saturating_sub(MAX_NAMED);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

#[derive(Serialize)]
struct PortEvidence {
    bus_id: String,
    port_type: Option<String>,
    acs_control: Option<String>,
    acs_bits: Option<String>,
    unreadable: Option<String>,
}

fn port_evidence(tree: &PcieTree) -> Vec<PortEvidence> {
    tree.ports
        .iter()
        .take(MAX_PORTS_SHOWN)
        .map(|p| PortEvidence {
            bus_id: p.bus_id.clone(),
            port_type: p.port_type.value().map(|t| port_type_name(*t).to_string()),
            acs_control: match &p.acs {
                Reading::Value(Some(a)) => Some(format!("{:#06x}", a.control)),
                Reading::Value(None) => Some("no ACS capability".into()),
                Reading::Unavailable(_) => None,
            },
            acs_bits: p
                .acs
                .value()
                .and_then(|a| a.as_ref())
                .map(|a| acs_lspci(a.control)),
            unreadable: p.acs.reason().map(str::to_string),
        })
        .collect()
}

/// The IOMMU in words ("on (dmar0, dmar1), iommu=pt"), where read.
fn iommu_words(tree: &PcieTree) -> Option<String> {
    let io = tree.iommu.value()?;
    let params = io.cmdline.value().cloned().unwrap_or_default();
    let state = if io.units.is_empty() {
        "off (no unit in /sys/class/iommu)".to_string()
    } else {
        format!("on ({})", named(&io.units))
    };
    Some(if params.is_empty() {
        state
    } else {
        format!("{state}, {}", params.join(" "))
    })
}

fn passthrough(tree: &PcieTree) -> bool {
    tree.iommu
        .value()
        .and_then(|io| io.cmdline.value())
        .is_some_and(|p| {
            p.iter()
                .any(|t| t == "iommu=pt" || t == "iommu.passthrough=1")
        })
}

fn iommu_on(tree: &PcieTree) -> bool {
    tree.iommu.value().is_some_and(|io| !io.units.is_empty())
}

/// Whether `nvidia-smi topo -m` joins two GPUs (by bus id) with NVLink: their peer traffic
/// takes it, not the PCIe switch, so ACS does not touch it.
fn nvlinked(facts: &Facts, a: &str, b: &str) -> bool {
    let Some(topo) = facts.topology.value() else {
        return false;
    };
    let index = |bus: &str| {
        let g = facts
            .gpu_list()
            .iter()
            .find(|g| crate::facts::normalize_bus_id(&g.pci_bus_id) == bus)?;
        topo.gpus
            .iter()
            .position(|l| *l == format!("GPU{}", g.index))
    };
    match (index(a), index(b)) {
        (Some(i), Some(j)) => matches!(
            topo.links.get(i).and_then(|r| r.get(j)),
            Some(TopoLink::NvLink(_))
        ),
        _ => false,
    }
}

fn run_acs(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let tree = match &facts.pcie_tree {
        Reading::Value(t) => t,
        Reading::Unavailable(r) => {
            return vec![Finding::skip(
                ID,
                format!("the PCIe paths were not read: {r}"),
            )]
        }
    };
    let gpus: Vec<&PcieEndpoint> = tree
        .endpoints
        .iter()
        .filter(|e| e.role == EndpointRole::Gpu)
        .collect();
    let nics = tree.endpoints.len() - gpus.len();
    if gpus.is_empty() {
        return vec![Finding::skip(
            ID,
            "no NVIDIA GPU on the PCI bus: no peer-to-peer path to judge",
        )];
    }
    let iommu = iommu_words(tree);
    if facts.machine.hypervisor.value() == Some(&true) {
        let not_read: Vec<String> = tree
            .endpoints
            .iter()
            .filter_map(|e| e.upstream.reason().map(|r| format!("{}: {r}", name(e))))
            .collect();
        let seen = match not_read.len() {
            1.. => "its paths were not read, see the evidence".to_string(),
            0 => format!(
                "{} above the GPUs and NICs",
                count_of(tree.ports.len() as u64, "virtual bridge")
            ),
        };
        // Nothing is judged: a skip that says what cannot be seen, not a note on every VM.
        return vec![Finding::skip(
            ID,
            format!(
                "in a VM: the host's PCIe switches and their ACS cannot be seen, only the VM's own virtual PCIe tree ({seen}); the hypervisor decides whether GPUs reach each other over PCIe (`nvidia-smi topo -p2p r` shows it); NVLink is not affected by ACS"
            ),
        )
        .with("virtual_ports", port_evidence(tree))
        .with("paths_not_known", &not_read)
        .with("iommu", &iommu)];
    }
    if gpus.len() == 1 && nics == 0 {
        return vec![Finding::skip(
            ID,
            format!(
                "one GPU ({}) and no RDMA NIC: no peer-to-peer path through a PCIe switch to judge",
                gpus[0].bus_id
            ),
        )
        .with("iommu", &iommu)];
    }
    // Every pair of a GPU with a later GPU or with a NIC.
    let mut meetings = Vec::new();
    let mut over_nvlink = 0usize;
    // (device, why its path is not known)
    let mut unknown: Vec<(String, String)> = Vec::new();
    for (i, a) in tree.endpoints.iter().enumerate() {
        for b in &tree.endpoints[i + 1..] {
            if a.role != EndpointRole::Gpu && b.role != EndpointRole::Gpu {
                continue;
            }
            if a.role == EndpointRole::Gpu
                && b.role == EndpointRole::Gpu
                && nvlinked(facts, &a.bus_id, &b.bus_id)
            {
                over_nvlink += 1;
                continue;
            }
            match meeting(a, b) {
                Some(Some(m)) => meetings.push(m),
                Some(None) => {}
                None => {
                    for e in [a, b] {
                        if let Reading::Unavailable(r) = &e.upstream {
                            if !unknown.iter().any(|(n, _)| *n == name(e)) {
                                unknown.push((name(e), r.clone()));
                            }
                        }
                    }
                }
            }
        }
    }
    let mut ports: Vec<String> = meetings.iter().flat_map(|m| m.ports.clone()).collect();
    ports.sort();
    ports.dedup();
    let mut redirecting: Vec<(String, u16)> = Vec::new();
    let mut unreadable: Vec<String> = Vec::new();
    let mut clear: Vec<String> = Vec::new();
    for p in &ports {
        match tree.port(p).map(|x| &x.acs) {
            Some(Reading::Value(Some(a))) if a.control & REDIRECT_BITS != 0 => {
                redirecting.push((p.clone(), a.control))
            }
            Some(Reading::Value(_)) => clear.push(p.clone()),
            Some(Reading::Unavailable(r)) => unreadable.push(r.clone()),
            None => unreadable.push(format!("{p}: its config space was not read")),
        }
    }
    let ev = |f: Finding| {
        f.with("ports", port_evidence(tree))
            .with("gpu_pairs_over_nvlink", over_nvlink)
            .with("iommu", &iommu)
            .with(
                "paths_not_known",
                unknown
                    .iter()
                    .map(|(n, r)| format!("{n}: {r}"))
                    .collect::<Vec<_>>(),
            )
    };
    if !redirecting.is_empty() {
        let pairs: Vec<String> = meetings
            .iter()
            .filter(|m| {
                m.ports
                    .iter()
                    .any(|p| redirecting.iter().any(|(r, _)| r == p))
            })
            .map(|m| format!("{} ↔ {}", name(m.a), name(m.b)))
            .collect();
        let port_words: Vec<String> = redirecting
            .iter()
            .map(|(p, c)| format!("{p} ({})", acs_bit_names(*c)))
            .collect();
        let iommu_cost = if iommu_on(tree) && !passthrough(tree) {
            "; with the IOMMU translating (on, not iommu=pt) the redirected requests are checked by it and can be refused, which NCCL shows as a hang"
        } else if iommu_on(tree) {
            "; the IOMMU is on (in passthrough)"
        } else {
            ""
        };
        let fix = format!(
            "on bare metal for training, disable ACS for the PCIe switches in the BIOS, or for this boot {} (NCCL's troubleshooting guide; keep ACS where GPUs are passed to VMs or the IOMMU must isolate devices)",
            redirecting
                .iter()
                .take(MAX_NAMED)
                .map(|(p, _)| format!("`sudo setpci -s {p} ECAP_ACS+0x6.w=0000`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut f = Finding::warn(
            ID,
            format!(
                "ACS redirect is on at {} of {} PCIe switch {} between devices that share a switch: {}; peer-to-peer and GPUDirect RDMA traffic between {} goes up to the root complex instead of turning in the switch (lower bandwidth){iommu_cost}",
                redirecting.len(),
                ports.len(),
                if ports.len() == 1 { "port" } else { "ports" },
                named(&port_words),
                named(&pairs),
            ),
        )
        .fix(fix);
        if !unreadable.is_empty() {
            f = f.with("ports_not_read", &unreadable);
        }
        return vec![ev(f)];
    }
    if !unreadable.is_empty() {
        return vec![ev(Finding::skip(
            ID,
            format!(
                "cannot read the ACS of {} of the {} PCIe switch {} between GPUs and NICs: {}",
                unreadable.len(),
                ports.len(),
                if ports.len() == 1 { "port" } else { "ports" },
                unreadable[0]
            ),
        ))];
    }
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|(n, _)| n.clone()).collect();
        return vec![ev(Finding::skip(
            ID,
            format!(
                "the PCIe path of {} is not known: {}",
                named(&names),
                unknown[0].1
            ),
        ))];
    }
    if !clear.is_empty() {
        let pairs: Vec<String> = meetings
            .iter()
            .map(|m| format!("{} ↔ {}", name(m.a), name(m.b)))
            .collect();
        return vec![ev(Finding::pass(
            ID,
            format!(
                "ACS redirect is off on the {} PCIe switch {} where GPUs and NICs meet ({}): their peer traffic turns in the switch",
                clear.len(),
                if clear.len() == 1 { "port" } else { "ports" },
                named(&pairs)
            ),
        ))];
    }
    vec![ev(Finding::info(
        ID,
        format!(
            "{}no two of the {} and {} share a PCIe switch: their traffic crosses the root complex (or NVLink) whatever the switches' ACS says",
            if over_nvlink > 0 {
                "apart from GPU pairs joined by NVLink (their traffic takes NVLink), "
            } else {
                ""
            },
            count_of(gpus.len() as u64, "GPU"),
            count_of(nics as u64, "RDMA NIC")
        ),
    ))]
}

#[cfg(test)]
mod tests;
