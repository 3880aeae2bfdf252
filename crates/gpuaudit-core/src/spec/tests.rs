use super::*;

fn db() -> SpecDb {
    SpecDb::parse(EMBEDDED).expect("data/gpus.toml must parse")
}

fn keys(v: &[&GpuSpec]) -> Vec<String> {
    let mut k: Vec<String> = v.iter().map(|g| g.key.clone()).collect();
    k.sort();
    k
}

#[test]
fn embedded_database_parses_and_is_served() {
    let db = db();
    assert!(!db.gpus.is_empty());
    assert_eq!(SpecDb::embedded().gpus.len(), db.gpus.len());
}

#[test]
fn the_ordered_models_are_all_there() {
    let db = db();
    for key in [
        "v100-pcie-16gb",
        "v100-pcie-32gb",
        "v100-sxm2-16gb",
        "v100-sxm2-32gb",
        "t4",
        "a10",
        "a10g",
        "a30",
        "a40",
        "a100-pcie-40gb",
        "a100-pcie-80gb",
        "a100-sxm4-40gb",
        "a100-sxm4-80gb",
        "a800-pcie-80gb",
        "a800-sxm4-80gb",
        "l4",
        "l40",
        "l40s",
        "rtx-4090",
        "rtx-a6000",
        "rtx-6000-ada",
        "h100-pcie-80gb",
        "h100-sxm5-80gb",
        "h100-nvl-94gb",
        "h800-sxm5",
        "h800-pcie",
        "h20",
        "h200-sxm-141gb",
        "h200-nvl-141gb",
        "gh200-96gb",
        "gh200-144gb",
        "b200",
    ] {
        assert!(db.by_key(key).is_some(), "{key} missing");
    }
}

#[test]
fn every_entry_is_well_formed() {
    for g in &db().gpus {
        assert!(!g.sources.is_empty(), "{} cites no source", g.key);
        for s in &g.sources {
            assert!(!s.title.trim().is_empty(), "{}: untitled source", g.key);
            assert!(s.url.starts_with("https://"), "{}: {}", g.key, s.url);
        }
        let cc = g.compute_capability().expect("valid compute capability");
        assert!((7..=12).contains(&cc.major), "{}: {cc}", g.key);
        assert!(g.min_driver().is_some(), "{}: architecture unknown", g.key);
        assert!(!g.nvml_names.is_empty(), "{}: no NVML name", g.key);
        assert!(
            ["sxm", "pcie", "superchip", "mezzanine"].contains(&g.form_factor.as_str()),
            "{}: form factor {}",
            g.key,
            g.form_factor
        );
        for (dtype, v) in g.tflops.entries() {
            if let Some(v) = v {
                assert!(v > 0.0 && v < 20_000.0, "{}: {dtype} = {v}", g.key);
            }
        }
        // Dense tensor figures never fall below the plain FP32 rate where both exist.
        if let (Some(fp32), Some(fp16)) = (g.tflops.fp32, g.tflops.fp16) {
            assert!(fp16 >= fp32, "{}: fp16 {fp16} < fp32 {fp32}", g.key);
        }
        if let (Some(min), Some(max)) = (g.tdp_min_w, g.tdp_w) {
            assert!(min <= max, "{}", g.key);
        }
        if let Some(pcie) = g.pcie_gen {
            assert!((3..=6).contains(&pcie), "{}: PCIe gen {pcie}", g.key);
        }
    }
}

#[test]
fn pci_ids_are_not_shared() {
    let mut seen: BTreeMap<u16, String> = BTreeMap::new();
    for g in &db().gpus {
        for id in &g.pci_device_ids {
            if let Some(other) = seen.insert(*id, g.key.clone()) {
                panic!("{id:#06x} in {other} and {}", g.key);
            }
        }
    }
}

#[test]
fn every_pci_id_and_nvml_name_identifies_its_entry() {
    let db = db();
    for g in &db.gpus {
        let mib = g.memory_mib().map(|m| m as u64);
        for id in &g.pci_device_ids {
            assert_eq!(db.identify(Some(*id), None, None).unwrap().key, g.key);
            for n in &g.nvml_names {
                assert_eq!(
                    db.identify(Some(*id), Some(n), mib).unwrap().key,
                    g.key,
                    "{id:#06x} {n}"
                );
            }
        }
        for n in &g.nvml_names {
            assert_eq!(db.identify(None, Some(n), None).unwrap().key, g.key, "{n}");
            assert_eq!(db.identify(None, Some(n), mib).unwrap().key, g.key, "{n}");
            // An id the database does not know falls back to the name.
            assert_eq!(
                db.identify(Some(0xffff), Some(n), None).unwrap().key,
                g.key,
                "{n}"
            );
        }
    }
}

#[test]
fn reported_memory_lands_on_the_right_entry() {
    let db = db();
    let id = |pci, name: &str, mib| {
        db.identify(pci, Some(name), Some(mib))
            .map(|g| g.key.as_str())
    };
    assert_eq!(
        id(Some(0x2335), "NVIDIA H200", 143771),
        Some("h200-sxm-141gb")
    );
    assert_eq!(
        id(Some(0x2330), "NVIDIA H100 80GB HBM3", 81559),
        Some("h100-sxm5-80gb")
    );
    assert_eq!(
        id(None, "NVIDIA A100-PCIE-40GB", 40960),
        Some("a100-pcie-40gb")
    );
    // Names that are not an exact NVML name go through the loose rules, and memory decides.
    assert_eq!(
        id(None, "NVIDIA A100-SXM-80GB", 81920),
        Some("a100-sxm4-80gb")
    );
    assert_eq!(id(None, "A100 SXM4", 81920), Some("a100-sxm4-80gb"));
    assert_eq!(id(None, "A100 SXM4", 40536), Some("a100-sxm4-40gb"));
    assert_eq!(id(None, "V100 SXM2", 32510), Some("v100-sxm2-32gb"));
    assert_eq!(id(None, "V100 SXM2", 16160), Some("v100-sxm2-16gb"));
    assert_eq!(id(None, "GH200", 97871), Some("gh200-96gb"));
    assert_eq!(id(None, "GH200", 146000), Some("gh200-144gb"));
}

#[test]
fn nothing_known_identifies_nothing() {
    let db = db();
    assert!(db.identify(None, None, Some(81559)).is_none());
    assert!(db.identify(Some(0xffff), None, None).is_none());
    assert!(db
        .identify(Some(0xffff), Some("Radeon RX 7900 XTX"), None)
        .is_none());
    assert!(db.identify(None, Some(""), None).is_none());
    assert!(db.identify(None, Some("NVIDIA"), None).is_none());
}

#[test]
fn memory_labels_accept_what_nvml_reports() {
    let db = db();
    let ok = |key: &str, mib| db.by_key(key).unwrap().memory_matches(mib);
    assert_eq!(ok("h100-sxm5-80gb", 81559), Some(true));
    assert_eq!(ok("h200-sxm-141gb", 143771), Some(true));
    assert_eq!(ok("a100-pcie-40gb", 40960), Some(true));
    assert_eq!(ok("a100-sxm4-80gb", 81920), Some(true));
    assert_eq!(ok("t4", 15360), Some(true));
    assert_eq!(ok("l40s", 46068), Some(true));
    assert_eq!(ok("b200", 183359), Some(true));
    // 40 GB delivered for 80 GB, or a MIG slice, is not the model.
    assert_eq!(ok("a100-sxm4-80gb", 40960), Some(false));
    assert_eq!(ok("h100-sxm5-80gb", 10240), Some(false));
    assert_eq!(ok("h20", 97871), None);
}

#[test]
fn architecture_minimum_drivers() {
    let db = db();
    let min = |key: &str| db.by_key(key).unwrap().min_driver().unwrap().to_string();
    assert_eq!(min("v100-sxm2-32gb"), "384.81");
    assert_eq!(min("t4"), "410.48");
    assert_eq!(min("a100-sxm4-80gb"), "450.51.05");
    assert_eq!(min("a10"), "455.23");
    assert_eq!(min("l40s"), "520.61.05");
    assert_eq!(min("h100-sxm5-80gb"), "520.61.05");
    assert_eq!(min("b200"), "570.26");
    assert_eq!(
        db.by_key("h200-sxm-141gb")
            .unwrap()
            .arch_support()
            .unwrap()
            .first_cuda,
        crate::facts::CudaVersion::new(11, 8)
    );
}

#[test]
fn loose_names_match_the_models_they_stand_for() {
    let db = db();
    let cases: &[(&str, &[&str])] = &[
        (
            "h100",
            &["h100-nvl-94gb", "h100-pcie-80gb", "h100-sxm5-80gb"],
        ),
        (
            "H100",
            &["h100-nvl-94gb", "h100-pcie-80gb", "h100-sxm5-80gb"],
        ),
        ("h100-sxm5-80gb", &["h100-sxm5-80gb"]),
        ("H100-SXM5-80GB", &["h100-sxm5-80gb"]),
        ("h100-sxm", &["h100-sxm5-80gb"]),
        ("h100 sxm5", &["h100-sxm5-80gb"]),
        ("h100-pcie", &["h100-pcie-80gb"]),
        ("h100-nvl", &["h100-nvl-94gb"]),
        ("h100-80gb", &["h100-pcie-80gb", "h100-sxm5-80gb"]),
        (
            "a100",
            &[
                "a100-pcie-40gb",
                "a100-pcie-80gb",
                "a100-sxm4-40gb",
                "a100-sxm4-80gb",
            ],
        ),
        ("a100-80gb", &["a100-pcie-80gb", "a100-sxm4-80gb"]),
        ("A100 80GB", &["a100-pcie-80gb", "a100-sxm4-80gb"]),
        ("a100-40g", &["a100-pcie-40gb", "a100-sxm4-40gb"]),
        ("a100-sxm", &["a100-sxm4-40gb", "a100-sxm4-80gb"]),
        ("a100-sxm4-80gb", &["a100-sxm4-80gb"]),
        ("a800", &["a800-pcie-80gb", "a800-sxm4-80gb"]),
        ("h200", &["h200-nvl-141gb", "h200-sxm-141gb"]),
        ("h200-sxm", &["h200-sxm-141gb"]),
        ("h200 nvl", &["h200-nvl-141gb"]),
        ("h800", &["h800-pcie", "h800-sxm5"]),
        ("h20", &["h20"]),
        ("gh200", &["gh200-144gb", "gh200-96gb"]),
        ("gh200-144g", &["gh200-144gb"]),
        ("b200", &["b200"]),
        ("rtx4090", &["rtx-4090"]),
        ("RTX 4090", &["rtx-4090"]),
        ("4090", &["rtx-4090"]),
        ("geforce rtx 4090", &["rtx-4090"]),
        ("l4", &["l4"]),
        ("l40", &["l40"]),
        ("l40s", &["l40s"]),
        ("L40S", &["l40s"]),
        ("a10", &["a10"]),
        ("a10g", &["a10g"]),
        ("a30", &["a30"]),
        ("a40", &["a40"]),
        ("t4", &["t4"]),
        ("Tesla T4", &["t4"]),
        ("a6000", &["rtx-a6000"]),
        ("rtx a6000", &["rtx-a6000"]),
        ("rtx 6000 ada", &["rtx-6000-ada"]),
        ("rtx-6000", &["rtx-6000-ada"]),
        (
            "v100",
            &[
                "v100-pcie-16gb",
                "v100-pcie-32gb",
                "v100-sxm2-16gb",
                "v100-sxm2-32gb",
            ],
        ),
        ("v100-32gb", &["v100-pcie-32gb", "v100-sxm2-32gb"]),
        ("v100-sxm2", &["v100-sxm2-16gb", "v100-sxm2-32gb"]),
        ("NVIDIA H100 80GB HBM3", &["h100-sxm5-80gb"]),
        ("Tesla V100-SXM2-32GB", &["v100-sxm2-32gb"]),
    ];
    for (query, expected) in cases {
        let got = keys(&db.matching(query));
        let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "query {query:?}");
    }
}

#[test]
fn unknown_and_empty_names_match_nothing() {
    let db = db();
    for query in [
        "",
        "   ",
        "-",
        "nvidia",
        "h300",
        "a1000",
        "mi300x",
        "h100:8",
        "h100 sxm6",
        "100",
        "h",
        "gh100",
    ] {
        assert!(db.matching(query).is_empty(), "{query:?} matched");
    }
}

#[test]
fn h100_never_matches_its_cousins() {
    let db = db();
    for g in db.matching("h100") {
        for cousin in ["h800", "h20", "h200", "gh200"] {
            assert!(!g.key.starts_with(cousin), "{}", g.key);
        }
    }
}

const MINIMAL: &str = r#"
[[gpu]]
key = "x"
name = "X"
family = "X"
nvml_names = ["NVIDIA X"]
pci_device_ids = [0x1234]
architecture = "Hopper"
compute_capability = "9.0"
form_factor = "sxm"
tflops = {}
sources = [{ title = "t", url = "https://example.invalid" }]
"#;

#[test]
fn bad_databases_are_errors_not_panics() {
    assert!(SpecDb::parse(MINIMAL).is_ok());
    let broken = [
        "".to_string(),
        "garbage".to_string(),
        "[[gpu]]".to_string(),
        "[[gpu]]\nkey = 1".to_string(),
        "\u{0}\u{1}\u{2}".to_string(),
        MINIMAL.replace("\"9.0\"", "\"nine\""),
        MINIMAL.replace("\"9.0\"", "\"9.\""),
        MINIMAL.replace(
            "sources = [{ title = \"t\", url = \"https://example.invalid\" }]",
            "sources = []",
        ),
        MINIMAL.replace("pci_device_ids = [0x1234]", "pci_device_ids = []"),
        MINIMAL.replace("pci_device_ids = [0x1234]", "pci_device_ids = [0x12345]"),
        MINIMAL.replace("tflops = {}", "tflops = { fp32 = -1 }"),
        MINIMAL.replace("tflops = {}", "tflops = { fp33 = 1 }"),
        MINIMAL.replace(
            "form_factor = \"sxm\"",
            "form_factor = \"sxm\"\ncolour = \"green\"",
        ),
        MINIMAL.replace("key = \"x\"", "key = \"X\""),
        format!("{MINIMAL}{}", MINIMAL.replace("0x1234", "0x4321")),
        format!("{MINIMAL}{}", MINIMAL.replace("key = \"x\"", "key = \"y\"")),
        MINIMAL.replace(
            "form_factor = \"sxm\"",
            "form_factor = \"sxm\"\ntdp_w = 300\ntdp_min_w = 400",
        ),
    ];
    for text in &broken {
        assert!(SpecDb::parse(text).is_err(), "{text:?} parsed");
    }
}

/// Values read from the 2xH200 VM snapshot (shared/fixtures/snapshots/h200-x2-vm:
/// nvidia-smi -q -x and sysfs), so the database agrees with a real machine.
#[test]
fn h200_vm_snapshot_agrees_with_its_entry() {
    let db = db();
    let g = db
        .identify(Some(0x2335), Some("NVIDIA H200"), Some(143771))
        .unwrap();
    assert_eq!(g.key, "h200-sxm-141gb");
    assert_eq!(g.memory_matches(143771), Some(true));
    assert_eq!(g.tdp_w, Some(700.0)); // default_power_limit 700.00 W
    assert_eq!(g.boost_clock_mhz, Some(1980)); // max_clocks sm_clock 1980 MHz
    assert_eq!(g.pcie_gen, Some(5)); // max_link_gen 5
    let driver = DriverVersion::parse("580.159.04").unwrap();
    assert!(driver >= *g.min_driver().unwrap());
    // nvidia-smi reports CUDA 13.0 for this driver.
    assert_eq!(
        cuda_table().max_cuda_for_driver(&driver),
        Some(crate::facts::CudaVersion::new(13, 0))
    );
}
