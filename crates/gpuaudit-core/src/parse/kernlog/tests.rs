use super::*;

const FATAL: &str = include_str!("../testdata/aer-gpu-burn-fatal.txt");
const CORRECTED: &str = include_str!("../testdata/aer-popos-corrected.txt");
const PREFIXED: &str = include_str!("../testdata/aer-popos-aer-prefix.txt");
const LIMITED: &str = include_str!("../testdata/aer-limited-by-dri-devel.txt");
const COR_DOC: &str = include_str!("../testdata/aer_dev_correctable-abi-doc.txt");
const FATAL_DOC: &str = include_str!("../testdata/aer_dev_fatal-abi-doc.txt");

#[test]
fn a_fatal_report_at_the_root_port_with_its_names() {
    let (aer, notices) = parse_pcie(FATAL);
    assert!(notices.is_empty());
    assert_eq!(aer.len(), 2);
    assert_eq!(aer[0].bus_id, "0000:00:02.0");
    assert_eq!(aer[0].severity, AerSeverity::Corrected);
    assert_eq!(aer[0].layer.as_deref(), Some("Data Link Layer"));
    assert_eq!(aer[0].errors, vec!["Replay Timer Timeout"]);
    assert_eq!(aer[0].time.as_deref(), Some("74785.660380 s after boot"));
    assert_eq!(aer[1].severity, AerSeverity::Fatal);
    assert_eq!(aer[1].layer.as_deref(), Some("Transaction Layer"));
    assert_eq!(aer[1].errors, vec!["Surprise Down Error"]);
    // Every line of it is kept by an extract but the one with neither needle nor name.
    let kept: Vec<&str> = FATAL.lines().filter(|l| keep(l)).collect();
    assert_eq!(kept.len(), 7, "{kept:#?}");
}

#[test]
fn corrected_reports_of_port_and_gpu_are_told_apart() {
    let (aer, _) = parse_pcie(CORRECTED);
    assert_eq!(aer.len(), 2);
    assert_eq!(aer[0].bus_id, "0000:00:03.1");
    assert_eq!(aer[0].severity, AerSeverity::Corrected);
    assert_eq!(
        aer[0].errors,
        vec!["BadTLP", "BadDLLP", "Rollover", "Timeout"]
    );
    assert_eq!(aer[0].time.as_deref(), Some("Sep 19 16:18:04"));
    assert_eq!(aer[0].at, None);
    assert_eq!(aer[1].bus_id, "0000:07:00.0");
    assert_eq!(aer[1].errors, vec!["Timeout"]);
}

#[test]
fn the_aer_prefixed_format_reads_the_same() {
    let (aer, _) = parse_pcie(PREFIXED);
    assert_eq!(aer.len(), 3);
    assert!(aer.iter().all(|e| e.errors == vec!["RxErr"]), "{aer:#?}");
    assert_eq!(aer[2].bus_id, "0000:03:00.0");
    assert_eq!(aer[2].layer.as_deref(), Some("Physical Layer"));
}

#[test]
fn a_limited_by_notice() {
    let (aer, n) = parse_pcie(LIMITED);
    assert!(aer.is_empty());
    assert_eq!(n.len(), 1);
    let n = &n[0];
    assert_eq!(n.bus_id, "0000:01:00.0");
    assert_eq!(n.limited_at.as_deref(), Some("0000:00:01.0"));
    assert_eq!((n.gts, n.width), (8.0, 8));
    assert_eq!((n.capable_gts, n.capable_width), (8.0, 16));
    assert_eq!(n.time.as_deref(), Some("0.276602 s after boot"));
    let unknown = "pci 0000:01:00.0: 2.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x1 link at <unknown> (capable of 31.504 Gb/s with 8.0 GT/s PCIe x4 link)";
    let (_, n) = parse_pcie(unknown);
    assert_eq!(n[0].limited_at, None);
    assert_eq!((n[0].gts, n[0].width), (2.5, 1));
    assert_eq!((n[0].capable_gts, n[0].capable_width), (8.0, 4));
}

#[test]
fn iso_dated_lines_carry_their_time() {
    let line = "2026-11-30T10:00:00.000001+00:00 pcieport 0000:00:01.0: AER: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)";
    let (aer, _) = parse_pcie(line);
    assert_eq!(aer[0].severity, AerSeverity::NonFatal);
    assert_eq!(aer[0].at, Some(1_796_032_800));
}

#[test]
fn severities() {
    assert_eq!(severity("Corrected"), Some(AerSeverity::Corrected));
    assert_eq!(severity("Correctable"), Some(AerSeverity::Corrected));
    assert_eq!(
        severity("Uncorrected (Non-Fatal)"),
        Some(AerSeverity::NonFatal)
    );
    assert_eq!(severity("Uncorrected (Fatal)"), Some(AerSeverity::Fatal));
    assert_eq!(
        severity("Uncorrectable (NonFatal)"),
        Some(AerSeverity::NonFatal)
    );
    assert_eq!(severity("Weird"), None);
    assert_eq!(severity(""), None);
}

#[test]
fn what_an_extract_keeps() {
    for l in [
        "NVRM: Xid (PCI:0000:00:07): 79, pid=1, GPU has fallen off the bus.",
        "nvidia-nvswitch0: SXid (PCI:0000:c5:00.0): 12028, Non-fatal",
        "NVRM: GPU 0000:00:07.0: GPU has fallen off the bus.",
        "NVRM: GPU 0000:00:07.0: GPU requires reset",
        "pcieport 0000:00:1d.0: AER: Corrected error received: 0000:00:1d.0",
        "pcieport 0000:00:1d.0:    [ 0] RxErr                  (First)",
        "pcieport 0000:00:1d.0:    [12] Replay Timer Timeout",
    ] {
        assert!(keep(l), "{l}");
    }
    for l in [
        "pcieport 0000:00:1d.0:   device [8086:a330] error status/mask=00000001/00002000",
        "[    0.2] pci 0000:01:00.0: [10de:1f95] type 00 class 0x030000",
        "[ 12.5] random line",
        "pcieport 0000:00:1d.0:    [] nothing",
        "pcieport 0000:00:1d.0:    [123] three digits",
        "pcieport 0000:00:1d.0:    [ 1]   ",
        "",
    ] {
        assert!(!keep(l), "{l}");
    }
}

#[test]
fn bus_addresses() {
    assert_eq!(bdf("0000:00:1D.0:").as_deref(), Some("0000:00:1d.0"));
    assert_eq!(bdf("0000:00:1d.0").as_deref(), Some("0000:00:1d.0"));
    for bad in [
        "00:1d.0",
        "0000:00:1d",
        "0000:00:1d.10",
        "000g:00:1d.0",
        "0000:00:1d.0:x:",
        "a:b:c.d",
    ] {
        assert_eq!(bdf(bad), None, "{bad}");
    }
}

#[test]
fn names_go_to_the_newest_report_of_their_function_bounded() {
    let mut log = String::from(
        "pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n",
    );
    for i in 0..40 {
        log.push_str(&format!(
            "pcieport 0000:00:01.0:    [{:>2}] Name{i}\n",
            i % 16
        ));
    }
    // A name of a function with no report is dropped.
    log.push_str("nvidia 0000:18:00.0:    [ 0] RxErr\n");
    let (aer, _) = parse_pcie(&log);
    assert_eq!(aer.len(), 1);
    assert_eq!(aer[0].errors.len(), MAX_NAMES);
    assert_eq!(aer[0].errors[0], "Name0");
}

#[test]
fn the_last_events_are_kept_and_lines_cut() {
    let mut log = String::new();
    for i in 0..MAX_EVENTS + 3 {
        log.push_str(&format!(
            "pcieport 0000:00:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, {i} {}\n",
            "x".repeat(500)
        ));
        log.push_str(&format!(
            "pci 0000:01:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x{} link at 0000:00:01.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)\n",
            i % 8 + 1
        ));
    }
    let (aer, n) = parse_pcie(&log);
    assert_eq!(aer.len(), MAX_EVENTS);
    assert_eq!(n.len(), MAX_EVENTS);
    assert!(aer[0].text.contains(", 3 x"), "{}", &aer[0].text[..120]);
    assert_eq!(n[0].width, 4);
    assert!(aer[0].text.chars().count() <= MAX_LINE_CHARS);
}

#[test]
fn sysfs_counter_files() {
    let c = parse_aer_counts(COR_DOC).unwrap();
    assert_eq!(c.total, 2);
    assert_eq!(c.by_name, vec![("Receiver Error".to_string(), 2)]);
    let f = parse_aer_counts(FATAL_DOC).unwrap();
    assert_eq!(f.total, 0);
    assert!(f.by_name.is_empty());
    let modern = "RxErr 0\nBadTLP 3\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 3\n";
    let m = parse_aer_counts(modern).unwrap();
    assert_eq!(m.total, 3);
    assert_eq!(
        m.by_name,
        vec![("BadTLP".to_string(), 3), ("Timeout".to_string(), 1)]
    );
    for bad in [
        "",
        "RxErr 0\n",
        "RxErr x\nTOTAL_ERR_COR 1",
        "5\nTOTAL_ERR_COR 1",
        "TOTAL_ERR_COR -1",
    ] {
        assert_eq!(parse_aer_counts(bad), None, "{bad:?}");
    }
}

#[test]
fn odd_input_is_ignored() {
    for s in [
        "0000:00:01.0: PCIe Bus Error:",
        "x 0000:00:01.0: PCIe Bus Error: severity=",
        "x 0000:00:01.0: available PCIe bandwidth, limited by ",
        "x 0000:00:01.0: available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:00:01.0 (capable of 1 Gb/s with",
        "x 0000:00:01.0: available PCIe bandwidth, limited by NaN GT/s PCIe x8 link at a (capable of 1 Gb/s with 8.0 GT/s PCIe x0 link)",
        "\u{0}\u{ffff} 0000:00:01.0: [",
        "é 0000:00:01.0:    [é] é",
    ] {
        let _ = parse_pcie(s);
        let _ = keep(s);
        let _ = parse_aer_counts(s);
    }
}
