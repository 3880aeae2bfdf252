use super::*;
use TopoLink::*;

const H200: &str =
    include_str!("../../../../../fixtures/snapshots/h200-x2-vm/cmd/nvidia-smi-topo-m.txt");
const H100X8: &str = include_str!("../testdata/topo-h100x8-nvswitch-nics.txt");
const A100X4_ANSI: &str = include_str!("../testdata/topo-a100x4-ansi-tabs.txt");
const OLD_MLX4: &str = include_str!("../testdata/topo-old-mlx4-header.txt");

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

#[test]
fn h200_fixture() {
    let t = parse(H200).unwrap();
    assert_eq!(t.gpus, vec!["GPU0", "GPU1"]);
    assert_eq!(
        t.links,
        vec![vec![Itself, NvLink(18)], vec![NvLink(18), Itself]]
    );
    assert!(t.nics.is_empty());
    assert_eq!(t.gpu_nic, vec![Vec::<TopoLink>::new(), vec![]]);
    assert!(t.nic_names.is_empty());
    // The empty tab cell between "NUMA Affinity" and "GPU NUMA ID" does not shift the columns.
    assert_eq!(t.cpu_affinity, vec![s("0-31"), s("0-31")]);
    assert_eq!(t.numa_affinity, vec![s("0"), s("0")]);
}

#[test]
fn eight_gpus_on_nvswitch_with_nics_and_legend() {
    let t = parse(H100X8).unwrap();
    assert_eq!(t.gpus.len(), 8);
    for (i, row) in t.links.iter().enumerate() {
        for (j, l) in row.iter().enumerate() {
            assert_eq!(
                *l,
                if i == j { Itself } else { NvLink(18) },
                "GPU{i}-GPU{j}"
            );
        }
    }
    assert_eq!(
        t.nics,
        (0..10).map(|i| format!("NIC{i}")).collect::<Vec<_>>()
    );
    assert_eq!(t.gpu_nic.len(), 8);
    assert_eq!(t.gpu_nic[0][0], Pix);
    assert_eq!(t.gpu_nic[0][1], Node);
    assert_eq!(t.gpu_nic[0][4], Sys);
    assert_eq!(t.gpu_nic[5][5], Pix);
    assert_eq!(t.gpu_nic[5][9], Node);
    assert_eq!(t.nic_names.len(), 10);
    assert_eq!(t.nic_names[0], ("NIC0".to_string(), "mlx5_0".to_string()));
    assert_eq!(
        t.nic_names[9],
        ("NIC9".to_string(), "mlx5_bond_1".to_string())
    );
    assert_eq!(t.cpu_affinity[0], s("0-55,112-167"));
    assert_eq!(t.cpu_affinity[7], s("56-111,168-223"));
    assert_eq!(t.numa_affinity[3], s("0"));
    assert_eq!(t.numa_affinity[4], s("1"));
}

#[test]
fn ansi_colours_tabs_and_crlf() {
    let crlf = A100X4_ANSI.replace('\n', "\r\n");
    for text in [A100X4_ANSI, crlf.as_str()] {
        let t = parse(text).unwrap();
        assert_eq!(t.gpus, vec!["GPU0", "GPU1", "GPU2", "GPU3"]);
        assert_eq!(t.links[0], vec![Itself, NvLink(12), NvLink(12), NvLink(12)]);
        assert_eq!(t.links[3][3], Itself);
        assert_eq!(t.nics, vec!["NIC0", "NIC1"]);
        assert_eq!(t.gpu_nic[0], vec![Pxb, Sys]);
        assert_eq!(t.gpu_nic[2], vec![Sys, Pxb]);
        assert_eq!(
            t.nic_names,
            vec![
                ("NIC0".to_string(), "mlx5_0".to_string()),
                ("NIC1".to_string(), "mlx5_1".to_string())
            ]
        );
        assert_eq!(t.cpu_affinity[2], s("32-63,96-127"));
        assert_eq!(t.numa_affinity[2], s("1"));
    }
}

#[test]
fn old_driver_names_the_nic_in_the_header() {
    let t = parse(OLD_MLX4).unwrap();
    assert_eq!(t.gpus.len(), 4);
    assert_eq!(t.links[0], vec![Itself, Pix, Phb, Sys]);
    assert_eq!(t.nics, vec!["mlx4_0"]);
    assert_eq!(t.gpu_nic[3], vec![Sys]);
    assert!(t.nic_names.is_empty());
    assert_eq!(t.cpu_affinity[3], s("10-19,30-39"));
    // No "NUMA Affinity" column in this driver's output.
    assert_eq!(t.numa_affinity, vec![None; 4]);
}

#[test]
fn single_gpu_and_unknown_cells() {
    let t = parse("\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tN/A\tN/A\n").unwrap();
    assert_eq!(t.links, vec![vec![Itself]]);
    assert_eq!(t.cpu_affinity, vec![None]);
    assert_eq!(t.numa_affinity, vec![None]);

    let t = parse("  GPU0 GPU1\nGPU0 X SOC\nGPU1 SOC X\n").unwrap();
    assert_eq!(t.links[0][1], Other("SOC".into()));
    assert_eq!(t.cpu_affinity, vec![None, None]);
}

#[test]
fn cells() {
    assert_eq!(link("NV1"), NvLink(1));
    assert_eq!(link("NV18"), NvLink(18));
    assert_eq!(link("NV"), Other("NV".into()));
    assert_eq!(link("NV99999999999"), Other("NV99999999999".into()));
    assert_eq!(link("NV+1"), Other("NV+1".into()));
    assert_eq!(link("PIX"), Pix);
    assert_eq!(link("PXB"), Pxb);
    assert_eq!(link("PHB"), Phb);
    assert_eq!(link("NODE"), Node);
    assert_eq!(link("SYS"), Sys);
    assert_eq!(link("X"), Itself);
    assert_eq!(link("C2C"), Other("C2C".into()));
}

#[test]
fn errors() {
    assert_eq!(parse("").unwrap_err(), ParseError::Empty);
    assert_eq!(parse("\n \r\n").unwrap_err(), ParseError::Empty);
    let e =
        parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
            .unwrap_err();
    assert!(
        matches!(&e, ParseError::Malformed(m) if m.contains("couldn't communicate")),
        "{e:?}"
    );
    // Truncated after the header.
    let cut: String = H200.lines().take(2).collect::<Vec<_>>().join("\n");
    assert!(matches!(parse(&cut), Err(ParseError::Malformed(m)) if m.contains("no row for it")));
    // Truncated inside a row.
    let cut = &H200[..H200.find("NV18").unwrap()];
    assert!(matches!(parse(cut), Err(ParseError::Malformed(m)) if m.contains("cells")));
    assert!(matches!(
        parse("GPU0 GPU0\nGPU0 X X\n"),
        Err(ParseError::Malformed(m)) if m.contains("twice")
    ));
}
