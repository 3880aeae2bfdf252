use super::*;
use crate::facts::{Acs, Iommu, PciePort, TopoLink};
use crate::finding::Status;
use crate::testing::Machine;

const RP: &str = "0000:00:01.0";
const USP: &str = "0000:01:00.0";
const DSP0: &str = "0000:02:00.0";
const DSP1: &str = "0000:02:01.0";

fn gpu(bus: &str, up: &[&str]) -> PcieEndpoint {
    PcieEndpoint {
        bus_id: bus.into(),
        role: EndpointRole::Gpu,
        upstream: Reading::Value(up.iter().map(|s| s.to_string()).collect()),
        numa_node: Reading::Value(0),
    }
}

fn nic(dev: &str, bus: &str, up: &[&str]) -> PcieEndpoint {
    PcieEndpoint {
        role: EndpointRole::Nic { device: dev.into() },
        ..gpu(bus, up)
    }
}

fn port(bus: &str, ptype: u8, acs: Reading<Option<u16>>) -> PciePort {
    PciePort {
        bus_id: bus.into(),
        config_path: format!("/sys/devices/pci0000:00/{bus}/config"),
        port_type: Reading::Value(ptype),
        acs: acs.map(|c| {
            c.map(|control| Acs {
                capability: 0x5f,
                control,
            })
        }),
    }
}

/// A GPU under DSP0 and a NIC under DSP1 of one switch; `ctl0`/`ctl1` the two ports' ACS.
fn switch(
    ctl0: Reading<Option<u16>>,
    ctl1: Reading<Option<u16>>,
    units: &[&str],
    cmdline: &[&str],
) -> PcieTree {
    PcieTree {
        endpoints: vec![
            gpu("0000:03:00.0", &[RP, USP, DSP0]),
            nic("mlx5_0", "0000:04:00.0", &[RP, USP, DSP1]),
        ],
        ports: vec![
            port(RP, 4, Reading::Value(Some(0x1d))),
            port(USP, 5, Reading::Value(None)),
            port(DSP0, 6, ctl0),
            port(DSP1, 6, ctl1),
        ],
        iommu: Reading::Value(Iommu {
            units: units.iter().map(|s| s.to_string()).collect(),
            cmdline: Reading::Value(cmdline.iter().map(|s| s.to_string()).collect()),
        }),
    }
}

fn run_on(tree: Reading<PcieTree>) -> Vec<Finding> {
    let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
    f.pcie_tree = tree;
    run_acs(&f, &Policy::default())
}

fn one(tree: PcieTree) -> Finding {
    let r = run_on(Reading::Value(tree));
    assert_eq!(r.len(), 1, "{r:?}");
    r.into_iter().next().unwrap()
}

#[test]
fn redirect_on_a_switch_port_between_gpu_and_nic_warns() {
    // Linux's default where the IOMMU is on: SV RR CR UF.
    let f = one(switch(
        Reading::Value(Some(0x1d)),
        Reading::Value(Some(0x00)),
        &["dmar0"],
        &["intel_iommu=on"],
    ));
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message.contains("at 1 of 2 PCIe switch ports"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("0000:02:00.0 (SV RR CR UF)"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .contains("GPU 0000:03:00.0 ↔ mlx5_0 (0000:04:00.0)"),
        "{}",
        f.message
    );
    assert!(f.message.contains("can be refused"), "{}", f.message);
    let fix = f.fix.as_deref().unwrap();
    assert!(
        fix.contains("`sudo setpci -s 0000:02:00.0 ECAP_ACS+0x6.w=0000`"),
        "{fix}"
    );
    assert!(!fix.contains("0000:02:01.0"), "{fix}");
    // Each redirect bit on its own warns; the others do not.
    for bit in [ACS_RR, ACS_CR, ACS_EC] {
        let f = one(switch(
            Reading::Value(Some(bit)),
            Reading::Value(Some(0)),
            &[],
            &[],
        ));
        assert_eq!(f.status, Status::Warn, "{bit:#x}");
        assert!(!f.message.contains("IOMMU"), "{}", f.message);
    }
    for bit in [0x01, 0x02, 0x10, 0x40] {
        let f = one(switch(
            Reading::Value(Some(bit)),
            Reading::Value(Some(0)),
            &[],
            &[],
        ));
        assert_eq!(f.status, Status::Pass, "{bit:#x}");
    }
    // In passthrough the IOMMU does not translate.
    let f = one(switch(
        Reading::Value(Some(0x1d)),
        Reading::Value(Some(0x1d)),
        &["dmar0"],
        &["iommu=pt"],
    ));
    assert!(f.message.contains("at 2 of 2"), "{}", f.message);
    assert!(f.message.contains("in passthrough"), "{}", f.message);
    assert!(!f.message.contains("refused"), "{}", f.message);
    let f = one(switch(
        Reading::Value(Some(0x1d)),
        Reading::Value(None),
        &["dmar0"],
        &["iommu.passthrough=1"],
    ));
    assert!(f.message.contains("in passthrough"), "{}", f.message);
    assert!(f.message.contains("at 1 of 2"), "{}", f.message);
}

#[test]
fn redirect_off_passes_and_unreadable_skips() {
    let f = one(switch(
        Reading::Value(Some(0)),
        Reading::Value(None),
        &[],
        &[],
    ));
    assert_eq!(f.status, Status::Pass);
    assert!(
        f.message.contains("off on the 2 PCIe switch ports"),
        "{}",
        f.message
    );
    let denied = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/config: only the first 64 bytes were readable: extended config space needs root (permission denied)";
    let f = one(switch(
        Reading::unavailable(denied),
        Reading::Value(Some(0)),
        &[],
        &[],
    ));
    assert_eq!(f.status, Status::Skip);
    assert!(
        f.message.contains("1 of the 2 PCIe switch ports"),
        "{}",
        f.message
    );
    assert!(f.message.contains("permission denied"), "{}", f.message);
    assert!(f.message.contains("0000:02:00.0/config"), "{}", f.message);
    // One port redirecting and one unreadable: the warning stands, the other is named.
    let f = one(switch(
        Reading::unavailable(denied),
        Reading::Value(Some(0x1d)),
        &[],
        &[],
    ));
    assert_eq!(f.status, Status::Warn);
    assert!(f.evidence.get("ports_not_read").is_some());
    // A port on a meeting path not read at all.
    let mut t = switch(Reading::Value(Some(0)), Reading::Value(Some(0)), &[], &[]);
    t.ports.retain(|p| p.bus_id != DSP1);
    let f = one(t);
    assert_eq!(f.status, Status::Skip);
    assert!(
        f.message
            .contains("0000:02:01.0: its config space was not read"),
        "{}",
        f.message
    );
}

#[test]
fn paths_that_meet_at_the_root_port_or_not_at_all_share_no_switch() {
    // Two GPUs on two root ports.
    let t = PcieTree {
        endpoints: vec![
            gpu("0000:03:00.0", &[RP]),
            gpu("0000:83:00.0", &["0000:80:01.0"]),
        ],
        ports: vec![port(RP, 4, Reading::Value(Some(0x1d)))],
        iommu: Reading::unavailable("not read"),
    };
    let f = one(t.clone());
    assert_eq!(f.status, Status::Info);
    assert!(
        f.message
            .contains("no two of the 2 GPUs and 0 RDMA NICs share a PCIe switch"),
        "{}",
        f.message
    );
    // Common prefix of one (the root port) is no switch either.
    let mut t1 = t.clone();
    t1.endpoints[1] = gpu("0000:04:00.0", &[RP, "0000:02:00.1"]);
    t1.endpoints[0] = gpu("0000:03:00.0", &[RP, "0000:02:00.0"]);
    assert_eq!(one(t1).status, Status::Info);
    // Two NICs sharing a switch, but no GPU among them: not judged.
    let t2 = PcieTree {
        endpoints: vec![
            gpu("0000:83:00.0", &["0000:80:01.0"]),
            nic("mlx5_0", "0000:03:00.0", &[RP, USP, DSP0]),
            nic("mlx5_1", "0000:04:00.0", &[RP, USP, DSP1]),
        ],
        ports: vec![
            port(DSP0, 6, Reading::Value(Some(0x1d))),
            port(DSP1, 6, Reading::Value(Some(0x1d))),
        ],
        iommu: Reading::unavailable("not read"),
    };
    let f = one(t2);
    assert_eq!(f.status, Status::Info, "{}", f.message);
    assert!(f.message.contains("1 GPU and 2 RDMA NICs"), "{}", f.message);
    // Two GPUs on one switch: the GPU-GPU pair is judged.
    let t3 = PcieTree {
        endpoints: vec![
            gpu("0000:03:00.0", &[RP, USP, DSP0]),
            gpu("0000:04:00.0", &[RP, USP, DSP1]),
        ],
        ports: vec![
            port(DSP0, 6, Reading::Value(Some(0x04))),
            port(DSP1, 6, Reading::Value(Some(0))),
        ],
        iommu: Reading::unavailable("not read"),
    };
    let f = one(t3);
    assert_eq!(f.status, Status::Warn);
    assert!(
        f.message.contains("GPU 0000:03:00.0 ↔ GPU 0000:04:00.0"),
        "{}",
        f.message
    );
    // A device on the switch's own bus (no port of its own below the meeting point).
    let t4 = PcieTree {
        endpoints: vec![
            gpu("0000:03:00.0", &[RP, USP, DSP0]),
            nic("mlx5_0", "0000:02:00.1", &[RP, USP]),
        ],
        ports: vec![port(DSP0, 6, Reading::Value(Some(0x04)))],
        iommu: Reading::unavailable("not read"),
    };
    let f = one(t4);
    assert!(
        f.message.contains("at 1 of 1 PCIe switch port "),
        "{}",
        f.message
    );
}

#[test]
fn unknown_paths_skip_and_nothing_read_skips() {
    let mut t = switch(Reading::Value(Some(0)), Reading::Value(Some(0)), &[], &[]);
    t.endpoints[1].upstream =
        Reading::unavailable("/sys/class/infiniband/mlx5_0/device: does not resolve");
    let f = one(t);
    assert_eq!(f.status, Status::Skip);
    assert!(
        f.message
            .starts_with("the PCIe path of mlx5_0 (0000:04:00.0) is not known: /sys/class"),
        "{}",
        f.message
    );
    let r = run_on(Reading::unavailable(
        "/sys/bus/pci/devices: permission denied",
    ));
    assert_eq!(r[0].status, Status::Skip);
    assert_eq!(
        r[0].message,
        "the PCIe paths were not read: /sys/bus/pci/devices: permission denied"
    );
    let none = PcieTree::default();
    let f = one(none);
    assert_eq!(f.status, Status::Skip);
    assert!(f.message.starts_with("no NVIDIA GPU on the PCI bus"));
}

#[test]
fn one_gpu_alone_and_a_vm_inform() {
    let t = PcieTree {
        endpoints: vec![gpu("0000:03:00.0", &[RP, USP, DSP0])],
        ports: vec![],
        iommu: Reading::unavailable("not read"),
    };
    let f = one(t);
    assert_eq!(f.status, Status::Skip);
    assert!(f
        .message
        .starts_with("one GPU (0000:03:00.0) and no RDMA NIC"));
    // One GPU and a NIC: judged.
    let f = one(switch(
        Reading::Value(Some(0)),
        Reading::Value(Some(0)),
        &[],
        &[],
    ));
    assert_eq!(f.status, Status::Pass);
    let mut m = Machine::healthy("h200-sxm-141gb", 2).build();
    m.machine.hypervisor = Reading::Value(true);
    m.pcie_tree = Reading::Value(switch(
        Reading::Value(Some(0x1d)),
        Reading::Value(Some(0x1d)),
        &[],
        &[],
    ));
    let r = run_acs(&m, &Policy::default());
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].status, Status::Skip);
    assert!(
        r[0].message.starts_with("in a VM: the host's PCIe switches and their ACS cannot be seen, only the VM's own virtual PCIe tree (4 virtual bridges above the GPUs and NICs)"),
        "{}",
        r[0].message
    );
    if let Reading::Value(t) = &mut m.pcie_tree {
        t.endpoints[0].upstream = Reading::unavailable("/sys/bus/pci/devices/x: does not resolve");
    }
    let r = run_acs(&m, &Policy::default());
    assert!(
        r[0].message
            .contains("(its paths were not read, see the evidence)"),
        "{}",
        r[0].message
    );
    assert!(r[0]
        .evidence
        .get("paths_not_known")
        .unwrap()
        .to_string()
        .contains("does not resolve"));
    // Hypervisor unknown: judged as bare metal.
    m.machine.hypervisor = Reading::unavailable("no cpuinfo");
    m.pcie_tree = Reading::Value(switch(
        Reading::Value(Some(0x1d)),
        Reading::Value(Some(0x1d)),
        &[],
        &[],
    ));
    assert_eq!(run_acs(&m, &Policy::default())[0].status, Status::Warn);
}

#[test]
fn words_and_bounds() {
    let items: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    assert_eq!(named(&items), "p0, p1, p2, p3 and 2 more");
    assert_eq!(named(&items[..4]), "p0, p1, p2, p3");
    let t = switch(Reading::Value(Some(0)), Reading::Value(None), &[], &[]);
    assert_eq!(
        iommu_words(&t).as_deref(),
        Some("off (no unit in /sys/class/iommu)")
    );
    let t = switch(
        Reading::Value(Some(0)),
        Reading::Value(None),
        &["dmar0", "dmar1"],
        &["iommu=pt"],
    );
    assert_eq!(
        iommu_words(&t).as_deref(),
        Some("on (dmar0, dmar1), iommu=pt")
    );
    let ev = port_evidence(&t);
    assert_eq!(ev[2].acs_control.as_deref(), Some("0x0000"));
    assert_eq!(ev[3].acs_control.as_deref(), Some("no ACS capability"));
    assert_eq!(ev[2].port_type.as_deref(), Some("switch downstream port"));
    let mut big = t.clone();
    big.ports = (0..40)
        .map(|i| port(&format!("0000:{i:02x}:00.0"), 6, Reading::Value(Some(0))))
        .collect();
    assert_eq!(port_evidence(&big).len(), MAX_PORTS_SHOWN);
    let n = nic("mlx5_\u{1b}[31m", "0000:04:00.0", &[]);
    assert!(!name(&n).contains('\u{1b}'), "{}", name(&n));
}

/// Two H200s joined by NVLink (the healthy machine's matrix says NV18) behind one switch:
/// their peer traffic takes NVLink, so the switch's ACS does not touch it; with a NIC beside
/// them the GPU-NIC pairs still count.
#[test]
fn gpu_pairs_joined_by_nvlink_are_left_aside() {
    let g0 = crate::testing::bus_id(0);
    let g1 = crate::testing::bus_id(1);
    let mut m = Machine::healthy("h200-sxm-141gb", 2).build();
    let tree = PcieTree {
        endpoints: vec![gpu(&g0, &[RP, USP, DSP0]), gpu(&g1, &[RP, USP, DSP1])],
        ports: vec![
            port(DSP0, 6, Reading::Value(Some(0x1d))),
            port(DSP1, 6, Reading::Value(Some(0x1d))),
        ],
        iommu: Reading::unavailable("not read"),
    };
    m.pcie_tree = Reading::Value(tree.clone());
    let r = run_acs(&m, &Policy::default());
    assert_eq!(r[0].status, Status::Info, "{}", r[0].message);
    assert!(
        r[0].message.starts_with("apart from GPU pairs joined by NVLink (their traffic takes NVLink), no two of the 2 GPUs and 0 RDMA NICs share a PCIe switch"),
        "{}",
        r[0].message
    );
    assert_eq!(
        r[0].evidence
            .get("gpu_pairs_over_nvlink")
            .and_then(|v| v.as_u64()),
        Some(1)
    );
    // Without NVLink between them (PCIe cards): judged.
    if let Reading::Value(t) = &mut m.topology {
        t.links[0][1] = TopoLink::Pix;
        t.links[1][0] = TopoLink::Pix;
    }
    let r = run_acs(&m, &Policy::default());
    assert_eq!(r[0].status, Status::Warn, "{}", r[0].message);
    // No matrix: judged too (NVLink not known).
    m.topology = Reading::unavailable("no nvidia-smi");
    assert_eq!(run_acs(&m, &Policy::default())[0].status, Status::Warn);
    // A NIC beside NVLinked GPUs: the GPU-NIC pairs warn.
    let mut m = Machine::healthy("h200-sxm-141gb", 2).build();
    let mut t = tree;
    t.endpoints
        .push(nic("mlx5_0", "0000:04:00.0", &[RP, USP, "0000:02:02.0"]));
    t.ports
        .push(port("0000:02:02.0", 6, Reading::Value(Some(0))));
    m.pcie_tree = Reading::Value(t);
    let r = run_acs(&m, &Policy::default());
    assert_eq!(r[0].status, Status::Warn, "{}", r[0].message);
    assert!(
        r[0].message.contains("at 2 of 3 PCIe switch ports"),
        "{}",
        r[0].message
    );
    assert!(
        !r[0].message.contains(&format!("GPU {g0} ↔ GPU {g1}")),
        "{}",
        r[0].message
    );
    assert!(
        r[0].message
            .contains(&format!("GPU {g0} ↔ mlx5_0 (0000:04:00.0)")),
        "{}",
        r[0].message
    );
}

/// Three GPUs behind one switch, GPU 0 and GPU 1 joined by NVLink, GPU 2 by PCIe only: the
/// pairs with GPU 2 are judged, each pair once, never a GPU with itself, and each GPU of
/// the matrix found by its own bus id and label.
#[test]
fn only_the_pairs_without_nvlink_are_named() {
    let g: Vec<String> = (0..3).map(crate::testing::bus_id).collect();
    let dsp2 = "0000:02:02.0";
    let mut m = Machine::healthy("h200-sxm-141gb", 3).build();
    if let Reading::Value(t) = &mut m.topology {
        for (i, j) in [(0, 2), (2, 0), (1, 2), (2, 1)] {
            t.links[i][j] = TopoLink::Pix;
        }
    }
    m.pcie_tree = Reading::Value(PcieTree {
        endpoints: vec![
            gpu(&g[0], &[RP, USP, DSP0]),
            gpu(&g[1], &[RP, USP, DSP1]),
            gpu(&g[2], &[RP, USP, dsp2]),
        ],
        ports: vec![
            port(DSP0, 6, Reading::Value(Some(0x1d))),
            port(DSP1, 6, Reading::Value(Some(0x1d))),
            port(dsp2, 6, Reading::Value(Some(0x1d))),
        ],
        iommu: Reading::unavailable("not read"),
    });
    let r = run_acs(&m, &Policy::default());
    assert_eq!(r.len(), 1, "{r:?}");
    let f = &r[0];
    assert_eq!(f.status, Status::Warn, "{}", f.message);
    let pair = |a: usize, b: usize| format!("GPU {} ↔ GPU {}", g[a], g[b]);
    assert!(f.message.contains(&pair(0, 2)), "{}", f.message);
    assert!(f.message.contains(&pair(1, 2)), "{}", f.message);
    assert!(!f.message.contains(&pair(0, 1)), "{}", f.message);
    for i in 0..3 {
        assert!(!f.message.contains(&pair(i, i)), "{}", f.message);
    }
    assert_eq!(
        f.evidence
            .get("gpu_pairs_over_nvlink")
            .and_then(|v| v.as_u64()),
        Some(1)
    );
}
