//! Parser test data that other projects published from real machines (each file under
//! `src/parse/testdata/` with a `*.PROVENANCE.md` naming its source and licence). The expected
//! values are read by eye from the files.

use gpuaudit_core::parse::nvlink;

/// `nvidia-smi nvlink -s` of an 8x A100-SXM4-80GB (leptonai/gpud, Apache-2.0): the speed is a
/// whole number ("25 GB/s"), the indentation nine spaces.
const NVLINK_A100X8_GPUD: &str = include_str!("../src/parse/testdata/nvlink-s-a100x8-gpud.txt");

#[test]
fn nvlink_status_of_an_hgx_a100_with_whole_number_speeds() {
    let gpus = nvlink::parse_status(NVLINK_A100X8_GPUD).expect("the published output parses");
    let indices: Vec<u32> = gpus.iter().map(|g| g.gpu).collect();
    assert_eq!(
        indices,
        (0..8).collect::<Vec<u32>>(),
        "eight GPU blocks, in order"
    );
    for g in &gpus {
        assert!(!g.all_inactive, "GPU {}: links are listed", g.gpu);
        let numbers: Vec<u32> = g.links.iter().map(|l| l.link).collect();
        assert_eq!(
            numbers,
            (0..12).collect::<Vec<u32>>(),
            "GPU {}: twelve NVLink 3 links",
            g.gpu
        );
        for l in &g.links {
            assert!(l.active, "GPU {} link {}: up", g.gpu, l.link);
            assert_eq!(
                l.speed_gbps,
                Some(25.0),
                "GPU {} link {}: \"25 GB/s\" is a reading of 25 GB/s",
                g.gpu,
                l.link
            );
        }
    }
}

use gpuaudit_core::facts::TopoLink::{self, *};
use gpuaudit_core::parse::topo;

fn nv(k: u32) -> TopoLink {
    NvLink(k)
}

/// The DGX-1 hybrid cube-mesh as msccl-tools keeps it: the NICs named in the header, no NIC
/// legend, no NUMA column.
const TOPO_DGX1_MSCCL: &str = include_str!("../src/parse/testdata/topo-dgx1-v100-msccl.txt");
/// The same wiring on a rented HGX-1 class machine, R580 layout, with its `nvlink -s`.
const TOPO_V100X8_VAST: &str = include_str!("../src/parse/testdata/topo-v100x8-cube-mesh-vast.txt");
const NVLINK_V100X8_VAST: &str =
    include_str!("../src/parse/testdata/nvlink-s-v100x8-cube-mesh-vast.txt");
/// Azure NDv2: the cube-mesh with NODE for the pairs left to PCIe, columns aligned by spaces.
const TOPO_NDV2_RAPIDS: &str = include_str!("../src/parse/testdata/topo-v100x8-ndv2-rapids.txt");
const TOPO_4090X8_VAST: &str = include_str!("../src/parse/testdata/topo-rtx4090x8-pcie-vast.txt");
const TOPO_A100X4_POLARIS: &str = include_str!("../src/parse/testdata/topo-a100x4-hgx-polaris.txt");
const TOPO_H100X4_NCCL: &str = include_str!("../src/parse/testdata/topo-h100x4-hgx-nccl1617.txt");
const TOPO_A6000X3: &str =
    include_str!("../src/parse/testdata/topo-a6000x3-one-bridge-siboehm.txt");
const NVLINK_A6000X3: &str =
    include_str!("../src/parse/testdata/nvlink-s-a6000x3-one-bridge-siboehm.txt");
const NVLINK_V100_AZHPC: &str =
    include_str!("../src/parse/testdata/nvlink-s-v100-two-down-azhpc73.txt");

/// The DGX-1 cube-mesh, row by row (read from NVIDIA's published DGX-1 matrix).
fn dgx1_row(i: usize) -> Vec<TopoLink> {
    const ROWS: [[u32; 8]; 8] = [
        [0, 1, 1, 2, 2, 9, 9, 9],
        [1, 0, 2, 1, 9, 2, 9, 9],
        [1, 2, 0, 2, 9, 9, 1, 9],
        [2, 1, 2, 0, 9, 9, 9, 1],
        [2, 9, 9, 9, 0, 1, 1, 2],
        [9, 2, 9, 9, 1, 0, 2, 1],
        [9, 9, 1, 9, 1, 2, 0, 2],
        [9, 9, 9, 1, 2, 1, 2, 0],
    ];
    ROWS[i]
        .iter()
        .map(|&k| match k {
            0 => Itself,
            9 => Sys,
            k => nv(k),
        })
        .collect()
}

#[test]
fn the_dgx1_cube_mesh_in_both_published_layouts() {
    for text in [TOPO_DGX1_MSCCL, TOPO_V100X8_VAST] {
        let t = topo::parse(text).expect("the published matrix parses");
        assert_eq!(t.gpus.len(), 8);
        for i in 0..8 {
            assert_eq!(t.links[i], dgx1_row(i), "GPU{i}");
            // 2 + 2 + 1 + 1: the V100's six links over four peers.
            let sum: u32 = t.links[i]
                .iter()
                .map(|l| if let NvLink(k) = l { *k } else { 0 })
                .sum();
            assert_eq!(sum, 6, "GPU{i}");
        }
    }
    let old = topo::parse(TOPO_DGX1_MSCCL).unwrap();
    assert_eq!(old.nics, vec!["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]);
    assert_eq!(old.gpu_nic[0], vec![Pix, Sys, Phb, Sys]);
    assert_eq!(old.gpu_nic[7], vec![Sys, Phb, Sys, Pix]);
    assert_eq!(old.cpu_affinity[4].as_deref(), Some("20-39,60-79"));
    assert_eq!(old.numa_affinity, vec![None; 8]);
    let r580 = topo::parse(TOPO_V100X8_VAST).unwrap();
    assert_eq!(r580.nics, vec!["NIC0"]);
    assert_eq!(
        r580.nic_names,
        vec![("NIC0".to_string(), "mlx5_2".to_string())]
    );
    assert_eq!(r580.gpu_nic[3], vec![Node]);
    assert_eq!(r580.gpu_nic[4], vec![Sys]);
    assert_eq!(r580.numa_affinity[7].as_deref(), Some("1"));
}

#[test]
fn the_cube_mesh_of_an_azure_ndv2_vm_aligned_by_spaces() {
    let t = topo::parse(TOPO_NDV2_RAPIDS).expect("parses");
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(
        t.links[0],
        vec![Itself, nv(2), nv(1), nv(2), Node, Node, nv(1), Node]
    );
    assert_eq!(
        t.links[7],
        vec![Node, nv(1), Node, Node, nv(2), nv(1), nv(2), Itself]
    );
    for (i, row) in t.links.iter().enumerate() {
        let peers = row.iter().filter(|l| matches!(l, NvLink(_))).count();
        assert_eq!(peers, 4, "GPU{i}: four NVLink peers");
    }
    assert_eq!(t.nics, vec!["mlx5_0"]);
    assert_eq!(t.gpu_nic[5], vec![Node]);
    assert_eq!(t.cpu_affinity[0].as_deref(), Some("0-19"));
    assert_eq!(t.numa_affinity[0].as_deref(), Some("0"));
}

#[test]
fn eight_rtx_4090s_over_pcie_only() {
    let t = topo::parse(TOPO_4090X8_VAST).expect("parses");
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(
        t.links[0],
        vec![Itself, Phb, Node, Node, Node, Node, Sys, Sys]
    );
    assert_eq!(t.links[6], vec![Sys, Sys, Sys, Sys, Sys, Sys, Itself, Phb]);
    assert!(t.links.iter().flatten().all(|l| !matches!(l, NvLink(_))));
    assert!(t.nics.is_empty());
    assert_eq!(t.cpu_affinity[7].as_deref(), Some("36-71,108-143"));
}

#[test]
fn four_gpu_hgx_boards_split_their_links_over_the_peers() {
    let a100 = topo::parse(TOPO_A100X4_POLARIS).expect("the edited header still parses");
    assert_eq!(a100.gpus, vec!["GPU0", "GPU1", "GPU2", "GPU3"]);
    assert_eq!(a100.nics, vec!["mlx5_0", "mlx5_1"]);
    assert_eq!(a100.links[0], vec![Itself, nv(4), nv(4), nv(4)]);
    assert_eq!(a100.links[3], vec![nv(4), nv(4), nv(4), Itself]);
    assert_eq!(a100.gpu_nic[1], vec![Sys, Phb]);
    assert_eq!(a100.cpu_affinity[0].as_deref(), Some("24-31,56-63"));
    assert_eq!(a100.numa_affinity[3].as_deref(), Some("0"));
    let h100 = topo::parse(TOPO_H100X4_NCCL).expect("parses");
    assert_eq!(h100.links[2], vec![nv(6), nv(6), Itself, nv(6)]);
    assert_eq!(h100.nics, vec!["NIC0", "NIC1", "NIC2", "NIC3"]);
    assert_eq!(h100.gpu_nic[2], vec![Sys, Sys, Pix, Sys]);
    assert_eq!(h100.cpu_affinity[1].as_deref(), Some("4,12,20,28"));
    assert_eq!(h100.numa_affinity[2].as_deref(), Some("7"));
}

#[test]
fn three_a6000s_two_of_them_bridged() {
    let t = topo::parse(TOPO_A6000X3).expect("the underlined header parses");
    assert_eq!(t.gpus, vec!["GPU0", "GPU1", "GPU2"]);
    assert_eq!(t.links[0], vec![Itself, nv(4), Node]);
    assert_eq!(t.links[2], vec![Node, Node, Itself]);
    let gpus = nvlink::parse_status(NVLINK_A6000X3).expect("parses");
    assert_eq!(gpus.len(), 3);
    for g in &gpus[..2] {
        assert_eq!(g.links.len(), 4, "GPU {}", g.gpu);
        assert!(g
            .links
            .iter()
            .all(|l| l.active && l.speed_gbps == Some(14.062)));
    }
    assert!(gpus[2].all_inactive && gpus[2].links.is_empty());
}

#[test]
fn a_cube_mesh_listing_and_a_cut_one_with_two_links_down() {
    let gpus = nvlink::parse_status(NVLINK_V100X8_VAST).expect("parses");
    assert_eq!(gpus.len(), 8);
    assert!(gpus
        .iter()
        .all(|g| g.links.len() == 6 && g.links.iter().all(|l| l.active)));
    // The elided listing names GPU 3 alone; its links 3 and 5 are inactive.
    let cut = nvlink::parse_status(NVLINK_V100_AZHPC).expect("parses");
    assert_eq!(cut.len(), 1);
    assert_eq!(cut[0].gpu, 3);
    let states: Vec<(u32, bool)> = cut[0].links.iter().map(|l| (l.link, l.active)).collect();
    assert_eq!(
        states,
        vec![
            (0, true),
            (1, true),
            (2, true),
            (3, false),
            (4, true),
            (5, false)
        ]
    );
}
