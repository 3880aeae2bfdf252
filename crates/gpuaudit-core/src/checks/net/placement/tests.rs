use super::*;
use crate::facts::{PcieEndpoint, PcieTree, RdmaPort};
use crate::finding::Status;
use crate::parse::topo;
use crate::testing::Machine;

const H100X8_RAIL: &str = include_str!("../../../parse/testdata/topo-h100x8-rail-nccl1453.txt");
const X3_TWO_PORT: &str =
    include_str!("../../../parse/testdata/topo-x3-two-port-nic-nccltests320.txt");
const A100X4_POLARIS: &str = include_str!("../../../parse/testdata/topo-a100x4-hgx-polaris.txt");
const H100X4_HGX: &str = include_str!("../../../parse/testdata/topo-h100x4-hgx-nccl1617.txt");

fn on(text: &str, gpus: u32) -> Finding {
    let mut f = Machine::healthy("h200-sxm-141gb", gpus).build();
    f.topology = Reading::Value(topo::parse(text).unwrap());
    let r = run_placement(&f, &Policy::default());
    assert_eq!(r.len(), 1, "{r:?}");
    r.into_iter().next().unwrap()
}

/// Synthetic (built for this test, not published): 4 GPUs on two sockets, two NICs both on
/// NUMA 0, so GPU2 and GPU3 reach a NIC only across the sockets.
const CROWDED: &str = "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tNV4\tNV4\tNV4\tPIX\tNODE\t0-31\t0\n\
GPU1\tNV4\t X \tNV4\tNV4\tNODE\tPIX\t0-31\t0\n\
GPU2\tNV4\tNV4\t X \tNV4\tSYS\tSYS\t32-63\t1\n\
GPU3\tNV4\tNV4\tNV4\t X \tSYS\tSYS\t32-63\t1\n\
\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n";

#[test]
fn published_rail_boards_pass() {
    let f = on(H100X8_RAIL, 8);
    assert_eq!(f.status, Status::Pass, "{}", f.message);
    assert!(
        f.message
            .starts_with("each of the 8 GPUs has an RDMA NIC on its own PCIe switch"),
        "{}",
        f.message
    );
    assert!(f.message.contains("(9 NICs in all)"), "{}", f.message);
    let f = on(H100X4_HGX, 4);
    assert_eq!(f.status, Status::Pass, "{}", f.message);
    assert_eq!(
        f.evidence.get("source").and_then(|s| s.as_str()),
        Some("nvidia-smi topo -m")
    );
}

#[test]
fn nics_through_the_cpu_pass_naming_it() {
    let f = on(X3_TWO_PORT, 3);
    assert_eq!(f.status, Status::Pass, "{}", f.message);
    assert!(
        f.message.contains("GPU0 → mlx5_0, mlx5_1 (NODE)"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("GPU2 → mlx5_0, mlx5_1 (PHB)"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .starts_with("each GPU has an RDMA NIC on its own NUMA node"),
        "{}",
        f.message
    );
}

#[test]
fn gpus_without_a_nic_on_their_node_inform_or_warn() {
    // Polaris: one CPU, four NUMA domains, two NICs on nodes 0 and 2: no node holds two.
    let f = on(A100X4_POLARIS, 4);
    assert_eq!(f.status, Status::Info, "{}", f.message);
    assert!(
        f.message
            .starts_with("GPU0 (NUMA 3), GPU2 (NUMA 1) have no RDMA NIC on their NUMA node"),
        "{}",
        f.message
    );
    assert!(
        f.message
            .contains("with 2 NICs for 4 GPUs and no NUMA node holding 2 or more"),
        "{}",
        f.message
    );
    let f = on(CROWDED, 4);
    assert_eq!(f.status, Status::Warn, "{}", f.message);
    assert!(
        f.message
            .starts_with("GPU2 (NUMA 1), GPU3 (NUMA 1) have no RDMA NIC"),
        "{}",
        f.message
    );
    assert!(
        f.message.ends_with("while NUMA 0 holds 2 (mlx5_0, mlx5_1)"),
        "{}",
        f.message
    );
    assert!(f.fix.is_some());
    // One GPU without: singular words.
    let one = CROWDED
        .replace(
            "GPU3\tNV4\tNV4\tNV4\t X \tSYS\tSYS\t32-63\t1",
            "GPU3\tNV4\tNV4\tNV4\t X \tSYS\tPIX\t32-63\t1",
        )
        .replace(
            "GPU0\t X \tNV4\tNV4\tNV4\tPIX\tNODE",
            "GPU0\t X \tNV4\tNV4\tNV4\tPIX\tSYS",
        )
        .replace(
            "GPU1\tNV4\t X \tNV4\tNV4\tNODE\tPIX",
            "GPU1\tNV4\t X \tNV4\tNV4\tNODE\tSYS",
        );
    let f = on(&one, 4);
    assert!(
        f.message
            .starts_with("GPU2 (NUMA 1) has no RDMA NIC on its NUMA node"),
        "{}",
        f.message
    );
    // mlx5_1 is now on node 1 by GPU3's PIX: no node holds two.
    assert_eq!(f.status, Status::Info, "{}", f.message);
}

#[test]
fn one_nic_for_all_gpus_is_a_design() {
    let t = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tSYS\tPIX\t0-31\t0\n\
GPU1\tSYS\t X \tSYS\t32-63\t1\n\
\nNIC Legend:\n\n  NIC0: mlx5_0\n";
    let f = on(t, 2);
    assert_eq!(f.status, Status::Info);
    assert!(
        f.message
            .starts_with("one RDMA NIC (mlx5_0) for 2 GPUs: a design"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("GPU1 (NUMA 1) reach it only across"),
        "{}",
        f.message
    );
    let local = t.replace("GPU1\tSYS\t X \tSYS", "GPU1\tSYS\t X \tNODE");
    let f = on(&local, 2);
    assert_eq!(f.status, Status::Info);
    assert!(
        f.message.contains("every GPU reaches it without crossing"),
        "{}",
        f.message
    );
    // A single GPU with its one NIC across the sockets: still the design.
    let single = "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tSYS\t0-31\t0\n";
    let f = on(single, 1);
    assert_eq!(f.status, Status::Info);
    assert!(f.message.contains("for 1 GPU:"), "{}", f.message);
    // Old drivers name the NIC itself in the header (no legend).
    let old = "\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\nGPU0\t X \tSYS\tPIX\tSYS\t0-31\nGPU1\tSYS\t X \tSYS\tPIX\t32-63\n";
    let f = on(old, 2);
    assert_eq!(f.status, Status::Pass);
    assert!(f
        .evidence
        .get("nics")
        .unwrap()
        .to_string()
        .contains("mlx5_1"));
}

fn ep(bus: &str, role: EndpointRole, numa: Reading<i32>) -> PcieEndpoint {
    PcieEndpoint {
        bus_id: bus.into(),
        role,
        upstream: Reading::Value(vec![]),
        numa_node: numa,
    }
}

fn numa_only(gpu_numa: &[Reading<i32>], nic_numa: &[Reading<i32>]) -> Finding {
    let mut f = Machine::healthy("h200-sxm-141gb", gpu_numa.len() as u32).build();
    // No NIC columns in the matrix (a VM's, or an older driver's).
    if let Reading::Value(t) = &mut f.topology {
        t.nics.clear();
        t.gpu_nic.iter_mut().for_each(Vec::clear);
    }
    let mut endpoints: Vec<PcieEndpoint> = f
        .gpu_list()
        .iter()
        .zip(gpu_numa)
        .map(|(g, n)| {
            ep(
                &crate::facts::normalize_bus_id(&g.pci_bus_id),
                EndpointRole::Gpu,
                n.clone(),
            )
        })
        .collect();
    for (i, n) in nic_numa.iter().enumerate() {
        endpoints.push(ep(
            &format!("0000:{:02x}:00.0", 0x80 + i),
            EndpointRole::Nic {
                device: format!("mlx5_{i}"),
            },
            n.clone(),
        ));
    }
    f.pcie_tree = Reading::Value(PcieTree {
        endpoints,
        ..PcieTree::default()
    });
    let r = run_placement(&f, &Policy::default());
    assert_eq!(r.len(), 1, "{r:?}");
    r.into_iter().next().unwrap()
}

#[test]
fn sysfs_numa_nodes_stand_in_for_the_matrix() {
    let v = Reading::Value;
    let f = numa_only(&[v(0), v(1)], &[v(0), v(1)]);
    assert_eq!(f.status, Status::Pass, "{}", f.message);
    assert!(f.message.contains("GPU0 → mlx5_0 (NODE)"), "{}", f.message);
    assert_eq!(
        f.evidence.get("source").and_then(|s| s.as_str()),
        Some("sysfs numa_node")
    );
    let f = numa_only(&[v(0), v(1)], &[v(0), v(0)]);
    assert_eq!(f.status, Status::Warn, "{}", f.message);
    assert!(
        f.message.starts_with("GPU1 (NUMA 1) has no RDMA NIC"),
        "{}",
        f.message
    );
    // -1 everywhere: not known, said so.
    let f = numa_only(&[v(-1), v(-1)], &[v(0), v(1)]);
    assert_eq!(f.status, Status::Skip);
    assert!(
        f.message
            .contains("numa_node is -1 (the firmware gives no NUMA affinity)"),
        "{}",
        f.message
    );
    // A NIC's node unknown while the GPU's has none on it: not known either.
    let f = numa_only(&[v(0), v(1)], &[v(0), v(-1)]);
    assert_eq!(f.status, Status::Info, "{}", f.message);
    assert!(
        f.message
            .starts_with("the nearest NIC of GPU1 is not known (NIC mlx5_1: numa_node is -1"),
        "{}",
        f.message
    );
    let f = numa_only(
        &[
            v(0),
            Reading::unavailable("/sys/bus/pci/devices/x/numa_node: permission denied"),
        ],
        &[v(0), v(0)],
    );
    assert_eq!(f.status, Status::Info, "{}", f.message);
    assert!(f.message.contains("permission denied"), "{}", f.message);
}

#[test]
fn no_nic_no_gpu_and_unread_fabric() {
    let mut f = Machine::healthy("h200-sxm-141gb", 2).build();
    f.host.fabric.rdma = Reading::Value(vec![]);
    let r = run_placement(&f, &Policy::default());
    assert_eq!(r[0].status, Status::Info);
    assert!(r[0].message.starts_with("no RDMA NIC"));
    f.host.fabric.rdma = Reading::unavailable("not in the snapshot");
    let r = run_placement(&f, &Policy::default());
    assert_eq!(r[0].status, Status::Skip);
    assert_eq!(
        r[0].message,
        "the RDMA devices were not read: not in the snapshot"
    );
    f.host.fabric.rdma = Reading::Value(vec![RdmaPort {
        device: "mlx5_0".into(),
        port: 1,
        state: Some("ACTIVE".into()),
        phys_state: None,
        rate_gbps: None,
        rate_text: None,
        link_layer: None,
        hca_type: None,
    }]);
    let r = run_placement(&f, &Policy::default());
    assert_eq!(r[0].status, Status::Skip);
    assert!(r[0]
        .message
        .starts_with("RDMA devices are present but where they sit is not known"));
    let mut none = Machine::healthy("h200-sxm-141gb", 1).build();
    none.gpus = Reading::Value(vec![]);
    assert_eq!(
        run_placement(&none, &Policy::default())[0].status,
        Status::Skip
    );
}

#[test]
fn words_and_order() {
    assert!(Nearness::Switch < Nearness::HostBridge);
    assert!(Nearness::HostBridge < Nearness::Node);
    assert!(Nearness::Node < Nearness::Sys);
    assert_eq!(Nearness::of(&TopoLink::Pxb), Some(Nearness::Switch));
    assert_eq!(Nearness::of(&TopoLink::NvLink(4)), None);
    let items: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    assert_eq!(named(&items), "n0, n1, n2, n3, n4, n5, n6, n7 and 2 more");
    assert_eq!(named(&items[..8]), "n0, n1, n2, n3, n4, n5, n6, n7");
    assert!(!shown("mlx5_\u{1b}[0m").contains('\u{1b}'));
    // A matrix whose GPU rows name no NIC path at all: skipped with the reason.
    let t = "\tGPU0\tNIC0\tCPU Affinity\nGPU0\t X \tX\t0-31\n";
    let f = on(t, 1);
    assert_eq!(f.status, Status::Skip);
    assert!(
        f.message.contains("names no PCIe path to any NIC"),
        "{}",
        f.message
    );
}

/// A NIC whose node only a NODE path tells (no GPU has it on its switch) still counts on
/// that node: two NICs on NUMA 0, none on GPU1's node 1.
#[test]
fn a_nic_reached_through_the_node_counts_on_that_node() {
    let t = "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tNV4\tPIX\tNODE\t0-31\t0\n\
GPU1\tNV4\t X \tSYS\tSYS\t32-63\t1\n\
\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n";
    let f = on(t, 2);
    assert_eq!(f.status, Status::Warn, "{}", f.message);
    assert!(
        f.message.ends_with("while NUMA 0 holds 2 (mlx5_0, mlx5_1)"),
        "{}",
        f.message
    );
    // A NIC SYS to every GPU has no node known: no crowd.
    let t2 = t.replace("GPU0\t X \tNV4\tPIX\tNODE", "GPU0\t X \tNV4\tPIX\tSYS");
    assert_eq!(on(&t2, 2).status, Status::Info);
}

/// Beside the matrix, a NIC's sysfs NUMA node (its own, by device name) is what places it;
/// -1 or no entry leaves the matrix's inference.
#[test]
fn a_nics_sysfs_numa_node_overrides_the_inference() {
    let with_tree = |nics: &[(&str, i32)]| {
        let mut f = Machine::healthy("h200-sxm-141gb", 4).build();
        f.topology = Reading::Value(topo::parse(CROWDED).unwrap());
        let endpoints = nics
            .iter()
            .enumerate()
            .map(|(i, (d, n))| {
                ep(
                    &format!("0000:{:02x}:00.0", 0x80 + i),
                    EndpointRole::Nic {
                        device: (*d).to_string(),
                    },
                    Reading::Value(*n),
                )
            })
            .collect();
        f.pcie_tree = Reading::Value(PcieTree {
            endpoints,
            ..PcieTree::default()
        });
        let r = run_placement(&f, &Policy::default());
        assert_eq!(r.len(), 1, "{r:?}");
        r.into_iter().next().unwrap()
    };
    // mlx5_1 on node 1 by sysfs: no node holds two, a note.
    let f = with_tree(&[("mlx5_0", 0), ("mlx5_1", 1)]);
    assert_eq!(f.status, Status::Info, "{}", f.message);
    // -1 is "not known": the matrix's node 0 stands, and node 0 holds both.
    let f = with_tree(&[("mlx5_0", 0), ("mlx5_1", -1)]);
    assert_eq!(f.status, Status::Warn, "{}", f.message);
    // Another device's node is not this NIC's.
    let f = with_tree(&[("mlx5_0", 0), ("mlx5_7", 1)]);
    assert_eq!(f.status, Status::Warn, "{}", f.message);
}
