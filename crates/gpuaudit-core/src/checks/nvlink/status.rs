//! nvlink.status: NVLink links per GPU, the topology between GPUs, the NVSwitch fabric.

use crate::checks::common::{no_gpu_reason, selected, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Fabric, Facts, GpuFacts, TopoLink};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "nvlink.status";

/// GPU pairs without NVLink named in the machine-level message; the evidence has them all.
pub const PAIRS_LISTED: usize = 4;

pub const CHECK: Check = Check {
    id: ID,
    title: "NVLink links up per GPU, the GPU-to-GPU topology and the NVSwitch fabric",
    looks_at: "NVLink links up per GPU against what the model has, topology matrix (NV#, PIX, \
               PXB, PHB, NODE, SYS), peer access",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what:
            "Active NVLink links per GPU against what the model has, the connection between each \
               pair of GPUs from `nvidia-smi topo -m` (NV# = # bonded NVLinks; PIX/PXB = PCIe \
               switch; PHB = through the CPU's host bridge; NODE/SYS = across host bridges or \
               sockets), and the NVSwitch fabric registration where there is one.",
        why: "Without NVLink, GPU-to-GPU traffic (all-reduce in data-parallel training, tensor \
              parallelism) goes over PCIe and through the CPU: 5-15x slower. A few links down \
              cut the bandwidth by their share; a fabric manager that is not running leaves \
              NVSwitch systems without NVLink at all.",
        verify: "nvidia-smi topo -m\nnvidia-smi nvlink -s\nnvidia-smi -q | grep -A3 Fabric\n\
                 systemctl status nvidia-fabricmanager   (NVSwitch systems)",
        fix: "Links down: a hardware fault (reseat the GPU/bridge, ask the provider). Fabric not \
              'Completed': start the fabric manager (`sudo systemctl enable --now \
              nvidia-fabricmanager`, version equal to the driver's). PCIe-only topology on a \
              multi-GPU training box: ask for an NVLink (SXM) instance.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "On a machine of several GPUs, a GPU whose NVLink links are all down fails instead of warning, and GPU pairs without an NVLink path fail, whatever the model.",
        },
    ],
    run: status,
};

fn status(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let gpus: Vec<&GpuFacts> = selected(facts, policy).collect();
    if gpus.is_empty() {
        return vec![Finding::skip(ID, no_gpu_reason(facts))];
    }
    let multi = facts.gpu_list().len() > 1;
    let mut out: Vec<Finding> = gpus
        .iter()
        .map(|g| per_gpu(facts, policy, g, multi).gpu(g.index))
        .collect();
    if multi {
        out.push(topology(facts, policy));
    }
    out
}

/// NVLink links this GPU should have, if the model has NVLink at all and NVIDIA states the
/// count. Bridged PCIe cards are left out: without a bridge, no links is normal.
fn spec_links(g: &GpuFacts) -> Option<(u32, String)> {
    let s = spec_of(g)?;
    let n = s.nvlink.as_ref().filter(|n| !n.bridge)?;
    Some((n.links?, s.form_factor.clone()))
}

/// NVLink links of this GPU that are up: from the link states where they were read, else the
/// bonded count towards the other GPUs in the topology matrix.
fn links_up(facts: &Facts, g: &GpuFacts) -> Option<u32> {
    match &g.nvlinks {
        Reading::Value(links) => Some(links.iter().filter(|l| l.active).count() as u32),
        Reading::Unavailable(_) => topo_links(facts, g),
    }
}

/// The fabric registration, where it is not what a working NVSwitch system shows.
fn fabric_problem(g: &GpuFacts) -> Option<&Fabric> {
    let f = g.fabric.value()?;
    let state_ok =
        f.state.eq_ignore_ascii_case("completed") || f.state.eq_ignore_ascii_case("not supported");
    let status_ok = f
        .status
        .as_deref()
        .is_none_or(|s| s.eq_ignore_ascii_case("success") || s.eq_ignore_ascii_case("n/a"));
    (!state_ok || !status_ok).then_some(f)
}

/// The NV# count between this GPU and any other, from the topology matrix.
fn topo_links(facts: &Facts, g: &GpuFacts) -> Option<u32> {
    let t = facts.topology.value()?;
    let row = t.links.get(g.index as usize)?;
    row.iter()
        .filter_map(|l| match l {
            TopoLink::NvLink(n) => Some(*n),
            _ => None,
        })
        .max()
}

fn per_gpu(facts: &Facts, policy: &Policy, g: &GpuFacts, multi: bool) -> Finding {
    let expected = spec_links(g);
    let mut ev = Evidence::new();
    if let Some((n, _)) = &expected {
        ev.insert("spec_links", n);
    }
    let (active, total) = match &g.nvlinks {
        Reading::Value(links) => {
            let a = links.iter().filter(|l| l.active).count() as u32;
            ev.insert("links_active", a);
            ev.insert("links_reported", links.len());
            ev.insert("source", &g.source);
            (Some(a), Some(links.len() as u32))
        }
        Reading::Unavailable(r) => {
            ev.insert("links_unavailable", r);
            // A snapshot without `nvidia-smi nvlink -s`: the topology matrix still shows the
            // bonded link count towards the other GPUs.
            match topo_links(facts, g) {
                Some(n) => {
                    ev.insert("links_from_topology", n);
                    ev.insert("source", "nvidia-smi topo -m");
                    (Some(n), None)
                }
                None => (None, None),
            }
        }
    };
    if let Reading::Value(f) = &g.fabric {
        ev.insert("fabric_state", &f.state);
        if let Some(s) = &f.status {
            ev.insert("fabric_status", s);
        }
    }
    if let Some(f) = fabric_problem(g).cloned() {
        return Finding::fail(
            ID,
            format!(
                "{}: NVSwitch fabric registration is '{}'{}: NVLink between GPUs is not usable until it completes",
                g.label(),
                f.state,
                f.status.map(|s| format!(" ({s})")).unwrap_or_default()
            ),
        )
        .evidence(ev)
        .fix("Start the fabric manager, with the same version as the driver: `sudo systemctl enable --now nvidia-fabricmanager`; then check `nvidia-smi -q | grep -A3 Fabric`.");
    }

    let severity_missing = if policy.profile == Profile::Train && multi {
        Status::Fail
    } else {
        Status::Warn
    };
    match (expected, active) {
        (None, Some(a)) if a > 0 => {
            Finding::pass(ID, format!("{}: {a} NVLink links active", g.label())).evidence(ev)
        }
        (None, _) => {
            let msg = if multi {
                format!(
                    "{}: this model has no NVLink; GPU-to-GPU traffic goes over PCIe",
                    g.label()
                )
            } else {
                format!(
                    "{}: no NVLink on this model (one GPU: nothing to link)",
                    g.label()
                )
            };
            Finding::info(ID, msg).evidence(ev)
        }
        (Some((want, form)), Some(a)) => {
            if a >= want {
                Finding::pass(
                    ID,
                    format!("{}: {a} of {want} NVLink links active", g.label()),
                )
                .evidence(ev)
            } else if a == 0 {
                if !multi {
                    return Finding::info(
                        ID,
                        format!(
                            "{}: no NVLink link active (one GPU: nothing to link)",
                            g.label()
                        ),
                    )
                    .evidence(ev);
                }
                // On a board where the other GPUs have their links, one GPU without any is
                // cut off from them: a fault, not the way the machine was sold.
                let alone = form != "pcie"
                    && facts
                        .gpu_list()
                        .iter()
                        .any(|o| o.index != g.index && links_up(facts, o).is_some_and(|n| n > 0));
                let why = if form == "pcie" {
                    "no NVLink bridge is installed or it is not detected"
                } else if alone {
                    "all links are down, while the other GPUs have theirs"
                } else {
                    "all links are down"
                };
                Finding::new(
                    ID,
                    if alone { Status::Fail } else { severity_missing },
                    format!(
                        "{}: 0 of {want} NVLink links active ({why}): its traffic with the other GPUs falls back to PCIe",
                        g.label()
                    ),
                )
                .evidence(ev)
                .fix(if form == "pcie" {
                    "Install the NVLink bridge (PCIe cards) or ask the provider for a bridged pair."
                } else {
                    "A hardware fault or the fabric: reseat, check `nvidia-smi nvlink -s`; on a cloud instance, report it."
                })
            } else {
                let of = total
                    .map(|t| format!(" ({t} reported)"))
                    .unwrap_or_default();
                Finding::new(
                    ID,
                    if multi { Status::Fail } else { Status::Warn },
                    format!(
                        "{}: only {a} of {want} NVLink links active{of}: GPU-to-GPU bandwidth is cut to {:.0}%",
                        g.label(),
                        100.0 * a as f64 / want as f64
                    ),
                )
                .evidence(ev)
                .fix("Links that are down are a hardware fault: reseat or replace; on a cloud instance, report it with `nvidia-smi nvlink -s`.")
            }
        }
        (Some((want, _)), None) => Finding::skip(
            ID,
            format!(
                "{}: NVLink state not read ({}); the model has {want} links",
                g.label(),
                g.nvlinks.reason().unwrap_or("?")
            ),
        )
        .evidence(ev),
    }
}

/// One machine-level finding about the GPU-to-GPU matrix.
fn topology(facts: &Facts, policy: &Policy) -> Finding {
    let t = match &facts.topology {
        Reading::Value(t) => t,
        Reading::Unavailable(r) => {
            return Finding::skip(ID, format!("GPU topology matrix not read: {r}"));
        }
    };
    let n = t.links.len();
    // Rows of the matrix are in the driver's GPU order, the same indices as the facts'.
    let unregistered: Vec<u32> = (0..n as u32)
        .filter(|&i| {
            facts
                .gpu_list()
                .iter()
                .any(|g| g.index == i && fabric_problem(g).is_some())
        })
        .collect();
    let mut counts: std::collections::BTreeMap<String, u32> = Default::default();
    let mut slow_pairs = Vec::new();
    let mut fabric_pairs = 0usize;
    // How many of its pairs each GPU has without NVLink.
    let mut slow_of = vec![0usize; n];
    for i in 0..n {
        for j in (i + 1)..n {
            let Some(l) = t.links.get(i).and_then(|r| r.get(j)) else {
                continue;
            };
            *counts.entry(l.label()).or_default() += 1;
            if !matches!(l, TopoLink::NvLink(_)) {
                slow_pairs.push(format!("GPU{i}-GPU{j} {}", l.label()));
                slow_of[i] += 1;
                slow_of[j] += 1;
            } else if unregistered.contains(&(i as u32)) || unregistered.contains(&(j as u32)) {
                fabric_pairs += 1;
            }
        }
    }
    let pairs = n * n.saturating_sub(1) / 2;
    let links = counts.keys().cloned().collect::<Vec<_>>().join(", ");
    let ev = Evidence::new()
        .with("gpus", n)
        .with("pairs", pairs)
        .with("links", &counts)
        .with("source", "nvidia-smi topo -m");
    if fabric_pairs > 0 {
        // The matrix shows the wiring; without the fabric registration no NVLink transfer
        // crosses the NVSwitches, so the pairs are not usable whatever the matrix says.
        return Finding::fail(
            ID,
            format!(
                "{fabric_pairs} of {pairs} GPU pair(s) are wired with NVLink ({links}) but the NVSwitch fabric is not registered on {} of {n} GPUs: NVLink between them is not usable",
                unregistered.len()
            ),
        )
        .evidence(
            ev.with("fabric_unregistered_gpus", &unregistered)
                .with("pairs_without_nvlink", &slow_pairs),
        )
        .fix("Start the fabric manager, with the same version as the driver: `sudo systemctl enable --now nvidia-fabricmanager`; then check `nvidia-smi -q | grep -A3 Fabric`.");
    }
    if slow_pairs.is_empty() {
        return Finding::pass(
            ID,
            format!("All {pairs} GPU pair(s) are connected by NVLink ({links})"),
        )
        .evidence(ev);
    }
    let through_cpu = slow_pairs
        .iter()
        .any(|p| p.ends_with("SYS") || p.ends_with("NODE") || p.ends_with("PHB"));
    let any_nvlink_model = facts.gpu_list().iter().any(|g| spec_links(g).is_some());
    let status = match (policy.profile, any_nvlink_model, through_cpu) {
        (Profile::Train, _, _) => Status::Fail,
        (_, true, _) => Status::Warn,
        (_, false, true) => Status::Info,
        (_, false, false) => Status::Info,
    };
    // On a board where the others are linked, a GPU without NVLink to any of them is the
    // finding; its pairs are the detail.
    let cut_off: Vec<String> = (0..n)
        .filter(|&i| n > 2 && slow_of[i] == n - 1 && slow_pairs.len() < pairs)
        .map(|i| format!("GPU{i}"))
        .collect();
    let mut listed = slow_pairs
        .iter()
        .take(PAIRS_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if slow_pairs.len() > PAIRS_LISTED {
        listed.push_str(&format!(", +{} more", slow_pairs.len() - PAIRS_LISTED));
    }
    let who = if cut_off.is_empty() {
        String::new()
    } else {
        format!(
            "{} {} no NVLink to any other GPU; ",
            cut_off.join(", "),
            if cut_off.len() == 1 { "has" } else { "have" }
        )
    };
    Finding::new(
        ID,
        status,
        format!(
            "{} of {pairs} GPU pair(s) have no NVLink path ({who}{listed}){}",
            slow_pairs.len(),
            if through_cpu { ": traffic between them crosses the CPU" } else { ": traffic between them goes over a PCIe switch" }
        ),
    )
    .evidence(
        ev.with("pairs_without_nvlink", &slow_pairs)
            .with("gpus_without_nvlink", &cut_off),
    )
    .fix("For multi-GPU training choose an NVLink/NVSwitch (SXM) instance; otherwise keep communicating GPUs under the same PCIe switch (`CUDA_VISIBLE_DEVICES`).")
}
