//! Every fixture snapshot, audited by the real binary: the findings are snapshot-tested, and
//! each degraded variant must show its fault under the right check.

mod common;
use common::*;

const ALL: &[&str] = &[
    "h200-x2-vm",
    "h200-x2-x8-link",
    "h200-x2-power-capped",
    "h200-x2-nouveau",
    "h200-x2-old-driver",
    "h200-x2-mig",
    "h200-x2-vgpu",
    "h200-x2-hw-slowdown",
    "h200-x2-nvlink-down",
    "h200-x2-ecc-errors",
    "h200-x2-gpu-lost",
    "h200-x2-no-driver",
    "h200-x2-vfio",
    "h200-x2-settings",
    "h200-x2-gen4-slot",
    "h200-x2-damaged",
    "h200-x2-nvlink-degraded",
    "h200-x2-live",
];

#[test]
fn findings_of_every_fixture() {
    for name in ALL {
        let (code, report) = audit(name, &[]);
        assert!(code == 0 || code == 1, "{name}: exit {code}");
        insta::assert_snapshot!(*name, digest(&report));
    }
}

#[test]
fn every_check_appears_in_every_report() {
    let ids: Vec<String> = gpuaudit_core::checks::all()
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    for name in ALL {
        let (_, report) = audit(name, &[]);
        for id in &ids {
            assert!(
                !findings(&report, id).is_empty(),
                "{name}: {id} missing from the report"
            );
        }
        let s = &report["summary"];
        let total: u64 = ["pass", "info", "warn", "fail", "skip"]
            .iter()
            .map(|k| s[k].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(
            total as usize,
            report["findings"].as_array().map(|a| a.len()).unwrap_or(0),
            "{name}: summary"
        );
        for f in report["findings"].as_array().into_iter().flatten() {
            assert!(
                !f["message"].as_str().unwrap_or("").is_empty(),
                "{name}: empty message in {f}"
            );
            if f["status"] == "fail" || f["status"] == "warn" {
                assert!(
                    f["fix"].is_string(),
                    "{name}: a {} finding without a fix: {f}",
                    f["status"]
                );
            }
        }
    }
}

#[test]
fn healthy_machine_has_no_failures() {
    let (code, r) = audit("h200-x2-vm", &[]);
    assert_eq!(code, 0, "{}", digest(&r));
    assert_eq!(r["schema"], "gpuaudit.report/1");
    assert_eq!(r["gpus"].as_array().map(|a| a.len()), Some(2));
    assert_eq!(r["gpus"][0]["spec"]["key"], "h200-sxm-141gb");
    assert_eq!(worst(&r, "gpu.identity", Some(0)), "pass");
    assert_eq!(worst(&r, "pcie.link", Some(1)), "pass");
    assert_eq!(worst(&r, "nvlink.status", Some(0)), "pass");
    assert_eq!(worst(&r, "nvlink.status", None), "pass");
    assert_eq!(worst(&r, "power.limit", Some(0)), "pass");
    assert_eq!(worst(&r, "memory.errors", Some(1)), "pass");
    assert_eq!(worst(&r, "cuda.driver", None), "pass");
    assert_eq!(worst(&r, "compute.gemm", None), "skip");
}

#[test]
fn each_fault_shows_under_its_check() {
    let cases: &[(&str, &str, Option<u64>, &str)] = &[
        ("h200-x2-x8-link", "pcie.link", Some(1), "fail"),
        ("h200-x2-x8-link", "pcie.link", Some(0), "pass"),
        ("h200-x2-power-capped", "power.limit", Some(0), "fail"),
        ("h200-x2-power-capped", "power.limit", Some(1), "pass"),
        ("h200-x2-nouveau", "kernel.modules", None, "fail"),
        ("h200-x2-nouveau", "gpu.present", None, "fail"),
        ("h200-x2-old-driver", "cuda.driver", None, "fail"),
        ("h200-x2-old-driver", "cuda.toolkit-compat", None, "fail"),
        ("h200-x2-old-driver", "clocks.throttle", Some(0), "pass"),
        ("h200-x2-old-driver", "power.limit", Some(0), "pass"),
        ("h200-x2-mig", "gpu.virtualization", Some(0), "warn"),
        ("h200-x2-mig", "gpu.virtualization", Some(1), "pass"),
        ("h200-x2-vgpu", "gpu.virtualization", Some(0), "warn"),
        ("h200-x2-vgpu", "gpu.identity", Some(1), "fail"),
        ("h200-x2-hw-slowdown", "clocks.throttle", Some(1), "fail"),
        ("h200-x2-hw-slowdown", "clocks.throttle", Some(0), "pass"),
        ("h200-x2-nvlink-down", "nvlink.status", Some(0), "fail"),
        ("h200-x2-nvlink-down", "nvlink.status", None, "warn"),
        ("h200-x2-ecc-errors", "memory.errors", Some(0), "fail"),
        ("h200-x2-ecc-errors", "memory.errors", Some(1), "fail"),
        ("h200-x2-gpu-lost", "gpu.present", None, "fail"),
        ("h200-x2-gpu-lost", "memory.errors", None, "fail"),
        ("h200-x2-no-driver", "gpu.present", None, "fail"),
        ("h200-x2-no-driver", "kernel.modules", None, "fail"),
        ("h200-x2-vfio", "gpu.driver-binding", None, "fail"),
        ("h200-x2-vfio", "gpu.driver-binding", Some(0), "pass"),
        ("h200-x2-settings", "os.persistence", Some(0), "warn"),
        ("h200-x2-settings", "memory.ecc", Some(1), "warn"),
        ("h200-x2-settings", "clocks.max", Some(1), "warn"),
        ("h200-x2-settings", "clocks.max", Some(0), "pass"),
        ("h200-x2-gen4-slot", "pcie.link", Some(0), "warn"),
        ("h200-x2-nvlink-degraded", "nvlink.status", Some(0), "fail"),
        ("h200-x2-nvlink-degraded", "nvlink.status", Some(1), "pass"),
    ];
    let mut failures = Vec::new();
    for (fixture, check, gpu, want) in cases {
        let (_, r) = audit(fixture, &[]);
        let got = worst(&r, check, *gpu);
        if got != *want {
            failures.push(format!(
                "{fixture}: {check} gpu {gpu:?}: want {want}, got {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_driver_is_diagnosed() {
    let (code, r) = audit("h200-x2-no-driver", &[]);
    assert_eq!(code, 1);
    let f = &findings(&r, "gpu.present")[0];
    let msg = f["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("couldn't communicate with the NVIDIA driver"),
        "{msg}"
    );
    assert!(msg.contains("2 NVIDIA GPU"), "{msg}");
}

#[test]
fn profiles_change_severities() {
    let (_, r) = audit("h200-x2-settings", &["--profile", "hpc"]);
    assert_eq!(worst(&r, "memory.ecc", Some(0)), "fail");
    let (_, r) = audit("h200-x2-mig", &["--profile", "train"]);
    assert_eq!(worst(&r, "gpu.virtualization", Some(0)), "fail");
    let (_, r) = audit("h200-x2-nvlink-down", &["--profile", "train"]);
    assert_eq!(worst(&r, "nvlink.status", None), "fail");
}

#[test]
fn expect_checks_model_and_count() {
    let (code, r) = audit("h200-x2-vm", &["--expect", "h200:2"]);
    assert_eq!(code, 0, "{}", digest(&r));
    assert_eq!(worst(&r, "gpu.identity", None), "pass");
    let (code, r) = audit("h200-x2-vm", &["--expect", "h200:8"]);
    assert_eq!(code, 1);
    assert_eq!(worst(&r, "gpu.identity", None), "fail");
    let (_, r) = audit("h200-x2-vm", &["--expect", "h100-sxm5-80gb"]);
    assert_eq!(worst(&r, "gpu.identity", Some(0)), "fail");
    let (_, r) = audit("h200-x2-vm", &["--expect", "a100-80gb:2"]);
    assert_eq!(worst(&r, "gpu.identity", Some(1)), "fail");
}

#[test]
fn gpu_selection_limits_per_gpu_findings() {
    let (_, r) = audit("h200-x2-x8-link", &["--gpus", "0"]);
    assert_eq!(statuses(&r, "pcie.link", Some(1)), Vec::<String>::new());
    assert_eq!(worst(&r, "pcie.link", Some(0)), "pass");
    assert_eq!(r["gpus"].as_array().map(|a| a.len()), Some(1));
}

#[test]
fn snapshot_collected_on_the_h200s_audits_clean() {
    // Collected by `gpuaudit collect` on the 2xH200 machine; its live audit had the same
    // facts findings (scripts/parity.py, BENCHMARKS.md).
    let (code, r) = audit("h200-x2-live", &[]);
    assert_eq!(code, 0, "{}", digest(&r));
    assert_eq!(worst(&r, "nvlink.status", None), "pass");
    assert_eq!(worst(&r, "cuda.framework", None), "pass");
    assert_eq!(worst(&r, "gpu.identity", Some(1)), "pass");
}
