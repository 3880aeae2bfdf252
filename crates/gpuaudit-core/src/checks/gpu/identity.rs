//! gpu.identity: each GPU against its datasheet entry, and the machine against what was ordered
//! (`--expect MODEL[:COUNT]`).

use crate::checks::common::{name_of, no_gpu_reason, selected, spec_of};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::Policy;
use crate::spec::SpecDb;

const ID: &str = "gpu.identity";

pub const CHECK: Check = Check {
    id: ID,
    title: "GPU model, memory and SM count match the datasheet and what was ordered (--expect)",
    looks_at: "model, memory size, SM count against the spec database and against `--expect` \
               (model and count): catches an A30 delivered as an A100, 40 GB for 80 GB, 4 GPUs \
               for 8",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "Identifies each GPU in the spec database (by PCI device id, then name and memory \
               size) and compares its memory and SM count with the datasheet; with --expect \
               MODEL[:COUNT] (e.g. h100-sxm5-80gb:8, a100:2, h200) also the model and the number \
               of GPUs with what was ordered.",
        why: "An A30 delivered as an A100, a 40 GB card for an 80 GB one, 4 GPUs for 8, or a \
              vGPU/MIG slice that shows a fraction of the memory: all run, all cost you, none \
              is visible without looking.",
        verify: "nvidia-smi --query-gpu=index,name,pci.device_id,memory.total --format=csv\n\
                 nvidia-smi -q | grep -i -e 'Product Name' -e 'FB Memory' -A3",
        fix: "Ask the provider for the model and count you ordered; keep this report as evidence.",
    },
    profiles: &[],
    run: identity,
};

fn identity(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let db = SpecDb::embedded();
    let mut out = Vec::new();

    let ordered = policy.expect.as_ref();
    let allowed: Option<Vec<&str>> = ordered.map(|e| {
        db.matching(&e.model)
            .iter()
            .map(|s| s.key.as_str())
            .collect()
    });

    // What was ordered against what is there: the count is about the machine.
    if let Some(e) = ordered {
        if let Some(count) = e.count {
            let have = facts.gpu_list().len() as u32;
            let f = if have == count {
                Finding::pass(ID, format!("{have} GPUs, as ordered ({})", e.model))
            } else {
                Finding::fail(
                    ID,
                    format!("{have} GPU(s) found, {count} ordered ({}:{count})", e.model),
                )
                .fix("Ask the provider for the missing GPUs; check `nvidia-smi -L` and `lspci -d 10de:` first.")
            };
            out.push(f.with("found", have).with("ordered", count));
        }
    }

    for g in selected(facts, policy) {
        let found = identity_of(g, ordered.map(|e| e.model.as_str()), allowed.as_deref());
        out.extend(found.into_iter().map(|f| f.gpu(g.index)));
    }
    if out.is_empty() {
        out.push(Finding::skip(ID, no_gpu_reason(facts)));
    }
    out
}

fn identity_of(g: &GpuFacts, ordered: Option<&str>, allowed: Option<&[&str]>) -> Vec<Finding> {
    let name = name_of(g);
    let mut ev = Evidence::new().with("name", &name);
    if let Some(id) = g.pci_device_id.value() {
        ev.insert("pci_device_id", format!("0x{id:04x}"));
    }
    if let Some(m) = g.memory.total_mib.value() {
        ev.insert("memory_total_mib", m);
    }
    if let Some(s) = g.sm_count.value() {
        ev.insert("sm_count", s);
    }
    ev.insert("source", &g.source);

    let Some(spec) = spec_of(g) else {
        let msg = format!(
            "{} is a {name} that the spec database does not know: nothing to compare with",
            g.label()
        );
        let f = match ordered {
            Some(o) => Finding::warn(ID, format!("{msg}; cannot confirm it is the ordered {o}")),
            None => Finding::info(ID, msg),
        };
        return vec![f.evidence(ev)];
    };
    ev.insert("spec", &spec.key);

    let mut problems: Vec<(Status, String)> = Vec::new();
    if let (Some(o), Some(allowed)) = (ordered, allowed) {
        if !allowed.contains(&spec.key.as_str()) {
            problems.push((
                Status::Fail,
                format!("it is a {}, not the ordered {o}", spec.name),
            ));
        }
    }
    if let (Some(&mib), Some(spec_gb)) = (g.memory.total_mib.value(), spec.memory_gb) {
        ev.insert("spec_memory_gb", spec_gb);
        // Drivers show a little less than the label (reserved memory; GDDR parts with ECC on
        // give up 1/16): outside the spec's tolerance it is another part or a slice.
        if spec.memory_matches(mib) == Some(false) {
            problems.push((
                Status::Fail,
                format!(
                    "it shows {:.1} GiB of memory, the datasheet says {spec_gb} GB: another variant, a vGPU or a MIG slice",
                    mib as f64 / 1024.0
                ),
            ));
        }
    }
    if let (Some(&sms), Some(spec_sms)) = (g.sm_count.value(), spec.sm_count) {
        ev.insert("spec_sm_count", spec_sms);
        if sms != spec_sms {
            problems.push((
                Status::Fail,
                format!("it has {sms} SMs, the datasheet says {spec_sms}"),
            ));
        }
    }

    if problems.is_empty() {
        let mut msg = format!("{} is an {}", g.label(), spec.name);
        if let Some(o) = ordered {
            msg.push_str(&format!(", as ordered ({o})"));
        }
        if let Some(r) = g.sm_count.reason() {
            ev.insert("sm_count_unavailable", r);
        }
        return vec![Finding::pass(ID, msg).evidence(ev)];
    }
    let worst = problems.iter().map(|p| p.0).max().unwrap_or(Status::Warn);
    let text = problems
        .into_iter()
        .map(|p| p.1)
        .collect::<Vec<_>>()
        .join("; ");
    vec![Finding::new(ID, worst, format!("{} ({name}): {text}", g.label()))
        .evidence(ev)
        .fix("Ask the provider for the model and memory size you ordered; keep this report as evidence.")]
}
