//! net.fabric: InfiniBand / RoCE devices and their ports, GPUDirect RDMA, Ethernet speeds.

use crate::checks::common::gpu_count;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, NetInterface, RdmaPort};
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
               each physical network interface of /sys/class/net. Each active port's rate is \
               held against its siblings (ports of the same HCA model, hca_type, and link \
               layer): one below the rate most of them run at trained with lanes down or at a \
               lower speed.",
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
              RoCE), load GPUDirect RDMA (`sudo modprobe nvidia_peermem`, or use DMA-BUF with the \
              open kernel module on kernel 5.12+), and get down ports fixed by the provider \
              (cables, switch ports, subnet manager).",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "No RDMA device on a machine of several GPUs warns instead of being info, an RDMA port that is not up or runs slower than its siblings fails instead of warning, and RDMA without nvidia_peermem warns instead of being info.",
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

/// A port slower than the rate most of its siblings run at.
struct SlowPort<'a> {
    port: &'a RdmaPort,
    reference_gbps: f64,
    /// The siblings' rate as the driver writes it ("400 Gb/sec (4X NDR)").
    reference_text: String,
    /// How many siblings run at the reference rate.
    siblings: usize,
    /// What the siblings share, in words ("MT4129, InfiniBand").
    group: String,
}

/// Active ports of one HCA model and link layer compared with each other: the rate most of
/// them run at (the higher one on a tie) is what the others should reach, and one below it
/// trained with fewer lanes or at a lower speed. Ports whose model or rate was not read are
/// compared by what was read.
fn slow_ports(ports: &[RdmaPort]) -> Vec<SlowPort<'_>> {
    let usable: Vec<&RdmaPort> = ports
        .iter()
        .filter(|p| p.state.as_deref() == Some("ACTIVE"))
        .filter(|p| p.phys_state.as_deref().is_none_or(|s| s == "LinkUp"))
        .filter(|p| p.rate_gbps.is_some())
        .collect();
    let mut out = Vec::new();
    let mut groups: Vec<(Option<&str>, Option<&str>)> = usable
        .iter()
        .map(|p| (p.hca_type.as_deref(), p.link_layer.as_deref()))
        .collect();
    groups.sort();
    groups.dedup();
    for key in groups {
        let members: Vec<&RdmaPort> = usable
            .iter()
            .copied()
            .filter(|p| (p.hca_type.as_deref(), p.link_layer.as_deref()) == key)
            .collect();
        if members.len() < 2 {
            continue;
        }
        let rate = |p: &RdmaPort| p.rate_gbps.unwrap_or(0.0);
        let mut rates: Vec<f64> = members.iter().map(|p| rate(p)).collect();
        rates.sort_by(|a, b| b.total_cmp(a));
        rates.dedup();
        let count = |r: f64| members.iter().filter(|p| rate(p) == r).count();
        // The first (highest) rate among those with the most ports.
        let Some(reference) =
            rates
                .iter()
                .copied()
                .reduce(|best, r| if count(r) > count(best) { r } else { best })
        else {
            continue;
        };
        let at_reference: Vec<&RdmaPort> = members
            .iter()
            .copied()
            .filter(|p| rate(p) == reference)
            .collect();
        let reference_text = at_reference
            .first()
            .and_then(|p| p.rate_text.clone())
            .unwrap_or_else(|| format!("{reference} Gb/s"));
        let group = [key.0, key.1]
            .iter()
            .flatten()
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        for p in members.iter().copied().filter(|p| rate(p) < reference) {
            out.push(SlowPort {
                port: p,
                reference_gbps: reference,
                reference_text: reference_text.clone(),
                siblings: at_reference.len(),
                group: if group.is_empty() {
                    "same link layer".into()
                } else {
                    group.clone()
                },
            });
        }
    }
    out
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
    let slow = slow_ports(ports);
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
        if let Some(s) = slow.iter().find(|s| std::ptr::eq(s.port, p)) {
            let msg = format!(
                "{name} runs at {}, below the {} of {} sibling {} ({}): lanes down or a degraded cable or transceiver; collectives run at the pace of their slowest link",
                p.rate_text.as_deref().unwrap_or("?"),
                s.reference_text,
                s.siblings,
                if s.siblings == 1 { "port" } else { "ports" },
                s.group
            );
            let f = if train {
                Finding::fail(ID, msg)
            } else {
                Finding::warn(ID, msg)
            };
            out.push(
                ev(f)
                    .with("rate_gbps", p.rate_gbps)
                    .with("sibling_rate_gbps", s.reference_gbps)
                    .with("siblings_at_that_rate", s.siblings)
                    .with("hca_type", &p.hca_type)
                    .fix(format!("check the cable, transceiver and switch port of {} (ibstat {}; mlxlink -d {} -m shows the lanes and their errors); on a cloud instance, report it to the provider", p.device, p.device, p.device)),
            );
        } else if active && up {
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
                out.push(f.fix("`sudo modprobe nvidia_peermem` (and `echo nvidia_peermem | sudo tee /etc/modules-load.d/nvidia-peermem.conf` to load it at boot); check with NCCL_DEBUG=INFO that 'GDRDMA' appears"));
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
            hca_type: Some("MT4129".into()),
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

    fn ib(dev: &str, rate: f64, text: &str, hca: Option<&str>, layer: &str) -> RdmaPort {
        RdmaPort {
            device: dev.into(),
            port: 1,
            state: Some("ACTIVE".into()),
            phys_state: Some("LinkUp".into()),
            rate_gbps: Some(rate),
            rate_text: Some(text.into()),
            link_layer: Some(layer.into()),
            hca_type: hca.map(str::to_string),
        }
    }

    fn eight_with(slow: f64, text: &str) -> Facts {
        let mut ports: Vec<RdmaPort> = (0..8)
            .map(|i| {
                ib(
                    &format!("mlx5_{i}"),
                    400.0,
                    "400 Gb/sec (4X NDR)",
                    Some("MT4129"),
                    "InfiniBand",
                )
            })
            .collect();
        ports[3].rate_gbps = Some(slow);
        ports[3].rate_text = Some(text.into());
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        f.host.fabric.rdma = Reading::Value(ports);
        f.host.fabric.nics = Reading::Value(vec![]);
        f.modules = Reading::Value(vec![KernelModule {
            name: "nvidia_peermem".into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: "O".into(),
        }]);
        f
    }

    #[test]
    fn a_port_slower_than_its_siblings() {
        // Seen: one port at 200 Gb/s (2X) among seven at 400: "RDMA ports up".
        let f = eight_with(200.0, "200 Gb/sec (2X NDR)");
        let r = run_fabric(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("mlx5_3 port 1 runs at 200 Gb/sec (2X NDR), below the 400 Gb/sec (4X NDR) of 7 sibling ports (MT4129, InfiniBand)"), "{}", r[0].message);
        assert!(!r[1].message.contains("mlx5_3"));
        let train = Policy {
            profile: Profile::Train,
            ..Policy::default()
        };
        assert_eq!(
            statuses(&run_fabric(&f, &train)),
            vec![Status::Fail, Status::Pass]
        );
        // Just below the siblings' rate is slower; at it, not.
        let f = eight_with(399.9, "399.9 Gb/sec");
        assert_eq!(run_fabric(&f, &Policy::default())[0].status, Status::Warn);
        let f = eight_with(400.0, "400 Gb/sec (4X NDR)");
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // A faster one is not a fault of the others: the rate most ports run at is the bar.
        let f = eight_with(800.0, "800 Gb/sec (4X XDR)");
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Pass]
        );
    }

    #[test]
    fn siblings_are_ports_of_one_model_and_link_layer() {
        let mut f = eight_with(400.0, "400 Gb/sec (4X NDR)");
        // A storage NIC of another model, and a RoCE port: not compared with the others.
        if let Reading::Value(p) = &mut f.host.fabric.rdma {
            p.push(ib(
                "mlx5_8",
                100.0,
                "100 Gb/sec (4X EDR)",
                Some("MT4123"),
                "InfiniBand",
            ));
            p.push(ib(
                "mlx5_9",
                200.0,
                "200 Gb/sec (4X HDR)",
                Some("MT4129"),
                "Ethernet",
            ));
        }
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // Two ports of one model at different rates: the higher is the bar on a tie.
        f.host.fabric.rdma = Reading::Value(vec![
            ib("mlx5_0", 200.0, "200 Gb/sec (4X HDR)", None, "InfiniBand"),
            ib("mlx5_1", 100.0, "100 Gb/sec (2X HDR)", None, "InfiniBand"),
        ]);
        let r = run_fabric(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn, Status::Pass], "{r:#?}");
        assert!(
            r[0].message.contains("mlx5_1")
                && r[0].message.contains("of 1 sibling port (InfiniBand)")
        );
        // Three at 100, one at 200: the majority is the bar, the odd one is not slower.
        f.host.fabric.rdma = Reading::Value(vec![
            ib("mlx5_0", 100.0, "100 Gb/sec (4X EDR)", None, "InfiniBand"),
            ib("mlx5_1", 100.0, "100 Gb/sec (4X EDR)", None, "InfiniBand"),
            ib("mlx5_2", 100.0, "100 Gb/sec (4X EDR)", None, "InfiniBand"),
            ib("mlx5_3", 200.0, "200 Gb/sec (4X HDR)", None, "InfiniBand"),
        ]);
        assert_eq!(
            statuses(&run_fabric(&f, &Policy::default())),
            vec![Status::Pass]
        );
        // A port alone in its group, a port that is down, or one without a rate: no comparison.
        let mut down = ib("mlx5_1", 10.0, "10 Gb/sec (4X SDR)", None, "InfiniBand");
        down.state = Some("DOWN".into());
        let mut norate = ib("mlx5_2", 1.0, "?", None, "InfiniBand");
        norate.rate_gbps = None;
        f.host.fabric.rdma = Reading::Value(vec![
            ib("mlx5_0", 400.0, "400 Gb/sec (4X NDR)", None, "InfiniBand"),
            down,
            norate,
        ]);
        let r = run_fabric(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn, Status::Pass], "{r:#?}");
        assert!(r[0].message.contains("is DOWN"));
    }
}
