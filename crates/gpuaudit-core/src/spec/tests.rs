use super::*;
use crate::reading::Reading;

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

/// Every model issue 8 asks the database to cover, by key.
const COVERED: &[&str] = &[
    "grid-k520",
    "gtx-1060-3gb",
    "gtx-1060-6gb",
    "p4",
    "p40",
    "p100-pcie-12gb",
    "p100-pcie-16gb",
    "p100-sxm2-16gb",
    "v100-pcie-16gb",
    "v100-pcie-32gb",
    "v100-sxm2-16gb",
    "v100-sxm2-32gb",
    "v100-sxm3-32gb",
    "v100s-pcie-32gb",
    "t4",
    "rtx-2080",
    "rtx-2080-ti",
    "gtx-1650-super",
    "a2",
    "a10",
    "a10g",
    "a16",
    "a30",
    "a40",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "a100-sxm4-40gb",
    "a100-sxm4-80gb",
    "a800-pcie-80gb",
    "a800-sxm4-80gb",
    "rtx-a4000",
    "rtx-a5000",
    "rtx-a6000",
    "rtx-3080",
    "rtx-3090",
    "l4",
    "l20",
    "l40",
    "l40s",
    "rtx-4000-ada",
    "rtx-4000-sff-ada",
    "rtx-5000-ada",
    "rtx-6000-ada",
    "rtx-4080",
    "rtx-4090",
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
    "b300",
    "gb200",
    "rtx-pro-6000-server",
    "rtx-pro-6000-workstation",
    "rtx-pro-6000-max-q",
    "rtx-5090",
];

#[test]
fn the_ordered_models_are_all_there() {
    let db = db();
    for key in COVERED {
        assert!(db.by_key(key).is_some(), "{key} missing");
    }
    // And nothing unlisted crept in without a test naming it.
    for g in &db.gpus {
        assert!(
            COVERED.contains(&g.key.as_str()),
            "{} is not in COVERED",
            g.key
        );
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
        assert!((3..=12).contains(&cc.major), "{}: {cc}", g.key);
        for n in std::iter::once(&g.name).chain(g.nvml_names.iter()) {
            assert!(
                g.family_fits(n),
                "{}: {n:?} lacks family {:?}",
                g.key,
                g.family
            );
        }
        // The NVLink figures and the kind agree, and `bridge` mirrors the kind.
        match (g.nvlink_kind(), &g.nvlink) {
            (NvlinkKind::None | NvlinkKind::Unknown, Some(_)) => {
                panic!("{}: figures without NVLink", g.key)
            }
            (kind, Some(n)) => assert_eq!(n.bridge, kind == NvlinkKind::Bridge, "{}", g.key),
            _ => {}
        }
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
    let mut seen: BTreeMap<u16, Vec<&GpuSpec>> = BTreeMap::new();
    let db = db();
    for g in &db.gpus {
        for id in &g.pci_device_ids {
            seen.entry(*id).or_default().push(g);
        }
    }
    for (id, entries) in seen {
        if entries.len() == 1 {
            continue;
        }
        // Only NVIDIA's two-products-one-id case, told apart by disjoint subsystems.
        let mut subsystems: Vec<u16> = Vec::new();
        for g in &entries {
            assert!(
                !g.pci_subsystem_device_ids.is_empty(),
                "{id:#06x} shared by {} without subsystem ids",
                g.key
            );
            for s in &g.pci_subsystem_device_ids {
                assert!(
                    !subsystems.contains(s),
                    "{id:#06x}: subsystem {s:#06x} twice"
                );
                subsystems.push(*s);
            }
        }
        assert_eq!(id, 0x25b6, "a new shared id: check it is NVIDIA's doing");
    }
}

#[test]
fn every_pci_id_and_nvml_name_identifies_its_entry() {
    let db = db();
    for g in &db.gpus {
        let mib = g.memory_mib().map(|m| m as u64);
        for id in &g.pci_device_ids {
            if !g.pci_subsystem_device_ids.is_empty() {
                for sub in &g.pci_subsystem_device_ids {
                    let e = GpuEvidence {
                        pci_device_id: Some(*id),
                        pci_subsystem_device_id: Some(*sub),
                        ..GpuEvidence::default()
                    };
                    assert_eq!(db.identify_evidence(&e).unwrap().key, g.key);
                }
                // A shared id without its subsystem: the name decides.
                for n in &g.nvml_names {
                    assert_eq!(db.identify(Some(*id), Some(n), None).unwrap().key, g.key);
                }
                continue;
            }
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
    // What nvidia-smi prints for the GTX 1060s: each label accepts its own card only.
    assert_eq!(ok("gtx-1060-6gb", 6144), Some(true));
    assert_eq!(ok("gtx-1060-3gb", 3072), Some(true));
    assert_eq!(ok("gtx-1060-6gb", 3072), Some(false));
    assert_eq!(ok("gtx-1060-3gb", 6144), Some(false));
    assert_eq!(ok("grid-k520", 4036), None);
}

/// The identities added for issue 19: the GRID K520 of EC2 g2 instances, the two GTX 1060s and
/// the GTX 1650 SUPER, by every id and name the driver reports for them.
#[test]
fn kepler_pascal_and_turing_geforce_identities() {
    let db = db();
    let key = |pci, name: Option<&str>, mib| db.identify(pci, name, mib).map(|g| g.key.as_str());
    for (ids, name, entry) in [
        (&[0x118a][..], "GRID K520", "grid-k520"),
        (
            &[0x1c03, 0x1c06, 0x1b83][..],
            "NVIDIA GeForce GTX 1060 6GB",
            "gtx-1060-6gb",
        ),
        (
            &[0x1c02, 0x1b84][..],
            "NVIDIA GeForce GTX 1060 3GB",
            "gtx-1060-3gb",
        ),
        (
            &[0x2187][..],
            "NVIDIA GeForce GTX 1650 SUPER",
            "gtx-1650-super",
        ),
    ] {
        for id in ids {
            assert_eq!(key(Some(*id), None, None), Some(entry), "{id:#06x}");
            assert_eq!(key(Some(*id), Some(name), None), Some(entry), "{id:#06x}");
        }
        assert_eq!(key(None, Some(name), None), Some(entry), "{name}");
        // Drivers before R470 print GeForce names without "NVIDIA ".
        let bare = name.trim_start_matches("NVIDIA ");
        assert_eq!(key(None, Some(bare), None), Some(entry), "{bare}");
    }
    // The device id decides over a name that says the other size.
    assert_eq!(
        key(
            Some(0x1c02),
            Some("NVIDIA GeForce GTX 1060 6GB"),
            Some(6144)
        ),
        Some("gtx-1060-3gb")
    );
    // A name without the size: the memory reported tells the two products apart.
    assert_eq!(
        key(None, Some("GeForce GTX 1060"), Some(3072)),
        Some("gtx-1060-3gb")
    );
    assert_eq!(
        key(None, Some("GeForce GTX 1060"), Some(6144)),
        Some("gtx-1060-6gb")
    );
    assert_eq!(
        key(None, Some("GTX 1060"), Some(3019)),
        Some("gtx-1060-3gb")
    );
    assert_eq!(
        key(None, Some("GTX 1060"), Some(6072)),
        Some("gtx-1060-6gb")
    );
    // Ids of other products of the same number are not these entries.
    for other in [0x1c04, 0x1c20, 0x1c60, 0x2188, 0x1f82] {
        assert!(db.by_pci_id(other, None).is_empty(), "{other:#06x}");
    }
    // The GTX 1650 and the GTX 1060 5GB are other products; no loose name reaches them.
    assert!(db
        .identify(None, Some("NVIDIA GeForce GTX 1650"), None)
        .is_none());
    assert!(db
        .identify(None, Some("NVIDIA GeForce GTX 1060 5GB"), None)
        .is_none());
    let fits = |k: &str, n: &str| db.by_key(k).unwrap().family_fits(n);
    assert!(fits("gtx-1060-3gb", "NVIDIA GeForce GTX 1060 6GB"));
    assert!(!fits("gtx-1650-super", "NVIDIA GeForce GTX 1650"));
    assert!(!fits("gtx-1060-6gb", "NVIDIA GeForce GTX 1060 Max-Q"));
    // What the entries are: architecture and compute capability.
    let cc = |k: &str| {
        db.by_key(k)
            .unwrap()
            .compute_capability()
            .unwrap()
            .to_string()
    };
    assert_eq!(cc("grid-k520"), "3.0");
    assert_eq!(cc("gtx-1060-6gb"), "6.1");
    assert_eq!(cc("gtx-1060-3gb"), "6.1");
    assert_eq!(cc("gtx-1650-super"), "7.5");
    let k520 = db.by_key("grid-k520").unwrap();
    assert_eq!(k520.architecture, "Kepler");
    assert_eq!(k520.arch_support().unwrap().last_branch, Some(470));
    assert_eq!(k520.memory_gb, None);
    assert_eq!(db.by_key("gtx-1650-super").unwrap().memory_gb, None);
    // `--expect gtx-1060` names both sizes; each key names its own.
    assert_eq!(
        keys(&db.resolve_expected("gtx-1060").unwrap()),
        vec!["gtx-1060-3gb", "gtx-1060-6gb"]
    );
    assert_eq!(
        keys(&db.resolve_expected("gtx-1060-3gb").unwrap()),
        vec!["gtx-1060-3gb"]
    );
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
    assert_eq!(min("grid-k520"), "295");
    assert_eq!(min("gtx-1060-6gb"), "367.48");
    assert_eq!(min("gtx-1650-super"), "410.48");
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
        // "rtx 6000" is every card of that number: the Ada one and the RTX PRO 6000s (the
        // Max-Q only when asked for).
        (
            "rtx-6000",
            &[
                "rtx-6000-ada",
                "rtx-pro-6000-server",
                "rtx-pro-6000-workstation",
            ],
        ),
        (
            "rtx-pro-6000",
            &["rtx-pro-6000-server", "rtx-pro-6000-workstation"],
        ),
        ("rtx pro 6000 max-q", &["rtx-pro-6000-max-q"]),
        ("rtx2080", &["rtx-2080"]),
        ("gtx 1060", &["gtx-1060-3gb", "gtx-1060-6gb"]),
        ("gtx-1060", &["gtx-1060-3gb", "gtx-1060-6gb"]),
        ("1060 6gb", &["gtx-1060-6gb"]),
        ("GeForce GTX 1060 3GB", &["gtx-1060-3gb"]),
        ("gtx 1650 super", &["gtx-1650-super"]),
        ("gtx1650 super", &["gtx-1650-super"]),
        ("k520", &["grid-k520"]),
        ("GRID K520", &["grid-k520"]),
        ("rtx 2080 ti", &["rtx-2080-ti"]),
        ("rtx 4000 ada", &["rtx-4000-ada"]),
        ("rtx 4000 sff ada", &["rtx-4000-sff-ada"]),
        ("v100s", &["v100s-pcie-32gb"]),
        (
            "p100",
            &["p100-pcie-12gb", "p100-pcie-16gb", "p100-sxm2-16gb"],
        ),
        ("p40", &["p40"]),
        ("p4", &["p4"]),
        ("a2", &["a2"]),
        ("a16", &["a16"]),
        ("l20", &["l20"]),
        ("b300", &["b300"]),
        ("gb200", &["gb200"]),
        ("rtx5090", &["rtx-5090"]),
        ("3090", &["rtx-3090"]),
        ("rtx 3080", &["rtx-3080"]),
        ("4080", &["rtx-4080"]),
        ("a5000", &["rtx-a5000"]),
        ("rtx a4000", &["rtx-a4000"]),
        (
            "v100",
            &[
                "v100-pcie-16gb",
                "v100-pcie-32gb",
                "v100-sxm2-16gb",
                "v100-sxm2-32gb",
                "v100-sxm3-32gb",
            ],
        ),
        (
            "v100-32gb",
            &["v100-pcie-32gb", "v100-sxm2-32gb", "v100-sxm3-32gb"],
        ),
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
        "gtx 1650",
        "gtx 1060 5gb",
        "k80",
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

// ------------------------------------------------------------------ identification samples

/// One GPU of each family as the driver reports it: (PCI id, NVML name, entry).
const SAMPLES: &[(u16, &str, &str)] = &[
    (0x118a, "GRID K520", "grid-k520"),
    (0x1c03, "NVIDIA GeForce GTX 1060 6GB", "gtx-1060-6gb"),
    (0x1c02, "NVIDIA GeForce GTX 1060 3GB", "gtx-1060-3gb"),
    (0x15f8, "Tesla P100-PCIE-16GB", "p100-pcie-16gb"),
    (0x1b38, "Tesla P40", "p40"),
    (0x1bb3, "Tesla P4", "p4"),
    (0x1db5, "Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    (0x1db8, "Tesla V100-SXM3-32GB", "v100-sxm3-32gb"),
    (0x1df6, "Tesla V100S-PCIE-32GB", "v100s-pcie-32gb"),
    (0x1eb8, "Tesla T4", "t4"),
    (0x1e07, "NVIDIA GeForce RTX 2080 Ti", "rtx-2080-ti"),
    (0x2187, "NVIDIA GeForce GTX 1650 SUPER", "gtx-1650-super"),
    (0x20b2, "NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    (0x20f3, "NVIDIA A800-SXM4-80GB", "a800-sxm4-80gb"),
    (0x20b7, "NVIDIA A30", "a30"),
    (0x2237, "NVIDIA A10G", "a10g"),
    (0x2235, "NVIDIA A40", "a40"),
    (0x2231, "NVIDIA RTX A5000", "rtx-a5000"),
    (0x2204, "NVIDIA GeForce RTX 3090", "rtx-3090"),
    (0x220a, "NVIDIA GeForce RTX 3080", "rtx-3080"),
    (0x26ba, "NVIDIA L20", "l20"),
    (0x26b9, "NVIDIA L40S", "l40s"),
    (0x27b8, "NVIDIA L4", "l4"),
    (0x27b2, "NVIDIA RTX 4000 Ada Generation", "rtx-4000-ada"),
    (0x2684, "NVIDIA GeForce RTX 4090", "rtx-4090"),
    (0x2330, "NVIDIA H100 80GB HBM3", "h100-sxm5-80gb"),
    (0x2324, "NVIDIA H800", "h800-sxm5"),
    (0x2329, "NVIDIA H20", "h20"),
    (0x2335, "NVIDIA H200", "h200-sxm-141gb"),
    (0x2342, "NVIDIA GH200 480GB", "gh200-96gb"),
    (0x2901, "NVIDIA B200", "b200"),
    (0x3182, "NVIDIA B300 SXM6 AC", "b300"),
    (0x2941, "NVIDIA GB200", "gb200"),
    (
        0x2bb5,
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "rtx-pro-6000-server",
    ),
    (0x2b85, "NVIDIA GeForce RTX 5090", "rtx-5090"),
];

#[test]
fn a_gpu_of_every_family_is_identified_by_id_and_by_name() {
    let db = db();
    for (id, name, key) in SAMPLES {
        let by_id = db.identify(Some(*id), None, None).map(|g| g.key.as_str());
        assert_eq!(by_id, Some(*key), "{id:#06x}");
        let by_name = db.identify(None, Some(name), None).map(|g| g.key.as_str());
        assert_eq!(by_name, Some(*key), "{name}");
        // Old drivers print the name without "NVIDIA "; the rules ignore it.
        let bare = name.trim_start_matches("NVIDIA ");
        let by_bare = db.identify(None, Some(bare), None).map(|g| g.key.as_str());
        assert_eq!(by_bare, Some(*key), "{bare}");
    }
}

#[test]
fn a2_and_a16_share_a_device_id_and_the_subsystem_or_name_tells_them_apart() {
    let db = db();
    let id = |sub: Option<u16>, name: Option<&'static str>| {
        db.identify_evidence(&GpuEvidence {
            pci_device_id: Some(0x25b6),
            pci_subsystem_device_id: sub,
            name,
            ..GpuEvidence::default()
        })
        .map(|g| g.key.clone())
    };
    assert_eq!(id(Some(0x14a9), None).as_deref(), Some("a16"));
    assert_eq!(id(Some(0x157e), None).as_deref(), Some("a2"));
    assert_eq!(id(None, Some("NVIDIA A16")).as_deref(), Some("a16"));
    assert_eq!(id(None, Some("NVIDIA A2")).as_deref(), Some("a2"));
    // The subsystem outranks a name that says otherwise.
    assert_eq!(id(Some(0x14a9), Some("NVIDIA A2")).as_deref(), Some("a16"));
    // A subsystem neither lists: neither model.
    assert_eq!(id(Some(0x1234), None), None);
    assert_eq!(db.by_pci_id(0x25b6, None).len(), 2);
    // GpuFacts carry NVML's pciSubSystemId: subsystem device in the high half.
    let mut g = crate::facts::GpuFacts::unread(0, "0000:01:00.0", "nvml", "test");
    g.pci_device_id = Reading::Value(0x25b6);
    g.pci_subsystem_id = Reading::Value(0x14a9_10de);
    assert_eq!(db.identify_gpu(&g).unwrap().key, "a16");
}

#[test]
fn unreadable_pci_ids_name_nothing() {
    let db = db();
    assert!(db.by_pci_id(0x0000, None).is_empty());
    assert!(db.by_pci_id(0xffff, None).is_empty());
    let mut g = crate::facts::GpuFacts::unread(0, "0000:01:00.0", "nvml", "test");
    g.pci_device_id = Reading::Value(0);
    g.name = Reading::Value("NVIDIA L4".into());
    g.memory.total_mib = Reading::Value(0);
    g.sm_count = Reading::Value(0);
    let e = GpuEvidence::of(&g);
    assert_eq!(e.pci_device_id, None);
    assert_eq!(e.memory_mib, None);
    assert_eq!(e.sm_count, None);
    assert_eq!(db.identify_gpu(&g).unwrap().key, "l4");
    // The subsystem device half: 0x0000 and 0xffff are no board; one either side is.
    for (sub, read) in [
        (0x0000_10de, None),
        (0xffff_10de, None),
        (0x0001_10de, Some(0x0001)),
        (0xfffe_10de, Some(0xfffe)),
        (0x1577_10de, Some(0x1577)),
    ] {
        g.pci_subsystem_id = Reading::Value(sub);
        assert_eq!(
            GpuEvidence::of(&g).pci_subsystem_device_id,
            read,
            "{sub:#x}"
        );
    }
    // One MiB, one SM and a name of one letter are readings.
    g.memory.total_mib = Reading::Value(1);
    g.sm_count = Reading::Value(1);
    g.name = Reading::Value(" x ".into());
    let e = GpuEvidence::of(&g);
    assert_eq!(
        (e.memory_mib, e.sm_count, e.name),
        (Some(1), Some(1), Some(" x "))
    );
}

#[test]
fn variant_words_make_another_product() {
    let db = db();
    let fits = |key: &str, name: &str| db.by_key(key).unwrap().family_fits(name);
    assert!(fits("rtx-3080", "NVIDIA GeForce RTX 3080"));
    assert!(!fits("rtx-3080", "NVIDIA GeForce RTX 3080 Ti"));
    assert!(!fits("rtx-3080", "NVIDIA GeForce RTX 3080 Laptop GPU"));
    assert!(!fits("rtx-4090", "NVIDIA GeForce RTX 4090 D"));
    assert!(!fits("rtx-2080", "NVIDIA GeForce RTX 2080 SUPER"));
    assert!(fits("rtx-2080-ti", "NVIDIA GeForce RTX 2080 Ti"));
    assert!(!fits(
        "rtx-pro-6000-workstation",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    ));
    assert!(fits(
        "rtx-pro-6000-max-q",
        "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    ));
    assert!(!fits("rtx-4000-ada", "NVIDIA RTX 4000 SFF Ada Generation"));
    assert!(!fits("rtx-6000-ada", "Quadro RTX 6000"));
    // Words, not substrings: an A100X is not an A100, an A10G not an A10.
    assert!(!fits("a100-sxm4-80gb", "NVIDIA A100X"));
    assert!(!fits("a10", "NVIDIA A10G"));
    assert!(fits("a100-pcie-40gb", "GRID A100-40C"));
}

// ---------------------------------------------------------------------------------- NVLink

#[test]
fn nvlink_kinds_say_unknown_none_bridge_direct_or_switch() {
    let db = db();
    let kind = |key: &str| db.by_key(key).unwrap().nvlink_kind();
    assert_eq!(kind("v100-sxm3-32gb"), NvlinkKind::Switch);
    assert_eq!(kind("b200"), NvlinkKind::Switch);
    assert_eq!(kind("b300"), NvlinkKind::Switch);
    assert_eq!(kind("gb200"), NvlinkKind::Switch);
    assert_eq!(kind("p100-sxm2-16gb"), NvlinkKind::Direct);
    assert_eq!(kind("v100-sxm2-32gb"), NvlinkKind::Direct);
    assert_eq!(kind("a100-sxm4-80gb"), NvlinkKind::Direct);
    assert_eq!(kind("h100-sxm5-80gb"), NvlinkKind::Direct);
    assert_eq!(kind("h200-sxm-141gb"), NvlinkKind::Direct);
    for bridged in [
        "a100-pcie-40gb",
        "a100-pcie-80gb",
        "a30",
        "a40",
        "rtx-a6000",
        "rtx-2080-ti",
        "rtx-3090",
        "h100-pcie-80gb",
        "h100-nvl-94gb",
        "h200-nvl-141gb",
    ] {
        assert_eq!(kind(bridged), NvlinkKind::Bridge, "{bridged}");
    }
    for none in [
        "p100-pcie-16gb",
        "p40",
        "v100-pcie-16gb",
        "v100-pcie-32gb",
        "t4",
        "a10",
        "l4",
        "l40",
        "l40s",
        "rtx-4090",
        "rtx-6000-ada",
        "rtx-5000-ada",
    ] {
        assert_eq!(kind(none), NvlinkKind::None, "{none}");
    }
    // Where no document read says, the database does not guess.
    for unknown in ["p4", "a10g", "h20", "gh200-96gb", "rtx-a5000", "rtx-2080"] {
        assert_eq!(kind(unknown), NvlinkKind::Unknown, "{unknown}");
    }
    assert!(NvlinkKind::Switch.is_on_board() && NvlinkKind::Direct.is_on_board());
    assert!(!NvlinkKind::Bridge.is_on_board() && !NvlinkKind::None.is_on_board());
    assert!(!NvlinkKind::Unknown.is_on_board());
    // The checks read `nvlink` and `bridge`; the kind keeps them as they were.
    let pcie = db.by_key("a100-pcie-80gb").unwrap().nvlink.clone().unwrap();
    assert!(pcie.bridge);
    assert_eq!(pcie.bandwidth_gbps, 600.0);
    let sxm = db.by_key("h100-sxm5-80gb").unwrap().nvlink.clone().unwrap();
    assert!(!sxm.bridge);
    assert_eq!(sxm.links, Some(18));
    let turing = db.by_key("rtx-2080-ti").unwrap().nvlink.clone().unwrap();
    assert!(turing.bridge);
    assert_eq!((turing.version, turing.links), (2, Some(2)));
    assert_eq!(turing.bandwidth_gbps, 100.0);
    assert!(db.by_key("l40s").unwrap().nvlink.is_none());
    assert!(db.by_key("v100-sxm3-32gb").unwrap().nvlink.is_none());
    // GA102 bridge cards: four NVLink 3 links, 112.5 GB/s between two cards (GA102
    // whitepaper); the A40's link count is not stated for its chip.
    for key in ["rtx-3090", "rtx-a6000"] {
        let n = db.by_key(key).unwrap().nvlink.clone().unwrap();
        assert!(n.bridge, "{key}");
        assert_eq!((n.version, n.links), (3, Some(4)), "{key}");
        assert_eq!(n.bandwidth_gbps, 112.5, "{key}");
    }
    let a40 = db.by_key("a40").unwrap().nvlink.clone().unwrap();
    assert_eq!(
        (a40.version, a40.links, a40.bandwidth_gbps),
        (3, None, 112.5)
    );
    let a100 = db.by_key("a100-pcie-40gb").unwrap().nvlink.clone().unwrap();
    assert_eq!((a100.links, a100.bandwidth_gbps), (Some(12), 600.0));
}

#[test]
fn nvlink_tables_that_contradict_themselves_are_refused() {
    let with = |nvlink: &str| MINIMAL.replace("tflops = {}", &format!("{nvlink}\ntflops = {{}}"));
    for ok in [
        r#"nvlink = { kind = "none" }"#,
        r#"nvlink = { kind = "switch" }"#,
        r#"nvlink = { kind = "bridge", version = 3, bandwidth_gbps = 112.5 }"#,
        r#"nvlink = { kind = "direct", version = 4, links = 18, bandwidth_gbps = 900 }"#,
    ] {
        assert!(SpecDb::parse(&with(ok)).is_ok(), "{ok}");
    }
    for bad in [
        r#"nvlink = { kind = "none", version = 3, bandwidth_gbps = 100 }"#,
        r#"nvlink = { kind = "bridge", version = 3 }"#,
        r#"nvlink = { kind = "bridge", bandwidth_gbps = 100 }"#,
        r#"nvlink = { kind = "direct", links = 12 }"#,
        r#"nvlink = { kind = "maybe" }"#,
        r#"nvlink = { version = 3, bandwidth_gbps = 100 }"#,
        r#"nvlink = { kind = "bridge", version = 3, bandwidth_gbps = 100, bridge = true }"#,
        r#"nvlink = "none""#,
        r#"nvlink = { kind = "bridge", version = 3, bandwidth_gbps = -1 }"#,
    ] {
        assert!(SpecDb::parse(&with(bad)).is_err(), "{bad} parsed");
    }
    let parsed = SpecDb::parse(&with(r#"nvlink = { kind = "none" }"#)).unwrap();
    assert_eq!(parsed.gpus[0].nvlink_kind(), NvlinkKind::None);
    let parsed = SpecDb::parse(MINIMAL).unwrap();
    assert_eq!(parsed.gpus[0].nvlink_kind(), NvlinkKind::Unknown);
}

#[test]
fn a_database_survives_a_round_trip_through_its_own_format() {
    let db = db();
    let text = toml::to_string(&db).expect("serializes");
    let again = SpecDb::parse(&text).expect("parses what it wrote");
    assert_eq!(again.gpus, db.gpus);
}

#[test]
fn families_shared_device_ids_and_subsystems_are_checked() {
    // A family the names do not carry.
    assert!(SpecDb::parse(&MINIMAL.replace("family = \"X\"", "family = \"Y\"")).is_err());
    assert!(SpecDb::parse(&MINIMAL.replace("family = \"X\"", "family = \"-\"")).is_err());
    // Two entries on one device id: only with disjoint subsystem ids.
    let second = MINIMAL
        .replace("key = \"x\"", "key = \"y\"")
        .replace("NVIDIA X", "NVIDIA X Two");
    let shared = |a: &str, b: &str| {
        let first = MINIMAL.replace(
            "pci_device_ids = [0x1234]",
            &format!("pci_device_ids = [0x1234]\n{a}"),
        );
        let other = second.replace(
            "pci_device_ids = [0x1234]",
            &format!("pci_device_ids = [0x1234]\n{b}"),
        );
        SpecDb::parse(&format!("{first}{other}"))
    };
    assert!(shared("", "").is_err());
    assert!(shared("pci_subsystem_device_ids = [0x1]", "").is_err());
    assert!(shared(
        "pci_subsystem_device_ids = [0x1]",
        "pci_subsystem_device_ids = [0x1, 0x2]"
    )
    .is_err());
    assert!(shared(
        "pci_subsystem_device_ids = [0x1]",
        "pci_subsystem_device_ids = [0x2]"
    )
    .is_ok());
    // A base clock above the boost clock is a typo.
    assert!(SpecDb::parse(&MINIMAL.replace(
        "form_factor = \"sxm\"",
        "form_factor = \"sxm\"\nbase_clock_mhz = 2000\nboost_clock_mhz = 1500"
    ))
    .is_err());
}

// ------------------------------------------------------------------- figures and sources

/// The figures a check needs of a data-center GPU, and for each entry the ones the sources
/// read did not give (the entry's comment says why). A figure added or lost fails here until
/// this table and the comment agree.
const REQUIRED: &[&str] = &[
    "memory_gb",
    "memory_type",
    "memory_bandwidth_gbps",
    "tdp_w",
    "sm_count",
    "boost_clock_mhz",
    "pcie_gen",
    "tflops.fp32",
    "tflops.fp16",
];

const KNOWN_GAPS: &[(&str, &[&str])] = &[
    ("p4", &["pcie_gen", "tflops.fp16"]),
    ("p40", &["tflops.fp16"]),
    ("p100-pcie-12gb", &["boost_clock_mhz"]),
    ("p100-pcie-16gb", &["boost_clock_mhz"]),
    ("p100-sxm2-16gb", &["pcie_gen"]),
    ("v100-pcie-16gb", &["boost_clock_mhz"]),
    ("v100-pcie-32gb", &["boost_clock_mhz"]),
    (
        "v100-sxm3-32gb",
        &[
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    ("v100s-pcie-32gb", &["boost_clock_mhz"]),
    ("a2", &["boost_clock_mhz"]),
    ("a16", &["tdp_w", "boost_clock_mhz"]),
    ("a10", &["sm_count", "boost_clock_mhz"]),
    (
        "a10g",
        &[
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    ("a30", &["sm_count", "boost_clock_mhz"]),
    ("a40", &["boost_clock_mhz"]),
    (
        "a800-pcie-80gb",
        &[
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    (
        "a800-sxm4-80gb",
        &[
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    ("l4", &["sm_count", "boost_clock_mhz"]),
    (
        "l20",
        &[
            "memory_gb",
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    ("l40", &["boost_clock_mhz"]),
    ("l40s", &["boost_clock_mhz"]),
    ("h100-nvl-94gb", &["sm_count", "boost_clock_mhz"]),
    (
        "h800-sxm5",
        &[
            "memory_gb",
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    (
        "h800-pcie",
        &[
            "memory_gb",
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    (
        "h20",
        &[
            "memory_gb",
            "memory_type",
            "memory_bandwidth_gbps",
            "tdp_w",
            "sm_count",
            "boost_clock_mhz",
            "pcie_gen",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
    ("h200-nvl-141gb", &["sm_count", "boost_clock_mhz"]),
    ("gh200-96gb", &["sm_count", "boost_clock_mhz", "pcie_gen"]),
    ("gh200-144gb", &["sm_count", "boost_clock_mhz", "pcie_gen"]),
    ("b200", &["sm_count", "boost_clock_mhz"]),
    ("b300", &["sm_count", "boost_clock_mhz"]),
    ("gb200", &["sm_count", "boost_clock_mhz"]),
    (
        "rtx-pro-6000-server",
        &[
            "memory_bandwidth_gbps",
            "sm_count",
            "boost_clock_mhz",
            "tflops.fp32",
            "tflops.fp16",
        ],
    ),
];

/// Data-center parts: what clouds rent by the hour, where the checks lean on the datasheet.
const DATACENTER: &[&str] = &[
    "p4",
    "p40",
    "p100-pcie-12gb",
    "p100-pcie-16gb",
    "p100-sxm2-16gb",
    "v100-pcie-16gb",
    "v100-pcie-32gb",
    "v100-sxm2-16gb",
    "v100-sxm2-32gb",
    "v100-sxm3-32gb",
    "v100s-pcie-32gb",
    "t4",
    "a2",
    "a16",
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
    "l20",
    "l40",
    "l40s",
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
    "b300",
    "gb200",
    "rtx-pro-6000-server",
];

/// FP32 lanes per SM, the CUDA C++ Programming Guide's "Arithmetic Instructions" table: the
/// divisor behind every "CUDA cores / per SM" SM count in data/gpus.toml.
fn fp32_lanes_per_sm(cc: &str) -> u32 {
    match cc {
        "6.0" | "7.0" | "7.5" | "8.0" => 64,
        "6.1" | "8.6" | "8.9" | "9.0" | "10.0" | "10.3" | "12.0" => 128,
        other => panic!("no FP32 lane count for compute capability {other}"),
    }
}

/// Where an entry has an SM count, a boost clock and an FP32 peak, the three come from
/// different lines of different documents (and SM counts are often derived from a core
/// count): the peak must be 2 x SMs x lanes x boost, within the rounding of datasheets that
/// print "12" for 11.76. A mistyped SM count or clock fails here.
#[test]
fn fp32_peaks_agree_with_sm_count_and_boost_clock() {
    let mut checked = 0;
    for g in &db().gpus {
        let (Some(sms), Some(boost), Some(fp32)) = (g.sm_count, g.boost_clock_mhz, g.tflops.fp32)
        else {
            continue;
        };
        let lanes = fp32_lanes_per_sm(&g.compute_capability);
        let derived = 2.0 * f64::from(sms * lanes) * f64::from(boost) / 1e6;
        let off = (derived / fp32 - 1.0).abs();
        assert!(
            off < 0.03,
            "{}: 2 x {sms} SMs x {lanes} x {boost} MHz = {derived:.2} TFLOPS, datasheet {fp32}",
            g.key
        );
        checked += 1;
    }
    // The cross-check covers the entries it was written for, not an empty set.
    assert!(checked >= 15, "only {checked} entries cross-checked");
    // And it would catch a wrong figure: the P40 with the P4's clock is 26% off.
    let p40 = db().by_key("p40").cloned().unwrap();
    let wrong = 2.0 * f64::from(p40.sm_count.unwrap() * 128) * 1063.0 / 1e6;
    assert!((wrong / p40.tflops.fp32.unwrap() - 1.0).abs() > 0.03);
}

/// Where an entry has an SM count and an FP32 peak but no boost clock (the datasheet prints
/// none), the clock they imply must still be one a GPU runs at: a mistyped SM count or peak
/// (8 SMs for 80, 164 TFLOPS for 16.4) lands far outside.
#[test]
fn fp32_peaks_imply_a_clock_a_gpu_runs_at() {
    let db = db();
    let mut checked = Vec::new();
    for g in &db.gpus {
        let (Some(sms), Some(fp32)) = (g.sm_count, g.tflops.fp32) else {
            continue;
        };
        let lanes = fp32_lanes_per_sm(&g.compute_capability);
        let mhz = fp32 * 1e6 / (2.0 * f64::from(sms * lanes));
        assert!(
            (900.0..=3200.0).contains(&mhz),
            "{}: {fp32} TFLOPS over {sms} SMs implies {mhz:.0} MHz",
            g.key
        );
        checked.push(g.key.as_str());
    }
    for key in [
        "a2",
        "rtx-a5000",
        "v100s-pcie-32gb",
        "a16",
        "rtx-a4000",
        "t4",
    ] {
        assert!(checked.contains(&key), "{key} not cross-checked");
    }
}

fn missing_figures(g: &GpuSpec) -> Vec<&'static str> {
    let present = |f: &str| match f {
        "memory_gb" => g.memory_gb.is_some(),
        "memory_type" => g.memory_type.is_some(),
        "memory_bandwidth_gbps" => g.memory_bandwidth_gbps.is_some(),
        "tdp_w" => g.tdp_w.is_some(),
        "sm_count" => g.sm_count.is_some(),
        "boost_clock_mhz" => g.boost_clock_mhz.is_some(),
        "pcie_gen" => g.pcie_gen.is_some(),
        "tflops.fp32" => g.tflops.fp32.is_some(),
        "tflops.fp16" => g.tflops.fp16.is_some(),
        other => panic!("unknown figure {other}"),
    };
    REQUIRED.iter().copied().filter(|f| !present(f)).collect()
}

#[test]
fn data_center_entries_have_every_figure_nvidia_published_in_the_sources_read() {
    let db = db();
    for key in DATACENTER {
        let g = db.by_key(key).unwrap_or_else(|| panic!("{key} missing"));
        let want: Vec<&str> = KNOWN_GAPS
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, gaps)| gaps.to_vec())
            .unwrap_or_default();
        assert_eq!(
            missing_figures(g),
            want,
            "{key}: figures present differ from KNOWN_GAPS"
        );
    }
    for (key, _) in KNOWN_GAPS {
        assert!(
            DATACENTER.contains(key),
            "{key} in KNOWN_GAPS but not DATACENTER"
        );
    }
    // A part with figures cites more than its identity: a source beyond the id lists.
    for g in &db.gpus {
        let identity_only = g.tflops.entries().iter().all(|(_, v)| v.is_none())
            && g.memory_bandwidth_gbps.is_none()
            && g.tdp_w.is_none();
        if !identity_only {
            assert!(
                g.sources
                    .iter()
                    .any(|s| !s.title.contains("Compatible GPUs")
                        && !s.title.contains("PCI ID Repository")),
                "{}: figures without a datasheet source",
                g.key
            );
        }
    }
}

// ------------------------------------------------------------------------------- --expect

#[test]
fn every_name_gpuaudit_models_lists_is_accepted_by_expect() {
    let db = db();
    for g in &db.gpus {
        let names = g.expect_names();
        assert_eq!(names[0], g.key);
        for n in &names {
            let found = db
                .resolve_expected(n)
                .unwrap_or_else(|e| panic!("{}: {e}", g.key));
            assert!(
                found.iter().any(|f| f.key == g.key),
                "--expect {n} does not name {}",
                g.key
            );
        }
        // The key alone names the entry alone.
        assert_eq!(keys(&db.matching(&g.key)), vec![g.key.clone()]);
    }
}

#[test]
fn natural_short_names_resolve() {
    let db = db();
    for (name, includes) in [
        ("a100", "a100-sxm4-80gb"),
        ("h100", "h100-sxm5-80gb"),
        ("v100s", "v100s-pcie-32gb"),
        ("rtx4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("l40s", "l40s"),
        ("b200", "b200"),
        ("gh200", "gh200-144gb"),
        ("rtx-pro-6000", "rtx-pro-6000-server"),
        ("rtx-pro-6000", "rtx-pro-6000-workstation"),
        ("V100S", "v100s-pcie-32gb"),
        ("h200", "h200-sxm-141gb"),
        ("t4", "t4"),
        ("p100", "p100-sxm2-16gb"),
    ] {
        let found = db.resolve_expected(name).unwrap();
        assert!(
            found.iter().any(|g| g.key == includes),
            "{name} -> {includes}"
        );
    }
    // `--expect v100s:8` is split by Expectation before the database sees it.
    let e: crate::Expectation = "v100s:8".parse().unwrap();
    assert_eq!(
        keys(&db.resolve_expected(&e.model).unwrap()),
        vec!["v100s-pcie-32gb"]
    );
}

#[test]
fn an_unknown_model_is_refused_with_the_names_known() {
    let db = db();
    let err = db.resolve_expected("x100").unwrap_err();
    assert_eq!(err.model, "x100");
    let text = err.to_string();
    assert!(
        text.starts_with("unknown GPU model 'x100'; known: "),
        "{text}"
    );
    for short in ["a100", "h100", "v100s", "rtx-4090", "rtx-pro-6000", "b200"] {
        assert!(err.known.iter().any(|k| k == short), "{short} not offered");
    }
    assert!(text.contains("`gpuaudit models`"), "{text}");
    assert_eq!(err.known, db.family_short_names());
    // Sorted, no repeats.
    let mut sorted = err.known.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, err.known);
}

fn facts(
    pci: Option<u16>,
    name: Option<&str>,
    mib: Option<u64>,
    sms: Option<u32>,
) -> crate::facts::GpuFacts {
    let mut g = crate::facts::GpuFacts::unread(0, "0000:3b:00.0", "nvidia-smi", "not read");
    if let Some(p) = pci {
        g.pci_device_id = Reading::Value(p);
    }
    if let Some(n) = name {
        g.name = Reading::Value(n.to_string());
    }
    if let Some(m) = mib {
        g.memory.total_mib = Reading::Value(m);
    }
    if let Some(s) = sms {
        g.sm_count = Reading::Value(s);
    }
    g
}

fn why(m: &ExpectMatch) -> Vec<String> {
    match m {
        ExpectMatch::Contradicts { why, .. } => why.clone(),
        other => panic!("expected a contradiction, got {other:?}"),
    }
}

#[test]
fn a_v100s_ordered_as_an_a100_contradicts_on_every_count() {
    let db = db();
    // Issue 8, defect 1: eight V100S-PCIE-32GB audited with --expect a100:8.
    let g = facts(
        Some(0x1df6),
        Some("Tesla V100S-PCIE-32GB"),
        Some(32768),
        Some(80),
    );
    let m = db.judge_expected("a100", &g);
    let reasons = why(&m);
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(
        reasons[0].contains("0x1df6") && reasons[0].contains("V100S"),
        "{}",
        reasons[0]
    );
    assert!(
        reasons[1].contains("Tesla V100S-PCIE-32GB"),
        "{}",
        reasons[1]
    );
    assert!(
        reasons[2].contains("32.0 GiB") && reasons[2].contains("40 or 80 GB"),
        "{}",
        reasons[2]
    );
    assert!(
        reasons[3].contains("80 SMs") && reasons[3].contains("108"),
        "{}",
        reasons[3]
    );
    let ExpectMatch::Contradicts { delivered, .. } = &m else {
        unreachable!()
    };
    assert_eq!(delivered.map(|d| d.key.as_str()), Some("v100s-pcie-32gb"));
    assert!(m.why_text().contains("; "));
    // Each piece of evidence alone is enough.
    for alone in [
        facts(Some(0x1df6), None, None, None),
        facts(None, Some("Tesla V100S-PCIE-32GB"), None, None),
        facts(None, None, Some(32768), None),
        facts(None, None, None, Some(80)),
    ] {
        assert_eq!(why(&db.judge_expected("a100", &alone)).len(), 1);
    }
}

#[test]
fn an_rtx_3090_ordered_as_an_rtx_4090_contradicts() {
    let db = db();
    let g = facts(
        Some(0x2204),
        Some("NVIDIA GeForce RTX 3090"),
        Some(24576),
        Some(82),
    );
    let reasons = why(&db.judge_expected("rtx4090", &g));
    assert!(reasons[0].contains("0x2204"), "{reasons:?}");
    assert!(reasons
        .iter()
        .any(|r| r.contains("NVIDIA GeForce RTX 3090")));
    // 24 GB fits a 4090 too; only the SM count and the identity say otherwise.
    assert!(!reasons.iter().any(|r| r.contains("GiB")), "{reasons:?}");
    assert!(reasons
        .iter()
        .any(|r| r.contains("82 SMs") && r.contains("128")));
}

#[test]
fn an_h200_ordered_as_an_h200_matches() {
    let db = db();
    // The values of the 2xH200 VM snapshot.
    let g = facts(Some(0x2335), Some("NVIDIA H200"), Some(143771), Some(132));
    for order in ["h200", "h200-sxm-141gb", "H200 SXM", "h200-sxm"] {
        match db.judge_expected(order, &g) {
            ExpectMatch::Matches(s) => assert_eq!(s.key, "h200-sxm-141gb", "{order}"),
            other => panic!("{order}: {other:?}"),
        }
    }
    // The NVL card is an H200 too, but not this one.
    assert!(matches!(
        db.judge_expected("h200-nvl-141gb", &g),
        ExpectMatch::Contradicts { .. }
    ));
}

#[test]
fn a_gpu_the_database_does_not_know_contradicts_by_name() {
    let db = db();
    // Neither the id nor the name is in the database, and the name is no A100's.
    let g = facts(Some(0x1e30), Some("Quadro RTX 6000"), None, None);
    let m = db.judge_expected("a100", &g);
    let reasons = why(&m);
    assert!(
        reasons[0].contains("0x1e30") && reasons[0].contains("not among"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("'Quadro RTX 6000', a name no A100 has"),
        "{reasons:?}"
    );
    let ExpectMatch::Contradicts { delivered, .. } = m else {
        unreachable!()
    };
    assert!(delivered.is_none());
    // The name alone, no id: still a contradiction.
    let g = facts(None, Some("Radeon Instinct MI100"), None, None);
    assert_eq!(why(&db.judge_expected("h100", &g)).len(), 1);
}

#[test]
fn a_gpu_with_nothing_readable_cannot_tell() {
    let db = db();
    let g = facts(None, None, None, None);
    assert!(matches!(
        db.judge_expected("a100", &g),
        ExpectMatch::Unknown { .. }
    ));
    // Zeros are not readings either.
    let g = facts(Some(0), Some("  "), Some(0), Some(0));
    assert!(matches!(
        db.judge_expected("a100", &g),
        ExpectMatch::Unknown { .. }
    ));
    // Memory and SMs that fit, and nothing that names the model: cannot tell.
    let g = facts(None, None, Some(81920), Some(108));
    let m = db.judge_expected("a100", &g);
    assert!(matches!(m, ExpectMatch::Unknown { .. }), "{m:?}");
    assert!(
        m.why_text().starts_with("neither the PCI device id ("),
        "{m:?}"
    );
    assert!(m.why_text().contains(") nor the name ("), "{m:?}");
    // Each says why it was not read: the reading's reason, or the zero it held.
    let g = facts(Some(0), None, None, None);
    let m = db.judge_expected("a100", &g);
    assert!(
        m.why_text()
            .starts_with("neither the PCI device id (0x0000 names no device) nor the name ("),
        "{m:?}"
    );
    let mut g = facts(None, Some("  "), None, None);
    g.pci_device_id = Reading::unavailable("nvidia-smi: <pci/pci_device_id> redacted");
    let m = db.judge_expected("a100", &g);
    assert_eq!(
        m.why_text(),
        "neither the PCI device id (nvidia-smi: <pci/pci_device_id> redacted) nor the name \
         (empty) could be read; what was read fits"
    );
    // An order the database does not know cannot be judged, and says so.
    let g = facts(Some(0x2335), Some("NVIDIA H200"), None, None);
    assert!(matches!(
        db.judge_expected("x100", &g),
        ExpectMatch::Unknown { .. }
    ));
    let g = facts(None, None, None, None);
    assert_eq!(
        db.judge_expected("x100", &g).why_text(),
        "no model in the spec database is named 'x100'"
    );
    // The other Unknown (an id the database lacks, the name vouching for the family) keeps
    // its reason.
    let g = facts(Some(0x2339), Some("NVIDIA H100"), None, None);
    assert!(db.judge_expected("h100", &g).why_text().contains("variant"));
}

#[test]
fn the_evidence_narrows_the_order_before_it_is_judged() {
    let db = db();
    // The id says A100 SXM4 80GB, the memory says 40 GB: a 40 GB part under an 80 GB id is
    // not what an "a100" order delivers either (the id narrowed it to the 80 GB model).
    let g = facts(
        Some(0x20b2),
        Some("NVIDIA A100-SXM4-80GB"),
        Some(40960),
        None,
    );
    let reasons = why(&db.judge_expected("a100", &g));
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0] == "it shows 40.0 GiB of memory; the datasheet label of 'a100' is 80 GB",
        "{reasons:?}"
    );
    // The right size: matches the model the id names.
    let g = facts(
        Some(0x20b2),
        Some("NVIDIA A100-SXM4-80GB"),
        Some(81920),
        Some(108),
    );
    assert!(
        matches!(db.judge_expected("a100", &g), ExpectMatch::Matches(s) if s.key == "a100-sxm4-80gb")
    );
    // A PCIe card ordered as SXM: the exact name of another entry contradicts.
    let g = facts(None, Some("NVIDIA A100 80GB PCIe"), None, None);
    let reasons = why(&db.judge_expected("a100-sxm4-80gb", &g));
    assert!(
        reasons[0].contains("the name of the NVIDIA A100 PCIe 80GB"),
        "{reasons:?}"
    );
    // A name not in the database that carries the family is no contradiction: a vGPU
    // profile name, with its slice of memory, of an "a100" order.
    let g = facts(None, Some("GRID A100-40C"), Some(40960), None);
    match db.judge_expected("a100", &g) {
        ExpectMatch::Matches(s) => assert!(s.key.starts_with("a100-") && s.key.ends_with("40gb")),
        other => panic!("{other:?}"),
    }
    // A variant name is another product: an RTX 3080 Ti ordered as an RTX 3080.
    let g = facts(None, Some("NVIDIA GeForce RTX 3080 Ti"), None, None);
    assert_eq!(why(&db.judge_expected("rtx3080", &g)).len(), 1);
    // The SM count narrows what identification alone would pick: a name and memory that fit
    // both 80 GB H100s, and the PCIe card's 114 SMs.
    let g = facts(None, Some("H100"), Some(81920), Some(114));
    assert!(
        matches!(db.judge_expected("h100", &g), ExpectMatch::Matches(s) if s.key == "h100-pcie-80gb")
    );
    // A model whose figure is unknown is not ruled out by it: an H20 of any size.
    let g = facts(Some(0x2329), Some("NVIDIA H20"), Some(97871), Some(78));
    assert!(matches!(db.judge_expected("h20", &g), ExpectMatch::Matches(s) if s.key == "h20"));
}

#[test]
fn an_unlisted_id_contradicts_unless_the_name_vouches_for_the_family() {
    let db = db();
    // 0x2339 is an H100 variant the driver names "NVIDIA H100" and the database lacks.
    let g = facts(Some(0x2339), Some("NVIDIA H100"), None, None);
    let m = db.judge_expected("h100", &g);
    assert!(matches!(m, ExpectMatch::Unknown { .. }), "{m:?}");
    assert!(m.why_text().contains("0x2339") && m.why_text().contains("variant"));
    // The same GPU ordered as an A100: the name says otherwise, so the id counts too.
    let reasons = why(&db.judge_expected("a100", &g));
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].contains("0x2339") && reasons[0].contains("not among"));
    // An unlisted id and no name: another product, against every id the order names.
    let g = facts(Some(0x1234), None, None, None);
    let reasons = why(&db.judge_expected("a100", &g));
    assert_eq!(
        reasons[0],
        "PCI device id 0x1234 is not among the ids of the models 'a100' names \
         (0x20b0, 0x20b1, 0x20b2, 0x20b5, 0x20f1)"
    );
    // An unlisted id with a name that fits but a memory size that does not: still a
    // contradiction, by the memory.
    let g = facts(Some(0x2339), Some("NVIDIA H100"), Some(16384), None);
    assert!(matches!(
        db.judge_expected("h100", &g),
        ExpectMatch::Contradicts { .. }
    ));
}
