//! Real machines: every `fixtures/real/*` snapshot (an `nvidia-smi -q -x` published by the
//! machine's owner, see each PROVENANCE.md) is audited with the real binary. The audit must do
//! its job on all of them (exit 0 or 1, never 2, never a panic) and report every GPU the XML
//! lists with the name, bus id and memory the XML gives, and the driver and CUDA versions.
//!
//! The expected values below were read by eye from each XML, not from gpuaudit's output. The
//! verdicts (pass/warn/fail per check) are not asserted here: PROVENANCE.md says what they
//! should be, and the checks' own tests pin them.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;

struct Machine {
    slug: &'static str,
    driver: &'static str,
    /// `<cuda_version>`; the R375 log has none.
    cuda: Option<&'static str>,
    /// (PCI bus id as the report normalises it, `<product_name>`, `<fb_memory_usage><total>` MiB)
    gpus: &'static [(&'static str, &'static str, u64)],
}

const MACHINES: &[Machine] = &[
    Machine {
        slug: "a100-sxm4-80gb-mig-r535",
        driver: "535.54.03",
        cuda: Some("12.2"),
        gpus: &[("0000:01:00.0", "NVIDIA A100-SXM4-80GB", 81920)],
    },
    Machine {
        slug: "a10g-r515",
        driver: "515.105.01",
        cuda: Some("11.7"),
        gpus: &[("0000:00:1e.0", "NVIDIA A10G", 23028)],
    },
    Machine {
        slug: "grid-p4-1q-vgpu-r513-windows",
        driver: "513.46",
        cuda: Some("11.6"),
        gpus: &[("0000:00:0b.0", "GRID P4-1Q", 1024)],
    },
    Machine {
        slug: "gt1030-x4-r470",
        driver: "470.74",
        cuda: Some("11.4"),
        gpus: &[("0000:2d:00.0", "NVIDIA GeForce GT 1030", 1998)],
    },
    Machine {
        slug: "gtx1050-mobile-x8-r515",
        driver: "515.65.01",
        cuda: Some("11.7"),
        gpus: &[("0000:01:00.0", "NVIDIA GeForce GTX 1050", 4096)],
    },
    Machine {
        slug: "gtx1660ti-graphics-device-r418",
        driver: "418.43",
        cuda: Some("10.1"),
        gpus: &[("0000:43:00.0", "Graphics Device", 5912)],
    },
    Machine {
        slug: "p100-pcie-12gb-x2-r375",
        driver: "375.66",
        cuda: None,
        gpus: &[
            ("0000:04:00.0", "Tesla P100-PCIE-12GB", 11567),
            ("0000:82:00.0", "Tesla P100-PCIE-12GB_2", 12290),
        ],
    },
    Machine {
        slug: "quadro-p2000-x8-r525",
        driver: "525.125.06",
        cuda: Some("12.0"),
        gpus: &[("0000:17:00.0", "Quadro P2000", 5120)],
    },
    Machine {
        slug: "quadro-p400-r418",
        driver: "418.43",
        cuda: Some("10.1"),
        gpus: &[("0000:43:00.0", "Quadro P400", 1998)],
    },
    Machine {
        slug: "rtx-a5000-x2-r590",
        driver: "590.44.01",
        cuda: Some("13.1"),
        gpus: &[
            ("0000:81:00.0", "NVIDIA RTX A5000", 24564),
            ("0000:c1:00.0", "NVIDIA RTX A5000", 24564),
        ],
    },
    Machine {
        slug: "rtx-pro-6000-blackwell-maxq-r590",
        driver: "590.44.01",
        cuda: Some("13.1"),
        gpus: &[(
            "0000:61:00.0",
            "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
            97887,
        )],
    },
    Machine {
        slug: "rtx2070-x2-r590",
        driver: "590.44.01",
        cuda: Some("13.1"),
        gpus: &[
            ("0000:01:00.0", "NVIDIA GeForce RTX 2070", 8192),
            ("0000:02:00.0", "NVIDIA GeForce RTX 2070", 8192),
        ],
    },
    Machine {
        slug: "rtx2080-x2-r590",
        driver: "590.44.01",
        cuda: Some("13.1"),
        gpus: &[
            ("0000:01:00.0", "NVIDIA GeForce RTX 2080", 8192),
            ("0000:02:00.0", "NVIDIA GeForce RTX 2080", 8192),
        ],
    },
    Machine {
        slug: "rtx3060-r570",
        driver: "570.124.04",
        cuda: Some("12.8"),
        gpus: &[("0000:2d:00.0", "NVIDIA GeForce RTX 3060", 12288)],
    },
    Machine {
        slug: "rtx3080-busy-r595",
        driver: "595.58.03",
        cuda: Some("13.2"),
        gpus: &[("0000:0c:00.0", "NVIDIA GeForce RTX 3080", 10240)],
    },
    Machine {
        slug: "rtx3090-power-capped-r525",
        driver: "525.147.05",
        cuda: Some("12.0"),
        gpus: &[("0000:00:10.0", "NVIDIA GeForce RTX 3090", 24576)],
    },
    Machine {
        slug: "rtx4000-sff-ada-r595",
        driver: "595.84",
        cuda: Some("13.2"),
        gpus: &[("0000:06:00.0", "NVIDIA RTX 4000 SFF Ada Generation", 20475)],
    },
    Machine {
        slug: "t4-r515",
        driver: "515.105.01",
        cuda: Some("11.7"),
        gpus: &[("0000:00:1e.0", "Tesla T4", 15360)],
    },
    Machine {
        slug: "v100-pcie-32gb-busy-vm-r460",
        driver: "460.39",
        cuda: Some("11.2"),
        gpus: &[("0000:21:01.0", "Tesla V100-PCIE-32GB", 32510)],
    },
    Machine {
        slug: "v100s-pcie-32gb-x8-r460",
        driver: "460.73.01",
        cuda: Some("11.2"),
        gpus: &[
            ("0000:00:0d.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:0e.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:0f.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:10.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:11.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:12.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:13.0", "Tesla V100S-PCIE-32GB", 32510),
            ("0000:00:14.0", "Tesla V100S-PCIE-32GB", 32510),
        ],
    },
];

fn real_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real")
}

/// Audit one real snapshot: (exit code, stdout, stderr).
fn run(slug: &str, format: &str) -> (Option<i32>, String, String) {
    let out = gpuaudit()
        .arg("--root")
        .arg(real_dir().join(slug))
        .args(["--format", format])
        .output()
        .expect("gpuaudit runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_did_its_job(slug: &str, format: &str, code: Option<i32>, stderr: &str) {
    assert!(
        matches!(code, Some(0) | Some(1)),
        "{slug} ({format}): exit {code:?} (0 or 1 expected: the audit must not give up on a real machine); stderr: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "{slug} ({format}): panic: {stderr}"
    );
}

#[test]
fn every_real_snapshot_is_in_the_table_and_has_its_provenance() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(real_dir())
        .expect("fixtures/real exists")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("meta.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let in_table: BTreeSet<String> = MACHINES.iter().map(|m| m.slug.to_string()).collect();
    assert_eq!(
        on_disk, in_table,
        "every fixtures/real snapshot needs a row here (read its values from the XML), and every row a snapshot"
    );
    for slug in &on_disk {
        let dir = real_dir().join(slug);
        assert!(
            dir.join("cmd/nvidia-smi-q.xml").is_file(),
            "{slug}: no cmd/nvidia-smi-q.xml"
        );
        let prov = std::fs::read_to_string(dir.join("PROVENANCE.md"))
            .unwrap_or_else(|e| panic!("{slug}: PROVENANCE.md: {e}"));
        for section in [
            "- repository:",
            "- commit:",
            "- licence:",
            "## Expected judgment",
        ] {
            assert!(
                prov.contains(section),
                "{slug}: PROVENANCE.md lacks {section:?}"
            );
        }
    }
}

#[test]
fn every_real_machine_is_audited_with_every_listed_gpu() {
    for m in MACHINES {
        let (code, stdout, stderr) = run(m.slug, "json");
        assert_did_its_job(m.slug, "json", code, &stderr);
        let report: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{}: stdout is not JSON ({e}); stderr: {stderr}", m.slug));

        assert_eq!(
            report["machine"]["driver_version"], m.driver,
            "{}: driver version",
            m.slug
        );
        match m.cuda {
            Some(c) => assert_eq!(
                report["machine"]["cuda_driver_version"], c,
                "{}: CUDA version the driver supports",
                m.slug
            ),
            None => assert!(
                report["machine"]["cuda_driver_version"].is_null(),
                "{}: the XML has no <cuda_version>, the report must not invent one: {}",
                m.slug,
                report["machine"]["cuda_driver_version"]
            ),
        }

        let gpus = report["gpus"].as_array().expect("gpus is an array");
        assert_eq!(
            gpus.len(),
            m.gpus.len(),
            "{}: every <gpu> of the XML is in the report, no more",
            m.slug
        );
        for (i, (bus, name, mib)) in m.gpus.iter().enumerate() {
            let g = &gpus[i];
            assert_eq!(g["index"], i as u64, "{}: GPU {i} index", m.slug);
            assert_eq!(g["pci_bus_id"], *bus, "{}: GPU {i} bus id", m.slug);
            assert_eq!(g["name"], *name, "{}: GPU {i} product name", m.slug);
            assert_eq!(
                g["memory_total_mib"], *mib,
                "{}: GPU {i} memory total",
                m.slug
            );
        }

        // Every GPU the XML lists is judged by the per-GPU checks (one finding per GPU, passing
        // ones included, as docs/DESIGN.md promises for the report).
        for check in [
            "pcie.link",
            "power.limit",
            "clocks.throttle",
            "memory.errors",
        ] {
            let judged: BTreeSet<u64> = findings(&report, check)
                .into_iter()
                .filter_map(|f| f["gpu"].as_u64())
                .collect();
            let listed: BTreeSet<u64> = (0..m.gpus.len() as u64).collect();
            assert_eq!(judged, listed, "{}: {check} judges every GPU", m.slug);
        }
    }
}

#[test]
fn every_real_machine_renders_as_a_table() {
    for m in MACHINES {
        let (code, stdout, stderr) = run(m.slug, "table");
        assert_did_its_job(m.slug, "table", code, &stderr);
        assert!(
            stdout.contains(m.driver),
            "{}: the table's header names the driver {}:\n{stdout}",
            m.slug,
            m.driver
        );
        for (_, name, _) in m.gpus {
            assert!(
                stdout.contains(name),
                "{}: the table names {name}:\n{stdout}",
                m.slug
            );
        }
    }
}
