//! /sys/class/infiniband (InfiniBand and RoCE ports) and /sys/class/net (physical NICs).

use crate::root::join;
use crate::root::RootFs;
use gpuaudit_core::facts::{FabricFacts, NetInterface, RdmaPort};
use gpuaudit_core::parse::host::fabric::{parse_port_state, parse_rate_gbps, parse_speed_mbps};
use gpuaudit_core::reading::Reading;

pub const IB: &str = "sys/class/infiniband";
pub const NET: &str = "sys/class/net";

fn text(root: &RootFs, rel: &str) -> Option<String> {
    root.read_text(rel)
        .ok()
        .flatten()
        .map(|t| t.trim().to_string())
}

pub fn read_rdma(root: &RootFs) -> Reading<Vec<RdmaPort>> {
    if !root.exists(IB) {
        // No RDMA driver registered a device (the class directory appears with the first one).
        return Reading::Value(Vec::new());
    }
    let devices = match root.list(IB) {
        Ok(d) => d,
        Err(_) => return Reading::unavailable("/sys/class/infiniband: cannot be listed"),
    };
    let mut ports = Vec::new();
    for dev in devices {
        let hca_type = text(root, &join(&join(IB, &dev), "hca_type")).filter(|t| !t.is_empty());
        let pdir = join(&join(IB, &dev), "ports");
        for p in root.children(&pdir) {
            let Ok(port) = p.parse::<u32>() else { continue };
            let base = join(&pdir, &p);
            let rate_text = text(root, &join(&base, "rate"));
            ports.push(RdmaPort {
                device: dev.clone(),
                port,
                state: text(root, &join(&base, "state")).and_then(|s| parse_port_state(&s)),
                phys_state: text(root, &join(&base, "phys_state"))
                    .and_then(|s| parse_port_state(&s)),
                rate_gbps: rate_text.as_deref().and_then(parse_rate_gbps),
                rate_text,
                link_layer: text(root, &join(&base, "link_layer")),
                hca_type: hca_type.clone(),
            });
        }
    }
    Reading::Value(ports)
}

/// Physical interfaces: those with a `device` (virtual ones, bridges and veths have none).
pub fn physical_nics(root: &RootFs) -> Vec<String> {
    root.children(NET)
        .into_iter()
        .filter(|n| n != "lo" && root.exists(&join(&join(NET, n), "device")))
        .collect()
}

pub fn read_nics(root: &RootFs) -> Reading<Vec<NetInterface>> {
    if !root.exists(NET) {
        return Reading::unavailable("no /sys/class/net");
    }
    Reading::Value(
        physical_nics(root)
            .into_iter()
            .map(|n| {
                let base = join(NET, &n);
                NetInterface {
                    speed_mbps: text(root, &join(&base, "speed"))
                        .and_then(|s| parse_speed_mbps(&s)),
                    operstate: text(root, &join(&base, "operstate")),
                    driver: driver(root, &base),
                    name: n,
                }
            })
            .collect(),
    )
}

/// The NIC's driver: the name of its `device/driver` link. A snapshot keeps it as a plain
/// file holding the name, empty where it is not known: its directory marks the interface as
/// physical.
fn driver(root: &RootFs, base: &str) -> Option<String> {
    let rel = join(base, "device/driver");
    let name = root.unrecorded().link_name(&rel).ok().flatten();
    root.record(&rel, name.clone().unwrap_or_default());
    name
}

pub fn read(root: &RootFs) -> FabricFacts {
    FabricFacts {
        rdma: read_rdma(root),
        nics: read_nics(root),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn reads_ports_and_nics() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sys/class/infiniband/mlx5_0/ports/1");
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("state"), "4: ACTIVE\n").unwrap();
        fs::write(p.join("phys_state"), "5: LinkUp\n").unwrap();
        fs::write(p.join("rate"), "400 Gb/sec (4X NDR)\n").unwrap();
        fs::write(p.join("link_layer"), "InfiniBand\n").unwrap();
        fs::write(
            d.path().join("sys/class/infiniband/mlx5_0/hca_type"),
            "MT4129\n",
        )
        .unwrap();
        let n = d.path().join("sys/class/net/eth0/device");
        fs::create_dir_all(&n).unwrap();
        fs::write(n.join("driver"), "mlx5_core\n").unwrap();
        fs::write(d.path().join("sys/class/net/eth0/speed"), "-1\n").unwrap();
        fs::create_dir_all(d.path().join("sys/class/net/docker0")).unwrap();
        let root = RootFs::new(d.path());
        let f = read(&root);
        let ports = f.rdma.into_value().unwrap();
        assert_eq!(ports[0].rate_gbps, Some(400.0));
        assert_eq!(ports[0].state.as_deref(), Some("ACTIVE"));
        assert_eq!(ports[0].hca_type.as_deref(), Some("MT4129"));
        let nics = f.nics.into_value().unwrap();
        assert_eq!(nics.len(), 1);
        assert_eq!(nics[0].driver.as_deref(), Some("mlx5_core"));
        assert_eq!(nics[0].speed_mbps, None);
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(
            read_rdma(&RootFs::new(empty.path())),
            Reading::Value(vec![])
        );
    }
}
