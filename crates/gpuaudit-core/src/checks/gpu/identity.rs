//! gpu.identity: each GPU against its datasheet entry, and the machine against what was ordered
//! (`--expect MODEL[:COUNT]`).

use crate::checks::common::{
    compute_capability_of, count_of, name_of, no_gpu_reason, selected, with_article,
};
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, GpuFacts, ValueSource, VirtualizationMode};
use crate::finding::{Evidence, Finding, Status};
use crate::policy::{Expectation, Policy};
use crate::spec::{ExpectMatch, GpuEvidence, GpuSpec, SpecDb};

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
               of GPUs with what was ordered. A GPU whose PCI device id, name, memory size or SM \
               count rules out every model the order names fails, whether or not the spec \
               database knows the model delivered; one on which nothing that tells models apart \
               could be read is a warning that says what was not read. The count passes \
               (\"as ordered\") only where the count and every GPU's model match.",
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

/// How one GPU stands against the order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OrderFit {
    Matches,
    Contradicts,
    /// Nothing read tells (see [`ExpectMatch::Unknown`]).
    Unknown,
}

fn identity(facts: &Facts, policy: &Policy) -> Vec<Finding> {
    let db = SpecDb::embedded();
    let ordered = policy.expect.as_ref();
    let mut out = Vec::new();

    let mut per_gpu = Vec::new();
    for g in selected(facts, policy) {
        let findings = identity_of(db, g, ordered.map(|e| e.model.as_str()));
        per_gpu.extend(findings.into_iter().map(|f| f.gpu(g.index)));
    }

    // What was ordered against what is there: the count is about the machine, so every GPU
    // the driver lists is judged for it (not only those chosen with --gpus).
    if let Some(e) = ordered {
        if let Some(count) = e.count {
            let fits: Vec<OrderFit> = facts
                .gpu_list()
                .iter()
                .map(|g| order_fit(&db.judge_expected(&e.model, g)))
                .collect();
            out.push(count_finding(facts, e, count, &fits));
        }
    }
    out.extend(per_gpu);
    if out.is_empty() {
        out.push(Finding::skip(ID, no_gpu_reason(facts)));
    }
    out
}

fn order_fit(m: &ExpectMatch) -> OrderFit {
    match m {
        ExpectMatch::Matches(_) => OrderFit::Matches,
        ExpectMatch::Contradicts { .. } => OrderFit::Contradicts,
        ExpectMatch::Unknown { .. } => OrderFit::Unknown,
    }
}

/// The machine's GPU count against the order, and whether their models are the ordered one:
/// "as ordered" only where both are.
fn count_finding(facts: &Facts, e: &Expectation, count: u32, fits: &[OrderFit]) -> Finding {
    let order = format!("{}:{count}", e.model);
    let listed = fits.len() as u32;
    let attached = facts.driver.attached_gpus.value().copied();
    let on_bus = facts.pci_gpus.value().map(|p| p.len() as u32);
    let unreadable = facts.driver.report_unreadable.is_some();
    // Neither the driver's report nor the PCI bus could be read: the GPUs are unknown, and
    // unknown GPUs contradict no order (they are unconfirmed).
    let not_counted = unreadable && facts.gpus.value().is_none() && on_bus.is_none();
    // How many GPUs there are: the driver's list; the driver's own count where it says more
    // are attached than it describes; the PCI functions where the driver does not answer.
    let (found, found_text, undescribed) = match (facts.gpus.value(), attached, on_bus) {
        (Some(_), Some(a), _) if a > listed => (
            a,
            format!(
                "{} attached (the driver says), {listed} described",
                count_of(a, "GPU")
            ),
            a - listed,
        ),
        (Some(_), _, _) => (listed, format!("{} found", count_of(listed, "GPU")), 0),
        (None, _, Some(n)) => (
            n,
            format!(
                "{} on the PCI bus ({})",
                count_of(n, "GPU"),
                match unreadable {
                    true => "the driver's report could not be read",
                    false => "the driver does not answer",
                }
            ),
            n,
        ),
        // Nothing to count: unknown, not none.
        (None, _, None) if not_counted => (
            0,
            "GPUs not known (the driver's report could not be read)".to_string(),
            count,
        ),
        (None, _, None) => (0, "no GPU found".to_string(), 0),
    };
    let contradicted = fits.iter().filter(|f| **f == OrderFit::Contradicts).count();
    let unconfirmed =
        fits.iter().filter(|f| **f == OrderFit::Unknown).count() + undescribed as usize;

    let mut clauses = Vec::new();
    if contradicted > 0 {
        clauses.push(format!(
            "the model does not match on {contradicted} of them (see each GPU's finding)"
        ));
    }
    if unconfirmed > 0 {
        clauses.push(format!(
            "the model could not be confirmed on {unconfirmed} of them"
        ));
    }
    let status = if not_counted {
        Status::Warn
    } else if found != count || contradicted > 0 {
        Status::Fail
    } else if unconfirmed > 0 {
        Status::Warn
    } else {
        Status::Pass
    };
    let msg = if status == Status::Pass {
        format!("{}, as ordered ({order})", count_of(found, "GPU"))
    } else {
        let mut m = format!("{found_text}, {count} ordered ({order})");
        for c in &clauses {
            m.push_str("; ");
            m.push_str(c);
        }
        m
    };
    let mut f = Finding::new(ID, status, msg)
        .with("found", found)
        .with("ordered", count)
        .with("model_mismatches", contradicted)
        .with("model_unconfirmed", unconfirmed);
    if let Some(a) = attached {
        f = f.with("attached_gpus", a);
    }
    match status {
        Status::Fail if found != count => f.fix(
            "Ask the provider for the GPUs you ordered; check `nvidia-smi -L` and `lspci -d 10de:` first.",
        ),
        Status::Fail => f.fix(
            "Ask the provider for the model you ordered; keep this report as evidence.",
        ),
        Status::Warn => f.fix(
            "Read the model by hand (`nvidia-smi --query-gpu=index,name,pci.device_id,memory.total --format=csv`) before accepting the machine.",
        ),
        _ => f,
    }
}

/// The evidence that tells models apart, each read value or the reason it was not read.
fn evidence_of(g: &GpuFacts) -> Evidence {
    let e = GpuEvidence::of(g);
    let mut ev = Evidence::new();
    match (e.name, g.name.reason()) {
        (Some(n), _) => ev.insert("name", n),
        (None, Some(r)) => ev.insert("name_unavailable", r),
        (None, None) => ev.insert("name_unavailable", "empty"),
    }
    match (e.pci_device_id, g.pci_device_id.reason()) {
        (Some(id), _) => ev.insert("pci_device_id", format!("{id:#06x}")),
        (None, Some(r)) => ev.insert("pci_device_id_unavailable", r),
        (None, None) => ev.insert("pci_device_id_unavailable", "not a device id"),
    }
    match (e.memory_mib, g.memory.total_mib.reason()) {
        (Some(m), _) => ev.insert("memory_total_mib", m),
        (None, Some(r)) => ev.insert("memory_total_mib_unavailable", r),
        (None, None) => ev.insert("memory_total_mib_unavailable", "0 MiB"),
    }
    match (e.sm_count, g.sm_count.reason()) {
        (Some(s), _) => ev.insert("sm_count", s),
        (None, Some(r)) => ev.insert("sm_count_unavailable", r),
        (None, None) => ev.insert("sm_count_unavailable", "0"),
    }
    ev.insert("source", &g.source);
    ev
}

fn is_vgpu(g: &GpuFacts) -> bool {
    g.virtualization.value() == Some(&VirtualizationMode::Vgpu)
}

/// One GPU's findings: against the order where one was given, else against its datasheet.
fn identity_of(db: &SpecDb, g: &GpuFacts, ordered: Option<&str>) -> Vec<Finding> {
    let name = name_of(g);
    let mut ev = evidence_of(g);
    let delivered = db.identify_gpu(g);
    if let Some(s) = delivered {
        ev.insert("spec", &s.key);
    }

    if let Some(o) = ordered {
        return match db.judge_expected(o, g) {
            ExpectMatch::Matches(spec) => {
                ev.insert("spec", &spec.key);
                datasheet_findings(g, spec, Some(o), ev)
            }
            ExpectMatch::Contradicts { why, delivered } => {
                let what = match delivered {
                    Some(d) => with_article(&d.name),
                    None => format!("{} the spec database does not know", with_article(&name)),
                };
                ev.insert("ordered", o);
                vec![Finding::fail(
                    ID,
                    format!(
                        "{} is {what}, not the ordered {o}: {}",
                        g.label(),
                        why.join("; ")
                    ),
                )
                .evidence(ev)
                .fix("Ask the provider for the model you ordered; keep this report as evidence.")]
            }
            ExpectMatch::Unknown { why } => {
                ev.insert("ordered", o);
                vec![Finding::warn(
                    ID,
                    format!(
                        "{} ({name}): cannot confirm it is the ordered {o}: {why}",
                        g.label()
                    ),
                )
                .evidence(ev)
                .fix("Read the model by hand (`nvidia-smi -q | grep -i -e 'Product Name' -e 'Device Id'`) and compare it with the order.")]
            }
        };
    }

    let Some(spec) = delivered else {
        let e = GpuEvidence::of(g);
        if e.name.is_none() && e.pci_device_id.is_none() {
            let why = format!(
                "the name ({}) and the PCI device id ({}) were not read",
                g.name.reason().unwrap_or("empty"),
                g.pci_device_id.reason().unwrap_or("not a device id")
            );
            return vec![Finding::skip(
                ID,
                format!("{}: nothing identifies the model: {why}", g.label()),
            )
            .evidence(ev)];
        }
        let msg = format!(
            "{} is {} that the spec database does not know: nothing to compare with",
            g.label(),
            with_article(&name)
        );
        return vec![Finding::info(ID, msg).evidence(ev)];
    };
    datasheet_findings(g, spec, None, ev)
}

/// The GPU against its model's datasheet: memory size and SM count. A vGPU shows a slice of
/// the memory by design: that is said (gpu.virtualization judges it), not failed.
fn datasheet_findings(
    g: &GpuFacts,
    spec: &GpuSpec,
    ordered: Option<&str>,
    mut ev: Evidence,
) -> Vec<Finding> {
    let name = name_of(g);
    let e = GpuEvidence::of(g);
    let vgpu = is_vgpu(g);
    let mut problems: Vec<String> = Vec::new();
    let mut slice = None;
    if let Some(spec_gb) = spec.memory_gb {
        ev.insert("spec_memory_gb", spec_gb);
        if let Some(mib) = e.memory_mib {
            // Drivers show a little less than the label (reserved memory; GDDR parts with ECC
            // on give up 1/16): outside the spec's tolerance it is another part or a slice.
            if spec.memory_matches(mib) == Some(false) {
                let shown = format!(
                    "{:.1} GiB of memory; the datasheet label is {spec_gb} GB",
                    mib as f64 / 1024.0
                );
                if vgpu {
                    slice = Some(shown);
                } else {
                    problems.push(format!(
                        "it shows {shown}: another variant, a vGPU or a MIG slice"
                    ));
                }
            }
        }
    }
    if let Some(spec_sms) = spec.sm_count {
        ev.insert("spec_sm_count", spec_sms);
        if let Some(sms) = e.sm_count {
            if sms != spec_sms {
                problems.push(format!("it has {sms} SMs, the datasheet says {spec_sms}"));
            }
        }
    }

    // A compute capability read from the GPU tells the architecture; one filled from the
    // datasheet is the identified model's own and proves nothing.
    if let Some((cc, text)) = compute_capability_of(g) {
        ev.insert("compute_capability", cc.to_string());
        if let Some(src) = g.compute_capability_source {
            ev.insert("compute_capability_source", src);
        }
        let read = !g
            .compute_capability_source
            .is_some_and(ValueSource::is_datasheet);
        if let (true, Some(spec_cc)) = (read, spec.compute_capability()) {
            if cc != spec_cc {
                problems.push(format!("it reports {text}, the datasheet says {spec_cc}"));
            }
        }
    }

    if !problems.is_empty() {
        return vec![Finding::fail(
            ID,
            format!("{} ({name}): {}", g.label(), problems.join("; ")),
        )
        .evidence(ev)
        .fix("Ask the provider for the model and memory size you ordered; keep this report as evidence.")];
    }
    let what = if vgpu {
        ev.insert("virtualization_mode", "vgpu");
        format!(
            "a vGPU ({name}) of {}{}",
            with_article(&spec.name),
            slice
                .map(|s| format!(", with {s} (a slice: see gpu.virtualization)"))
                .unwrap_or_default()
        )
    } else {
        with_article(&spec.name)
    };
    let mut msg = format!("{} is {what}", g.label());
    if let Some(o) = ordered {
        msg.push_str(&format!(", as ordered ({o})"));
    }
    // A vGPU is a share of the model, not the model: said, not passed as a whole GPU.
    let status = if vgpu { Status::Info } else { Status::Pass };
    vec![Finding::new(ID, status, msg).evidence(ev)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::run_one;
    use crate::policy::Expectation;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn run(facts: &Facts, expect: Option<&str>) -> Vec<Finding> {
        let policy = Policy {
            expect: expect.map(|e| e.parse::<Expectation>().expect("a valid --expect")),
            ..Policy::default()
        };
        run_one(&CHECK, facts, &policy)
    }

    /// The eight V100S of the datasheet-style fixture, as the real log shows them.
    fn v100s_x8() -> Facts {
        Machine::healthy("v100s-pcie-32gb", 8)
            .gpus(|g| g.sm_count = Reading::unavailable("nvidia-smi -q does not report it"))
            .build()
    }

    #[test]
    fn a_healthy_gpu_is_its_model() {
        let out = run(&Machine::healthy("h200-sxm-141gb", 2).build(), None);
        assert_eq!(statuses(&out), vec![Status::Pass, Status::Pass]);
        assert_eq!(
            out[0].message,
            "GPU 0 (00:06.0) is an NVIDIA H200 SXM 141GB"
        );
        assert_eq!(out[0].evidence.get("spec").unwrap(), "h200-sxm-141gb");
        assert_eq!(out[0].evidence.get("pci_device_id").unwrap(), "0x2335");
    }

    #[test]
    fn the_wrong_model_delivered_fails_every_gpu_and_the_count() {
        // Issue 8, defect 1: eight V100S audited with --expect a100:8.
        let out = run(&v100s_x8(), Some("a100:8"));
        assert_eq!(out.len(), 9);
        assert_eq!(out[0].gpu, None);
        assert_eq!(out[0].status, Status::Fail);
        assert_eq!(
            out[0].message,
            "8 GPUs found, 8 ordered (a100:8); the model does not match on 8 of them (see each GPU's finding)"
        );
        assert!(!out[0].message.contains("as ordered"));
        assert_eq!(
            out[0].fix.as_deref(),
            Some("Ask the provider for the model you ordered; keep this report as evidence.")
        );
        for f in &out[1..] {
            assert_eq!(f.status, Status::Fail, "{}", f.message);
            assert!(
                f.message
                    .contains("is an NVIDIA Tesla V100S PCIe 32GB, not the ordered a100: PCI device id 0x1df6"),
                "{}",
                f.message
            );
        }
    }

    #[test]
    fn the_ordered_model_passes_every_gpu_and_the_count() {
        let out = run(&v100s_x8(), Some("v100s:8"));
        assert!(out.iter().all(|f| f.status == Status::Pass), "{out:#?}");
        assert_eq!(out[0].message, "8 GPUs, as ordered (v100s:8)");
        assert_eq!(out[0].fix, None);
        assert_eq!(
            out[1].message,
            "GPU 0 (00:06.0) is an NVIDIA Tesla V100S PCIe 32GB, as ordered (v100s)"
        );
        // Without a count, no count finding.
        let out = run(&v100s_x8(), Some("v100s"));
        assert_eq!(out.len(), 8);
        assert!(out.iter().all(|f| f.gpu.is_some()));
    }

    #[test]
    fn a_model_the_database_does_not_know_still_fails_the_order() {
        // Neither the id nor the name is in the database; both rule out an A100.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.pci_device_id = Reading::Value(0x1e30);
                g.name = Reading::Value("Quadro RTX 6000".into());
                g.memory.total_mib = Reading::Value(24576);
                g.sm_count = Reading::unavailable("not read");
            })
            .build();
        let out = run(&f, Some("a100:1"));
        assert_eq!(statuses(&out), vec![Status::Fail, Status::Fail]);
        assert!(
            out[1].message.starts_with(
                "GPU 0 (00:06.0) is a Quadro RTX 6000 the spec database does not know, not the ordered a100: "
            ),
            "{}",
            out[1].message
        );
        // Without an order it is only unknown: info.
        let out = run(&f, None);
        assert_eq!(statuses(&out), vec![Status::Info]);
        assert_eq!(
            out[0].message,
            "GPU 0 (00:06.0) is a Quadro RTX 6000 that the spec database does not know: nothing to compare with"
        );
        // The id alone, or the name alone, is still something to name it by.
        let mut id_only = f.clone();
        if let Reading::Value(g) = &mut id_only.gpus {
            g[0].name = Reading::unavailable("N/A");
        }
        let out = run(&id_only, None);
        assert_eq!(statuses(&out), vec![Status::Info]);
        assert!(out[0]
            .message
            .contains("is an unknown model that the spec database does not know"));
        let mut name_only = f.clone();
        if let Reading::Value(g) = &mut name_only.gpus {
            g[0].pci_device_id = Reading::unavailable("N/A");
        }
        assert_eq!(statuses(&run(&name_only, None)), vec![Status::Info]);
    }

    #[test]
    fn nothing_readable_is_a_warning_that_says_what_was_not_read() {
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .gpu(0, |g| {
                g.pci_device_id = Reading::unavailable("nvidia-smi: <pci/pci_device_id> redacted");
                g.name = Reading::unavailable("nvidia-smi: <product_name> N/A");
            })
            .build();
        let out = run(&f, Some("a100:1"));
        assert_eq!(statuses(&out), vec![Status::Warn, Status::Warn]);
        assert_eq!(
            out[0].message,
            "1 GPU found, 1 ordered (a100:1); the model could not be confirmed on 1 of them"
        );
        assert!(out[0]
            .fix
            .as_deref()
            .unwrap()
            .starts_with("Read the model by hand"));
        let m = &out[1].message;
        assert!(m.contains("cannot confirm it is the ordered a100"), "{m}");
        assert!(
            m.contains("<pci/pci_device_id> redacted") && m.contains("<product_name> N/A"),
            "{m}"
        );
        // Without an order, nothing identifies it: skip with the reasons.
        let out = run(&f, None);
        assert_eq!(statuses(&out), vec![Status::Skip]);
        assert!(out[0].message.contains("nothing identifies the model"));
        assert!(out[0].message.contains("redacted"));
    }

    #[test]
    fn the_count_fails_when_it_differs_either_way() {
        for (order, msg) in [
            ("h200:3", "2 GPUs found, 3 ordered (h200:3)"),
            ("h200:1", "2 GPUs found, 1 ordered (h200:1)"),
        ] {
            let out = run(&Machine::healthy("h200-sxm-141gb", 2).build(), Some(order));
            assert_eq!(out[0].status, Status::Fail, "{order}");
            assert_eq!(out[0].message, msg);
            assert!(out[0].fix.as_deref().unwrap().contains("GPUs you ordered"));
            // The models match.
            assert!(out[1..].iter().all(|f| f.status == Status::Pass));
        }
        // One GPU: singular.
        let out = run(
            &Machine::healthy("h200-sxm-141gb", 1).build(),
            Some("h200:1"),
        );
        assert_eq!(out[0].message, "1 GPU, as ordered (h200:1)");
    }

    #[test]
    fn the_count_of_gpus_the_driver_attaches_but_does_not_describe() {
        // The driver says 4 attached, describes 1 (nvidia-smi -q -x -i 0, or a cut-down log).
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .with(|f| f.driver.attached_gpus = Reading::Value(4))
            .build();
        let out = run(&f, Some("a100:4"));
        assert_eq!(out[0].status, Status::Warn);
        assert_eq!(
            out[0].message,
            "4 GPUs attached (the driver says), 1 described, 4 ordered (a100:4); the model could not be confirmed on 3 of them"
        );
        // Attached = described (or fewer, a log that contradicts itself): the list counts.
        for attached in [1, 0] {
            let f = Machine::healthy("a100-sxm4-80gb", 1)
                .with(|f| f.driver.attached_gpus = Reading::Value(attached))
                .build();
            assert_eq!(
                run(&f, Some("a100:1"))[0].message,
                "1 GPU, as ordered (a100:1)"
            );
            assert_eq!(
                run(&f, Some("a100:2"))[0].message,
                "1 GPU found, 2 ordered (a100:2)"
            );
        }
        // Four attached, eight ordered: the count fails.
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .with(|f| f.driver.attached_gpus = Reading::Value(4))
            .build();
        assert_eq!(run(&f, Some("a100:8"))[0].status, Status::Fail);
    }

    #[test]
    fn the_count_where_the_driver_does_not_answer_comes_from_the_pci_bus() {
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| f.gpus = Reading::unavailable("NVML: driver not loaded"))
            .build();
        let out = run(&f, Some("h200:2"));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Warn);
        assert_eq!(
            out[0].message,
            "2 GPUs on the PCI bus (the driver does not answer), 2 ordered (h200:2); the model could not be confirmed on 2 of them"
        );
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(|f| {
                f.gpus = Reading::unavailable("no driver");
                f.pci_gpus = Reading::unavailable("no sysfs");
            })
            .build();
        let out = run(&f, Some("h200:2"));
        assert_eq!(out[0].status, Status::Fail);
        assert!(out[0].message.starts_with("no GPU found, 2 ordered"));
    }

    #[test]
    fn a_driver_report_that_could_not_be_read_is_not_no_gpu_found() {
        let unread = |f: &mut Facts| {
            f.gpus = Reading::unavailable("nvidia-smi -q -x: malformed");
            f.driver.report_unreadable = Some("nvidia-smi -q -x: malformed".into());
        };
        // The PCI bus still counts them.
        let f = Machine::healthy("h200-sxm-141gb", 2).with(unread).build();
        let out = run(&f, Some("h200:2"));
        assert_eq!(out[0].status, Status::Warn);
        assert_eq!(
            out[0].message,
            "2 GPUs on the PCI bus (the driver's report could not be read), 2 ordered (h200:2); the model could not be confirmed on 2 of them"
        );
        // The PCI bus counts fewer than ordered: that fails, report read or not.
        let out = run(&f, Some("h200:4"));
        assert_eq!(out[0].status, Status::Fail);
        assert!(
            out[0].message.starts_with(
                "2 GPUs on the PCI bus (the driver's report could not be read), 4 ordered (h200:4)"
            ),
            "{}",
            out[0].message
        );
        // Nothing counts them: not known, which contradicts no order.
        let f = Machine::healthy("h200-sxm-141gb", 2)
            .with(unread)
            .with(|f| f.pci_gpus = Reading::unavailable("no sysfs"))
            .build();
        let out = run(&f, Some("h200:2"));
        assert_eq!(out[0].status, Status::Warn);
        assert_eq!(
            out[0].message,
            "GPUs not known (the driver's report could not be read), 2 ordered (h200:2); the model could not be confirmed on 2 of them"
        );
        assert_eq!(out[0].evidence.get("found").unwrap(), 0);
        // Without --expect there is nothing to judge: the skip says why.
        let out = run(&f, None);
        assert_eq!(out[0].status, Status::Skip);
        assert!(out[0]
            .message
            .contains("the driver's report could not be read"));
    }

    #[test]
    fn one_wrong_gpu_among_right_ones_fails_the_count_too() {
        let f = Machine::healthy("h100-sxm5-80gb", 2)
            .gpu(1, |g| {
                g.pci_device_id = Reading::Value(0x20b2);
                g.name = Reading::Value("NVIDIA A100-SXM4-80GB".into());
                g.sm_count = Reading::Value(108);
            })
            .build();
        let out = run(&f, Some("h100:2"));
        assert_eq!(
            statuses(&out),
            vec![Status::Fail, Status::Pass, Status::Fail]
        );
        assert!(out[0].message.contains("does not match on 1 of them"));
        assert!(out[2]
            .message
            .contains("is an NVIDIA A100 SXM4 80GB, not the ordered h100"));
    }

    #[test]
    fn memory_outside_the_label_fails_and_says_it_in_one_unit_per_figure() {
        let db = SpecDb::embedded();
        let spec = db.by_key("a100-sxm4-80gb").unwrap();
        let label = spec.memory_mib().unwrap();
        for (mib, ok) in [
            // The bounds of GpuSpec::memory_matches: [0.90, 1.02] of the label.
            ((label * 0.90).ceil() as u64, true),
            ((label * 0.90).floor() as u64 - 1, false),
            ((label * 1.02).floor() as u64, true),
            ((label * 1.02).ceil() as u64 + 1, false),
        ] {
            let f = Machine::healthy("a100-sxm4-80gb", 1)
                .gpu(0, |g| g.memory.total_mib = Reading::Value(mib))
                .build();
            let out = run(&f, None);
            assert_eq!(
                out[0].status == Status::Pass,
                ok,
                "{mib}: {}",
                out[0].message
            );
        }
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .gpu(0, |g| g.memory.total_mib = Reading::Value(40960))
            .build();
        let out = run(&f, None);
        assert_eq!(
            out[0].message,
            "GPU 0 (00:06.0) (NVIDIA A100-SXM4-80GB): it shows 40.0 GiB of memory; the datasheet \
             label is 80 GB: another variant, a vGPU or a MIG slice"
        );
    }

    #[test]
    fn an_sm_count_other_than_the_datasheet_fails() {
        for (sms, status) in [
            (132, Status::Pass),
            (131, Status::Fail),
            (133, Status::Fail),
        ] {
            let f = Machine::healthy("h200-sxm-141gb", 1)
                .gpu(0, |g| g.sm_count = Reading::Value(sms))
                .build();
            let out = run(&f, None);
            assert_eq!(out[0].status, status, "{sms}");
            if status == Status::Fail {
                assert!(out[0]
                    .message
                    .ends_with(&format!("it has {sms} SMs, the datasheet says 132")));
            }
        }
    }

    #[test]
    fn a_compute_capability_read_from_the_gpu_must_be_the_models() {
        use crate::facts::ComputeCapability as Cc;
        let ampere = Cc { major: 8, minor: 0 };
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| g.compute_capability = Reading::Value(ampere))
            .build();
        let out = run(&f, None);
        assert_eq!(out[0].status, Status::Fail);
        assert!(out[0]
            .message
            .ends_with("it reports compute capability 8.0, the datasheet says 9.0"));
        // The same value from the datasheet (of a misidentified model) proves nothing.
        let f = Machine::healthy("h200-sxm-141gb", 1)
            .gpu(0, |g| {
                g.compute_capability = Reading::Value(ampere);
                g.compute_capability_source = Some(ValueSource::Datasheet);
            })
            .build();
        let out = run(&f, None);
        assert_eq!(out[0].status, Status::Pass);
        assert_eq!(
            out[0].evidence.get("compute_capability_source").unwrap(),
            "datasheet"
        );
        // The model's own value passes, and is evidence.
        let out = run(&Machine::healthy("h200-sxm-141gb", 1).build(), None);
        assert_eq!(out[0].status, Status::Pass);
        assert_eq!(out[0].evidence.get("compute_capability").unwrap(), "9.0");
        assert_eq!(
            out[0].evidence.get("compute_capability_source").unwrap(),
            "nvml"
        );
    }

    #[test]
    fn a_vgpu_is_said_to_be_a_slice_of_its_model() {
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .gpu(0, |g| {
                g.name = Reading::Value("GRID A100X-10C".into());
                g.memory.total_mib = Reading::Value(10240);
                g.virtualization = Reading::Value(VirtualizationMode::Vgpu);
            })
            .build();
        let out = run(&f, None);
        assert_eq!(statuses(&out), vec![Status::Info]);
        assert_eq!(
            out[0].message,
            "GPU 0 (00:06.0) is a vGPU (GRID A100X-10C) of an NVIDIA A100 SXM4 80GB, with 10.0 GiB \
             of memory; the datasheet label is 80 GB (a slice: see gpu.virtualization)"
        );
        // The same memory without vGPU mode is a fault.
        let f = Machine::healthy("a100-sxm4-80gb", 1)
            .gpu(0, |g| g.memory.total_mib = Reading::Value(10240))
            .build();
        assert_eq!(run(&f, None)[0].status, Status::Fail);
    }

    #[test]
    fn a_zeroed_device_id_is_not_evidence() {
        let f = Machine::healthy("a10g", 1)
            .gpu(0, |g| g.pci_device_id = Reading::Value(0))
            .build();
        let out = run(&f, None);
        assert_eq!(out[0].status, Status::Pass, "{}", out[0].message);
        assert!(out[0].evidence.get("pci_device_id").is_none());
        assert!(out[0].evidence.get("pci_device_id_unavailable").is_some());
    }
}
