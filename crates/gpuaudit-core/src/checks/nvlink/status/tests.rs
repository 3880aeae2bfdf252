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
        "The 2 GPUs are connected by NVLink (NV18)"
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
    assert!(
        x.message.contains(
            "6 of 18 NVLink links down, 12 active (18 listed): GPU-to-GPU bandwidth is cut to 67% (600 of 900 GB/s)"
        ),
        "{}",
        x.message
    );
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
            .contains("an NVLink bridge is fitted: 4 of 4 NVLink links active"),
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
            .contains("8 of the bridge's 12 NVLink links down, 4 active (12 listed): a bridge is missing or loose"),
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
        x.message
            .contains("the datasheet entry does not say whether this model takes an NVLink bridge"),
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
                ..Default::default()
            })
        })
        .build();
    let out = general(&f);
    assert_eq!(of(&out, 0).status, Status::Fail);
    assert!(of(&out, 0).message.contains("'In Progress'"));
    assert_eq!(machine_level(&out).status, Status::Fail);
    let ok = Machine::healthy("h200-sxm-141gb", 2)
        .gpus(|g| {
            g.fabric = Reading::Value(Fabric {
                state: "Completed".into(),
                status: Some("Success".into()),
                ..Default::default()
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
        assert!(
            x.message
                .ends_with(": traffic between them goes through the CPU's PCIe host bridge (PHB)"),
            "{}",
            x.message
        );
        assert_eq!(
            machine_level(&run(&f, Profile::Train)).status,
            Status::Warn,
            "{key}"
        );
    }
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
        .ends_with("traffic between them stays under one PCIe switch (PIX)"));
    let f = Machine::healthy("l4", 2)
        .with(|f| f.topology = Reading::unavailable("no file"))
        .build();
    assert_eq!(machine_level(&general(&f)).status, Status::Skip);
}

// ------------------------------------------------------------------ published machines
// The topology matrices and link listings below are real (src/parse/testdata, each with its
// PROVENANCE.md and the judgment it calls for); the GPUs around them are the healthy test
// machine of the model the owner names.

const DGX1_MSCCL: &str = include_str!("../../../parse/testdata/topo-dgx1-v100-msccl.txt");
const V100X8_TOPO: &str = include_str!("../../../parse/testdata/topo-v100x8-cube-mesh-vast.txt");
const V100X8_NVLINK: &str =
    include_str!("../../../parse/testdata/nvlink-s-v100x8-cube-mesh-vast.txt");
const NDV2: &str = include_str!("../../../parse/testdata/topo-v100x8-ndv2-rapids.txt");
const RTX4090X8: &str = include_str!("../../../parse/testdata/topo-rtx4090x8-pcie-vast.txt");
const A100X4: &str = include_str!("../../../parse/testdata/topo-a100x4-hgx-polaris.txt");
const H100X4: &str = include_str!("../../../parse/testdata/topo-h100x4-hgx-nccl1617.txt");
const A6000X3_TOPO: &str =
    include_str!("../../../parse/testdata/topo-a6000x3-one-bridge-siboehm.txt");
const A6000X3_NVLINK: &str =
    include_str!("../../../parse/testdata/nvlink-s-a6000x3-one-bridge-siboehm.txt");
const V100_TWO_DOWN: &str =
    include_str!("../../../parse/testdata/nvlink-s-v100-two-down-azhpc73.txt");
const A100X8_NVLINK: &str = include_str!("../../../parse/testdata/nvlink-s-a100x8-gpud.txt");

/// `n` GPUs of `key` with this matrix (none where `topo` is `None`) and these link states
/// (a GPU the listing does not name: not read).
fn published(key: &str, n: u32, topo: Option<&str>, nvlink: Option<&str>) -> Facts {
    let topology = match topo {
        Some(t) => Reading::Value(crate::parse::topo::parse(t).unwrap()),
        None => Reading::unavailable("no file"),
    };
    let blocks = nvlink
        .map(|s| crate::parse::nvlink::parse_status(s).unwrap())
        .unwrap_or_default();
    Machine::healthy(key, n)
        .gpus(|g| g.nvlinks = unread())
        .with(move |f| {
            f.topology = topology;
            if let Reading::Value(gpus) = &mut f.gpus {
                for b in blocks {
                    if let Some(g) = gpus.iter_mut().find(|g| g.index == b.gpu) {
                        g.nvlinks = Reading::Value(b.links);
                    }
                }
            }
        })
        .build()
}

/// The matrix with the cell of GPUs `i` and `j` (both ways) replaced.
fn with_cell(topo: &str, i: usize, j: usize, cell: TopoLink) -> Topology {
    let mut t = crate::parse::topo::parse(topo).unwrap();
    t.links[i][j] = cell.clone();
    t.links[j][i] = cell;
    t
}
fn with_topology(mut f: Facts, t: Topology) -> Facts {
    f.topology = Reading::Value(t);
    f
}

fn statuses(out: &[Finding]) -> Vec<Status> {
    out.iter().map(|f| f.status).collect()
}

#[test]
fn the_dgx1_hybrid_cube_mesh_passes_with_its_pcie_pairs_in_every_profile() {
    for (topo, nvlink) in [
        (DGX1_MSCCL, None),
        (V100X8_TOPO, None),
        (V100X8_TOPO, Some(V100X8_NVLINK)),
        (NDV2, None),
    ] {
        let f = published("v100-sxm2-32gb", 8, Some(topo), nvlink);
        for p in Profile::ALL {
            let out = run(&f, p);
            assert_eq!(statuses(&out), vec![Status::Pass; 9], "{p}: {out:#?}");
        }
        let out = general(&f);
        let x = of(&out, 0);
        if nvlink.is_some() {
            assert_eq!(x.message, "GPU 0 (00:06.0): 6 of 6 NVLink links active");
            assert_eq!(x.evidence.get("links_listed").unwrap(), 6);
        } else {
            assert!(
                x.message.starts_with(
                    "GPU 0 (00:06.0): 6 of 6 NVLink links active (from the topology matrix: NV2 to "
                ),
                "{}",
                x.message
            );
            assert_eq!(x.evidence.get("links_from_topology").unwrap(), 6);
        }
        let t = machine_level(&out);
        assert!(
            t.message.starts_with(
                "The 8 GPUs are wired as the hybrid cube-mesh of a DGX-1 / HGX-1 (NV1, NV2): each GPU's 6 NVLinks go to 4 of the other 7"
            ),
            "{}",
            t.message
        );
        assert!(
            t.message.contains(
                "and the other 12 of the 28 pairs go over PCIe by that design: traffic between them"
            ),
            "{}",
            t.message
        );
        assert!(t
            .message
            .ends_with("; NCCL routes its rings over the NVLink paths"));
        assert_eq!(t.evidence.get("wiring").unwrap(), "hybrid-cube-mesh");
        let paths = t.evidence.get("links").unwrap();
        assert_eq!((&paths["NV1"], &paths["NV2"]), (&8.into(), &8.into()));
        assert_eq!(
            t.evidence
                .get("pairs_without_nvlink_by_design")
                .and_then(|v| v.as_array())
                .map(Vec::len),
            Some(12)
        );
    }
    // The DGX-1's pairs left to PCIe cross the sockets; the NDv2 VM sees one NUMA node.
    let dgx1 = general(&published("v100-sxm2-32gb", 8, Some(DGX1_MSCCL), None));
    assert!(machine_level(&dgx1)
        .message
        .contains("traffic between them crosses the interconnect between the CPU sockets (SYS)"));
    assert!(machine_level(&dgx1)
        .message
        .contains("(GPU0: NV2 to GPU3 and GPU4, NV1 to GPU1 and GPU2)"));
    let ndv2 = general(&published("v100-sxm2-32gb", 8, Some(NDV2), None));
    assert!(machine_level(&ndv2)
        .message
        .contains("traffic between them crosses PCIe host bridges within a NUMA node (NODE)"));
}

#[test]
fn the_p100_cube_mesh_has_four_links_of_one_each() {
    let mut t = crate::parse::topo::parse(DGX1_MSCCL).unwrap();
    for row in t.links.iter_mut() {
        for l in row.iter_mut() {
            if matches!(l, TopoLink::NvLink(_)) {
                *l = TopoLink::NvLink(1);
            }
        }
    }
    let f = with_topology(published("p100-sxm2-16gb", 8, None, None), t);
    let out = run(&f, Profile::Train);
    assert_eq!(statuses(&out), vec![Status::Pass; 9], "{out:#?}");
    assert!(of(&out, 3).message.contains(
        "4 of 4 NVLink links active (from the topology matrix: NV1 to GPU0, GPU1, GPU2 and GPU7)"
    ));
    assert!(machine_level(&out)
        .message
        .contains("each GPU's 4 NVLinks go to 4 of the other 7"));
}

#[test]
fn a_cube_mesh_pair_at_nv1_instead_of_nv2_is_a_link_down_on_both_gpus() {
    let t = with_cell(DGX1_MSCCL, 0, 3, TopoLink::NvLink(1));
    let f = with_topology(published("v100-sxm2-32gb", 8, None, None), t);
    let out = general(&f);
    for g in [0, 3] {
        let x = of(&out, g);
        assert_eq!(x.status, Status::Fail, "{}", x.message);
        assert!(
            x.message
                .contains("1 of 6 NVLink links down, 5 active (from the topology matrix: "),
            "{}",
            x.message
        );
        assert!(
            x.message
                .ends_with("GPU-to-GPU bandwidth is cut to 83% (250 of 300 GB/s)"),
            "{}",
            x.message
        );
    }
    assert_eq!(of(&out, 1).status, Status::Pass);
    // The pairs the design leaves to PCIe are still the design's; the topology says who is short.
    let t = machine_level(&out);
    assert_eq!(t.status, Status::Pass, "{}", t.message);
    assert!(
        t.message.ends_with(
            "; GPU0 and GPU3 show fewer NVLinks than the model has (see their own findings)"
        ),
        "{}",
        t.message
    );
    // A pair that lost its NVLink altogether: both GPUs have 3 peers left, the pair is a fault.
    let t = with_cell(DGX1_MSCCL, 0, 3, TopoLink::Sys);
    let f = with_topology(published("v100-sxm2-32gb", 8, None, None), t);
    for (p, want) in [
        (Profile::General, Status::Warn),
        (Profile::Train, Status::Fail),
    ] {
        let out = run(&f, p);
        let t = machine_level(&out);
        assert_eq!(t.status, want, "{p}: {}", t.message);
        assert!(
            t.message.starts_with(
                "1 of 28 GPU pairs has no NVLink path (12 more the wiring leaves to PCIe by design) (GPU0-GPU3 SYS)"
            ),
            "{}",
            t.message
        );
        assert_eq!(of(&out, 0).status, Status::Fail);
    }
}

#[test]
fn four_gpu_hgx_boards_split_their_links_over_three_peers() {
    for (key, topo, nv, links) in [
        ("a100-sxm4-40gb", A100X4, 4, 12),
        ("h100-sxm5-80gb", H100X4, 6, 18),
    ] {
        let f = published(key, 4, Some(topo), None);
        for p in Profile::ALL {
            assert_eq!(statuses(&run(&f, p)), vec![Status::Pass; 5], "{key} {p}");
        }
        let out = general(&f);
        assert_eq!(
            of(&out, 1).message,
            format!(
                "GPU 1 (00:07.0): {links} of {links} NVLink links active (from the topology matrix: NV{nv} to GPU0, GPU2 and GPU3)"
            )
        );
        assert_eq!(
            machine_level(&out).message,
            format!(
                "All 6 GPU pairs are connected directly by NVLink, without NVSwitch (NV{nv}: each GPU's {links} links are split over its 3 peers)"
            )
        );
        assert_eq!(
            machine_level(&out).evidence.get("wiring").unwrap(),
            "direct-mesh"
        );
    }
    // 4x V100 SXM2 boards: NV2 to each of three peers, 6 links.
    let mut t = crate::parse::topo::parse(A100X4).unwrap();
    for row in t.links.iter_mut() {
        for l in row.iter_mut() {
            if matches!(l, TopoLink::NvLink(_)) {
                *l = TopoLink::NvLink(2);
            }
        }
    }
    let f = with_topology(published("v100-sxm2-16gb", 4, None, None), t);
    assert_eq!(statuses(&general(&f)), vec![Status::Pass; 5]);
    // One pair at NV3: both of its GPUs are a link short.
    let t = with_cell(A100X4, 0, 1, TopoLink::NvLink(3));
    let f = with_topology(published("a100-sxm4-40gb", 4, None, None), t);
    let out = general(&f);
    assert_eq!(
        of(&out, 0).message,
        "GPU 0 (00:06.0): 1 of 12 NVLink links down, 11 active (from the topology matrix: NV4 to GPU2 and GPU3, NV3 to GPU1): GPU-to-GPU bandwidth is cut to 92% (550 of 600 GB/s)"
    );
    assert_eq!(
        statuses(&out),
        vec![
            Status::Fail,
            Status::Fail,
            Status::Pass,
            Status::Pass,
            Status::Pass
        ]
    );
}

#[test]
fn eight_pcie_cards_name_each_path_in_its_own_words() {
    let f = published("rtx-4090", 8, Some(RTX4090X8), None);
    let out = general(&f);
    assert!(out[..8].iter().all(|x| x.status == Status::Info));
    let t = machine_level(&out);
    assert_eq!(t.status, Status::Info);
    assert!(
        t.message.starts_with("None of the 28 GPU pairs has an NVLink path (GPU0-GPU1 PHB, GPU0-GPU2 NODE, GPU0-GPU3 NODE, GPU0-GPU4 NODE, +24 more): traffic goes through the CPU's PCIe host bridge (PHB) for 4 pairs, crosses PCIe host bridges within a NUMA node (NODE) for 12 pairs and crosses the interconnect between the CPU sockets (SYS) for 12 pairs"),
        "{}",
        t.message
    );
    assert_eq!(t.evidence.get("wiring").unwrap(), "pcie");
    assert_eq!(machine_level(&run(&f, Profile::Train)).status, Status::Warn);
}

#[test]
fn three_a6000s_with_one_bridge() {
    let f = published("rtx-a6000", 3, Some(A6000X3_TOPO), Some(A6000X3_NVLINK));
    let out = general(&f);
    for g in [0, 1] {
        assert_eq!(of(&out, g).status, Status::Pass);
        assert!(of(&out, g)
            .message
            .ends_with("an NVLink bridge is fitted: 4 of 4 NVLink links active"));
    }
    assert_eq!(of(&out, 2).status, Status::Info);
    assert!(of(&out, 2).message.contains("no NVLink bridge fitted"));
    let t = machine_level(&out);
    assert_eq!(t.status, Status::Info);
    assert_eq!(
        t.message,
        "2 of 3 GPU pairs have no NVLink path (GPU2 has no NVLink to any other GPU; GPU0-GPU2 NODE, GPU1-GPU2 NODE): traffic between them crosses PCIe host bridges within a NUMA node (NODE)"
    );
    let train = run(&f, Profile::Train);
    assert_eq!(
        statuses(&train),
        vec![Status::Pass, Status::Pass, Status::Warn, Status::Warn]
    );
}

#[test]
fn a_bridged_pair_with_a_link_down_warns_with_what_it_costs() {
    // Two RTX 3090s behind one bridge: NV4 with the bridge's four links up passes; NV3 (or one
    // link listed inactive) is a link down.
    let listing = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-a)\n\t Link 0: 14.062 GB/s\n\t Link 1: 14.062 GB/s\n\t Link 2: <inactive>\n\t Link 3: 14.062 GB/s\nGPU 1: NVIDIA GeForce RTX 3090 (UUID: GPU-b)\n\t Link 0: 14.062 GB/s\n\t Link 1: 14.062 GB/s\n\t Link 2: 14.062 GB/s\n\t Link 3: 14.062 GB/s\n";
    let f = published("rtx-3090", 2, None, Some(listing));
    let out = general(&f);
    let x = of(&out, 0);
    assert_eq!(x.status, Status::Warn, "{}", x.message);
    assert_eq!(
        x.message,
        "GPU 0 (00:06.0): 1 of the bridge's 4 NVLink links down, 3 active (4 listed): a bridge is missing or loose, or one of its links is down; it costs 25% of the bridge's 112.5 GB/s (28.1 GB/s)"
    );
    assert_eq!(of(&out, 1).status, Status::Pass);
    assert_eq!(x.evidence.get("links_inactive").unwrap(), 1);
    assert_eq!(x.evidence.get("links_listed").unwrap(), 4);
    assert_eq!(x.evidence.get("links_active").unwrap(), 3);
    // Only the matrix: NV3 between the cards.
    let mut t = crate::parse::topo::parse(A6000X3_TOPO).unwrap();
    t.links.truncate(2);
    for row in t.links.iter_mut() {
        row.truncate(2);
    }
    t.gpus.truncate(2);
    let nv3 = {
        let mut t = t.clone();
        t.links[0][1] = TopoLink::NvLink(3);
        t.links[1][0] = TopoLink::NvLink(3);
        t
    };
    let f = with_topology(published("rtx-3090", 2, None, None), nv3);
    let out = general(&f);
    assert_eq!(
        statuses(&out),
        vec![Status::Warn, Status::Warn, Status::Pass]
    );
    assert!(of(&out, 1)
        .message
        .starts_with("GPU 1 (00:07.0): 1 of the bridge's 4 NVLink links down, 3 active (from the topology matrix: NV3 to GPU0)"));
    let f = with_topology(published("rtx-3090", 2, None, None), t);
    assert_eq!(statuses(&general(&f)), vec![Status::Pass; 3]);
    // A bridge whose link count the database does not give: what is up passes.
    let f = published("a40", 2, None, Some(listing));
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Pass);
    assert!(x
        .message
        .ends_with("an NVLink bridge is fitted: 3 NVLink links active"));
}

#[test]
fn a_listing_cut_short_is_not_a_link_down() {
    // The A100 listing of eight GPUs with GPU 0's links elided but link 0.
    let mut cut: Vec<&str> = A100X8_NVLINK.lines().collect();
    let first = cut.iter().position(|l| l.contains("Link 1:")).unwrap();
    cut.drain(first..first + 11);
    let cut = cut.join("\n");
    let f = published("a100-sxm4-80gb", 8, None, Some(&cut));
    let out = general(&f);
    let x = of(&out, 0);
    assert_eq!(x.status, Status::Info, "{}", x.message);
    assert_eq!(
        x.message,
        "GPU 0 (00:06.0): the NVLink listing is incomplete: it lists 1 link (all active) of the 12 this model has; the other 11 are not listed, so whether they are up is not known (`nvidia-smi nvlink -s` prints a link that is down as <inactive>)"
    );
    assert_eq!(x.evidence.get("links_not_listed").unwrap(), 11);
    assert_eq!(of(&out, 1).status, Status::Pass);
    // The matrix of the NVSwitch board shows all twelve: pass.
    let f = published("a100-sxm4-80gb", 8, None, Some(&cut));
    let f = Machine::healthy("a100-sxm4-80gb", 8)
        .with(move |g| g.gpus = f.gpus.clone())
        .build();
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Pass, "{}", x.message);
    assert!(x.message.starts_with(
        "GPU 0 (00:06.0): 12 of 12 NVLink links active by the topology matrix (NV12 to GPU1"
    ));
    assert!(x.message.ends_with(
        "`nvidia-smi nvlink -s` lists 1 of them (all active), the other 11 are not in the listing"
    ));
    // An elided listing with two links inactive: those are down, the rest unknown.
    let f = published("v100-sxm2-32gb", 8, None, Some(V100_TWO_DOWN));
    let out = general(&f);
    let x = of(&out, 3);
    assert_eq!(x.status, Status::Fail);
    assert_eq!(
        x.message,
        "GPU 3 (00:09.0): 2 of 6 NVLink links down, 4 active (6 listed): GPU-to-GPU bandwidth is cut to 67% (200 of 300 GB/s)"
    );
    // The GPUs the listing leaves out are not read (and there is no matrix): not judged.
    assert_eq!(of(&out, 0).status, Status::Skip);
    // Listed with one link inactive and the rest cut: at least one down.
    let partial = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n         Link 0: 25 GB/s\n         Link 1: <inactive>\n";
    let f = published("a100-sxm4-80gb", 2, None, Some(partial));
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Fail);
    assert_eq!(
        x.message,
        "GPU 0 (00:06.0): at least 1 of 12 NVLink links down, 1 active (2 listed, of which 1 inactive; 10 not listed): GPU-to-GPU bandwidth is cut to 92% (550 of 600 GB/s)"
    );
}

#[test]
fn two_bridged_pairs_reach_each_other_over_pcie_by_design() {
    // Four A6000s in two bridged pairs: GPU0-GPU1 and GPU2-GPU3 NV4, the others SYS.
    let mut t = crate::parse::topo::parse(A100X4).unwrap();
    for (i, row) in t.links.iter_mut().enumerate() {
        for (j, l) in row.iter_mut().enumerate() {
            if i != j {
                *l = if i / 2 == j / 2 {
                    TopoLink::NvLink(4)
                } else {
                    TopoLink::Sys
                };
            }
        }
    }
    let f = with_topology(published("rtx-a6000", 4, None, None), t);
    let out = general(&f);
    let x = machine_level(&out);
    assert_eq!(x.status, Status::Info, "{}", x.message);
    assert_eq!(
        x.message,
        "No NVLink path by design for 4 of the 6 GPU pairs: an NVLink bridge joins two cards, and every card's bridge links are in use (NV4); traffic between them crosses the interconnect between the CPU sockets (SYS)"
    );
    assert_eq!(machine_level(&run(&f, Profile::Train)).status, Status::Warn);
    assert!(out[..4].iter().all(|x| x.status == Status::Pass));
}

#[test]
fn one_link_left_out_of_a_listing_is_said_in_the_singular() {
    let mut listing = String::from("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n");
    for l in 0..11 {
        listing.push_str(&format!("         Link {l}: 25 GB/s\n"));
    }
    let f = published("a100-sxm4-80gb", 2, None, Some(&listing));
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Info);
    assert!(
        x.message.contains(
            "it lists 11 links (all active) of the 12 this model has; the other one is not listed, so whether it is up is not known"
        ),
        "{}",
        x.message
    );
    // The same listing beside the NVSwitch matrix that shows all twelve.
    let f = Machine::healthy("a100-sxm4-80gb", 2)
        .with(move |g| g.gpus = f.gpus.clone())
        .build();
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Pass);
    assert!(x
        .message
        .ends_with("lists 11 of them (all active), the other one is not in the listing"));
}

#[test]
fn through_nvswitch_a_gpu_has_the_largest_nv_of_its_row() {
    // Eight H200s on NVSwitch without a link listing: NV18 to every peer is 18 links, not 126.
    let f = Machine::healthy("h200-sxm-141gb", 8)
        .gpus(|g| g.nvlinks = unread())
        .build();
    let out = general(&f);
    assert_eq!(statuses(&out), vec![Status::Pass; 9], "{out:#?}");
    assert!(of(&out, 3).message.starts_with(
        "GPU 3 (00:09.0): 18 of 18 NVLink links active (from the topology matrix: NV18 to GPU0, GPU1, GPU2, GPU4"
    ));
    assert_eq!(of(&out, 3).evidence.get("links_active").unwrap(), 18);
    assert_eq!(
        machine_level(&out).evidence.get("wiring").unwrap(),
        "nvswitch"
    );
    assert_eq!(
        machine_level(&out).evidence.get("links").unwrap(),
        &serde_json::json!({"NV18": 28})
    );
    assert!(machine_level(&out)
        .evidence
        .get("gpus_below_model_links")
        .is_none());
    assert_eq!(
        machine_level(&out).message,
        "All 28 GPU pairs are connected over NVLink through NVSwitch (NV18: every pair has all of a GPU's links)"
    );
    // GPU 5 with a link down: NV17 to every peer; the others keep 18.
    let mut t = f.topology.value().cloned().unwrap();
    for j in 0..8 {
        if j != 5 {
            t.links[5][j] = TopoLink::NvLink(17);
            t.links[j][5] = TopoLink::NvLink(17);
        }
    }
    let out = general(&with_topology(f, t));
    let five = of(&out, 5);
    assert_eq!(five.status, Status::Fail, "{}", five.message);
    assert!(five
        .message
        .starts_with("GPU 5 (00:0b.0): 1 of 18 NVLink links down, 17 active"));
    assert_eq!(of(&out, 4).status, Status::Pass);
    assert!(machine_level(&out)
        .message
        .ends_with("; GPU5 shows fewer NVLinks than the model has (see its own finding)"));
    assert_eq!(
        machine_level(&out)
            .evidence
            .get("gpus_below_model_links")
            .unwrap(),
        &serde_json::json!(["GPU5"])
    );
    // A model whose NVLink reaches the others only through NVSwitch: two of its GPUs are
    // said to be connected through it.
    let f = Machine::healthy("b200", 2)
        .gpus(|g| g.nvlinks = unread())
        .build();
    let out = general(&f);
    assert_eq!(statuses(&out), vec![Status::Pass; 3], "{out:#?}");
    assert_eq!(
        machine_level(&out).evidence.get("wiring").unwrap(),
        "nvswitch"
    );
    let f = Machine::healthy("h200-sxm-141gb", 2).build();
    assert_eq!(
        machine_level(&general(&f)).evidence.get("wiring").unwrap(),
        "nvlink"
    );
}

#[test]
fn without_the_model_s_link_count_the_matrix_gives_the_largest_nv() {
    // The A800 SXM4's entry states no NVLink figures: NV4 to three peers is shown as read, and
    // nothing is judged against a count the database does not have.
    let t = crate::parse::topo::parse(A100X4).unwrap();
    let f = with_topology(published("a800-sxm4-80gb", 4, None, None), t);
    let out = general(&f);
    let x = of(&out, 0);
    assert_eq!(x.status, Status::Pass, "{}", x.message);
    assert_eq!(
        x.message,
        "GPU 0 (00:06.0): 4 NVLink links active (from the topology matrix: NV4 to GPU1, GPU2 and GPU3)"
    );
    assert_eq!(x.evidence.get("links_active").unwrap(), 4);
    assert!(x.evidence.get("spec_links").is_none());
}

#[test]
fn what_the_topology_finding_adds_about_links_and_the_fabric() {
    // A GPU with every link down is its own finding's fail; the pair still shows NVLink in the
    // matrix and the topology names no GPU short of links.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .gpu(1, |g| g.nvlinks = links(18, 0))
        .build();
    assert_eq!(
        machine_level(&general(&f)).message,
        "The 2 GPUs are connected by NVLink (NV18)"
    );
    // No link in the matrix (and none listed): the GPUs' own findings fail, the pair is told
    // by its path, and no GPU is "short".
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .gpus(|g| g.nvlinks = unread())
        .with(phb(2))
        .build();
    assert_eq!(
        machine_level(&general(&f)).message,
        "The GPU pair has no NVLink path (GPU0-GPU1 PHB): traffic between them goes through the CPU's PCIe host bridge (PHB)"
    );
    // Some links listed inactive: the topology names the GPU.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .gpu(0, |g| g.nvlinks = links(18, 12))
        .build();
    assert_eq!(
        machine_level(&general(&f)).message,
        "The 2 GPUs are connected by NVLink (NV18); GPU0 shows fewer NVLinks than the model has (see its own finding)"
    );
    // NVML may answer for more link slots than the model has: only the model's links can be
    // missing.
    let f = Machine::healthy("a100-sxm4-80gb", 2)
        .gpus(|g| g.nvlinks = links(18, 12))
        .build();
    let out = general(&f);
    assert_eq!(of(&out, 0).status, Status::Pass, "{}", of(&out, 0).message);
    assert!(of(&out, 0)
        .message
        .ends_with(": 12 of 12 NVLink links active"));
    assert!(!machine_level(&out).message.contains("fewer NVLinks"));
    // A cut listing is not a GPU short of links.
    let f = published(
        "a100-sxm4-80gb",
        2,
        None,
        Some("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-x)\n         Link 0: 25 GB/s\n"),
    );
    let f = Machine::healthy("a100-sxm4-80gb", 2)
        .with(move |g| g.gpus = f.gpus.clone())
        .build();
    assert_eq!(
        machine_level(&general(&f)).message,
        "The 2 GPUs are connected by NVLink (NV12)"
    );
    // One pair whose GPU's fabric did not register: in the singular.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .gpu(0, |g| {
            g.fabric = Reading::Value(Fabric {
                state: "In Progress".into(),
                status: Some("N/A".into()),
                ..Default::default()
            })
        })
        .build();
    assert_eq!(
        machine_level(&general(&f)).message,
        "1 of 1 GPU pair is wired with NVLink (NV18) but the NVSwitch fabric is not registered on 1 of the 2 GPUs: NVLink between them is not usable"
    );
}

#[test]
fn pairs_without_a_registered_fabric_are_caused_by_the_first_gpu_without_it() {
    // GPUs 1 and 2 of 3 did not register: the pairs' finding names GPU 1's fabric finding
    // as its cause, so the fabric is one problem with the pairs under it.
    let unregistered = |g: &mut crate::facts::GpuFacts| {
        g.fabric = Reading::Value(Fabric {
            state: "In Progress".into(),
            status: None,
            ..Default::default()
        })
    };
    let f = Machine::healthy("h200-sxm-141gb", 3)
        .gpu(1, unregistered)
        .gpu(2, unregistered)
        .build();
    let findings = general(&f);
    let pairs = machine_level(&findings);
    assert_eq!(pairs.status, Status::Fail);
    assert_eq!(pairs.caused_by, Some(crate::finding::Cause::gpu(ID, 1)));
    let cause = of(&findings, 1);
    assert_eq!(cause.status, Status::Fail);
    // nvlink.fabric's finding on that GPU is its root (the registration, the fabric manager).
    assert_eq!(
        cause.caused_by,
        Some(crate::finding::Cause::gpu(crate::checks::causes::FABRIC, 1))
    );
    // A healthy machine's topology finding has no cause.
    let f = Machine::healthy("h200-sxm-141gb", 3).build();
    assert!(machine_level(&general(&f)).caused_by.is_none());
}

/// `f` with the matrix cells of GPU `i` and each of `others` set to PHB.
fn cut_pairs(mut f: Facts, i: usize, others: &[usize]) -> Facts {
    if let Reading::Value(t) = &mut f.topology {
        for &j in others {
            t.links[i][j] = TopoLink::Phb;
            t.links[j][i] = TopoLink::Phb;
        }
    }
    f
}

#[test]
fn pairs_without_nvlink_are_caused_by_the_gpu_whose_links_are_down() {
    // GPU 2 of 4 has all its links down: its pairs are what that causes.
    let f = Machine::healthy("h200-sxm-141gb", 4)
        .gpu(2, |g| g.nvlinks = links(18, 0))
        .build();
    let f = cut_pairs(f, 2, &[0, 1, 3]);
    let out = general(&f);
    assert_eq!(of(&out, 2).status, Status::Fail);
    let pairs = machine_level(&out);
    assert_eq!(pairs.status, Status::Warn, "{}", pairs.message);
    assert_eq!(pairs.caused_by, Some(crate::finding::Cause::gpu(ID, 2)));
    // Two GPUs down, the second one cut off from all: the cut-off one is named first.
    let f = Machine::healthy("h200-sxm-141gb", 4)
        .gpu(0, |g| g.nvlinks = links(18, 0))
        .gpu(3, |g| g.nvlinks = links(18, 0))
        .build();
    let f = cut_pairs(f, 3, &[0, 1, 2]);
    let out = general(&f);
    assert_eq!(
        machine_level(&out).caused_by,
        Some(crate::finding::Cause::gpu(ID, 3))
    );
    // Of two GPUs nothing is "cut off from the others": the first whose links are down.
    let f = Machine::healthy("h200-sxm-141gb", 2)
        .gpu(1, |g| g.nvlinks = links(18, 0))
        .build();
    let f = cut_pairs(f, 1, &[0]);
    let out = general(&f);
    assert_eq!(
        machine_level(&out).caused_by,
        Some(crate::finding::Cause::gpu(ID, 1))
    );
    // On a 4-GPU HGX A100 (direct links), GPU 0 has links down elsewhere and the pair
    // GPU2-GPU3 lost its NVLink: the cause is a GPU of that pair, not the first with a problem.
    let f = published("a100-sxm4-40gb", 4, None, None);
    let mut f = with_topology(f, with_cell(A100X4, 2, 3, TopoLink::Phb));
    if let Reading::Value(gpus) = &mut f.gpus {
        gpus[0].nvlinks = links(12, 8);
    }
    let out = general(&f);
    assert_eq!(of(&out, 0).status, Status::Fail);
    assert_eq!(
        machine_level(&out).caused_by,
        Some(crate::finding::Cause::gpu(ID, 2))
    );
    // A pair without NVLink between two GPUs whose links are fine has no known cause, even
    // where another pair's has one.
    let f = Machine::healthy("h200-sxm-141gb", 4)
        .gpu(3, |g| g.nvlinks = links(18, 0))
        .build();
    let f = cut_pairs(cut_pairs(f, 3, &[0, 1, 2]), 0, &[1, 2]);
    let out = general(&f);
    let pairs = machine_level(&out);
    assert_eq!(pairs.status, Status::Warn);
    assert!(pairs.caused_by.is_none(), "{pairs:#?}");
    let f = cut_pairs(Machine::healthy("h200-sxm-141gb", 2).build(), 0, &[1]);
    assert!(machine_level(&general(&f)).caused_by.is_none());
}

#[test]
fn a_bridge_listing_cut_with_a_link_down_says_at_least() {
    let listing = "GPU 0: NVIDIA GeForce RTX 3090 (UUID: GPU-a)\n\t Link 0: 14.062 GB/s\n\t Link 1: 14.062 GB/s\n\t Link 2: <inactive>\n";
    let f = published("rtx-3090", 2, None, Some(listing));
    let x = of(&general(&f), 0).clone();
    assert_eq!(x.status, Status::Warn);
    assert_eq!(
        x.message,
        "GPU 0 (00:06.0): at least 1 of the bridge's 4 NVLink links down, 2 active (3 listed, of which 1 inactive; 1 not listed): a bridge is missing or loose, or one of its links is down; it costs 25% of the bridge's 112.5 GB/s (28.1 GB/s)"
    );
}

#[test]
fn the_cube_mesh_is_told_only_of_models_with_nvlink_on_the_board() {
    // The DGX-1's matrix under GPUs whose entry does not say they have NVLink: the pairs without
    // it are not explained away as the cube-mesh's design.
    let f = published("a800-sxm4-80gb", 8, Some(DGX1_MSCCL), None);
    let t = machine_level(&general(&f)).clone();
    assert_eq!(t.status, Status::Info, "{}", t.message);
    assert!(
        t.message
            .starts_with("12 of 28 GPU pairs have no NVLink path"),
        "{}",
        t.message
    );
    assert_eq!(t.evidence.get("wiring").unwrap(), "nvlink");
}

#[test]
fn as_many_pairs_as_are_listed_need_no_more() {
    // Five GPUs, GPU4 cut off: its 4 pairs are all named, with no "+0 more".
    let mut f = Machine::healthy("h200-sxm-141gb", 5).build();
    if let Reading::Value(t) = &mut f.topology {
        for j in 0..4 {
            t.links[4][j] = TopoLink::Phb;
            t.links[j][4] = TopoLink::Phb;
        }
    }
    assert_eq!(
        machine_level(&general(&f)).message,
        "4 of 10 GPU pairs have no NVLink path (GPU4 has no NVLink to any other GPU; GPU0-GPU4 PHB, GPU1-GPU4 PHB, GPU2-GPU4 PHB, GPU3-GPU4 PHB): traffic between them goes through the CPU's PCIe host bridge (PHB)"
    );
}
