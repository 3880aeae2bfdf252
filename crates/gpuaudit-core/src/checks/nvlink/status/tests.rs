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
