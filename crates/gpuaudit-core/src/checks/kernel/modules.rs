//! kernel.modules: the NVIDIA kernel modules loaded (and nouveau not), their flavour.

use crate::checks::common::spec_of;
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, ModuleFlavor};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;

const ID: &str = "kernel.modules";

pub const CHECK: Check = Check {
    id: ID,
    title: "nvidia and nvidia_uvm loaded, nouveau not, nvidia_peermem for GPUDirect RDMA, open or proprietary module",
    looks_at: "nvidia and nvidia_uvm loaded, nouveau not loaded, nvidia_peermem for GPUDirect \
               RDMA, open vs proprietary module",
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
        fix: "nouveau: blacklist it (`echo blacklist nouveau | sudo tee \
              /etc/modprobe.d/blacklist-nouveau.conf`), rebuild the initramfs (`sudo \
              update-initramfs -u` on Debian and Ubuntu, `sudo dracut -f` on the RHEL family) \
              and reboot. nvidia_uvm: `sudo modprobe nvidia_uvm` (or the setuid helper \
              `nvidia-modprobe -u -c=0`). nvidia_peermem: `sudo modprobe nvidia_peermem`. \
              Flavour: install the driver's -open package.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "nvidia_peermem missing on a machine with InfiniBand/RoCE devices warns instead of being info: multi-node NCCL copies through host memory.",
        },
    ],
    run: modules,
};

fn modules(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    use crate::checks::causes;
    use crate::facts::short_bus_id;
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
    // Where nouveau holds a GPU, gpu.driver-binding names it: what follows here is that.
    let held = causes::bound_to(facts, "nouveau");
    let held_cause = held.first().map(|b| b.cause());
    if has("nouveau") {
        let message = match held.as_slice() {
            [] => "nouveau (the open-source driver) is loaded: it cannot run CUDA and conflicts with nvidia".to_string(),
            [one] => format!("nouveau (the open-source driver) is loaded and holds {}: it cannot run CUDA and conflicts with nvidia", short_bus_id(&one.bus_id)),
            more => format!("nouveau (the open-source driver) is loaded and holds {} GPUs: it cannot run CUDA and conflicts with nvidia", more.len()),
        };
        out.push(
            Finding::fail(ID, message)
                .evidence(ev.clone())
                .caused_by_opt(held_cause.clone())
                .fix("`printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf`, then `sudo update-initramfs -u` (Debian, Ubuntu) or `sudo dracut -f` (RHEL family), and reboot"),
        );
    }
    if !has("nvidia") {
        let finding = match &held_cause {
            // nvidia cannot take a GPU nouveau holds: the binding's fix comes first.
            Some(c) => Finding::fail(ID, "The nvidia kernel module is not loaded (nouveau holds the GPUs): no CUDA program can run")
                .caused_by(c.clone())
                .fix("Blacklist nouveau and reboot (gpu.driver-binding), then `sudo modprobe nvidia`."),
            None => Finding::fail(ID, "The nvidia kernel module is not loaded: no CUDA program can run")
                .fix("`sudo modprobe nvidia`; if it fails, the driver is not built for this kernel: reinstall it (DKMS) for the kernel `uname -r` names."),
        };
        out.push(finding.evidence(ev.clone()));
        return out;
    }
    if !has("nvidia_uvm") {
        out.push(
            Finding::warn(ID, "nvidia_uvm is not loaded: CUDA loads it on first use through nvidia-modprobe; where that is not possible (containers, no setuid helper) CUDA fails to initialise")
                .evidence(ev.clone())
                .fix("`sudo modprobe nvidia_uvm`"),
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
                .fix("`sudo modprobe nvidia_peermem`"),
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
                .fix("Install the driver's open flavour (Ubuntu: `sudo apt install nvidia-driver-BRANCH-open`, BRANCH the driver's, e.g. 570; NVIDIA's repository: `sudo dnf install nvidia-open`; the .run installer: `sudo sh NVIDIA-Linux-x86_64-VERSION.run -m=kernel-open`)."),
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{KernelModule, RdmaPort};
    use crate::testing::{statuses, Machine};

    fn module(name: &str) -> KernelModule {
        KernelModule {
            name: name.into(),
            size: 1,
            used_by: vec![],
            state: "Live".into(),
            taints: "OE".into(),
        }
    }

    fn loaded(names: &[&str]) -> Reading<Vec<KernelModule>> {
        Reading::Value(names.iter().map(|n| module(n)).collect())
    }

    fn ib_port() -> RdmaPort {
        RdmaPort {
            device: "mlx5_0".into(),
            port: 1,
            state: Some("ACTIVE".into()),
            phys_state: Some("LinkUp".into()),
            rate_gbps: Some(400.0),
            rate_text: None,
            link_layer: Some("InfiniBand".into()),
            hca_type: None,
        }
    }

    fn train() -> Policy {
        Policy {
            profile: Profile::Train,
            ..Policy::default()
        }
    }

    #[test]
    fn nouveau_holding_a_gpu_is_the_bindings_cause() {
        use crate::finding::Cause;
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(1, |p| p.driver = Reading::Value(Some("nouveau".into())))
            .build();
        f.modules = loaded(&["nvidia", "nvidia_uvm", "nouveau"]);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert_eq!(
            r[0].message,
            "nouveau (the open-source driver) is loaded and holds 00:07.0: it cannot run CUDA and conflicts with nvidia"
        );
        let binding = Cause::device("gpu.driver-binding", "0000:00:07.0");
        assert_eq!(r[0].caused_by, Some(binding.clone()));
        // Both GPUs held, nvidia not loaded: both findings are the binding's.
        let mut f = Machine::healthy("h200-sxm-141gb", 2)
            .pci(0, |p| p.driver = Reading::Value(Some("nouveau".into())))
            .pci(1, |p| p.driver = Reading::Value(Some("nouveau".into())))
            .build();
        f.modules = loaded(&["nouveau"]);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail, Status::Fail]);
        assert!(r[0].message.contains("holds 2 GPUs"), "{}", r[0].message);
        assert_eq!(
            r[1].message,
            "The nvidia kernel module is not loaded (nouveau holds the GPUs): no CUDA program can run"
        );
        let first = Cause::device("gpu.driver-binding", "0000:00:06.0");
        assert_eq!(r[0].caused_by, Some(first.clone()));
        assert_eq!(r[1].caused_by, Some(first));
        assert!(r[1]
            .fix
            .as_deref()
            .is_some_and(|x| x.starts_with("Blacklist nouveau")));
    }

    #[test]
    fn nvidia_uvm_nouveau() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert_eq!(
            r[0].message,
            "nvidia and nvidia_uvm are loaded, nouveau is not (open kernel module)"
        );
        // Only the GPU modules are evidence.
        f.modules = loaded(&["nvidia", "nvidia_uvm", "ext4", "nouveau_helper_x"]);
        let r = modules(&f, &Policy::default());
        assert_eq!(
            r[0].evidence.get("gpu_modules").map(|v| v.to_string()),
            Some(r#"["nvidia","nvidia_uvm"]"#.to_string())
        );
        f.driver.module_flavor = Reading::Value(ModuleFlavor::Proprietary);
        assert!(modules(&f, &Policy::default())[0]
            .message
            .ends_with("(proprietary kernel module)"));
        f.driver.module_flavor = Reading::unavailable("x");
        assert!(modules(&f, &Policy::default())[0]
            .message
            .ends_with("nouveau is not"));
        f.modules = loaded(&["nvidia", "nouveau"]);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail, Status::Warn], "{r:#?}");
        assert!(r[0].message.contains("nouveau"));
        assert!(r[1].message.contains("nvidia_uvm is not loaded"));
        f.modules = loaded(&["nouveau"]);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail, Status::Fail]);
        assert!(r[1].message.contains("nvidia kernel module is not loaded"));
        // Nouveau loaded but holding no GPU is its own cause.
        assert!(r.iter().all(|x| x.caused_by.is_none()), "{r:#?}");
        f.modules = Reading::unavailable("no /proc/modules");
        assert_eq!(
            statuses(&modules(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

    #[test]
    fn peermem_with_infiniband_by_profile() {
        let mut f = Machine::healthy("h200-sxm-141gb", 8).build();
        f.host.fabric.rdma = Reading::Value(vec![ib_port()]);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Info], "{r:#?}");
        assert!(r[0].message.contains("nvidia_peermem is not loaded"));
        assert_eq!(statuses(&modules(&f, &train())), vec![Status::Warn]);
        // Loaded: nothing to say.
        f.modules = loaded(&["nvidia", "nvidia_uvm", "nvidia_peermem"]);
        assert_eq!(statuses(&modules(&f, &train())), vec![Status::Pass]);
        // No RDMA device, or none read: peermem does not matter.
        f.modules = loaded(&["nvidia", "nvidia_uvm"]);
        f.host.fabric.rdma = Reading::Value(vec![]);
        assert_eq!(statuses(&modules(&f, &train())), vec![Status::Pass]);
        f.host.fabric.rdma = Reading::unavailable("x");
        assert_eq!(statuses(&modules(&f, &train())), vec![Status::Pass]);
    }

    #[test]
    fn blackwell_needs_the_open_module() {
        let mut f = Machine::healthy("b200", 1).build();
        assert_eq!(
            statuses(&modules(&f, &Policy::default())),
            vec![Status::Pass]
        );
        f.driver.module_flavor = Reading::Value(ModuleFlavor::Proprietary);
        let r = modules(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("Blackwell"));
        // Hopper is fine with either.
        let mut h = Machine::healthy("h200-sxm-141gb", 1).build();
        h.driver.module_flavor = Reading::Value(ModuleFlavor::Proprietary);
        assert_eq!(
            statuses(&modules(&h, &Policy::default())),
            vec![Status::Pass]
        );
    }
}
