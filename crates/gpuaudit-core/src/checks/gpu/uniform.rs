//! gpu.uniform: all GPUs of the machine alike (model, PCI device id, memory size, VBIOS).

use crate::checks::common::{no_gpu_reason, selected};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::reading::Reading;
use std::collections::BTreeSet;

const ID: &str = "gpu.uniform";

pub const CHECK: Check = Check {
    id: ID,
    title: "All GPUs are the same model, memory size and VBIOS",
    looks_at: "all GPUs of the machine are the same model, memory, VBIOS",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Compares model, PCI device id, memory size and VBIOS version across the GPUs.",
        why: "Data-parallel training runs at the pace of the slowest GPU, and mixed VBIOS \
              versions have different clock and power tables: the machine behaves like its \
              weakest card.",
        verify: "nvidia-smi --query-gpu=index,name,memory.total,vbios_version --format=csv",
        fix: "Ask the provider for matching GPUs, or a VBIOS update so all cards run the same \
              version.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "GPUs that differ in model, PCI device id or memory size fail instead of warning: data-parallel training runs at the pace of the weakest.",
        },
    ],
    run: uniform,
};

fn uniform(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let gpus: Vec<&GpuFacts> = selected(facts, policy).collect();
    if gpus.is_empty() {
        return vec![Finding::skip(ID, no_gpu_reason(facts))];
    }
    if gpus.len() == 1 {
        return vec![Finding::pass(ID, "One GPU: nothing to compare")];
    }
    let distinct = |f: &dyn Fn(&GpuFacts) -> String| -> BTreeSet<String> {
        gpus.iter().map(|g| f(g)).collect()
    };
    let show = |r: &Reading<String>| r.value().cloned().unwrap_or_else(|| "?".into());
    let names = distinct(&|g| show(&g.name));
    let ids = distinct(&|g| {
        g.pci_device_id
            .value()
            .map(|i| format!("0x{i:04x}"))
            .unwrap_or_else(|| "?".into())
    });
    let mems = distinct(&|g| {
        g.memory
            .total_mib
            .value()
            .map(|m| m.to_string())
            .unwrap_or_else(|| "?".into())
    });
    let vbios = distinct(&|g| show(&g.vbios).to_ascii_lowercase());

    let ev = Evidence::new()
        .with("gpus", gpus.len())
        .with("models", &names)
        .with("pci_device_ids", &ids)
        .with("memory_total_mib", &mems)
        .with("vbios", &vbios);
    if names.len() > 1 || ids.len() > 1 || mems.len() > 1 {
        let status = if policy.profile == Profile::Train {
            Status::Fail
        } else {
            Status::Warn
        };
        return vec![Finding::new(
            ID,
            status,
            format!(
                "The GPUs differ: {} model(s) ({}), {} memory size(s): multi-GPU work runs at the pace of the weakest",
                names.len(),
                names.iter().cloned().collect::<Vec<_>>().join(", "),
                mems.len()
            ),
        )
        .evidence(ev)
        .fix("Ask the provider for matching GPUs.")];
    }
    if vbios.len() > 1 {
        return vec![Finding::warn(
            ID,
            format!(
                "{} identical GPUs, but {} VBIOS versions ({}): clock and power tables may differ",
                gpus.len(),
                vbios.len(),
                vbios.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        )
        .evidence(ev)
        .fix("Ask the provider to bring all GPUs to the same VBIOS version.")];
    }
    vec![Finding::pass(
        ID,
        format!(
            "All {} GPUs are {} with the same memory and VBIOS",
            gpus.len(),
            names.iter().next().cloned().unwrap_or_default()
        ),
    )
    .evidence(ev)]
}
