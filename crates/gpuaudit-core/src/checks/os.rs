//! kernel.modules, os.platform, os.persistence, os.numa.

use super::common::{per_gpu, spec_of};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, Libc, ModuleFlavor};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "kernel.modules",
        title: "nvidia and nvidia_uvm loaded, nouveau not, nvidia_peermem for GPUDirect RDMA, open or proprietary module",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "The kernel modules in /proc/modules: nvidia, nvidia_uvm (CUDA's unified memory, \
                   needed by every CUDA program), nouveau (must not be loaded), nvidia_peermem \
                   (GPUDirect RDMA over InfiniBand), and whether the NVIDIA module is the open or \
                   the proprietary flavour (/proc/driver/nvidia/version).",
            why: "nouveau loaded next to nvidia fights over the GPU; without nvidia_uvm CUDA fails \
                  to initialise; without nvidia_peermem multi-node NCCL copies through host memory. \
                  Blackwell GPUs work only with the open module.",
            verify: "lsmod | grep -e nvidia -e nouveau\ncat /proc/driver/nvidia/version",
            fix: "nouveau: blacklist it and rebuild the initramfs. nvidia_uvm: `sudo modprobe \
                  nvidia_uvm` (or nvidia-modprobe -u -c=0). nvidia_peermem: `sudo modprobe \
                  nvidia_peermem`. Flavour: install the driver's -open package.",
        },
        run: modules,
    },
    Check {
        id: "os.platform",
        title: "Distribution, kernel, architecture and C library",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "/etc/os-release, the kernel version, the CPU architecture and the C library.",
            why: "The NVIDIA driver and CUDA support glibc on x86_64 and aarch64 (and ppc64le for \
                  older releases); musl-based images (Alpine) cannot load the driver's libraries.",
            verify: "cat /etc/os-release; uname -rm; ldd --version",
            fix: "Use a glibc-based image (Ubuntu, Debian, RHEL family) for CUDA work.",
        },
        run: platform,
    },
    Check {
        id: "os.persistence",
        title: "Persistence mode per GPU",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Whether each GPU is in persistence mode (or kept initialised by nvidia-persistenced).",
            why: "With persistence off, the driver tears the GPU down when the last program exits, \
                  and every new process pays the initialisation again: hundreds of milliseconds \
                  to seconds per start, which hurts short jobs and serving restarts.",
            verify: "nvidia-smi --query-gpu=index,persistence_mode --format=csv",
            fix: "Run the persistence daemon: `sudo systemctl enable --now nvidia-persistenced` \
                  (or `sudo nvidia-smi -pm 1`; gpuaudit never changes it).",
        },
        run: persistence,
    },
    Check {
        id: "os.numa",
        title: "GPU NUMA node and local CPUs",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "Each GPU's NUMA node and local CPU list (sysfs), the sockets of the machine, and \
                   the CPU affinity of `nvidia-smi topo -m`.",
            why: "On a multi-socket host, data loader threads and pinned buffers on the wrong \
                  socket cross the inter-socket link for every host-device copy. When the NUMA \
                  node is unknown (-1) nothing can place them right.",
            verify: "cat /sys/bus/pci/devices/<bus-id>/numa_node /sys/bus/pci/devices/<bus-id>/local_cpulist\n\
                     nvidia-smi topo -m\nlscpu | grep -i numa",
            fix: "Bind each GPU's workers to its local CPUs (`numactl --cpunodebind=N --membind=N`, \
                  or torchrun with --local-ranks-filter/affinity); on a VM showing -1 on a \
                  multi-socket host, ask the provider to expose the NUMA topology.",
        },
        run: numa,
    },
];

fn modules(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "kernel.modules";
    let mods = match &facts.modules {
        Reading::Value(m) => m,
        Reading::Unavailable(r) => {
            return vec![Finding::skip(ID, format!("kernel modules not read: {r}"))]
        }
    };
    let has = |n: &str| mods.iter().any(|m| m.name == n);
    let names: Vec<&str> = mods
        .iter()
        .map(|m| m.name.as_str())
        .filter(|n| n.starts_with("nvidia") || *n == "nouveau")
        .collect();
    let mut ev = Evidence::new().with("gpu_modules", &names);
    if let Some(f) = facts.driver.module_flavor.value() {
        ev.insert("flavor", f);
    }
    let mut out = Vec::new();
    if has("nouveau") {
        out.push(
            Finding::fail(ID, "nouveau (the open-source driver) is loaded: it cannot run CUDA and conflicts with nvidia")
                .evidence(ev.clone())
                .fix("echo -e 'blacklist nouveau\\noptions nouveau modeset=0' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf; sudo update-initramfs -u; reboot"),
        );
    }
    if !has("nvidia") {
        out.push(
            Finding::fail(ID, "The nvidia kernel module is not loaded: no CUDA program can run")
                .evidence(ev.clone())
                .fix("sudo modprobe nvidia; if it fails, the driver is not built for this kernel: reinstall it (DKMS) for `uname -r`."),
        );
        return out;
    }
    if !has("nvidia_uvm") {
        out.push(
            Finding::warn(ID, "nvidia_uvm is not loaded: CUDA loads it on first use through nvidia-modprobe; where that is not possible (containers, no setuid helper) CUDA fails to initialise")
                .evidence(ev.clone())
                .fix("sudo modprobe nvidia_uvm"),
        );
    }
    let has_ib = facts.host_ib_devices().is_some_and(|n| n > 0);
    if !has("nvidia_peermem") && has_ib {
        let st = if policy.profile == Profile::Train {
            Status::Warn
        } else {
            Status::Info
        };
        out.push(
            Finding::new(ID, st, "InfiniBand/RoCE devices are present but nvidia_peermem is not loaded: multi-node NCCL cannot use GPUDirect RDMA and copies through host memory")
                .evidence(ev.clone())
                .fix("sudo modprobe nvidia_peermem"),
        );
    }
    let blackwell = facts
        .gpu_list()
        .iter()
        .filter_map(spec_of)
        .any(|s| s.architecture.eq_ignore_ascii_case("blackwell"));
    if blackwell && facts.driver.module_flavor.value() == Some(&ModuleFlavor::Proprietary) {
        out.push(
            Finding::fail(ID, "Blackwell GPUs need the open NVIDIA kernel module, and the proprietary one is loaded")
                .evidence(ev.clone())
                .fix("Install the driver's open flavour (e.g. `nvidia-driver-<ver>-open`, or the .run installer with `-m=kernel-open`)."),
        );
    }
    if out.is_empty() {
        let flavor = match facts.driver.module_flavor.value() {
            Some(ModuleFlavor::Open) => " (open kernel module)",
            Some(ModuleFlavor::Proprietary) => " (proprietary kernel module)",
            None => "",
        };
        out.push(
            Finding::pass(
                ID,
                format!("nvidia and nvidia_uvm are loaded, nouveau is not{flavor}"),
            )
            .evidence(ev),
        );
    }
    out
}

fn platform(facts: &Facts, _: &Policy) -> Vec<Finding> {
    const ID: &str = "os.platform";
    let m = &facts.machine;
    let mut ev = Evidence::new();
    let os = m.os.value().map(|o| o.pretty_name.clone());
    if let Some(o) = &os {
        ev.insert("os", o);
    }
    if let Some(k) = m.kernel.value() {
        ev.insert("kernel", k);
    }
    if let Some(a) = m.arch.value() {
        ev.insert("arch", a);
    }
    if let Some(l) = m.libc.value() {
        ev.insert("libc", l);
    }
    if let Some(Libc::Musl { .. }) = m.libc.value() {
        return vec![Finding::fail(
            ID,
            "The C library is musl: the NVIDIA driver's user-space libraries need glibc",
        )
        .evidence(ev)
        .fix("Use a glibc-based image (Ubuntu, Debian, RHEL family).")];
    }
    if let Some(a) = m.arch.value() {
        if !matches!(a.as_str(), "x86_64" | "aarch64" | "ppc64le") {
            return vec![Finding::fail(
                ID,
                format!("Architecture {a} is not supported by the NVIDIA driver"),
            )
            .evidence(ev)];
        }
    }
    if os.is_none() && m.kernel.value().is_none() {
        return vec![Finding::skip(
            ID,
            format!(
                "platform not read: {}",
                m.os.reason().or(m.kernel.reason()).unwrap_or("?")
            ),
        )];
    }
    let kernel_short = m
        .kernel
        .value()
        .and_then(|k| k.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_else(|| "?".into());
    vec![Finding::pass(
        ID,
        format!(
            "{}, kernel {kernel_short}, {}{}",
            os.unwrap_or_else(|| "unknown distribution".into()),
            m.arch
                .value()
                .cloned()
                .unwrap_or_else(|| "unknown architecture".into()),
            match m.libc.value() {
                Some(Libc::Glibc { version: Some(v) }) => format!(", glibc {v}"),
                Some(Libc::Glibc { version: None }) => ", glibc".into(),
                _ => String::new(),
            }
        ),
    )
    .evidence(ev)]
}

fn persistence(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    per_gpu("os.persistence", facts, policy, |g| {
        persistence_one(g, policy)
    })
}

fn persistence_one(g: &GpuFacts, policy: &Policy) -> Finding {
    const ID: &str = "os.persistence";
    match g.persistence_mode {
        Reading::Value(true) => Finding::pass(ID, format!("{}: persistence mode on", g.label()))
            .with("persistence_mode", true),
        Reading::Value(false) => {
            let st = if policy.profile == Profile::Render {
                Status::Info
            } else {
                Status::Warn
            };
            Finding::new(
                ID,
                st,
                format!("{}: persistence mode off: every new CUDA process pays the driver's initialisation", g.label()),
            )
            .with("persistence_mode", false)
            .fix("sudo systemctl enable --now nvidia-persistenced (or `sudo nvidia-smi -pm 1`; gpuaudit never changes it)")
        }
        Reading::Unavailable(ref r) => {
            Finding::skip(ID, format!("{}: persistence mode not read: {r}", g.label()))
        }
    }
}

fn numa(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    const ID: &str = "os.numa";
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
