//! os.numa: each GPU's NUMA node and local CPUs against the sockets of the machine.

use crate::checks::common::per_gpu;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::Facts;
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;

const ID: &str = "os.numa";

pub const CHECK: Check = Check {
    id: ID,
    title: "GPU NUMA node and local CPUs",
    looks_at: "GPU NUMA node and local CPUs; unknown affinity on a multi-socket host",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Each GPU's NUMA node and local CPU list (sysfs), the sockets of the machine, and \
               the CPU affinity of `nvidia-smi topo -m`.",
        why: "On a multi-socket host, data loader threads and pinned buffers on the wrong \
              socket cross the inter-socket link for every host-device copy. When the NUMA \
              node is unknown (-1) nothing can place them right.",
        verify: "# BUS_ID: the GPU's address as `lspci -D -d 10de:` lists it, e.g. 0000:18:00.0\n\
                 cat /sys/bus/pci/devices/BUS_ID/numa_node /sys/bus/pci/devices/BUS_ID/local_cpulist\n\
                 nvidia-smi topo -m\nlscpu | grep -i numa",
        fix: "Bind each GPU's workers to its local CPUs: `torchrun --numa-binding=node \
              --nproc-per-node=8 train.py` (PyTorch 2.9 or later), or each process with \
              `numactl --cpunodebind=N --membind=N python train.py`; on a VM showing -1 on a \
              multi-socket host, ask the provider to expose the NUMA topology.",
    },
    profiles: &[],
    run: numa,
};

fn numa(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let sockets = facts.machine.cpu.value().and_then(|c| c.sockets);
    per_gpu(ID, facts, policy, |g| {
        let pci = facts.pci_of(g);
        let node = pci.and_then(|p| p.numa_node.value().copied());
        let cpus = pci.and_then(|p| p.local_cpulist.value().cloned());
        let mut ev = Evidence::new();
        if let Some(n) = node {
            ev.insert("numa_node", n);
        }
        if let Some(c) = &cpus {
            ev.insert("local_cpulist", c);
        }
        if let Some(s) = sockets {
            ev.insert("sockets", s);
        }
        if let Some(t) = facts.topology.value() {
            if let Some(Some(a)) = t.cpu_affinity.get(g.index as usize) {
                ev.insert("topo_cpu_affinity", a);
            }
        }
        match (node, sockets) {
            (None, _) => Finding::skip(
                ID,
                format!(
                    "{}: NUMA node not read: {}",
                    g.label(),
                    pci.and_then(|p| p.numa_node.reason()).unwrap_or("no sysfs entry for this GPU")
                ),
            )
            .evidence(ev),
            (Some(-1), Some(s)) if s > 1 => Finding::warn(
                ID,
                format!("{}: NUMA node unknown (-1) on a {s}-socket machine: CPU threads and pinned memory may sit on the far socket", g.label()),
            )
            .evidence(ev)
            .fix("Bind each GPU's workers to the right socket by hand (numactl); on a VM, ask the provider to expose NUMA topology."),
            (Some(-1), _) => Finding::pass(
                ID,
                format!("{}: no NUMA affinity reported (-1); the machine has one socket, so there is nothing to place wrong", g.label()),
            )
            .evidence(ev),
            (Some(n), _) => Finding::pass(
                ID,
                format!(
                    "{}: NUMA node {n}{}",
                    g.label(),
                    cpus.map(|c| format!(", local CPUs {c}")).unwrap_or_default()
                ),
            )
            .evidence(ev),
        }
    })
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn sockets(f: &mut Facts, n: Option<u32>) {
        if let Reading::Value(c) = &mut f.machine.cpu {
            c.sockets = n;
        }
    }

    #[test]
    fn numa_nodes_and_sockets() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(1, |p| p.numa_node = Reading::Value(1))
            .build();
        let r = numa(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass, Status::Pass]);
        assert_eq!(
            r[1].message,
            "GPU 1 (00:07.0): NUMA node 1, local CPUs 0-31"
        );
        assert_eq!(
            r[1].evidence
                .get("topo_cpu_affinity")
                .map(|v| v.to_string()),
            Some("\"0-31\"".into())
        );
        let mut u = Machine::healthy("h200-sxm-141gb", 1)
            .pci(0, |p| p.numa_node = Reading::Value(-1))
            .build();
        // One socket: nothing to place wrong.
        let r = numa(&u, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(r[0].message.contains("one socket"));
        // Two sockets: the far socket is a risk.
        sockets(&mut u, Some(2));
        let r = numa(&u, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("2-socket"));
        // Sockets unknown: not judged a risk.
        sockets(&mut u, None);
        assert_eq!(statuses(&numa(&u, &Policy::default())), vec![Status::Pass]);
        let n = Machine::healthy("h200-sxm-141gb", 1)
            .pci(0, |p| {
                p.numa_node = Reading::unavailable("no numa_node file")
            })
            .build();
        let r = numa(&n, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        assert!(r[0].message.contains("no numa_node file"));
        let mut none = Machine::healthy("h200-sxm-141gb", 1).build();
        none.pci_gpus = Reading::Value(vec![]);
        assert!(numa(&none, &Policy::default())[0]
            .message
            .contains("no sysfs entry"));
    }
}
