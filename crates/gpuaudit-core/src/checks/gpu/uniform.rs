//! gpu.uniform: all GPUs of the machine alike (model, memory size, VBIOS).

use crate::checks::common::{count_of, no_gpu_reason, selected};
use crate::checks::{Check, CheckDoc, CheckKind, ProfileEffect};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Policy, Profile};
use crate::spec::{normalize_name, GpuEvidence, SpecDb};
use std::collections::BTreeMap;

const ID: &str = "gpu.uniform";

/// Boards of one model report totals a few MiB apart (what the driver reserves differs with
/// the VBIOS and the ECC state of its own pages: two GTX 1070s show 8112 and 8114 MiB), far
/// below 1%. More than this apart is another memory configuration: GDDR boards with ECC on
/// give up 1/16 (6.25%), a board with retired or remapped memory, or another variant.
pub const MEMORY_SPREAD: f64 = 0.01;

pub const CHECK: Check = Check {
    id: ID,
    title: "All GPUs are the same model, memory size and VBIOS",
    looks_at: "all GPUs of the machine are the same model, memory, VBIOS",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Compares the model, the memory size and the VBIOS version across the GPUs. The \
               model is the spec database's entry where it knows the GPU, else the PCI device \
               id, else the name as the driver gives it (case, separators and the words NVIDIA, \
               Tesla, GeForce ignored): two names for one device id are one model. Memory \
               sizes within 1% of each other are the same (the driver reserves a few MiB more \
               or less per board). Only readings are compared: a GPU whose model or VBIOS was \
               not read is named, not counted as different.",
        why: "Data-parallel training runs at the pace of the slowest GPU and fits the batch of \
              the smallest memory, and mixed VBIOS versions have different clock and power \
              tables: the machine behaves like its weakest card.",
        verify: "nvidia-smi --query-gpu=index,name,pci.device_id,memory.total,vbios_version --format=csv",
        fix: "Ask the provider for matching GPUs, or a VBIOS update so all cards run the same \
              version.",
    },
    profiles: &[
        ProfileEffect {
            profile: Profile::Train,
            effect: "GPUs of different models, or of one model with memory sizes more than 1% apart, fail instead of warning: data-parallel training runs at the pace of the weakest and fits the batch of the smallest.",
        },
    ],
    run: uniform,
};

/// What a GPU is, for comparing it with its siblings: a key and the words to show.
fn model_of(db: &SpecDb, g: &GpuFacts) -> Option<(String, String)> {
    let e = GpuEvidence::of(g);
    if let Some(spec) = db.identify_gpu(g) {
        return Some((format!("spec:{}", spec.key), spec.name.clone()));
    }
    let shown = e.name.map(str::to_string);
    if let Some(id) = e.pci_device_id {
        let key = match e.pci_subsystem_device_id {
            Some(sub) => format!("pci:{id:04x}:{sub:04x}"),
            None => format!("pci:{id:04x}"),
        };
        return Some((
            key,
            shown.unwrap_or_else(|| format!("PCI device {id:#06x}")),
        ));
    }
    let name = e.name?;
    Some((format!("name:{}", normalize_name(name)), name.to_string()))
}

/// "GPU 3", "GPUs 0, 1, 5".
fn gpu_list(indices: &[u32]) -> String {
    let list = indices
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if indices.len() == 1 {
        format!("GPU {list}")
    } else {
        format!("GPUs {list}")
    }
}

fn uniform(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let gpus: Vec<&GpuFacts> = selected(facts, policy).collect();
    if gpus.is_empty() {
        return vec![Finding::skip(ID, no_gpu_reason(facts))];
    }
    if gpus.len() == 1 {
        return vec![Finding::pass(ID, "One GPU: nothing to compare")];
    }
    let db = SpecDb::embedded();

    // Model -> (what to call it, the GPUs of it), in the order the GPUs come.
    let mut models: Vec<(String, String, Vec<u32>)> = Vec::new();
    let mut model_unread = Vec::new();
    for g in &gpus {
        match model_of(db, g) {
            Some((key, shown)) => match models.iter_mut().find(|m| m.0 == key) {
                Some(m) => m.2.push(g.index),
                None => models.push((key, shown, vec![g.index])),
            },
            None => model_unread.push(g.index),
        }
    }
    let names: Vec<String> = {
        let mut n: Vec<String> = gpus
            .iter()
            .filter_map(|g| g.name.value().cloned())
            .collect();
        n.dedup();
        n.sort();
        n.dedup();
        n
    };
    let mems: Vec<(u32, u64)> = gpus
        .iter()
        .filter_map(|g| GpuEvidence::of(g).memory_mib.map(|m| (g.index, m)))
        .collect();
    let mem_min = mems.iter().map(|m| m.1).min();
    let mem_max = mems.iter().map(|m| m.1).max();
    let mut vbios: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for g in &gpus {
        if let Some(v) = g.vbios.value().filter(|v| !v.trim().is_empty()) {
            vbios
                .entry(v.to_ascii_uppercase())
                .or_default()
                .push(g.index);
        }
    }

    let mut ev = Evidence::new()
        .with("gpus", gpus.len())
        .with(
            "models",
            models
                .iter()
                .map(|m| format!("{} ({})", m.1, gpu_list(&m.2)))
                .collect::<Vec<_>>(),
        )
        .with("names", &names)
        .with("pci_device_ids", {
            let mut ids: Vec<String> = gpus
                .iter()
                .filter_map(|g| GpuEvidence::of(g).pci_device_id)
                .map(|id| format!("{id:#06x}"))
                .collect();
            ids.sort();
            ids.dedup();
            ids
        })
        .with(
            "memory_total_mib",
            mems.iter().map(|m| m.1).collect::<Vec<_>>(),
        )
        .with("vbios", vbios.keys().collect::<Vec<_>>());
    if !model_unread.is_empty() {
        ev.insert("model_not_read", &model_unread);
    }
    let weak_status = if policy.profile == Profile::Train {
        Status::Fail
    } else {
        Status::Warn
    };

    if models.len() > 1 {
        ev.insert("memory_spread_allowed", MEMORY_SPREAD);
        return vec![Finding::new(
            ID,
            weak_status,
            format!(
                "The GPUs are of {} models ({}): multi-GPU work runs at the pace of the weakest",
                models.len(),
                models
                    .iter()
                    .map(|m| format!("{} on {}", m.1, gpu_list(&m.2)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .evidence(ev)
        .fix("Ask the provider for matching GPUs.")];
    }
    let model = models
        .first()
        .map(|m| m.1.clone())
        .unwrap_or_else(|| "of a model not read".to_string());

    if let (Some(lo), Some(hi)) = (mem_min, mem_max) {
        let spread = (hi - lo) as f64 / hi as f64;
        if spread > MEMORY_SPREAD {
            let small: Vec<u32> = mems.iter().filter(|m| m.1 == lo).map(|m| m.0).collect();
            let ecc: Vec<bool> = gpus
                .iter()
                .filter_map(|g| g.ecc.current.value().copied())
                .collect();
            let ecc_mixed = ecc.iter().any(|e| *e) && ecc.iter().any(|e| !*e);
            let hint = if ecc_mixed {
                " (ECC is on for some and off for others: GDDR boards give up 1/16 with ECC on)"
            } else {
                ""
            };
            return vec![Finding::new(
                ID,
                weak_status,
                format!(
                    "{} {model}, but their memory differs: {lo} to {hi} MiB ({:.1}%, more than the {:.0}% reservations explain; least on {}){hint}",
                    if gpus.len() == 2 { "Both GPUs are".to_string() } else { format!("All {} GPUs are", gpus.len()) },
                    100.0 * spread,
                    100.0 * MEMORY_SPREAD,
                    gpu_list(&small)
                ),
            )
            .evidence(ev.with("memory_spread", (spread * 1000.0).round() / 1000.0).with("memory_spread_allowed", MEMORY_SPREAD))
            .fix("Compare `nvidia-smi -q -d MEMORY,ECC,PAGE_RETIREMENT,ROW_REMAPPER` across the GPUs; ask the provider for matching GPUs.")];
        }
    }

    if vbios.len() > 1 {
        return vec![Finding::warn(
            ID,
            format!(
                "{} of one model, but {} VBIOS versions ({}): clock and power tables may differ",
                count_of(gpus.len() as u64, "GPU"),
                vbios.len(),
                vbios
                    .iter()
                    .map(|(v, on)| format!("{v} on {}", gpu_list(on)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .evidence(ev)
        .fix("Ask the provider to bring all GPUs to the same VBIOS version.")];
    }

    let mut msg = format!(
        "All {} GPUs are {model} with the same memory and VBIOS",
        gpus.len()
    );
    if names.len() > 1 {
        msg.push_str(&format!(
            " (the driver names them differently: {})",
            names.join(", ")
        ));
    }
    let unread: Vec<String> = [
        ("model", model_unread),
        (
            "memory size",
            gpus.iter()
                .filter(|g| GpuEvidence::of(g).memory_mib.is_none())
                .map(|g| g.index)
                .collect(),
        ),
        (
            "VBIOS",
            gpus.iter()
                .filter(|g| g.vbios.value().is_none_or(|v| v.trim().is_empty()))
                .map(|g| g.index)
                .collect(),
        ),
    ]
    .into_iter()
    .filter(|(_, on)| !on.is_empty())
    .map(|(what, on)| format!("the {what} of {} was not read", gpu_list(&on)))
    .collect();
    if unread.is_empty() {
        return vec![Finding::pass(ID, msg).evidence(ev)];
    }
    // Alike as far as read: said, not passed.
    msg = msg.replacen("All ", "The ", 1);
    vec![Finding::info(ID, format!("{msg}, as far as read: {}", unread.join("; "))).evidence(ev)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::run_one;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn run(facts: &Facts, profile: Profile) -> Vec<Finding> {
        let policy = Policy {
            profile,
            ..Policy::default()
        };
        run_one(&CHECK, facts, &policy)
    }

    fn general(facts: &Facts) -> Vec<Finding> {
        run(facts, Profile::General)
    }

    #[test]
    fn identical_gpus_pass() {
        let out = general(&Machine::healthy("h200-sxm-141gb", 8).build());
        assert_eq!(statuses(&out), vec![Status::Pass]);
        assert_eq!(
            out[0].message,
            "All 8 GPUs are NVIDIA H200 SXM 141GB with the same memory and VBIOS"
        );
        let out = general(&Machine::healthy("h200-sxm-141gb", 1).build());
        assert_eq!(out[0].message, "One GPU: nothing to compare");
    }

    /// Two GPUs of a model the database does not know (GTX 1070, device 0x1b81).
    fn gtx1070s(mib: [u64; 2]) -> Facts {
        Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| {
                g.name = Reading::Value("NVIDIA GeForce GTX 1070".into());
                g.pci_device_id = Reading::Value(0x1b81);
                g.memory.total_mib = Reading::Value(mib[g.index as usize]);
            })
            .build()
    }

    #[test]
    fn memory_a_few_mib_apart_is_the_same() {
        // Issue 8, defect 2.
        let out = general(&gtx1070s([8112, 8114]));
        assert_eq!(statuses(&out), vec![Status::Pass], "{}", out[0].message);
        assert_eq!(
            out[0].message,
            "All 2 GPUs are NVIDIA GeForce GTX 1070 with the same memory and VBIOS"
        );
    }

    #[test]
    fn memory_more_than_one_percent_apart_differs() {
        // 1% of 10000 MiB is 100 MiB: 9900 is at the limit, 9899 beyond it.
        let out = general(&gtx1070s([9900, 10000]));
        assert_eq!(statuses(&out), vec![Status::Pass]);
        let out = general(&gtx1070s([9899, 10000]));
        assert_eq!(statuses(&out), vec![Status::Warn]);
        assert_eq!(
            out[0].message,
            "Both GPUs are NVIDIA GeForce GTX 1070, but their memory differs: 9899 to 10000 MiB \
             (1.0%, more than the 1% reservations explain; least on GPU 0)"
        );
        assert_eq!(
            statuses(&run(&gtx1070s([9899, 10000]), Profile::Train)),
            vec![Status::Fail]
        );
        for p in [Profile::Inference, Profile::Hpc, Profile::Render] {
            assert_eq!(
                statuses(&run(&gtx1070s([9899, 10000]), p)),
                vec![Status::Warn]
            );
        }
    }

    #[test]
    fn mixed_ecc_is_named_as_the_likely_cause() {
        let f = Machine::healthy("l4", 2)
            .gpu(0, |g| {
                g.memory.total_mib = Reading::Value(21000);
                g.ecc.current = Reading::Value(false);
            })
            .gpu(1, |g| g.memory.total_mib = Reading::Value(22491))
            .build();
        let out = general(&f);
        assert_eq!(statuses(&out), vec![Status::Warn]);
        assert!(
            out[0]
                .message
                .ends_with("GDDR boards give up 1/16 with ECC on)"),
            "{}",
            out[0].message
        );
    }

    #[test]
    fn one_device_id_under_two_names_is_one_model() {
        // The Hadoop P100 log: one name edited with a "_2" suffix.
        let f = Machine::healthy("p100-pcie-12gb", 2)
            .gpu(1, |g| {
                g.name = Reading::Value("Tesla P100-PCIE-12GB_2".into())
            })
            .build();
        let out = general(&f);
        assert_eq!(statuses(&out), vec![Status::Pass]);
        assert!(out[0].message.ends_with(
            "(the driver names them differently: Tesla P100-PCIE-12GB, Tesla P100-PCIE-12GB_2)"
        ));
        // Unknown to the database: the device id decides, as well.
        let mut f = gtx1070s([8112, 8112]);
        if let Reading::Value(g) = &mut f.gpus {
            g[1].name = Reading::Value("GTX 1070 (edited)".into());
        }
        assert_eq!(statuses(&general(&f)), vec![Status::Pass]);
    }

    #[test]
    fn names_alone_compare_normalised() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| {
                g.pci_device_id = Reading::unavailable("redacted");
                g.name = Reading::Value(
                    ["NVIDIA GeForce GTX 1070", "geforce gtx-1070"][g.index as usize].into(),
                );
            })
            .build();
        assert_eq!(statuses(&general(&f)), vec![Status::Pass]);
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpus(|g| {
                g.pci_device_id = Reading::unavailable("redacted");
                g.name = Reading::Value(
                    ["NVIDIA GeForce GTX 1070", "NVIDIA GeForce GTX 1080"][g.index as usize].into(),
                );
            })
            .build();
        assert_eq!(statuses(&general(&f)), vec![Status::Warn]);
    }

    #[test]
    fn different_models_warn_and_fail_for_training() {
        let f = Machine::healthy("h100-sxm5-80gb", 2)
            .gpu(1, |g| {
                g.pci_device_id = Reading::Value(0x20b2);
                g.name = Reading::Value("NVIDIA A100-SXM4-80GB".into());
            })
            .build();
        let out = general(&f);
        assert_eq!(statuses(&out), vec![Status::Warn]);
        assert_eq!(
            out[0].message,
            "The GPUs are of 2 models (NVIDIA H100 SXM5 80GB on GPU 0, NVIDIA A100 SXM4 80GB on \
             GPU 1): multi-GPU work runs at the pace of the weakest"
        );
        assert_eq!(statuses(&run(&f, Profile::Train)), vec![Status::Fail]);
        for p in [Profile::Inference, Profile::Hpc, Profile::Render] {
            assert_eq!(statuses(&run(&f, p)), vec![Status::Warn], "{p:?}");
        }
    }

    #[test]
    fn vbios_versions_differ_warn_in_every_profile() {
        let f = Machine::healthy("h200-sxm-141gb", 3)
            .gpu(2, |g| g.vbios = Reading::Value("96.00.A5.00.1A".into()))
            .build();
        for p in [Profile::General, Profile::Train] {
            let out = run(&f, p);
            assert_eq!(statuses(&out), vec![Status::Warn]);
            assert_eq!(
                out[0].message,
                "3 GPUs of one model, but 2 VBIOS versions (96.00.A5.00.1A on GPU 2, \
                 96.00.AF.00.01 on GPUs 0, 1): clock and power tables may differ"
            );
        }
        // Case differences are one version.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| g.vbios = Reading::Value("96.00.af.00.01".into()))
            .build();
        assert_eq!(statuses(&general(&f)), vec![Status::Pass]);
    }

    #[test]
    fn what_was_not_read_is_not_a_difference() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| {
                g.vbios = Reading::unavailable("N/A");
                g.memory.total_mib = Reading::unavailable("N/A");
            })
            .build();
        let out = general(&f);
        assert_eq!(statuses(&out), vec![Status::Info]);
        assert_eq!(
            out[0].message,
            "The 2 GPUs are NVIDIA H200 SXM 141GB with the same memory and VBIOS, as far as \
             read: the memory size of GPU 1 was not read; the VBIOS of GPU 1 was not read"
        );
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .gpu(1, |g| {
                g.pci_device_id = Reading::unavailable("N/A");
                g.name = Reading::unavailable("N/A");
            })
            .build();
        let out = general(&f);
        assert_eq!(statuses(&out), vec![Status::Info]);
        assert!(out[0].message.contains("the model of GPU 1 was not read"));
    }

    #[test]
    fn only_the_chosen_gpus_are_compared() {
        let f = Machine::healthy("h100-sxm5-80gb", 3)
            .gpu(2, |g| {
                g.pci_device_id = Reading::Value(0x20b2);
                g.name = Reading::Value("NVIDIA A100-SXM4-80GB".into());
            })
            .build();
        let policy = Policy {
            gpus: Some(vec![0, 1]),
            ..Policy::default()
        };
        assert_eq!(statuses(&run_one(&CHECK, &f, &policy)), vec![Status::Pass]);
    }
}
