//! nvlink.status: NVLink links per GPU, the topology between GPUs, the NVSwitch fabric.

use crate::checks::common::{count_of, no_gpu_reason, selected, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Fabric, Facts, GpuFacts, TopoLink, NVML_NOT_SUPPORTED};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use crate::spec::NvlinkKind;

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
        what: "Active NVLink links per GPU against what the model has, the connection between \
               each pair of GPUs from `nvidia-smi topo -m` (NV# = # bonded NVLinks; PIX/PXB = \
               PCIe switch; PHB = through the CPU's host bridge; NODE/SYS = across host bridges \
               or sockets), and the NVSwitch fabric registration where there is one. The spec \
               database says which of four answers a model has: NVLink on its board (SXM, to \
               the other GPUs or to NVSwitch: links are expected, all down on a machine of \
               several GPUs fails, some down fails), an NVLink bridge (PCIe cards such as the \
               RTX A6000 or A100 PCIe: without a bridge no links up is normal, information), \
               none (PCIe only), or not stated (the datasheet entry does not say: nothing is \
               judged against it). One GPU of a model with NVLink on its board and no link to \
               show (a one-GPU slice of an SXM board in a VM, where NVML reports NVLink as \
               not supported) is information: no loss for one-GPU work, and no word on the \
               links of an instance with the whole board.",
        why: "Without NVLink, GPU-to-GPU traffic (all-reduce in data-parallel training, tensor \
              parallelism) goes over PCIe and through the CPU: 5-15x slower. A few links down \
              cut the bandwidth by their share; a fabric manager that is not running leaves \
              NVSwitch systems without NVLink at all.",
        verify: "nvidia-smi topo -m\nnvidia-smi nvlink -s\nnvidia-smi -q | grep -A3 Fabric\n\
                 systemctl status nvidia-fabricmanager   # NVSwitch systems",
        fix: "Links down: a hardware fault (reseat the GPU/bridge, ask the provider). Fabric not \
              'Completed': start the fabric manager (`sudo systemctl enable --now \
              nvidia-fabricmanager`, version equal to the driver's). PCIe-only topology on a \
              multi-GPU training box: ask for an NVLink (SXM) instance.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "On a machine of several GPUs, a bridge card without an NVLink bridge warns instead of informing, and GPU pairs without an NVLink path fail where the model has NVLink on its board and warn otherwise (all-reduce runs over PCIe); links down on SXM modules fail in every profile.",
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

/// One GPU of a model whose NVLink is on the board (SXM, or a superchip) with no link to
/// show: a one-GPU slice of a board (a VM given one GPU of an 8-GPU HGX, or `--gpus` on a
/// bare-metal board): nothing is lost for one-GPU work, and it says nothing about the links
/// of an instance with the whole board, which is what a multi-GPU plan on this provider
/// needs.
/// The PCI bus shows no other NVIDIA GPU (one the driver does not list, e.g. bound to vfio or
/// fallen off, would make "alone" false); where the bus was not read, the driver's list
/// stands.
fn alone_on_the_bus(facts: &Facts) -> bool {
    facts.pci_gpus.value().is_none_or(|p| p.len() <= 1)
}

fn one_gpu_of_a_board(facts: &Facts, who: &str, model: &ModelNvlink, seen: &str) -> String {
    let links = match model.links {
        Some(n) => format!("{n} NVLink links on its board"),
        None => "NVLink on its board".into(),
    };
    let here = if facts.machine.hypervisor.value() == Some(&true) {
        "this VM"
    } else {
        "this machine"
    };
    format!(
        "{who}: a model with {links}, alone in {here}: no NVLink is exposed to it ({seen}). \
         No loss for work on one GPU; a multi-GPU job on this provider needs an instance with \
         several GPUs of one board, whose links this check then reads"
    )
}

/// What the spec database says about a GPU's NVLink.
#[derive(Clone, Debug)]
struct ModelNvlink {
    kind: NvlinkKind,
    /// Links per GPU, where NVIDIA states it.
    links: Option<u32>,
    /// The model is in the spec database (an unknown kind of a known model is the datasheet's
    /// silence; of an unknown model, the database's).
    known: bool,
    pcie_card: bool,
}

impl ModelNvlink {
    fn of(g: &GpuFacts) -> ModelNvlink {
        match spec_of(g) {
            Some(s) => ModelNvlink {
                kind: s.nvlink_kind(),
                links: s.nvlink.as_ref().and_then(|n| n.links),
                known: true,
                pcie_card: s.form_factor == "pcie",
            },
            None => ModelNvlink {
                kind: NvlinkKind::Unknown,
                links: None,
                known: false,
                pcie_card: true,
            },
        }
    }

    /// What is known when the database does not say.
    fn unknown_phrase(&self) -> &'static str {
        match (self.known, self.pcie_card) {
            (true, true) => {
                "the datasheet entry does not say whether this model takes an NVLink bridge"
            }
            (true, false) => "the datasheet entry does not say whether this model has NVLink",
            (false, _) => {
                "the spec database does not know this model, so whether it has NVLink is not known"
            }
        }
    }
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

/// The NV# count between this GPU and any other, from the topology matrix: 0 where its row
/// shows other GPUs and none of them over NVLink, `None` where the matrix has no such row.
fn topo_links(facts: &Facts, g: &GpuFacts) -> Option<u32> {
    let t = facts.topology.value()?;
    let row = t.links.get(g.index as usize)?;
    let others: Vec<&TopoLink> = row
        .iter()
        .filter(|l| !matches!(l, TopoLink::Itself))
        .collect();
    if others.is_empty() {
        return None;
    }
    Some(
        others
            .iter()
            .filter_map(|l| match l {
                TopoLink::NvLink(n) => Some(*n),
                _ => None,
            })
            .max()
            .unwrap_or(0),
    )
}

const FIX_LINKS_DOWN: &str = "A hardware fault or the fabric: reseat, check `nvidia-smi nvlink -s`; on a cloud instance, report it.";
const FIX_BRIDGE: &str = "For multi-GPU work, fit the NVLink bridge (two cards of this model in slots the bridge spans) or ask the provider for a bridged pair; `nvidia-smi nvlink -s` shows the links.";

fn per_gpu(facts: &Facts, policy: &Policy, g: &GpuFacts, multi: bool) -> Finding {
    let model = ModelNvlink::of(g);
    let mut ev = Evidence::new().with("nvlink_kind", model.kind.as_str());
    if let Some(n) = model.links {
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

    let who = g.label();
    let bridge = model.kind == NvlinkKind::Bridge;
    match active {
        Some(a) if a > 0 => match model.links.filter(|want| a < *want) {
            Some(want) => {
                let of = total
                    .map(|t| format!(" ({t} reported)"))
                    .unwrap_or_default();
                let cut = format!(
                    "GPU-to-GPU bandwidth is cut to {}",
                    crate::checks::common::pct(a as f64, want as f64)
                );
                if bridge {
                    Finding::warn(
                        ID,
                        format!("{who}: only {a} of {want} NVLink links active{of}: a bridge of the set is missing or loose; {cut}"),
                    )
                    .evidence(ev)
                    .fix("Reseat the NVLink bridges (a full set spans every link); `nvidia-smi nvlink -s` shows which are down.")
                } else {
                    Finding::new(
                        ID,
                        if multi { Status::Fail } else { Status::Warn },
                        format!("{who}: only {a} of {want} NVLink links active{of}: {cut}"),
                    )
                    .evidence(ev)
                    .fix("Links that are down are a hardware fault: reseat or replace; on a cloud instance, report it with `nvidia-smi nvlink -s`.")
                }
            }
            None => {
                let of = model
                    .links
                    .map(|want| format!(" of {want}"))
                    .unwrap_or_default();
                let what = if bridge {
                    format!("{who}: an NVLink bridge is fitted: {a}{of} NVLink links active")
                } else {
                    format!("{who}: {a}{of} NVLink links active")
                };
                Finding::pass(ID, what).evidence(ev)
            }
        },
        // No link up (read, or seen in the topology matrix).
        Some(_) => {
            if !multi {
                let msg = match model.kind {
                    NvlinkKind::Direct | NvlinkKind::Switch if alone_on_the_bus(facts) => {
                        one_gpu_of_a_board(facts, &who, &model, "no link is active")
                    }
                    NvlinkKind::Direct | NvlinkKind::Switch => {
                        format!("{who}: no NVLink link active (one GPU: nothing to link)")
                    }
                    NvlinkKind::Bridge => format!(
                        "{who}: this card takes an NVLink bridge; none is fitted (one GPU: nothing to link)"
                    ),
                    NvlinkKind::None => {
                        format!("{who}: no NVLink on this model (one GPU: nothing to link)")
                    }
                    NvlinkKind::Unknown => format!(
                        "{who}: {}; no NVLink link is up (one GPU: nothing to link)",
                        model.unknown_phrase()
                    ),
                };
                return Finding::info(ID, msg).evidence(ev);
            }
            match model.kind {
                NvlinkKind::Direct | NvlinkKind::Switch => {
                    // On a board where the other GPUs have their links, one GPU without any
                    // is cut off from them.
                    let others_up = facts
                        .gpu_list()
                        .iter()
                        .any(|o| o.index != g.index && links_up(facts, o).is_some_and(|n| n > 0));
                    let why = if others_up {
                        "all links are down, while the other GPUs have theirs"
                    } else {
                        "all links are down"
                    };
                    let of = model
                        .links
                        .map(|want| format!("0 of {want} NVLink links active"))
                        .unwrap_or_else(|| {
                            "no NVLink link active, though this model's NVLink is on its board".into()
                        });
                    Finding::fail(
                        ID,
                        format!("{who}: {of} ({why}): its traffic with the other GPUs falls back to PCIe"),
                    )
                    .evidence(ev)
                    .fix(FIX_LINKS_DOWN)
                }
                NvlinkKind::Bridge => Finding::new(
                    ID,
                    if policy.profile == Profile::Train { Status::Warn } else { Status::Info },
                    format!(
                        "{who}: no NVLink bridge fitted (this card takes one): GPU-to-GPU traffic goes over PCIe; no fault for work on one GPU, it matters for multi-GPU training"
                    ),
                )
                .evidence(ev)
                .fix(FIX_BRIDGE),
                NvlinkKind::None => Finding::info(
                    ID,
                    format!("{who}: this model has no NVLink; GPU-to-GPU traffic goes over PCIe"),
                )
                .evidence(ev),
                NvlinkKind::Unknown => Finding::info(
                    ID,
                    format!(
                        "{who}: {}; no NVLink link is up: GPU-to-GPU traffic goes over PCIe",
                        model.unknown_phrase()
                    ),
                )
                .evidence(ev),
            }
        }
        // Not read.
        None => {
            let why = g.nvlinks.reason().unwrap_or("not reported");
            match model.kind {
                // NVML says the GPU has no NVLink, and it is the machine's only GPU.
                NvlinkKind::Direct | NvlinkKind::Switch
                    if !multi && why.starts_with(NVML_NOT_SUPPORTED) && alone_on_the_bus(facts) =>
                {
                    Finding::info(ID, one_gpu_of_a_board(facts, &who, &model, why)).evidence(ev)
                }
                NvlinkKind::Direct | NvlinkKind::Switch => Finding::skip(
                    ID,
                    match model.links {
                        Some(want) => format!(
                            "{who}: NVLink state not read ({why}); the model has {want} links"
                        ),
                        None => format!(
                            "{who}: NVLink state not read ({why}); the model has NVLink on its board"
                        ),
                    },
                )
                .evidence(ev),
                NvlinkKind::None => Finding::info(
                    ID,
                    if multi {
                        format!("{who}: this model has no NVLink; GPU-to-GPU traffic goes over PCIe")
                    } else {
                        format!("{who}: no NVLink on this model (one GPU: nothing to link)")
                    },
                )
                .evidence(ev),
                NvlinkKind::Bridge if !multi => Finding::info(
                    ID,
                    format!("{who}: this card takes an NVLink bridge (one GPU: nothing to link)"),
                )
                .evidence(ev),
                NvlinkKind::Bridge => Finding::skip(
                    ID,
                    format!(
                        "{who}: NVLink state not read ({why}): whether an NVLink bridge is fitted is not known (this card takes one)"
                    ),
                )
                .evidence(ev),
                NvlinkKind::Unknown if !multi => Finding::info(
                    ID,
                    format!("{who}: {} (one GPU: nothing to link)", model.unknown_phrase()),
                )
                .evidence(ev),
                NvlinkKind::Unknown => Finding::skip(
                    ID,
                    format!("{who}: NVLink state not read ({why}); {}", model.unknown_phrase()),
                )
                .evidence(ev),
            }
        }
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
                "{fabric_pairs} of {} {} wired with NVLink ({links}) but the NVSwitch fabric is not registered on {} of {n} GPUs: NVLink between them is not usable",
                count_of(pairs as u64, "GPU pair"),
                if fabric_pairs == 1 { "is" } else { "are" },
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
            if pairs == 1 {
                format!("Both GPUs are connected by NVLink ({links})")
            } else {
                format!("All {pairs} GPU pairs are connected by NVLink ({links})")
            },
        )
        .evidence(ev);
    }
    let through_cpu = slow_pairs
        .iter()
        .any(|p| p.ends_with("SYS") || p.ends_with("NODE") || p.ends_with("PHB"));
    // NVLink on the board (SXM) missing between GPUs is a fault; between PCIe cards it is how
    // the machine is built, which matters for multi-GPU training.
    let nvlink_on_board = facts
        .gpu_list()
        .iter()
        .any(|g| ModelNvlink::of(g).kind.is_on_board());
    let status = match (policy.profile, nvlink_on_board) {
        (Profile::Train, true) => Status::Fail,
        (_, true) | (Profile::Train, false) => Status::Warn,
        (_, false) => Status::Info,
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
            "{} of {} {} no NVLink path ({who}{listed}){}",
            slow_pairs.len(),
            count_of(pairs as u64, "GPU pair"),
            if slow_pairs.len() == 1 { "has" } else { "have" },
            if through_cpu { ": traffic between them crosses the CPU" } else { ": traffic between them goes over a PCIe switch" }
        ),
    )
    .evidence(
        ev.with("pairs_without_nvlink", &slow_pairs)
            .with("gpus_without_nvlink", &cut_off),
    )
    .fix("For multi-GPU training choose an NVLink/NVSwitch (SXM) instance; otherwise keep communicating GPUs under the same PCIe switch (`CUDA_VISIBLE_DEVICES`).")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::NvLink;
    use crate::testing::Machine;

    fn run(f: &Facts, profile: Profile) -> Vec<Finding> {
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        (CHECK.run)(f, &policy)
    }

    fn general(f: &Facts) -> Vec<Finding> {
        run(f, Profile::General)
    }

    fn of(out: &[Finding], gpu: u32) -> &Finding {
        out.iter()
            .find(|f| f.gpu == Some(gpu))
            .unwrap_or_else(|| panic!("no finding for GPU {gpu}: {out:#?}"))
    }

    fn machine_level(out: &[Finding]) -> &Finding {
        out.iter()
            .find(|f| f.gpu.is_none())
            .unwrap_or_else(|| panic!("no machine-level finding: {out:#?}"))
    }

    /// `active` of `n` links up.
    fn links(n: u32, active: u32) -> Reading<Vec<NvLink>> {
        Reading::Value(
            (0..n)
                .map(|link| NvLink {
                    link,
                    active: link < active,
                    version: Some(4),
                    speed_gbps: None,
                    remote_bus_id: None,
                })
                .collect(),
        )
    }

    fn unread() -> Reading<Vec<NvLink>> {
        Reading::unavailable("nvidia-smi -q does not list NVLink links")
    }

    /// Every pair of `n` GPUs through the host bridge.
    fn phb(n: usize) -> impl FnOnce(&mut Facts) {
        move |f| {
            if let Reading::Value(t) = &mut f.topology {
                for (i, row) in t.links.iter_mut().enumerate() {
                    for (j, l) in row.iter_mut().enumerate() {
                        if i != j && i < n && j < n {
                            *l = TopoLink::Phb;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn an_sxm_board_with_every_link_up_passes() {
        let out = general(&Machine::healthy("h200-sxm-141gb", 2).build());
        assert!(out.iter().all(|f| f.status == Status::Pass), "{out:#?}");
        assert!(of(&out, 0).message.contains("18 of 18 NVLink links active"));
        assert_eq!(
            machine_level(&out).message,
            "Both GPUs are connected by NVLink (NV18)"
        );
    }

    #[test]
    fn sxm_links_down_fail_on_a_machine_of_several_gpus_in_every_profile() {
        for p in Profile::ALL {
            let f = Machine::healthy("h200-sxm-141gb", 2)
                .gpu(1, |g| g.nvlinks = links(18, 0))
                .build();
            let out = run(&f, p);
            let x = of(&out, 1);
            assert_eq!(x.status, Status::Fail, "{p}: {}", x.message);
            assert!(x.message.contains("0 of 18 NVLink links active (all links are down, while the other GPUs have theirs)"), "{}", x.message);
            assert_eq!(of(&out, 0).status, Status::Pass);
        }
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.nvlinks = links(18, 0))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Fail);
        assert!(x.message.contains("(all links are down)"), "{}", x.message);
    }

    #[test]
    fn some_sxm_links_down_fail_with_several_gpus_and_warn_with_one() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(0, |g| g.nvlinks = links(18, 12))
            .build();
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Fail);
        assert!(x.message.contains("only 12 of 18 NVLink links active (18 reported): GPU-to-GPU bandwidth is cut to 67%"), "{}", x.message);
        // At the count: pass; one below: the finding.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(0, |g| g.nvlinks = links(18, 17))
            .build();
        assert_eq!(of(&general(&f), 0).status, Status::Fail);
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.nvlinks = links(18, 12))
            .build();
        assert_eq!(general(&f)[0].status, Status::Warn);
        // One GPU with no link up: a one-GPU slice of the board.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.nvlinks = links(18, 0))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Info);
        assert!(x
            .message
            .contains("no NVLink is exposed to it (no link is active)"));
    }

    #[test]
    fn v100_sxm3_has_nvlink_to_nvswitch_whatever_the_link_count() {
        let key = "v100-sxm3-32gb";
        assert_eq!(
            crate::spec::SpecDb::embedded()
                .by_key(key)
                .unwrap()
                .nvlink_kind(),
            NvlinkKind::Switch
        );
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = links(6, 0))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(
            x.message
                .contains("though this model's NVLink is on its board"),
            "{}",
            x.message
        );
        assert!(!x.message.contains("has no NVLink"));
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = links(6, 6))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message.ends_with(": 6 NVLink links active"),
            "{}",
            x.message
        );
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = unread())
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message.contains("the model has NVLink on its board"),
            "{}",
            x.message
        );
    }

    #[test]
    fn an_unread_sxm_link_state_skips_with_the_count() {
        // Two GPUs, no topology matrix to stand in (one GPU alone says what it means instead).
        let f = Machine::healthy("a100-sxm4-80gb", 2)
            .gpus(|g| g.nvlinks = unread())
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        let all = general(&f);
        let x = of(&all, 0);
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message.contains("the model has 12 links"),
            "{}",
            x.message
        );
    }

    #[test]
    fn the_topology_matrix_stands_in_for_unread_links() {
        // NV18 to the other GPU: up.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.nvlinks = unread())
            .build();
        let out = general(&f);
        assert_eq!(of(&out, 0).status, Status::Pass, "{}", of(&out, 0).message);
        assert_eq!(of(&out, 0).evidence.get("links_from_topology").unwrap(), 18);
        // Only PHB to the others: no link up, on a board that has them.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.nvlinks = unread())
            .with(phb(2))
            .build();
        assert_eq!(of(&general(&f), 0).status, Status::Fail);
    }

    #[test]
    fn a_bridge_card_without_a_bridge_is_information_and_warns_for_training() {
        let key = "rtx-a6000";
        assert_eq!(
            crate::spec::SpecDb::embedded()
                .by_key(key)
                .unwrap()
                .nvlink_kind(),
            NvlinkKind::Bridge
        );
        let f = Machine::healthy(key, 2).build();
        let out = general(&f);
        let x = of(&out, 0);
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message
                .contains("no NVLink bridge fitted (this card takes one)"),
            "{}",
            x.message
        );
        assert!(!x.message.contains("has no NVLink"));
        assert_eq!(of(&run(&f, Profile::Train), 0).status, Status::Warn);
        assert_eq!(of(&run(&f, Profile::Inference), 0).status, Status::Info);
        // One card: nothing to link.
        let x = &general(&Machine::healthy(key, 1).build())[0];
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message
                .contains("takes an NVLink bridge; none is fitted (one GPU"),
            "{}",
            x.message
        );
        assert_eq!(
            run(&Machine::healthy(key, 1).build(), Profile::Train)[0].status,
            Status::Info
        );
        // Bridged: pass.
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = links(4, 4))
            .build();
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Pass);
        assert!(
            x.message
                .contains("an NVLink bridge is fitted: 4 NVLink links active"),
            "{}",
            x.message
        );
        // Not read: with two cards the answer is not known; with one it does not matter.
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = unread())
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message
                .contains("whether an NVLink bridge is fitted is not known"),
            "{}",
            x.message
        );
        let f = Machine::healthy(key, 1)
            .gpu(0, |g| g.nvlinks = unread())
            .build();
        assert_eq!(general(&f)[0].status, Status::Info);
    }

    #[test]
    fn a_partial_bridge_set_warns() {
        let key = "a100-pcie-40gb";
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = links(12, 4))
            .build();
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Warn, "{}", x.message);
        assert!(
            x.message
                .contains("a bridge of the set is missing or loose"),
            "{}",
            x.message
        );
        let f = Machine::healthy(key, 2)
            .gpus(|g| g.nvlinks = links(12, 12))
            .build();
        assert!(of(&general(&f), 0).message.contains("fitted: 12 of 12"));
    }

    #[test]
    fn a_model_without_nvlink_says_so_only_where_the_database_does() {
        let f = Machine::healthy("l4", 2).build();
        let out = general(&f);
        assert_eq!(of(&out, 0).status, Status::Info);
        assert!(of(&out, 0).message.contains("this model has no NVLink"));
        let f = Machine::healthy("l4", 2)
            .gpus(|g| g.nvlinks = unread())
            .build();
        assert!(of(&general(&f), 1)
            .message
            .contains("this model has no NVLink"));
        let f = Machine::healthy("l4", 1)
            .gpus(|g| g.nvlinks = unread())
            .build();
        assert!(general(&f)[0]
            .message
            .contains("no NVLink on this model (one GPU"));
        let x = &general(&Machine::healthy("l4", 1).build())[0];
        assert!(
            x.message.contains("no NVLink on this model (one GPU"),
            "{}",
            x.message
        );
    }

    #[test]
    fn an_rtx_2080_pair_is_never_said_to_have_no_nvlink() {
        // The datasheet entry does not say: two cards, links not read.
        let f = Machine::healthy("rtx-2080", 2)
            .gpus(|g| g.nvlinks = unread())
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        for x in general(&f) {
            assert!(!x.message.contains("has no NVLink"), "{}", x.message);
        }
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Skip);
        assert!(
            x.message.contains(
                "the datasheet entry does not say whether this model takes an NVLink bridge"
            ),
            "{}",
            x.message
        );
        // Links read, none up: information, the same words.
        let f = Machine::healthy("rtx-2080", 2)
            .gpus(|g| g.nvlinks = links(1, 0))
            .build();
        let x = of(&general(&f), 0).clone();
        assert_eq!(x.status, Status::Info);
        assert!(
            x.message.contains(
                "does not say whether this model takes an NVLink bridge; no NVLink link is up"
            ),
            "{}",
            x.message
        );
        // One card: information.
        let f = Machine::healthy("rtx-2080", 1)
            .gpus(|g| g.nvlinks = unread())
            .build();
        assert_eq!(general(&f)[0].status, Status::Info);
        let f = Machine::healthy("rtx-2080", 1)
            .gpus(|g| g.nvlinks = links(1, 0))
            .build();
        assert!(general(&f)[0]
            .message
            .contains("no NVLink link is up (one GPU"));
    }

    /// Issue 14: one GPU of an SXM board (a one-GPU slice in a VM) says what that means
    /// instead of skipping, whether NVML cannot read the links or reads them all down; with
    /// two GPUs an unread state still skips.
    #[test]
    fn one_gpu_of_a_board_says_what_it_means() {
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = Reading::unavailable("NVML: not supported on this GPU"))
            .with(|f| f.machine.hypervisor = Reading::Value(true))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert_eq!(
            x.message,
            "GPU 0 (00:06.0): a model with 18 NVLink links on its board, alone in this VM: no \
             NVLink is exposed to it (NVML: not supported on this GPU). No loss for work on one \
             GPU; a multi-GPU job on this provider needs an instance with several GPUs of one \
             board, whose links this check then reads"
        );
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = links(18, 0))
            .with(|f| f.machine.hypervisor = Reading::Value(false))
            .build();
        let x = &general(&f)[0];
        assert_eq!(x.status, Status::Info, "{}", x.message);
        assert!(
            x.message
                .contains("alone in this machine: no NVLink is exposed to it (no link is active)"),
            "{}",
            x.message
        );
        // A snapshot's log that does not list links says nothing about them: still a skip.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = Reading::unavailable("nvidia-smi -q does not list NVLink links"))
            .build();
        assert_eq!(general(&f)[0].status, Status::Skip);
        // Another NVIDIA GPU on the bus (bound to vfio, or lost): not alone, so not a slice.
        let two_on_the_bus = Machine::healthy("h200-sxm-141gb", 2).build().pci_gpus;
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = Reading::unavailable(NVML_NOT_SUPPORTED))
            .with(|f| f.pci_gpus = two_on_the_bus.clone())
            .build();
        assert_eq!(general(&f)[0].status, Status::Skip);
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = links(18, 0))
            .with(|f| f.pci_gpus = two_on_the_bus)
            .build();
        assert!(general(&f)[0]
            .message
            .ends_with("no NVLink link active (one GPU: nothing to link)"));
        // Where the bus was not read, the driver's list stands.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpus(|g| g.nvlinks = Reading::unavailable(NVML_NOT_SUPPORTED))
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build();
        assert_eq!(general(&f)[0].status, Status::Info);
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| g.nvlinks = Reading::unavailable("NVML: not supported on this GPU"))
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        assert!(general(&f)
            .iter()
            .filter(|x| x.gpu.is_some())
            .all(|x| x.status == Status::Skip));
    }

    #[test]
    fn unknown_models_and_unstated_sxm_parts_have_their_own_words() {
        // The A800 SXM4's entry names the card only (no NVLink kind recorded).
        let f = Machine::healthy("a800-sxm4-80gb", 2)
            .gpus(|g| g.nvlinks = links(4, 0))
            .build();
        assert!(of(&general(&f), 0)
            .message
            .contains("does not say whether this model has NVLink"));
        let f = Machine::healthy("l4", 2)
            .gpus(|g| {
                g.name = Reading::Value("NVIDIA Mystery GPU".into());
                g.pci_device_id = Reading::unavailable("redacted");
            })
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build();
        let x = of(&general(&f), 0).clone();
        assert!(
            x.message
                .contains("the spec database does not know this model"),
            "{}",
            x.message
        );
        assert_eq!(x.evidence.get("nvlink_kind").unwrap(), "unknown");
    }

    #[test]
    fn a_fabric_that_did_not_register_fails() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| {
                g.fabric = Reading::Value(Fabric {
                    state: "In Progress".into(),
                    status: Some("N/A".into()),
                })
            })
            .build();
        let out = general(&f);
        assert_eq!(of(&out, 0).status, Status::Fail);
        assert!(of(&out, 0).message.contains("'In Progress'"));
        assert_eq!(machine_level(&out).status, Status::Fail);
        // One pair: singular, no "pair(s)".
        assert!(
            machine_level(&out)
                .message
                .starts_with("1 of 1 GPU pair is wired with NVLink (NV18)"),
            "{}",
            machine_level(&out).message
        );
        let ok = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| {
                g.fabric = Reading::Value(Fabric {
                    state: "Completed".into(),
                    status: Some("Success".into()),
                })
            })
            .build();
        assert!(general(&ok).iter().all(|f| f.status == Status::Pass));
    }

    #[test]
    fn pairs_without_nvlink_by_model_and_profile() {
        // SXM: a fault; warn, and fail for training.
        let f = Machine::healthy("h200-sxm-141gb", 2).with(phb(2)).build();
        assert_eq!(machine_level(&general(&f)).status, Status::Warn);
        assert_eq!(machine_level(&run(&f, Profile::Train)).status, Status::Fail);
        // PCIe cards (none or bridge): how the machine is built; warn for training.
        for key in ["l4", "rtx-a6000", "rtx-2080"] {
            let f = Machine::healthy(key, 2).with(phb(2)).build();
            let x = machine_level(&general(&f)).clone();
            assert_eq!(x.status, Status::Info, "{key}: {}", x.message);
            assert!(x.message.contains("crosses the CPU"), "{}", x.message);
            assert_eq!(
                machine_level(&run(&f, Profile::Train)).status,
                Status::Warn,
                "{key}"
            );
        }
    }

    #[test]
    fn pair_counts_are_words_not_pair_s() {
        // Three GPUs, one pair through the CPU: "1 of 3 GPU pairs has".
        let mut f = Machine::healthy("h200-sxm-141gb", 3).build();
        if let Reading::Value(t) = &mut f.topology {
            t.links[0][1] = TopoLink::Phb;
            t.links[1][0] = TopoLink::Phb;
        }
        let x = machine_level(&general(&f)).clone();
        assert!(
            x.message
                .starts_with("1 of 3 GPU pairs has no NVLink path (GPU0-GPU1"),
            "{}",
            x.message
        );
        let all = machine_level(&general(&Machine::healthy("h200-sxm-141gb", 3).build())).clone();
        assert_eq!(
            all.message,
            "All 3 GPU pairs are connected by NVLink (NV18)"
        );
    }

    #[test]
    fn one_gpu_cut_off_and_long_pair_lists_are_named() {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        if let Reading::Value(t) = &mut f.topology {
            for j in 0..8 {
                if j != 5 {
                    t.links[5][j] = TopoLink::Phb;
                    t.links[j][5] = TopoLink::Phb;
                }
            }
        }
        let x = machine_level(&general(&f)).clone();
        assert!(
            x.message.contains(
                "7 of 28 GPU pairs have no NVLink path (GPU5 has no NVLink to any other GPU;"
            ),
            "{}",
            x.message
        );
        assert!(
            x.message.contains(&format!("+{} more", 7 - PAIRS_LISTED)),
            "{}",
            x.message
        );
        // Under a PCIe switch: said so.
        let f = Machine::healthy("l4", 2)
            .with(|f| {
                if let Reading::Value(t) = &mut f.topology {
                    t.links[0][1] = TopoLink::Pix;
                    t.links[1][0] = TopoLink::Pix;
                }
            })
            .build();
        assert!(machine_level(&general(&f))
            .message
            .contains("goes over a PCIe switch"));
        let f = Machine::healthy("l4", 2)
            .with(|f| f.topology = Reading::unavailable("no file"))
            .build();
        assert_eq!(machine_level(&general(&f)).status, Status::Skip);
    }
}
