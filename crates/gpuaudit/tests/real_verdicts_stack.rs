//! The stack and host checks on real machines' published logs (fixtures/real): only the
//! nvidia-smi XML is published, so every check of the host around the GPU has nothing to read
//! and skips (never a pass on nothing), and the driver and persistence verdicts are those an
//! engineer gives from the XML (each PROVENANCE.md's "Expected judgment").

mod common;
use common::*;

/// Checks that read only host files, none of which a published log has.
const HOST_ONLY: &[&str] = &[
    "cuda.toolkit-compat",
    "cuda.libraries",
    "cuda.framework",
    "cuda.env",
    "kernel.modules",
    "os.platform",
    "os.numa",
    "os.graphics",
    "net.somaxconn",
    "net.loopback",
    "net.fabric",
    "storage.mounts",
    "storage.throughput",
    "host.shm",
    "container.runtime",
    "env.jupyter",
    "env.ssh",
];

fn real() -> Vec<String> {
    all_fixtures()
        .into_iter()
        .filter(|n| n.starts_with("real/"))
        .collect()
}

fn all_statuses(report: &serde_json::Value, check: &str) -> Vec<String> {
    findings(report, check)
        .into_iter()
        .map(|f| f["status"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[test]
fn host_checks_skip_where_nothing_was_published() {
    let names = real();
    assert!(names.len() >= 10, "{names:?}");
    for name in &names {
        for profile in ["general", "train", "inference"] {
            let (_, r) = audit(name, &["--profile", profile]);
            for id in HOST_ONLY {
                let s = all_statuses(&r, id);
                assert!(
                    !s.is_empty() && s.iter().all(|x| x == "skip"),
                    "{name} --profile {profile}: {id}: {s:?} {:#?}",
                    findings(&r, id)
                );
            }
        }
    }
}

#[test]
fn driver_verdicts_on_real_machines() {
    for (name, want) in [
        ("real/a100-sxm4-80gb-mig-r535", "pass"),
        ("real/a10g-r515", "warn"),
        ("real/grid-p4-1q-vgpu-r513-windows", "warn"),
        // R375 reports no CUDA version: too old for current builds, never a bare pass.
        ("real/p100-pcie-12gb-x2-r375", "warn"),
        ("real/quadro-p400-r418", "warn"),
        ("real/rtx-pro-6000-blackwell-maxq-r590", "pass"),
        ("real/rtx2080-x2-r590", "pass"),
        ("real/rtx3090-power-capped-r525", "pass"),
        ("real/rtx4000-sff-ada-r595", "pass"),
        ("real/t4-r515", "warn"),
        ("real/v100s-pcie-32gb-x8-r460", "warn"),
    ] {
        let (_, r) = audit(name, &[]);
        assert_eq!(
            worst(&r, "cuda.driver", None),
            want,
            "{name}: {:#?}",
            findings(&r, "cuda.driver")
        );
    }
    let (_, r) = audit("real/p100-pcie-12gb-x2-r375", &[]);
    let msg = findings(&r, "cuda.driver")[0]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        msg.contains("older than the first driver of CUDA 11.0"),
        "{msg}"
    );
}

#[test]
fn persistence_verdicts_on_real_machines() {
    for (name, gpus, want) in [
        ("real/a10g-r515", 1, "warn"),
        ("real/t4-r515", 1, "warn"),
        ("real/p100-pcie-12gb-x2-r375", 2, "warn"),
        ("real/v100s-pcie-32gb-x8-r460", 8, "warn"),
        ("real/rtx2080-x2-r590", 2, "pass"),
        ("real/rtx4000-sff-ada-r595", 1, "pass"),
        // A Windows vGPU guest has no persistence mode: N/A, a skip with the reason.
        ("real/grid-p4-1q-vgpu-r513-windows", 1, "skip"),
    ] {
        let (_, r) = audit(name, &[]);
        let (_, inf) = audit(name, &["--profile", "inference"]);
        for g in 0..gpus {
            assert_eq!(worst(&r, "os.persistence", Some(g)), want, "{name} GPU {g}");
            // Serving pays the driver's initialisation at every start: off fails there.
            let served = if want == "warn" { "fail" } else { want };
            assert_eq!(
                worst(&inf, "os.persistence", Some(g)),
                served,
                "{name} GPU {g}"
            );
        }
    }
}

#[test]
fn render_readiness_of_real_gpus() {
    // The XML says which GPU it is; the loader files were not published (skip).
    for (name, want) in [
        ("real/a100-sxm4-80gb-mig-r535", "fail"),
        ("real/rtx-pro-6000-blackwell-maxq-r590", "pass"),
        ("real/rtx4000-sff-ada-r595", "pass"),
        ("real/t4-r515", "pass"),
        ("real/a10g-r515", "pass"),
    ] {
        let (_, r) = audit(name, &["--profile", "render"]);
        assert_eq!(
            worst(&r, "os.graphics", Some(0)),
            want,
            "{name}: {:#?}",
            findings(&r, "os.graphics")
        );
        assert_eq!(worst(&r, "os.graphics", None), "skip", "{name}");
    }
}
