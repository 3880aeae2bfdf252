//! nvlink.status: NVLink links per GPU, the topology between GPUs, the NVSwitch fabric.
//!
//! How many links a GPU has up is read from `nvidia-smi nvlink -s` (or NVML) where the link
//! states were read, and from the topology matrix otherwise. The matrix's `NV#` is the number
//! of links between two GPUs, so what it says about one GPU depends on how the board is wired:
//!
//! - **Through NVSwitch** (HGX A100/H100/H200 8-GPU, DGX-2, B200): every link of a GPU goes to
//!   the switches, and every pair shows `NV<k>` with k the GPU's own link count (NV18 on an
//!   H100): the count of a GPU is the largest `NV#` of its row.
//! - **Directly** (4-GPU HGX A100 and H100 boards, 4x V100 SXM2, the DGX-1 hybrid cube-mesh,
//!   a bridged pair of PCIe cards): a GPU's links are split over its peers (NV4 to each of
//!   3 peers is 12 links): the count of a GPU is the sum of its row.
//!
//! A row whose sum exceeds what the model has can only be the first; a row within it is the
//! second (two GPUs of an NVSwitch board given to a VM read the same either way). A pair of
//! GPUs without NVLink is by design where both GPUs have every link of the model in use
//! towards their NVLink peers (the hybrid cube-mesh leaves 3 of each GPU's 7 pairs to PCIe;
//! two bridged pairs of cards reach each other over PCIe), and a fault or a missing bridge
//! otherwise.

use crate::checks::causes::{fabric_cause, fabric_unregistered};
use crate::checks::common::{count_of, no_gpu_reason, pct, plural, selected, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Fabric, Facts, GpuFacts, TopoLink, Topology, NVML_NOT_SUPPORTED};
use crate::finding::{Cause, Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use crate::spec::NvlinkKind;

const ID: &str = "nvlink.status";

/// GPU pairs without NVLink named in the machine-level message; the evidence has them all.
pub const PAIRS_LISTED: usize = 4;

/// GPUs in the hybrid cube-mesh of the DGX-1 / HGX-1 (V100 SXM2, P100 SXM2).
pub const CUBE_MESH_GPUS: usize = 8;
/// NVLink peers of each GPU in the hybrid cube-mesh: the 3 others of its quad and 1 of the
/// other quad; its other 3 pairs go over PCIe.
pub const CUBE_MESH_PEERS: usize = 4;

pub const CHECK: Check = Check {
    id: ID,
    title: "NVLink links up per GPU, the GPU-to-GPU topology and the NVSwitch fabric",
    looks_at: "NVLink links up per GPU against what the model has, topology matrix (NV#, PIX, \
               PXB, PHB, NODE, SYS), peer access",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Active NVLink links per GPU against what the model has, the connection between \
               each pair of GPUs from `nvidia-smi topo -m`, and the NVSwitch fabric \
               registration where there is one. NV# is the number of bonded NVLinks between \
               the two GPUs. Through NVSwitch (8-GPU HGX boards) every pair shows all of a \
               GPU's links (NV18 on an H100); on a board without NVSwitch a GPU's links are \
               split over its peers and add up to the model's count (a 4-GPU HGX H100 shows \
               NV6 to each of 3 peers, 18 links; a 4-GPU HGX A100 NV4 x3, 12; the DGX-1's \
               V100s NV2 to 2 peers and NV1 to 2, 6, with their other 3 pairs over PCIe by the \
               hybrid cube-mesh's design). Where `nvidia-smi nvlink -s` is read, only the \
               links it lists count: a link it prints as `<inactive>` is down, one it does not \
               list (a listing cut when pasted) is not known. Without NVLink the path is PIX \
               (one PCIe switch: the traffic stays on the switch), PXB (several PCIe \
               switches), PHB (through the CPU's PCIe host bridge), NODE (across host bridges \
               within a NUMA node) or SYS (across the CPU sockets' interconnect). The spec \
               database says which of four answers a model has: NVLink on its board (SXM: \
               links are expected; all down on a machine of several GPUs fails, some down \
               fails), an NVLink bridge (PCIe cards such as the RTX A6000 or A100 PCIe: \
               without a bridge no links up is normal, information; a bridged card with fewer \
               links than the bridge carries warns), none (PCIe only), or not stated (the \
               datasheet entry does not say: nothing is judged against it). One GPU of a \
               model with NVLink on its board and no link to show (a one-GPU slice of an SXM \
               board in a VM, where NVML reports NVLink as not supported) is information: no \
               loss for one-GPU work, and no word on the links of an instance with the whole \
               board.",
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
            effect: "On a machine of several GPUs, a bridge card without an NVLink bridge warns instead of informing, and GPU pairs without an NVLink path fail where the model has NVLink on its board and warn otherwise (all-reduce runs over PCIe); pairs that the board's design leaves to PCIe (the hybrid cube-mesh) do not; links down on SXM modules fail in every profile.",
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
        // The GPUs whose own links are a problem (down, the fabric): pairs without NVLink
        // that each have one of them are what it causes.
        let troubled: Vec<u32> = out
            .iter()
            .filter(|f| matches!(f.status, Status::Fail | Status::Warn))
            .filter_map(|f| f.gpu)
            .collect();
        out.push(topology(facts, policy, &troubled));
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
    /// Links per GPU (for a bridge card: between two bridged cards), where NVIDIA states it.
    links: Option<u32>,
    /// NVIDIA's total bidirectional NVLink bandwidth per GPU, GB/s.
    bandwidth_gbps: Option<f64>,
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
                bandwidth_gbps: s.nvlink.as_ref().map(|n| n.bandwidth_gbps),
                known: true,
                pcie_card: s.form_factor == "pcie",
            },
            None => ModelNvlink {
                kind: NvlinkKind::Unknown,
                links: None,
                bandwidth_gbps: None,
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

    /// The matrix's `NV#` of a pair is this GPU's whole link count (it reaches the others
    /// through NVSwitch), not a share of it.
    fn through_switch(&self, row: &TopoRow) -> bool {
        self.kind == NvlinkKind::Switch || self.links.is_some_and(|l| row.sum() > l)
    }

    /// How many links the topology matrix shows this GPU using (see the module's doc).
    fn links_in(&self, row: &TopoRow) -> u32 {
        if self.through_switch(row) || self.links.is_none() {
            row.max()
        } else {
            row.sum()
        }
    }

    /// Every link the model has is in use towards the GPU's NVLink peers, so a pair without
    /// NVLink is what the board's wiring leaves to PCIe.
    fn all_links_used(&self, row: &TopoRow) -> bool {
        self.links.is_some_and(|l| row.sum() >= l)
    }
}

/// One GPU's row of the topology matrix.
#[derive(Clone, Debug, Default)]
struct TopoRow {
    /// (peer index, NV#) of each GPU it reaches over NVLink, in index order.
    nv: Vec<(usize, u32)>,
    /// The other GPUs of the row, over NVLink or not.
    others: usize,
}

impl TopoRow {
    fn of(t: &Topology, i: usize) -> Option<TopoRow> {
        let cells = t.links.get(i)?;
        let mut row = TopoRow::default();
        for (j, l) in cells.iter().enumerate() {
            match l {
                TopoLink::Itself => {}
                TopoLink::NvLink(k) => {
                    row.others += 1;
                    row.nv.push((j, *k));
                }
                _ => row.others += 1,
            }
        }
        (row.others > 0).then_some(row)
    }

    fn sum(&self) -> u32 {
        self.nv.iter().map(|(_, k)| *k).sum()
    }

    fn max(&self) -> u32 {
        self.nv.iter().map(|(_, k)| *k).max().unwrap_or(0)
    }

    /// "NV2 to GPU3 and GPU4, NV1 to GPU1 and GPU2": the peers by link count, most first.
    fn peers(&self) -> String {
        let mut counts: Vec<u32> = self.nv.iter().map(|(_, k)| *k).collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        counts.dedup();
        let parts: Vec<String> = counts
            .iter()
            .map(|k| {
                let to: Vec<String> = self
                    .nv
                    .iter()
                    .filter(|(_, n)| n == k)
                    .map(|(j, _)| format!("GPU{j}"))
                    .collect();
                format!("NV{k} to {}", and_list(&to))
            })
            .collect();
        parts.join(", ")
    }
}

/// "the other one is" / "the other 11 are".
fn the_other(n: u32) -> String {
    if n == 1 {
        "the other one is".into()
    } else {
        format!("the other {n} are")
    }
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A datasheet figure as printed: "900", "112.5".
fn gbps(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').to_string()
    }
}

/// The row of GPU `g` in the topology matrix (rows are in the driver's GPU order, the same
/// indices as the facts').
fn topo_row(facts: &Facts, g: &GpuFacts) -> Option<TopoRow> {
    TopoRow::of(facts.topology.value()?, g.index as usize)
}

/// NVLink links of this GPU that are up: from the link states where they were read, else
/// from the topology matrix.
fn links_up(facts: &Facts, g: &GpuFacts) -> Option<u32> {
    match &g.nvlinks {
        Reading::Value(links) => Some(links.iter().filter(|l| l.active).count() as u32),
        Reading::Unavailable(_) => topo_row(facts, g).map(|row| ModelNvlink::of(g).links_in(&row)),
    }
}

/// Some of the GPU's links are up and some of the model's are known to be down: listed as
/// inactive, or missing from the topology matrix's count where the states were not read.
fn some_links_down(facts: &Facts, g: &GpuFacts) -> bool {
    let model = ModelNvlink::of(g);
    let Some(want) = model.links else {
        return false;
    };
    match &g.nvlinks {
        Reading::Value(links) => {
            let up = links.iter().filter(|l| l.active).count() as u32;
            up > 0 && up < want && links.iter().any(|l| !l.active)
        }
        Reading::Unavailable(_) => topo_row(facts, g)
            .map(|row| model.links_in(&row))
            .is_some_and(|up| up > 0 && up < want),
    }
}

/// The fabric registration, where it is not what a working NVSwitch system shows.
fn fabric_problem(g: &GpuFacts) -> Option<&Fabric> {
    fabric_unregistered(g)
}

const FIX_LINKS_DOWN: &str = "A hardware fault or the fabric: reseat, check `nvidia-smi nvlink -s`; on a cloud instance, report it.";
const FIX_BRIDGE: &str = "For multi-GPU work, fit the NVLink bridge (two cards of this model in slots the bridge spans) or ask the provider for a bridged pair; `nvidia-smi nvlink -s` shows the links.";
const FIX_FABRIC: &str = "Start the fabric manager, with the same version as the driver: `sudo systemctl enable --now nvidia-fabricmanager`; then check `nvidia-smi -q | grep -A3 Fabric`.";

/// A GPU's links as read: from the link states, or from the topology matrix.
#[derive(Clone, Debug)]
enum Count {
    /// `nvidia-smi nvlink -s` (or NVML): the links it lists, up and down. A link it does not
    /// list is not known.
    Listed { up: u32, down: u32, listed: u32 },
    /// The topology matrix, where the link states were not read.
    Topology { up: u32, row: TopoRow },
}

impl Count {
    fn up(&self) -> u32 {
        match self {
            Count::Listed { up, .. } | Count::Topology { up, .. } => *up,
        }
    }
}

fn per_gpu(facts: &Facts, policy: &Policy, g: &GpuFacts, multi: bool) -> Finding {
    let model = ModelNvlink::of(g);
    let mut ev = Evidence::new().with("nvlink_kind", model.kind.as_str());
    if let Some(n) = model.links {
        ev.insert("spec_links", n);
    }
    let count = match &g.nvlinks {
        Reading::Value(links) => {
            let up = links.iter().filter(|l| l.active).count() as u32;
            let listed = links.len() as u32;
            ev.insert("links_active", up);
            ev.insert("links_listed", listed);
            ev.insert("links_inactive", listed - up);
            ev.insert("source", &g.source);
            Some(Count::Listed {
                up,
                down: listed - up,
                listed,
            })
        }
        Reading::Unavailable(r) => {
            ev.insert("links_unavailable", r);
            // A snapshot without `nvidia-smi nvlink -s`: the topology matrix still shows the
            // bonded link counts towards the other GPUs.
            topo_row(facts, g).map(|row| {
                let up = model.links_in(&row);
                ev.insert("links_active", up);
                ev.insert("links_from_topology", up);
                ev.insert("source", "nvidia-smi topo -m");
                Count::Topology { up, row }
            })
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
        // nvlink.fabric judges the registration (and the fabric manager behind it): its
        // finding on this GPU is the problem, this one what it does to NVLink.
        .caused_by_opt(fabric_cause(g))
        .fix(FIX_FABRIC);
    }
    let who = g.label();
    match count {
        Some(c) if c.up() > 0 => links_up_finding(facts, g, &model, &who, &c, multi, ev),
        Some(_) => no_link_up(facts, policy, g, &model, &who, multi, ev),
        None => not_read(facts, g, &model, &who, multi, ev),
    }
}

/// Some links are up: all the model has, fewer (a fault, a loose bridge), or a listing that
/// names fewer links than the model has.
fn links_up_finding(
    facts: &Facts,
    g: &GpuFacts,
    model: &ModelNvlink,
    who: &str,
    c: &Count,
    multi: bool,
    mut ev: Evidence,
) -> Finding {
    let bridge = model.kind == NvlinkKind::Bridge;
    let up = c.up();
    let from_topology = match c {
        Count::Topology { row, .. } => format!(" (from the topology matrix: {})", row.peers()),
        Count::Listed { .. } => String::new(),
    };
    let Some(want) = model.links else {
        let what = if bridge {
            format!(
                "{who}: an NVLink bridge is fitted: {} active{from_topology}",
                count_of(up, "NVLink link")
            )
        } else {
            format!(
                "{who}: {} active{from_topology}",
                count_of(up, "NVLink link")
            )
        };
        return Finding::pass(ID, what).evidence(ev);
    };
    // Links known down, and links not known either way (a listing that stops short).
    // A listing may name more links than the model has (NVML counts the slots it answers
    // for): only the model's links can be missing.
    let missing = want.saturating_sub(up);
    let (down, unlisted, listed) = match c {
        Count::Listed { down, listed, .. } => (
            (*down).min(missing),
            want.saturating_sub(*listed),
            Some(*listed),
        ),
        Count::Topology { .. } => (missing, 0, None),
    };
    if unlisted > 0 && down == 0 {
        // A listing cut short (lines elided when it was pasted): what is listed is up, the rest
        // is not known. The topology matrix can still show every link.
        let listed = listed.unwrap_or(up);
        ev.insert("links_not_listed", unlisted);
        let shown = topo_row(facts, g).map(|row| (model.links_in(&row), row));
        if let Some((n, row)) = shown.filter(|(n, _)| *n >= want) {
            ev.insert("links_from_topology", n);
            return Finding::pass(
                ID,
                format!(
                    "{who}: {want} of {want} NVLink links active by the topology matrix ({}); `nvidia-smi nvlink -s` lists {listed} of them (all active), {} not in the listing",
                    row.peers(),
                    the_other(unlisted),
                ),
            )
            .evidence(ev);
        }
        return Finding::info(
            ID,
            format!(
                "{who}: the NVLink listing is incomplete: it lists {} (all active) of the {want} this model has; {} not listed, so whether {} up is not known (`nvidia-smi nvlink -s` prints a link that is down as <inactive>)",
                plural(listed as usize, "link", "links"),
                the_other(unlisted),
                if unlisted == 1 { "it is" } else { "they are" },
            ),
        )
        .evidence(ev)
        .fix("Read the whole listing: `nvidia-smi nvlink -s -i GPU_INDEX` (GPU_INDEX is the GPU's index).");
    }
    if down == 0 {
        let of = format!("{up} of {want} NVLink links active{from_topology}");
        let what = if bridge {
            format!("{who}: an NVLink bridge is fitted: {of}")
        } else {
            format!("{who}: {of}")
        };
        return Finding::pass(ID, what).evidence(ev);
    }
    // Links down: the share of the model's links still up.
    let working = want.saturating_sub(down);
    let listing = match (listed, unlisted) {
        (Some(l), 0) => format!(" ({l} listed)"),
        (Some(l), u) => {
            ev.insert("links_not_listed", u);
            format!(" ({l} listed, of which {down} inactive; {u} not listed)")
        }
        (None, _) => from_topology.clone(),
    };
    let bw = model
        .bandwidth_gbps
        .map(|b| {
            format!(
                " ({} of {} GB/s)",
                crate::units::figure(b * working as f64 / want as f64),
                gbps(b)
            )
        })
        .unwrap_or_default();
    if bridge {
        let cost = model
            .bandwidth_gbps
            .map(|b| {
                format!(
                    "; it costs {} of the bridge's {} GB/s ({} GB/s)",
                    pct(down as f64, want as f64),
                    gbps(b),
                    crate::units::figure(b * down as f64 / want as f64)
                )
            })
            // The database gives a bridge's links only with its bandwidth.
            .unwrap_or_default();
        let head = if unlisted > 0 { "at least " } else { "" };
        return Finding::warn(
            ID,
            format!(
                "{who}: {head}{down} of the bridge's {want} NVLink links down, {up} active{listing}: a bridge is missing or loose, or one of its links is down{cost}"
            ),
        )
        .evidence(ev)
        .fix("Reseat the NVLink bridge(s) (a full set spans every link); `nvidia-smi nvlink -s` shows which links are down.");
    }
    let head = if unlisted > 0 { "at least " } else { "" };
    Finding::new(
        ID,
        if multi { Status::Fail } else { Status::Warn },
        format!(
            "{who}: {head}{down} of {want} NVLink links down, {up} active{listing}: GPU-to-GPU bandwidth is cut to {}{bw}",
            pct(working as f64, want as f64)
        ),
    )
    .evidence(ev)
    .fix("Links that are down are a hardware fault: reseat or replace; on a cloud instance, report it with `nvidia-smi nvlink -s`.")
}

/// No link up (read, or seen in the topology matrix).
fn no_link_up(
    facts: &Facts,
    policy: &Policy,
    g: &GpuFacts,
    model: &ModelNvlink,
    who: &str,
    multi: bool,
    ev: Evidence,
) -> Finding {
    if !multi {
        let msg = match model.kind {
            NvlinkKind::Direct | NvlinkKind::Switch if alone_on_the_bus(facts) => {
                one_gpu_of_a_board(facts, who, model, "no link is active")
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
            // On a board where the other GPUs have their links, one GPU without any is cut off
            // from them.
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

/// The link states were not read and the topology matrix has no row for the GPU.
fn not_read(
    facts: &Facts,
    g: &GpuFacts,
    model: &ModelNvlink,
    who: &str,
    multi: bool,
    ev: Evidence,
) -> Finding {
    let why = g.nvlinks.reason().unwrap_or("not reported");
    match model.kind {
        // NVML says the GPU has no NVLink, and it is the machine's only GPU.
        NvlinkKind::Direct | NvlinkKind::Switch
            if !multi && why.starts_with(NVML_NOT_SUPPORTED) && alone_on_the_bus(facts) =>
        {
            Finding::info(ID, one_gpu_of_a_board(facts, who, model, why)).evidence(ev)
        }
        NvlinkKind::Direct | NvlinkKind::Switch => Finding::skip(
            ID,
            match model.links {
                Some(want) => {
                    format!("{who}: NVLink state not read ({why}); the model has {want} links")
                }
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

/// Where the traffic between two GPUs without NVLink goes, in words.
fn path_words(l: &TopoLink) -> String {
    match l {
        TopoLink::Pix => "stays under one PCIe switch (PIX)".into(),
        TopoLink::Pxb => "crosses several PCIe switches (PXB)".into(),
        TopoLink::Phb => "goes through the CPU's PCIe host bridge (PHB)".into(),
        TopoLink::Node => "crosses PCIe host bridges within a NUMA node (NODE)".into(),
        TopoLink::Sys => "crosses the interconnect between the CPU sockets (SYS)".into(),
        TopoLink::Itself | TopoLink::NvLink(_) => "goes over NVLink".into(),
        TopoLink::Other(s) => format!("takes the path nvidia-smi calls {s}"),
    }
}

/// "traffic between them goes through the CPU's PCIe host bridge (PHB)", or per path where
/// the pairs differ: "traffic goes through ... (PHB) for 4 of them, crosses ... (SYS) for 12".
fn paths_sentence(paths: &[&TopoLink]) -> String {
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for p in paths {
        let label = p.label();
        match kinds.iter_mut().find(|(k, _)| *k == label) {
            Some((_, n)) => *n += 1,
            None => kinds.push((label, 1)),
        }
    }
    match kinds.as_slice() {
        [_] => format!("traffic between them {}", path_words(paths[0])),
        _ => {
            let parts: Vec<String> = kinds
                .iter()
                .map(|(label, n)| {
                    let l = paths
                        .iter()
                        .find(|p| p.label() == *label)
                        .map(|p| path_words(p))
                        .unwrap_or_default();
                    format!("{l} for {}", count_of(*n as u64, "pair"))
                })
                .collect();
            format!("traffic {}", and_list(&parts))
        }
    }
}

/// The `NV#` cells of the matrix, as "NV18" or "NV1, NV2".
fn nv_labels(counts: &std::collections::BTreeMap<String, u32>) -> String {
    counts
        .keys()
        .filter(|k| k.starts_with("NV"))
        .cloned()
        .collect::<Vec<_>>()
        .join(", ")
}

/// One machine-level finding about the GPU-to-GPU matrix.
fn topology(facts: &Facts, policy: &Policy, troubled: &[u32]) -> Finding {
    let t = match &facts.topology {
        Reading::Value(t) => t,
        Reading::Unavailable(r) => {
            return Finding::skip(ID, format!("GPU topology matrix not read: {r}"));
        }
    };
    let n = t.links.len();
    // Rows of the matrix are in the driver's GPU order, the same indices as the facts'.
    let gpu_of = |i: usize| facts.gpu_list().iter().find(|g| g.index as usize == i);
    let models: Vec<Option<ModelNvlink>> = (0..n).map(|i| gpu_of(i).map(ModelNvlink::of)).collect();
    let rows: Vec<TopoRow> = (0..n)
        .map(|i| TopoRow::of(t, i).unwrap_or_default())
        .collect();
    let full: Vec<bool> = (0..n)
        .map(|i| {
            models[i]
                .as_ref()
                .is_some_and(|m| m.all_links_used(&rows[i]))
        })
        .collect();
    // The hybrid cube-mesh (DGX-1 / HGX-1): 8 GPUs with NVLink on the board, each with its
    // links to at most 4 of the others. A pair without NVLink where one of the two GPUs has its
    // 4 NVLink peers is the design's (that GPU has no link left for it); one whose GPUs have
    // both lost a peer is a link down.
    let cube_like = n == CUBE_MESH_GPUS
        && models
            .iter()
            .all(|m| m.as_ref().is_some_and(|m| m.kind == NvlinkKind::Direct))
        && rows.iter().all(|r| r.nv.len() <= CUBE_MESH_PEERS);
    let four_peers = |i: usize| rows[i].nv.len() == CUBE_MESH_PEERS;
    let unregistered: Vec<u32> = (0..n as u32)
        .filter(|&i| gpu_of(i as usize).is_some_and(|g| fabric_problem(g).is_some()))
        .collect();
    let mut counts: std::collections::BTreeMap<String, u32> = Default::default();
    // Pairs without NVLink: those the wiring leaves to PCIe, and the others.
    let mut designed: Vec<(usize, usize, &TopoLink)> = Vec::new();
    let mut slow: Vec<(usize, usize, &TopoLink)> = Vec::new();
    let mut fabric_pairs = 0usize;
    // How many of its pairs each GPU has without NVLink (not by design).
    let mut slow_of = vec![0usize; n];
    for i in 0..n {
        for j in (i + 1)..n {
            let Some(l) = t.links.get(i).and_then(|r| r.get(j)) else {
                continue;
            };
            *counts.entry(l.label()).or_default() += 1;
            if !matches!(l, TopoLink::NvLink(_)) {
                if (full[i] && full[j]) || (cube_like && (four_peers(i) || four_peers(j))) {
                    designed.push((i, j, l));
                } else {
                    slow.push((i, j, l));
                    slow_of[i] += 1;
                    slow_of[j] += 1;
                }
            } else if unregistered.contains(&(i as u32)) || unregistered.contains(&(j as u32)) {
                fabric_pairs += 1;
            }
        }
    }
    let pair_name = |(i, j, l): &(usize, usize, &TopoLink)| format!("GPU{i}-GPU{j} {}", l.label());
    let slow_pairs: Vec<String> = slow.iter().map(pair_name).collect();
    let designed_pairs: Vec<String> = designed.iter().map(pair_name).collect();
    let pairs = n * n.saturating_sub(1) / 2;
    let links = counts.keys().cloned().collect::<Vec<_>>().join(", ");
    // GPUs with some links up and some known down (their own findings judge it): from the
    // link states where read (a link a cut listing leaves out is not known down), else from
    // the matrix.
    let short: Vec<String> = (0..n)
        .filter(|&i| gpu_of(i).is_some_and(|g| some_links_down(facts, g)))
        .map(|i| format!("GPU{i}"))
        .collect();
    let switch = (0..n).any(|i| {
        models[i]
            .as_ref()
            .is_some_and(|m| !rows[i].nv.is_empty() && m.through_switch(&rows[i]))
    });
    let cube_mesh = cube_like && !designed.is_empty();
    // How the NVLinks run, as the evidence says it.
    let wiring = if !counts.keys().any(|k| k.starts_with("NV")) {
        "pcie"
    } else if switch {
        "nvswitch"
    } else if cube_mesh {
        "hybrid-cube-mesh"
    } else if designed.is_empty() && slow.is_empty() && n > 2 {
        "direct-mesh"
    } else {
        "nvlink"
    };
    let mut ev = Evidence::new()
        .with("gpus", n)
        .with("pairs", pairs)
        .with("links", &counts)
        .with("wiring", wiring)
        .with("source", "nvidia-smi topo -m");
    if !short.is_empty() {
        ev.insert("gpus_below_model_links", &short);
    }
    if fabric_pairs > 0 {
        // The matrix shows the wiring; without the fabric registration no NVLink transfer
        // crosses the NVSwitches, so the pairs are not usable whatever the matrix says.
        return Finding::fail(
            ID,
            format!(
                "{fabric_pairs} of {} {} wired with NVLink ({links}) but the NVSwitch fabric is not registered on {} of the {n} GPUs: NVLink between them is not usable",
                count_of(pairs as u64, "GPU pair"),
                if fabric_pairs == 1 { "is" } else { "are" },
                unregistered.len(),
            ),
        )
        .evidence(
            ev.with("fabric_unregistered_gpus", &unregistered)
                .with("pairs_without_nvlink", &slow_pairs),
        )
        // The pairs fail because the fabric is not registered: the GPUs' own fabric findings
        // are the problem (one problem, however many GPUs), this one what it causes.
        .caused_by_opt(unregistered.first().map(|&i| Cause::gpu(ID, i)))
        .fix(FIX_FABRIC);
    }
    let shortfall = if short.is_empty() {
        String::new()
    } else {
        format!(
            "; {} {} fewer NVLinks than the model has (see {} own {})",
            and_list(&short),
            if short.len() == 1 { "shows" } else { "show" },
            if short.len() == 1 { "its" } else { "their" },
            if short.len() == 1 {
                "finding"
            } else {
                "findings"
            },
        )
    };
    if slow.is_empty() && designed.is_empty() {
        let nv = nv_labels(&counts);
        let msg = match wiring {
            _ if pairs == 1 => format!("The 2 GPUs are connected by NVLink ({nv}){shortfall}"),
            "nvswitch" => format!(
                "All {} are connected over NVLink through NVSwitch ({nv}: every pair has all of a GPU's links){shortfall}",
                count_of(pairs as u64, "GPU pair")
            ),
            "direct-mesh" => {
                let per_gpu = models
                    .iter()
                    .flatten()
                    .find_map(|m| m.links)
                    .map(|l| format!(": each GPU's {l} links are split over its {} peers", n - 1))
                    .unwrap_or_default();
                format!(
                    "All {} are connected directly by NVLink, without NVSwitch ({nv}{per_gpu}){shortfall}",
                    count_of(pairs as u64, "GPU pair")
                )
            }
            _ => format!(
                "All {} are connected by NVLink ({nv}){shortfall}",
                count_of(pairs as u64, "GPU pair")
            ),
        };
        return Finding::pass(ID, msg).evidence(ev);
    }
    if slow.is_empty() {
        // Every pair without NVLink is one the wiring leaves to PCIe.
        let paths: Vec<&TopoLink> = designed.iter().map(|(_, _, l)| *l).collect();
        let ev = ev.with("pairs_without_nvlink_by_design", &designed_pairs);
        let on_board = models.iter().flatten().any(|m| m.kind.is_on_board());
        let msg = if cube_mesh {
            let links = models
                .iter()
                .flatten()
                .find_map(|m| m.links)
                .map(|l| format!("{l} NVLinks"))
                .unwrap_or_else(|| "NVLinks".into());
            format!(
                "The {n} GPUs are wired as the hybrid cube-mesh of a DGX-1 / HGX-1 ({}): each GPU's {links} go to {CUBE_MESH_PEERS} of the other {} ({}), and the other {} of the {pairs} pairs go over PCIe by that design: {}; NCCL routes its rings over the NVLink paths{shortfall}",
                nv_labels(&counts),
                n - 1,
                // A GPU with all its links, where there is one, shows the design.
                (0..n)
                    .find(|&i| full[i])
                    .map(|i| format!("GPU{i}: {}", rows[i].peers()))
                    .unwrap_or_else(|| format!("GPU0: {}", rows[0].peers())),
                designed.len(),
                paths_sentence(&paths),
            )
        } else {
            format!(
                "No NVLink path by design for {} of the {}: {} ({}); {}{shortfall}",
                designed.len(),
                count_of(pairs as u64, "GPU pair"),
                if on_board {
                    "each GPU's links all go to its NVLink peers"
                } else {
                    "an NVLink bridge joins two cards, and every card's bridge links are in use"
                },
                nv_labels(&counts),
                paths_sentence(&paths),
            )
        };
        // On an SXM board the wiring is the board's: no fault in any profile. Between bridged
        // cards it is what 2-way bridges allow: traffic between the pairs crosses PCIe, as
        // between any PCIe cards (information; a warning for training).
        let status = match (on_board, policy.profile) {
            (true, _) => Status::Pass,
            (false, Profile::Train) => Status::Warn,
            (false, _) => Status::Info,
        };
        return Finding::new(ID, status, msg).evidence(ev);
    }
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
        .filter(|&i| n > 2 && slow_of[i] == n - 1 && slow.len() < pairs)
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
            and_list(&cut_off),
            if cut_off.len() == 1 { "has" } else { "have" }
        )
    };
    let paths: Vec<&TopoLink> = slow.iter().map(|(_, _, l)| *l).collect();
    let subject = if slow.len() == pairs && pairs == 1 {
        "The GPU pair has no NVLink path".to_string()
    } else if slow.len() == pairs {
        format!("None of the {pairs} GPU pairs has an NVLink path")
    } else {
        format!(
            "{} of {} {} no NVLink path",
            slow.len(),
            count_of(pairs as u64, "GPU pair"),
            if slow.len() == 1 { "has" } else { "have" }
        )
    };
    let by_design = if designed.is_empty() {
        String::new()
    } else {
        format!(
            " ({} more the wiring leaves to PCIe by design)",
            designed.len()
        )
    };
    let sentence = paths_sentence(&paths);
    // Where every pair without NVLink has a GPU whose own links are a problem (all down, the
    // fabric), that GPU's finding is the cause: a GPU cut off first, else the first of them.
    let is_troubled = |i: usize| troubled.contains(&(i as u32));
    let cause = slow
        .iter()
        .all(|(i, j, _)| is_troubled(*i) || is_troubled(*j))
        .then(|| {
            (0..n)
                .filter(|&i| is_troubled(i))
                .find(|&i| slow_of[i] == n - 1)
                .or_else(|| (0..n).find(|&i| is_troubled(i) && slow_of[i] > 0))
        })
        .flatten()
        .map(|i| Cause::gpu(ID, i as u32));
    let mut ev = ev
        .with("pairs_without_nvlink", &slow_pairs)
        .with("gpus_without_nvlink", &cut_off);
    if !designed_pairs.is_empty() {
        ev.insert("pairs_without_nvlink_by_design", &designed_pairs);
    }
    Finding::new(
        ID,
        status,
        format!("{subject}{by_design} ({who}{listed}): {sentence}{shortfall}"),
    )
    .evidence(ev)
    .caused_by_opt(cause)
    .fix("For multi-GPU training choose an NVLink/NVSwitch (SXM) instance, or fit NVLink bridges where the cards take them; otherwise keep communicating GPUs under the same PCIe switch (`CUDA_VISIBLE_DEVICES`).")
}

/// Facts on which `profile` changes this check's verdict (checks/profiles.rs).
#[cfg(test)]
pub(crate) fn profile_examples() -> Vec<(Profile, Facts)> {
    use crate::testing::Machine;
    // Two RTX A6000 cards without a bridge: information, a warning for training.
    vec![(Profile::Train, Machine::healthy("rtx-a6000", 2).build())]
}

#[cfg(test)]
mod tests;
