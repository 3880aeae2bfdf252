//! net.fabric: InfiniBand / RoCE devices and their ports, GPUDirect RDMA, Ethernet speeds.

use crate::checks::common::gpu_count;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, NetInterface};
use crate::finding::Finding;
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "net.fabric";

pub const CHECK: Check = Check {
    id: ID,
    title: "InfiniBand / RoCE devices, port state and rate, GPUDirect RDMA; Ethernet speeds",
    looks_at: "InfiniBand / RoCE devices, port state and rate; Ethernet link speeds",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The RDMA devices of /sys/class/infiniband (InfiniBand, and RoCE on Ethernet): \
               each port's state, physical state, rate and link layer; whether the GPUDirect \
               RDMA module (nvidia_peermem, or the older nv_peer_mem) is loaded; the speed of \
               each physical network interface of /sys/class/net.",
        why: "Multi-node training exchanges gradients between nodes every step. Over \
              InfiniBand or RoCE with GPUDirect RDMA, NCCL moves them from GPU memory to the \
              NIC directly at 200-400 Gb/s per port; without RDMA it falls back to TCP \
              sockets through the CPU, often 10x slower, and the GPUs wait. A port that is \
              down or trained at a lower rate halves what the job gets without an error.",
        verify: "ibstat; ibv_devinfo | grep -E 'hca_id|state|active_width|active_speed|link_layer'\n\
                 cat /sys/class/infiniband/*/ports/*/{state,rate}\n\
                 lsmod | grep -E 'nvidia_peermem|nv_peer_mem'\n\
                 ethtool eth0 | grep Speed\n\
                 NCCL_DEBUG=INFO torchrun ... 2>&1 | grep -E 'NET/IB|NET/Socket|GDR'",
        fix: "Order instances with an RDMA fabric for multi-node training (EFA, InfiniBand or \
              RoCE), load GPUDirect RDMA (`modprobe nvidia_peermem`, or use DMA-BUF with the \
              open kernel module on kernel 5.12+), and get down ports fixed by the provider \
              (cables, switch ports, subnet manager).",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "No RDMA device on a machine of several GPUs warns instead of being info, an RDMA port that is not up fails instead of warning, and RDMA without nvidia_peermem warns instead of being info.",
        },
    ],
    run: run_fabric,
};

fn nic_summary(nics: &[NetInterface]) -> Vec<String> {
    nics.iter()
        .map(|n| {
            format!(
                "{} {}{}",
                n.name,
                n.speed_mbps
                    .map(|s| format!("{} Gb/s", s as f64 / 1000.0))
                    .unwrap_or_else(|| "speed unknown".into()),
                n.driver
                    .as_deref()
                    .map(|d| format!(" ({d})"))
                    .unwrap_or_default()
            )
        })
        .collect()
}

fn run_fabric(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let train = policy.profile == Profile::Train;
    let gpus = gpu_count(facts).unwrap_or(0);
    let nics = facts.host.fabric.nics.value().cloned().unwrap_or_default();
    let nic_ev = nic_summary(&nics);
    let fastest = nics.iter().filter_map(|n| n.speed_mbps).max();
    let ports = match &facts.host.fabric.rdma {
        Reading::Value(p) => p,
        Reading::Unavailable(r) => {
            return vec![
                Finding::skip(ID, format!("could not read the RDMA devices: {r}"))
                    .with("nics", &nic_ev),
            ];
        }
    };
    let mut out = Vec::new();
    if ports.is_empty() {
        let eth = match fastest {
            Some(s) => format!(
                "the fastest Ethernet interface runs at {} Gb/s",
                s as f64 / 1000.0
            ),
            None if nics.is_empty() => "no physical network interface was listed".to_string(),
            None => "the Ethernet speed is not reported (usual for virtual NICs)".into(),
        };
        let msg = format!(
            "no InfiniBand or RoCE device; {eth}: multi-node training would run NCCL over TCP sockets through the CPU, typically 10x below an RDMA fabric");
        let f = if train && gpus > 1 {
            Finding::warn(ID, msg).fix("for multi-node training, use instances with an RDMA fabric (InfiniBand, RoCE, EFA); a single-node job is not affected")
        } else {
            Finding::info(
                ID,
                "no InfiniBand or RoCE device; fine for single-node work".to_string(),
            )
        };
        out.push(f.with("nics", &nic_ev));
        return out;
    }
    let mut good = Vec::new();
    for p in ports {
        let name = format!("{} port {}", p.device, p.port);
        let active = p.state.as_deref() == Some("ACTIVE");
        let up = p.phys_state.as_deref().is_none_or(|s| s == "LinkUp");
        let ev = |f: Finding| {
            f.with("device", &p.device)
                .with("port", p.port)
                .with("state", &p.state)
                .with("phys_state", &p.phys_state)
                .with("rate", &p.rate_text)
                .with("link_layer", &p.link_layer)
        };
        if p.state.is_none() {
            out.push(ev(Finding::skip(
                ID,
                format!("cannot tell the state of {name}: its state file is missing or unreadable"),
            )));
            continue;
        }
        if active && up {
            good.push(format!(
                "{name} {} {}",
                p.link_layer.as_deref().unwrap_or("?"),
                p.rate_text.as_deref().unwrap_or("rate unknown")
            ));
        } else {
            let msg = format!(
                "{name} is {} ({}): NCCL cannot use it",
                p.state.as_deref().unwrap_or("in an unknown state"),
                p.phys_state.as_deref().unwrap_or("physical state unknown")
            );
            let f = if train {
                Finding::fail(ID, msg)
            } else {
                Finding::warn(ID, msg)
            };
            out.push(ev(f).fix("check the cable and switch port (ibstat, ibv_devinfo); on InfiniBand, a subnet manager must run (opensm or the switch's); on a cloud instance, report it to the provider"));
        }
    }
    // GPUDirect RDMA.
    if gpus > 0 {
        if let Some(mods) = facts.modules.value() {
            let peermem = mods
                .iter()
                .any(|m| m.name == "nvidia_peermem" || m.name == "nv_peer_mem");
            if !peermem {
                let msg = "RDMA devices are present but nvidia_peermem is not loaded: unless NCCL can use DMA-BUF (open kernel module, kernel 5.12 or newer), GPU data crosses host memory on its way to the NIC (lower bandwidth, more CPU)";
                let f = if train {
                    Finding::warn(ID, msg)
                } else {
                    Finding::info(ID, msg)
                };
                out.push(f.fix("modprobe nvidia_peermem (and add it to /etc/modules-load.d); check with NCCL_DEBUG=INFO that 'GDRDMA' appears"));
            }
        }
    }
    if !good.is_empty() {
        out.push(
            Finding::pass(ID, format!("RDMA ports up: {}", good.join("; ")))
                .with("ports", &good)
                .with("nics", &nic_ev),
        );
    }
    out
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{KernelModule, RdmaPort};
    use crate::finding::Status;
    use crate::testing::{statuses, Machine};

    #[test]
    fn fabric_none_on_train_with_several_gpus() {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        f.host.fabric.rdma = Reading::Value(vec![]);
        f.host.fabric.nics = Reading::Value(vec![NetInterface {
            name: "eth0".into(),
            speed_mbps: Some(25000),
            operstate: Some("up".into()),
            driver: Some("ena".into()),
        }]);
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_fabric(&f, &train);
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("25 Gb/s"), "{r:#?}");
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Info]
        );
    }

    #[test]
    fn fabric_ports_and_peermem() {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        let port = |dev: &str, state: &str| RdmaPort {
            device: dev.into(),
            port: 1,
            state: Some(state.into()),
            phys_state: Some(
                if state == "ACTIVE" {
                    "LinkUp"
                } else {
                    "Disabled"
                }
                .into(),
            ),
            rate_gbps: Some(400.0),
            rate_text: Some("400 Gb/sec (4X NDR)".into()),
            link_layer: Some("InfiniBand".into()),
        };
        f.host.fabric.rdma = Reading::Value(vec![port("mlx5_0", "ACTIVE"), port("mlx5_1", "DOWN")]);
        f.host.fabric.nics = Reading::Value(vec![]);
        f.modules = Reading::Value(vec![KernelModule {
            name: "nvidia".into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: "O".into(),
        }]);
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        let r = run_fabric(&f, &train);
        assert_eq!(
            statuses(&r),
            vec![Status::Fail, Status::Warn, Status::Pass],
            "{r:#?}"
        );
        assert!(r[0].message.contains("mlx5_1"));
        assert!(r[1].message.contains("nvidia_peermem"));
        f.host.fabric.rdma = Reading::unavailable("permission denied");
        assert_eq!(statuses(&run_fabric(&f, &train)), vec![Status::Skip]);
    }
}
