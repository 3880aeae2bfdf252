//! The gpu.* checks' verdicts on real machines (fixtures/real, each with its PROVENANCE.md and
//! the judgment an experienced GPU engineer gives it). A verdict that changes on a real
//! machine fails here, whatever the unit tests say.

mod common;
use common::*;
use serde_json::Value;

/// The findings of one check about one GPU (`None`: about the machine).
fn about<'a>(r: &'a Value, check: &str, gpu: Option<u64>) -> Vec<&'a Value> {
    findings(r, check)
        .into_iter()
        .filter(|f| f["gpu"].as_u64() == gpu)
        .collect()
}

fn message(f: &Value) -> &str {
    f["message"].as_str().unwrap_or("")
}

#[test]
fn v100s_x8_ordered_as_v100s_passes() {
    let (code, r) = audit("real/v100s-pcie-32gb-x8-r460", &["--expect", "v100s:8"]);
    assert_ne!(code, 2);
    let count = about(&r, "gpu.identity", None);
    assert_eq!(count.len(), 1);
    assert_eq!(count[0]["status"], "pass");
    assert_eq!(message(count[0]), "8 GPUs, as ordered (v100s:8)");
    for g in 0..8 {
        assert_eq!(worst(&r, "gpu.identity", Some(g)), "pass", "GPU {g}");
        let f = about(&r, "gpu.identity", Some(g))[0];
        assert!(
            message(f).ends_with("is an NVIDIA Tesla V100S PCIe 32GB, as ordered (v100s)"),
            "{}",
            message(f)
        );
    }
}

#[test]
fn v100s_x8_ordered_as_a100_fails_every_gpu_and_the_count() {
    // Issue 8, defect 1: the audit said "8 GPUs, as ordered (a100)" and exited 0.
    let (code, r) = audit("real/v100s-pcie-32gb-x8-r460", &["--expect", "a100:8"]);
    assert_eq!(code, 1);
    let count = about(&r, "gpu.identity", None)[0];
    assert_eq!(count["status"], "fail");
    assert!(!message(count).contains("as ordered"), "{}", message(count));
    assert_eq!(
        message(count),
        "8 GPUs found, 8 ordered (a100:8); the model does not match on 8 of them (see each GPU's finding)"
    );
    for g in 0..8 {
        let f = about(&r, "gpu.identity", Some(g))[0];
        assert_eq!(f["status"], "fail", "GPU {g}");
        let m = message(f);
        assert!(
            m.contains("is an NVIDIA Tesla V100S PCIe 32GB, not the ordered a100"),
            "{m}"
        );
        // The evidence that rules the order out, each piece.
        assert!(m.contains("PCI device id 0x1df6"), "{m}");
        assert!(m.contains("'Tesla V100S-PCIE-32GB'"), "{m}");
        assert!(m.contains("31.7 GiB of memory"), "{m}");
        assert_eq!(f["evidence"]["pci_device_id"], "0x1df6");
        assert_eq!(f["evidence"]["ordered"], "a100");
    }
}

#[test]
fn v100s_x8_is_uniform() {
    let (_, r) = audit("real/v100s-pcie-32gb-x8-r460", &[]);
    assert_eq!(worst(&r, "gpu.uniform", None), "pass");
    assert_eq!(worst(&r, "gpu.present", None), "pass");
    for g in 0..8 {
        assert_eq!(worst(&r, "gpu.identity", Some(g)), "pass");
        assert_eq!(worst(&r, "gpu.virtualization", Some(g)), "pass");
    }
}

#[test]
fn rtx3090_ordered_as_rtx4090_fails() {
    let (code, r) = audit("real/rtx3090-power-capped-r525", &["--expect", "rtx4090"]);
    assert_eq!(code, 1);
    let f = about(&r, "gpu.identity", Some(0))[0];
    assert_eq!(f["status"], "fail");
    // The device id is redacted: the name alone rules the order out.
    assert!(
        message(f).contains("is an NVIDIA GeForce RTX 3090, not the ordered rtx4090"),
        "{}",
        message(f)
    );
    assert!(f["evidence"]["pci_device_id"].is_null());
    assert_eq!(
        f["evidence"]["pci_device_id_unavailable"],
        "nvidia-smi: <pci/pci_device_id> redacted"
    );
    // As ordered: the name and memory fit.
    let (_, r) = audit("real/rtx3090-power-capped-r525", &["--expect", "rtx3090:1"]);
    assert_eq!(worst(&r, "gpu.identity", None), "pass");
    assert_eq!(worst(&r, "gpu.identity", Some(0)), "pass");
}

#[test]
fn a100_mig_log_of_one_gpu_of_four_is_not_all_answered_for() {
    // Issue 8, defect 4: <attached_gpus>4 with one <gpu> described.
    let (_, r) = audit("real/a100-sxm4-80gb-mig-r535", &[]);
    let f = about(&r, "gpu.present", None)[0];
    // A published log may be `nvidia-smi -q -x -i 0`: a snapshot cannot tell, so a warning.
    assert_eq!(f["status"], "warn");
    assert!(!message(f).contains("answers for each"), "{}", message(f));
    assert!(
        message(f)
            .starts_with("The driver says 4 GPUs attached and describes 1: 3 GPUs not described"),
        "{}",
        message(f)
    );
    assert_eq!(f["evidence"]["attached_gpus"], 4);
    // Identity: an A100 SXM4 80GB by device id and memory; MIG is virtualization's finding.
    assert_eq!(worst(&r, "gpu.identity", Some(0)), "pass");
    assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "warn");
    for p in ["train", "hpc"] {
        let (_, r) = audit("real/a100-sxm4-80gb-mig-r535", &["--profile", p]);
        assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "fail", "{p}");
    }
    for p in ["inference", "render"] {
        let (_, r) = audit("real/a100-sxm4-80gb-mig-r535", &["--profile", p]);
        assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "warn", "{p}");
    }
    // Four ordered, four attached, one described: not confirmed, not "as ordered".
    let (_, r) = audit("real/a100-sxm4-80gb-mig-r535", &["--expect", "a100:4"]);
    let count = about(&r, "gpu.identity", None)[0];
    assert_eq!(count["status"], "warn");
    assert!(message(count).contains("could not be confirmed on 3 of them"));
}

#[test]
fn a10g_with_a_zeroed_device_id_is_known_by_its_name() {
    let (_, r) = audit("real/a10g-r515", &[]);
    let f = about(&r, "gpu.identity", Some(0))[0];
    assert_eq!(f["status"], "pass");
    assert_eq!(message(f), "GPU 0 (00:1e.0) is an NVIDIA A10G");
    // Issue 8, defect 3: the zeroed id is not evidence of a device 0x0000.
    assert!(f["evidence"]["pci_device_id"].is_null(), "{f}");
    assert!(!f.to_string().contains("0x0000"), "{f}");
    assert!(f["evidence"]["pci_device_id_unavailable"]
        .as_str()
        .unwrap_or("")
        .contains("000000DE"));
    assert!(r["gpus"][0]["pci_device_id"].is_null());
    assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "pass");
    // Ordered as an A10G: the name vouches for it.
    let (_, r) = audit("real/a10g-r515", &["--expect", "a10g:1"]);
    assert_eq!(worst(&r, "gpu.identity", None), "pass");
}

#[test]
fn p4_vgpu_guest_is_a_slice_of_a_p4() {
    let (_, r) = audit("real/grid-p4-1q-vgpu-r513-windows", &[]);
    let f = about(&r, "gpu.identity", Some(0))[0];
    assert_eq!(f["status"], "info");
    assert_eq!(
        message(f),
        "GPU 0 (00:0b.0) is a vGPU (GRID P4-1Q) of an NVIDIA Tesla P4, with 1.0 GiB of memory; \
         the datasheet label is 8 GB (a slice: see gpu.virtualization)"
    );
    assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "warn");
    // Ordered as a whole P4: the 1 GB slice is not one.
    let (code, r) = audit("real/grid-p4-1q-vgpu-r513-windows", &["--expect", "p4"]);
    assert_eq!(code, 1);
    let f = about(&r, "gpu.identity", Some(0))[0];
    assert_eq!(f["status"], "fail");
    assert!(message(f).contains("1.0 GiB of memory"), "{}", message(f));
    // The parser's zeros: the max SM clock of the guest (0 MHz) is no reading.
    let f = about(&r, "clocks.max", Some(0))[0];
    assert_ne!(f["status"], "pass", "{f}");
    assert!(f["evidence"]["sm_max_mhz"].is_null(), "{f}");
    assert!(message(f).contains("0 MHz, which the driver reports where it does not know"));
}

#[test]
fn p100_pair_is_one_model_with_different_memory() {
    // Hadoop's log: one name edited with "_2"; the totals 11567 and 12290 MiB.
    let (_, r) = audit("real/p100-pcie-12gb-x2-r375", &[]);
    let f = about(&r, "gpu.uniform", None)[0];
    assert_eq!(f["status"], "warn");
    assert!(
        message(f).starts_with("Both GPUs are NVIDIA Tesla P100 PCIe 12GB, but their memory differs: 11567 to 12290 MiB"),
        "{}",
        message(f)
    );
    for g in 0..2 {
        assert_eq!(worst(&r, "gpu.identity", Some(g)), "pass");
    }
    let (_, r) = audit("real/p100-pcie-12gb-x2-r375", &["--profile", "train"]);
    assert_eq!(worst(&r, "gpu.uniform", None), "fail");
}

#[test]
fn rtx2080_pair_is_uniform() {
    let (_, r) = audit("real/rtx2080-x2-r590", &[]);
    let f = about(&r, "gpu.uniform", None)[0];
    assert_eq!(f["status"], "pass");
    assert_eq!(
        message(f),
        "All 2 GPUs are NVIDIA GeForce RTX 2080 with the same memory and VBIOS"
    );
    for g in 0..2 {
        let f = about(&r, "gpu.identity", Some(g))[0];
        assert_eq!(f["status"], "pass");
        assert!(message(f).ends_with("is an NVIDIA GeForce RTX 2080"));
    }
}

#[test]
fn one_gpu_machines_identify_and_pass_what_they_should() {
    for (slug, status, msg) in [
        ("real/t4-r515", "pass", "GPU 0 (00:1e.0) is an NVIDIA T4"),
        (
            "real/rtx4000-sff-ada-r595",
            "pass",
            "GPU 0 (06:00.0) is an NVIDIA RTX 4000 SFF Ada Generation",
        ),
        (
            "real/rtx-pro-6000-blackwell-maxq-r590",
            "pass",
            "GPU 0 (61:00.0) is an NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
        ),
        (
            "real/quadro-p400-r418",
            "info",
            "GPU 0 (43:00.0) is a Quadro P400 that the spec database does not know: nothing to compare with",
        ),
    ] {
        let (_, r) = audit(slug, &[]);
        let f = about(&r, "gpu.identity", Some(0))[0];
        assert_eq!(f["status"], status, "{slug}");
        assert_eq!(message(f), msg, "{slug}");
        assert_eq!(worst(&r, "gpu.uniform", None), "pass", "{slug}");
    }
}

#[test]
fn every_real_machine_lists_its_gpus_and_no_sentence_says_gpu_s() {
    for name in all_fixtures()
        .into_iter()
        .filter(|n| n.starts_with("real/"))
    {
        let (_, r) = audit(&name, &[]);
        let present = worst(&r, "gpu.present", None);
        let want = if name.contains("a100-sxm4-80gb-mig") {
            "warn"
        } else {
            "pass"
        };
        assert_eq!(present, want, "{name}");
        // No sysfs in a published log: the binding is not judged.
        assert_eq!(worst(&r, "gpu.driver-binding", None), "skip", "{name}");
        for check in [
            "gpu.present",
            "gpu.identity",
            "gpu.uniform",
            "gpu.virtualization",
        ] {
            for f in findings(&r, check) {
                let m = message(f);
                assert!(!m.contains("GPU(s)"), "{name}: {m}");
                assert!(!m.contains(" a NVIDIA"), "{name}: {m}");
            }
        }
    }
}
