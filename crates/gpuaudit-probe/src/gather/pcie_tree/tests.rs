use super::*;
use crate::pcipath::is_function;
use gpuaudit_core::parse::pci_config::synthetic;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

const RP: &str = "sys/devices/pci0000:00/0000:00:01.0";

fn write(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
}

/// A machine as sysfs shows one: a root port, a switch (upstream port 01:00.0, downstream
/// ports 02:00.0 and 02:01.0), a GPU under one and a ConnectX under the other; ACS as Linux
/// enables it on the downstream ports. `config_bytes` cuts the bridges' config files (64: as a
/// reader without root gets them).
fn machine(config_bytes: usize) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let usp = format!("{RP}/0000:01:00.0");
    let dsp0 = format!("{usp}/0000:02:00.0");
    let dsp1 = format!("{usp}/0000:02:01.0");
    let gpu = format!("{dsp0}/0000:03:00.0");
    let nic = format!("{dsp1}/0000:04:00.0");
    let cut = |b: Vec<u8>| b[..config_bytes.min(b.len())].to_vec();
    write(
        r,
        &format!("{RP}/config"),
        cut(synthetic(0x8086, 0x352a, Some(4), Some((0x5f, 0x1d)))),
    );
    write(
        r,
        &format!("{usp}/config"),
        cut(synthetic(0x1000, 0xc010, Some(5), None)),
    );
    write(
        r,
        &format!("{dsp0}/config"),
        cut(synthetic(0x1000, 0xc010, Some(6), Some((0x5f, 0x1d)))),
    );
    write(
        r,
        &format!("{dsp1}/config"),
        cut(synthetic(0x1000, 0xc010, Some(6), Some((0x5f, 0x00)))),
    );
    for (f, v) in [
        ("vendor", "0x10de\n"),
        ("device", "0x2335\n"),
        ("class", "0x030200\n"),
        ("numa_node", "0\n"),
    ] {
        write(r, &format!("{gpu}/{f}"), v);
    }
    write(r, &format!("{nic}/vendor"), "0x15b3\n");
    for (dev, v) in [
        (RP, "0x8086\n"),
        (&usp, "0x1000\n"),
        (&dsp0, "0x1000\n"),
        (&dsp1, "0x1000\n"),
    ] {
        write(r, &format!("{dev}/vendor"), v);
    }
    write(r, &format!("{nic}/numa_node"), "-1\n");
    fs::create_dir_all(r.join(format!("{nic}/infiniband/mlx5_0"))).unwrap();
    symlink(
        "../../../0000:04:00.0",
        r.join(format!("{nic}/infiniband/mlx5_0/device")),
    )
    .unwrap();
    fs::create_dir_all(r.join("sys/bus/pci/devices")).unwrap();
    for dev in [RP, &usp, &dsp0, &dsp1, &gpu, &nic] {
        let name = dev.rsplit('/').next().unwrap();
        symlink(
            format!("../../../{}", dev.trim_start_matches("sys/")),
            r.join(format!("sys/bus/pci/devices/{name}")),
        )
        .unwrap();
    }
    fs::create_dir_all(r.join("sys/class/infiniband")).unwrap();
    symlink(
        format!("../../{}/infiniband/mlx5_0", nic.trim_start_matches("sys/")),
        r.join("sys/class/infiniband/mlx5_0"),
    )
    .unwrap();
    fs::create_dir_all(r.join("sys/class/iommu/dmar0")).unwrap();
    write(
        r,
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz-6.8 root=UUID=abc ro intel_iommu=on iommu=pt quiet secret=x\n",
    );
    d
}

fn gpus(root: &RootFs) -> Reading<Vec<String>> {
    crate::gather::files::pci_gpus(root).map(|p| p.into_iter().map(|f| f.bus_id).collect())
}

#[test]
fn the_path_walk_names_each_function_above_the_device() {
    let m = machine(4096);
    let root = RootFs::new(m.path());
    let p = upstream(&root, "sys/bus/pci/devices/0000:03:00.0").unwrap();
    assert_eq!(
        p.functions,
        [
            "0000:00:01.0",
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0"
        ]
    );
    assert_eq!(
        p.sysfs,
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0"
    );
    assert_eq!(
        p.dir_of(1).as_deref(),
        Some("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0")
    );
    assert_eq!(p.dir_of(9), None);
    let n = upstream(&root, "sys/class/infiniband/mlx5_0/device").unwrap();
    assert_eq!(n.functions.last().map(String::as_str), Some("0000:04:00.0"));
    // Not a PCI device path.
    fs::create_dir_all(m.path().join("sys/bus/pci/devices/0000:09:00.0")).unwrap();
    let e = upstream(&root, "sys/bus/pci/devices/0000:09:00.0").unwrap_err();
    assert!(e.contains("not to a device under a PCI host bridge"), "{e}");
    assert!(e.contains("a snapshot collected before"), "{e}");
    let e = upstream(&root, "sys/bus/pci/devices/0000:0a:00.0").unwrap_err();
    assert!(e.ends_with("does not resolve"), "{e}");
    assert!(is_function("0000:1b:00.0"));
    assert!(!is_function("pci0000:00"));
    assert!(!is_function("0000:1b:00.0x"));
    assert!(!is_function("0000:1b:0g.0"));
    assert!(!is_function("0000-1b:00.0"));
}

#[test]
fn reads_endpoints_ports_acs_and_the_iommu() {
    let m = machine(4096);
    let root = RootFs::new(m.path());
    let t = read(&root, &gpus(&root)).into_value().unwrap();
    assert_eq!(t.endpoints.len(), 2);
    let g = &t.endpoints[0];
    assert_eq!(g.role, EndpointRole::Gpu);
    assert_eq!(g.bus_id, "0000:03:00.0");
    assert_eq!(
        g.upstream.value().unwrap(),
        &["0000:00:01.0", "0000:01:00.0", "0000:02:00.0"]
    );
    assert_eq!(g.numa_node, Reading::Value(0));
    let n = &t.endpoints[1];
    assert_eq!(
        n.role,
        EndpointRole::Nic {
            device: "mlx5_0".into()
        }
    );
    assert_eq!(n.bus_id, "0000:04:00.0");
    assert_eq!(n.numa_node, Reading::Value(-1));
    assert_eq!(t.ports.len(), 4);
    let dsp = t.port("0000:02:00.0").unwrap();
    assert_eq!(dsp.port_type, Reading::Value(6));
    assert_eq!(
        dsp.acs,
        Reading::Value(Some(Acs {
            capability: 0x5f,
            control: 0x1d
        }))
    );
    assert_eq!(
        dsp.config_path,
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/config"
    );
    assert_eq!(t.port("0000:01:00.0").unwrap().acs, Reading::Value(None));
    let io = t.iommu.value().unwrap();
    assert_eq!(io.units, ["dmar0"]);
    assert_eq!(
        io.cmdline,
        Reading::Value(vec!["intel_iommu=on".into(), "iommu=pt".into()])
    );
    // The GPUs not known: the tree is not either.
    assert_eq!(
        read(&root, &Reading::unavailable("why")).reason(),
        Some("why")
    );
}

#[test]
fn without_root_the_extended_space_is_permission_denied() {
    let m = machine(64);
    let root = RootFs::new(m.path());
    let t = read(&root, &gpus(&root)).into_value().unwrap();
    let dsp = t.port("0000:02:00.0").unwrap();
    let why = dsp.acs.reason().unwrap();
    assert!(
        why.contains("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/config"),
        "{why}"
    );
    assert!(
        why.contains("extended config space needs root (permission denied)"),
        "{why}"
    );
    assert!(dsp
        .port_type
        .reason()
        .unwrap()
        .contains("permission denied"));
    // 256 bytes: the PCIe capability, no extended space.
    let m = machine(256);
    let root = RootFs::new(m.path());
    let t = read(&root, &gpus(&root)).into_value().unwrap();
    let dsp = t.port("0000:02:00.0").unwrap();
    assert_eq!(dsp.port_type, Reading::Value(6));
    assert!(dsp
        .acs
        .reason()
        .unwrap()
        .contains("256 bytes, no extended config space"));
}

/// A recording reader keeps the links and files the walk reads: the snapshot gives the same
/// tree, and the GPU's own files (read, and written, before its path) land in its linked
/// directory.
#[test]
fn a_snapshot_gives_the_same_tree() {
    for bytes in [4096, 64] {
        let m = machine(bytes);
        let src = RootFs::new(m.path());
        let d = tempfile::tempdir().unwrap();
        let rec =
            std::sync::Arc::new(crate::root::Recorder::create(&d.path().join("snap")).unwrap());
        let recording = src.recording(rec.clone());
        // The GPUs' own files are read (and written) before their paths are known: the link
        // that comes later takes them into the linked directory.
        let tree = read(&recording, &gpus(&recording));
        assert!(
            rec.summary().failed.is_empty(),
            "{:?}",
            rec.summary().failed
        );
        let out = rec.out().to_path_buf();
        let snap = RootFs::new(&out);
        assert_eq!(read(&snap, &gpus(&snap)), tree, "{bytes}");
        assert_eq!(tree, read(&src, &gpus(&src)), "{bytes}");
        assert_eq!(
            fs::read_to_string(out.join("proc/cmdline")).unwrap(),
            "intel_iommu=on iommu=pt\n"
        );
        assert!(out
            .join(
                "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0/vendor"
            )
            .is_file());
        assert_eq!(
            fs::read(out.join(format!("{RP}/config"))).unwrap().len(),
            bytes
        );
    }
}

#[test]
fn a_snapshot_without_the_tree_says_so() {
    let d = tempfile::tempdir().unwrap();
    write(
        d.path(),
        "sys/bus/pci/devices/0000:00:06.0/vendor",
        "0x10de\n",
    );
    write(
        d.path(),
        "sys/bus/pci/devices/0000:00:06.0/class",
        "0x030200\n",
    );
    write(
        d.path(),
        "sys/bus/pci/devices/0000:00:06.0/device",
        "0x2335\n",
    );
    let root = RootFs::new(d.path());
    let t = read(&root, &gpus(&root)).into_value().unwrap();
    assert_eq!(t.endpoints[0].bus_id, "0000:00:06.0");
    assert!(t.endpoints[0]
        .upstream
        .reason()
        .unwrap()
        .contains("a snapshot collected before the PCIe paths were kept"));
    assert!(t.ports.is_empty());
    assert_eq!(t.iommu.reason(), Some("snapshot has no sys/class/iommu"));
    assert_eq!(
        cmdline_params(
            "ro quiet iommu=pt amd_iommu=on pcie_acs_override=downstream pci=noats iommufoo=1"
        ),
        [
            "iommu=pt",
            "amd_iommu=on",
            "pcie_acs_override=downstream",
            "pci=noats"
        ]
    );
}
