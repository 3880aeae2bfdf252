//! Every fixture snapshot (each directory under fixtures/snapshots), audited by the real
//! binary: each check's findings over all of them are snapshot-tested, one snapshot per check,
//! and each degraded variant must show its fault under the right check.

mod common;
use common::*;
use serde_json::{Map, Value};

/// One insta snapshot per check, `tests/snapshots/checks/<id>.snap`: for every fixture, the
/// check's findings with status, gpu, message, evidence, fix and (where set) caused_by. As ruff tests a rule: a new
/// or changed check changes only its own snapshot, a new fixture adds its entry to each.
#[test]
fn findings_of_each_check_over_every_fixture() {
    let reports: Vec<(String, Value)> = all_fixtures()
        .into_iter()
        .map(|name| {
            let (code, report) = audit(&name, &[]);
            assert!(code == 0 || code == 1, "{name}: exit {code}");
            (name, report)
        })
        .collect();
    let mut failed = Vec::new();
    for c in gpuaudit_core::checks::all() {
        let mut by_fixture = Map::new();
        for (name, report) in &reports {
            let found: Vec<Value> = findings(report, c.id)
                .into_iter()
                .map(|f| {
                    let mut m = Map::new();
                    for k in ["status", "gpu", "message", "evidence", "fix"] {
                        m.insert(k.to_string(), f[k].clone());
                    }
                    // Only where a cause explains it, so the other entries stay as they were.
                    if !f["caused_by"].is_null() {
                        m.insert("caused_by".into(), f["caused_by"].clone());
                    }
                    Value::Object(m)
                })
                .collect();
            by_fixture.insert(name.clone(), Value::Array(found));
        }
        let snapshot = Value::Object(by_fixture);
        // Compare every check before failing, so one run names all that changed.
        let compared = std::panic::catch_unwind(|| {
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path("snapshots/checks");
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.bind(|| insta::assert_yaml_snapshot!(c.id, snapshot));
        });
        if compared.is_err() {
            failed.push(c.id);
        }
    }
    assert!(
        failed.is_empty(),
        "the findings of these checks changed: {}",
        failed.join(", ")
    );
}

/// Every cause a finding names is a problem of its report (`caused_by` resolves), no chain
/// comes back on itself, and the fixtures whose fault is one cause show one problem: the
/// cause first, with what it explains under it.
#[test]
fn every_cause_names_a_problem_of_its_report() {
    use gpuaudit_core::report::{from_json, Causes, ProblemCounts};
    for name in all_fixtures() {
        let (_, report) = audit(&name, &[]);
        let r = from_json(&report.to_string()).expect("a report");
        let causes = Causes::of(&r.findings);
        for (i, f) in r.findings.iter().enumerate() {
            if let Some(c) = &f.caused_by {
                let j = causes.cause_of(i).unwrap_or_else(|| {
                    panic!("{name}: {} names {c:?}, not a problem here", f.check)
                });
                assert_ne!(causes.root_of(i), i, "{name}: {} is in a cycle", f.check);
                assert!(r.findings[j].caused_by.is_none() || causes.root_of(j) != j);
            }
        }
        let one = |root: &str| {
            let counts = ProblemCounts::of(&r);
            assert_eq!((counts.fail + counts.warn), 1, "{name}: {counts:?}");
            // As the views show them: one cause on several GPUs is one problem.
            let overview = gpuaudit_core::render::overview::Overview::of(&r);
            let roots: Vec<&str> = overview.problems().iter().map(|p| p.root.check).collect();
            assert_eq!(roots, [root], "{name}");
        };
        match name.as_str() {
            "h200-x2-nouveau" | "h200-x2-vfio" => one("gpu.driver-binding"),
            "h200-x2-no-driver" => one("kernel.modules"),
            "h200-x2-hw-slowdown" => one("clocks.throttle"),
            "h200-x2-old-driver" => one("cuda.driver"),
            "h200-x2-gpu-lost" => one("gpu.present"),
            "h200-x2-power-capped" => one("power.limit"),
            // The GPUs' fabric registration (nvlink.fabric) is why their NVLink is down.
            "h200-x8-nvswitch-fabric-down"
            | "h200-x2-nvlink-down"
            | "h200-x8-fm-down"
            | "h200-x8-fm-missing"
            | "h200-x8-fm-mismatch"
            | "h200-x8-fabric-in-progress"
            | "h200-x8-two-cliques" => one("nvlink.fabric"),
            "h200-x8-nvswitch-one-pcie" => one("nvlink.status"),
            _ => {}
        }
    }
}

#[test]
fn every_check_appears_in_every_report() {
    let ids: Vec<String> = gpuaudit_core::checks::all()
        .iter()
        .map(|c| c.id.to_string())
        .collect();
    for name in all_fixtures() {
        let (_, report) = audit(&name, &[]);
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
        // A vGPU shows its slice of the memory by design: identity says so (info) and
        // gpu.virtualization warns; only an order the slice does not fit fails (--expect).
        ("h200-x2-vgpu", "gpu.identity", Some(1), "info"),
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
        (
            "h200-x8-nvswitch-fabric-down",
            "nvlink.status",
            None,
            "fail",
        ),
        (
            "h200-x8-nvswitch-one-pcie",
            "nvlink.status",
            Some(5),
            "fail",
        ),
        (
            "h200-x8-nvswitch-one-pcie",
            "nvlink.status",
            Some(4),
            "pass",
        ),
        ("h200-x8-nvswitch-one-pcie", "nvlink.status", None, "warn"),
        ("h200-x8-nvswitch", "nvlink.fabric", None, "pass"),
        (
            "h200-x8-nvswitch-fabric-down",
            "nvlink.fabric",
            Some(0),
            "warn",
        ),
        ("h200-x8-fm-ok", "nvlink.fabric", None, "pass"),
        ("h200-x8-fm-down", "nvlink.fabric", None, "fail"),
        ("h200-x8-fm-down", "nvlink.fabric", Some(7), "fail"),
        ("h200-x8-fm-missing", "nvlink.fabric", None, "fail"),
        ("h200-x8-fm-mismatch", "nvlink.fabric", None, "fail"),
        (
            "h200-x8-fabric-in-progress",
            "nvlink.fabric",
            Some(3),
            "warn",
        ),
        ("h200-x8-two-cliques", "nvlink.fabric", None, "warn"),
        ("h200-x2-vm", "nvlink.fabric", None, "pass"),
        ("rtx4090-x8-pcie", "nvlink.fabric", None, "pass"),
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

/// The machine-level nvlink.status finding (the topology matrix).
fn topology_finding(r: &serde_json::Value) -> serde_json::Value {
    let machine: Vec<_> = findings(r, "nvlink.status")
        .into_iter()
        .filter(|f| f["gpu"].is_null())
        .collect();
    assert_eq!(machine.len(), 1, "{machine:?}");
    machine[0].clone()
}

#[test]
fn eight_h200s_on_nvswitch_audit_clean() {
    let (code, r) = audit("h200-x8-nvswitch", &[]);
    assert_eq!(code, 0, "{}", digest(&r));
    let gpus = r["gpus"].as_array().cloned().unwrap_or_default();
    assert_eq!(gpus.len(), 8);
    let bus: Vec<&str> = gpus
        .iter()
        .map(|g| g["pci_bus_id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        bus,
        [
            "0000:00:06.0",
            "0000:00:07.0",
            "0000:00:08.0",
            "0000:00:09.0",
            "0000:00:0a.0",
            "0000:00:0b.0",
            "0000:00:0c.0",
            "0000:00:0d.0"
        ]
    );
    let mut uuids: Vec<&str> = gpus
        .iter()
        .map(|g| g["uuid"].as_str().unwrap_or(""))
        .collect();
    uuids.sort_unstable();
    uuids.dedup();
    assert_eq!(uuids.len(), 8, "UUIDs are distinct");
    for g in 0..8u64 {
        assert_eq!(r["gpus"][g as usize]["index"], g);
        assert_eq!(r["gpus"][g as usize]["spec"]["key"], "h200-sxm-141gb");
        let f = findings(&r, "nvlink.status")
            .into_iter()
            .find(|f| f["gpu"].as_u64() == Some(g))
            .cloned()
            .unwrap_or_default();
        assert_eq!(f["status"], "pass", "GPU {g}: {f}");
        assert_eq!(f["evidence"]["links_active"], 18, "GPU {g}: {f}");
        assert_eq!(f["evidence"]["fabric_state"], "Completed", "GPU {g}: {f}");
        assert_eq!(worst(&r, "pcie.link", Some(g)), "pass");
        assert_eq!(worst(&r, "gpu.driver-binding", Some(g)), "pass");
    }
    let t = topology_finding(&r);
    assert_eq!(t["status"], "pass", "{t}");
    assert_eq!(
        t["message"],
        "All 28 GPU pairs are connected over NVLink through NVSwitch (NV18: every pair has all of a GPU's links)"
    );
    assert_eq!(t["evidence"]["pairs"], 28);
    assert_eq!(t["evidence"]["links"]["NV18"], 28);
    assert_eq!(worst(&r, "gpu.present", None), "pass");
    assert_eq!(worst(&r, "gpu.uniform", None), "pass");
}

#[test]
fn expect_on_eight_gpus() {
    let (code, r) = audit("h200-x8-nvswitch", &["--expect", "h200:8"]);
    assert_eq!(code, 0, "{}", digest(&r));
    assert_eq!(statuses(&r, "gpu.identity", None), ["pass"]);
    let (code, r) = audit("h200-x8-nvswitch", &["--expect", "h200:4"]);
    assert_eq!(code, 1);
    assert_eq!(statuses(&r, "gpu.identity", None), ["fail"]);
    let f = findings(&r, "gpu.identity")
        .into_iter()
        .find(|f| f["gpu"].is_null())
        .cloned()
        .unwrap_or_default();
    assert_eq!(f["message"], "8 GPUs found, 4 ordered (h200:4)");
}

#[test]
fn fabric_manager_down_on_eight_gpus() {
    let (code, r) = audit("h200-x8-nvswitch-fabric-down", &[]);
    assert_eq!(code, 1);
    for g in 0..8u64 {
        let f = findings(&r, "nvlink.status")
            .into_iter()
            .find(|f| f["gpu"].as_u64() == Some(g))
            .cloned()
            .unwrap_or_default();
        assert_eq!(f["status"], "fail", "GPU {g}: {f}");
        let msg = f["message"].as_str().unwrap_or("");
        assert!(
            msg.contains("fabric registration is 'In Progress'"),
            "{msg}"
        );
        assert!(f["fix"]
            .as_str()
            .unwrap_or("")
            .contains("nvidia-fabricmanager"));
    }
    // The matrix still reads NV18 everywhere; without the fabric the pairs are not usable.
    let t = topology_finding(&r);
    assert_eq!(t["status"], "fail", "{t}");
    assert_eq!(t["evidence"]["links"]["NV18"], 28);
    assert_eq!(
        t["evidence"]["fabric_unregistered_gpus"],
        serde_json::json!([0, 1, 2, 3, 4, 5, 6, 7])
    );
}

/// nvlink.fabric on the 8-GPU NVSwitch board: each fabric manager case says its cause.
#[test]
fn the_fabric_managers_cases() {
    let machine = |fixture: &str| -> serde_json::Value {
        let (_, r) = audit(fixture, &[]);
        findings(&r, "nvlink.fabric")
            .into_iter()
            .find(|f| f["gpu"].is_null())
            .cloned()
            .unwrap_or_default()
    };
    let msg = |f: &serde_json::Value| f["message"].as_str().unwrap_or("").to_string();
    let ok = machine("h200-x8-fm-ok");
    assert!(
        msg(&ok).contains("the fabric manager runs (version 580.159.04, the driver's)"),
        "{ok}"
    );
    assert_eq!(
        ok["evidence"]["nvswitches"][0],
        "0000:00:10.0 22a3 LS10 (H100 generation)"
    );
    let m = machine("h200-x8-fm-mismatch");
    assert!(
        msg(&m).contains("version 570.172.08 is not the driver's 580.159.04"),
        "{m}"
    );
    assert!(msg(&m).contains("(it is not running)"), "{m}");
    assert!(msg(&machine("h200-x8-fm-missing")).contains("without the fabric manager"));
    let down = machine("h200-x8-fm-down");
    assert!(msg(&down).contains("installed but not running"), "{down}");
    assert!(
        msg(&down).contains("detected NVSwitch fatal error 20034"),
        "{down}"
    );
    // A VM given GPUs but not the switches: the host's fabric manager, not judged here.
    assert!(msg(&machine("h200-x8-nvswitch")).contains("the host runs the fabric manager"));
    assert!(msg(&machine("h200-x8-two-cliques")).contains("8 of 8 GPUs registered"));
    let (_, r) = audit("h200-x8-two-cliques", &[]);
    let w: Vec<_> = findings(&r, "nvlink.fabric")
        .into_iter()
        .filter(|f| f["status"] == "warn")
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(msg(w[0]).contains("2 NVLink partitions"), "{}", w[0]);
}

#[test]
fn one_gpu_of_eight_without_nvlink() {
    let (code, r) = audit("h200-x8-nvswitch-one-pcie", &[]);
    assert_eq!(code, 1);
    for g in 0..8u64 {
        let want = if g == 5 { "fail" } else { "pass" };
        assert_eq!(worst(&r, "nvlink.status", Some(g)), want, "GPU {g}");
    }
    let five = findings(&r, "nvlink.status")
        .into_iter()
        .find(|f| f["gpu"].as_u64() == Some(5))
        .cloned()
        .unwrap_or_default();
    assert_eq!(five["evidence"]["links_active"], 0, "{five}");
    assert!(five["message"]
        .as_str()
        .unwrap_or("")
        .starts_with("GPU 5 (00:0b.0): 0 of 18 NVLink links active"));
    let t = topology_finding(&r);
    assert_eq!(t["status"], "warn", "{t}");
    let msg = t["message"].as_str().unwrap_or("");
    assert!(
        msg.starts_with("7 of 28 GPU pairs have no NVLink path"),
        "{msg}"
    );
    assert!(msg.contains("GPU5 has no NVLink to any other GPU"), "{msg}");
    assert_eq!(
        t["evidence"]["pairs_without_nvlink"],
        serde_json::json!([
            "GPU0-GPU5 PHB",
            "GPU1-GPU5 PHB",
            "GPU2-GPU5 PHB",
            "GPU3-GPU5 PHB",
            "GPU4-GPU5 PHB",
            "GPU5-GPU6 PHB",
            "GPU5-GPU7 PHB"
        ])
    );
    assert_eq!(t["evidence"]["links"]["NV18"], 21);
    // Training on it: the missing links fail the machine too.
    let (_, r) = audit("h200-x8-nvswitch-one-pcie", &["--profile", "train"]);
    assert_eq!(topology_finding(&r)["status"], "fail");
}

/// nvlink.status on the snapshots around published topologies (each PROVENANCE.md gives the
/// judgment these rows hold it to): per GPU and for the topology, in the general and the
/// training profile.
#[test]
fn published_topologies_are_judged_as_their_provenance_says() {
    // (fixture, [GPU verdicts], topology, topology under --profile train)
    let cases: &[(&str, &[&str], &str, &str)] = &[
        ("v100-sxm2-x8-cube-mesh", &["pass"; 8], "pass", "pass"),
        ("v100-sxm2-x8-dgx1", &["pass"; 8], "pass", "pass"),
        ("a100-sxm4-x4-hgx", &["pass"; 4], "pass", "pass"),
        ("h100-sxm5-x4-hgx", &["pass"; 4], "pass", "pass"),
        ("rtx4090-x8-pcie", &["info"; 8], "info", "warn"),
        (
            "rtx-a6000-x3-one-bridge",
            &["pass", "pass", "info"],
            "info",
            "warn",
        ),
        (
            "v100-sxm2-x8-cube-mesh-link-down",
            &[
                "fail", "pass", "pass", "fail", "pass", "pass", "pass", "pass",
            ],
            "pass",
            "pass",
        ),
        (
            "rtx3090-x2-bridge-link-down",
            &["warn", "warn"],
            "pass",
            "pass",
        ),
        ("a100-sxm4-x8-cut-listing", &["pass"; 8], "pass", "pass"),
    ];
    for (name, gpus, topo, train) in cases {
        let (_, r) = audit(name, &[]);
        for (g, want) in gpus.iter().enumerate() {
            assert_eq!(
                worst(&r, "nvlink.status", Some(g as u64)),
                *want,
                "{name} GPU {g}"
            );
        }
        assert_eq!(worst(&r, "nvlink.status", None), *topo, "{name} topology");
        let (_, t) = audit(name, &["--profile", "train"]);
        assert_eq!(
            worst(&t, "nvlink.status", None),
            *train,
            "{name} topology, train"
        );
    }
    let (_, r) = audit("v100-sxm2-x8-dgx1", &[]);
    let t = topology_finding(&r);
    assert!(
        t["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("The 8 GPUs are wired as the hybrid cube-mesh of a DGX-1 / HGX-1"),
        "{t}"
    );
    let (_, r) = audit("a100-sxm4-x8-cut-listing", &[]);
    let zero = findings(&r, "nvlink.status")
        .into_iter()
        .find(|f| f["gpu"].as_u64() == Some(0))
        .cloned()
        .unwrap_or_default();
    assert_eq!(zero["evidence"]["links_listed"], 1, "{zero}");
    assert_eq!(zero["evidence"]["links_not_listed"], 11, "{zero}");
}
