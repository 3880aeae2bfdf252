//! Every parser over a few thousand random and mutated inputs: none may panic, and what they
//! return must hold together. A stable-toolchain stand-in for the cargo-fuzz targets in
//! `fuzz/`, deterministic so that a failure reproduces.

use super::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

const SEEDS: &[&str] = &[
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/cmd/nvidia-smi-q.xml"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/cmd/nvidia-smi-topo-m.txt"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/cmd/nvcc-version.txt"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/proc/cpuinfo"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/proc/meminfo"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/proc/modules"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/proc/driver/nvidia/version"),
    include_str!("../../../../fixtures/snapshots/h200-x2-vm/etc/os-release"),
    include_str!("testdata/nvsmi-r470-v100.xml"),
    include_str!("testdata/nvsmi-r525-a100-mig.xml"),
    include_str!("testdata/nvsmi-r550-vgpu.xml"),
    include_str!("testdata/nvsmi-r580-h200-dtd.xml"),
    include_str!("testdata/topo-h100x8-nvswitch-nics.txt"),
    include_str!("testdata/topo-a100x4-ansi-tabs.txt"),
    include_str!("testdata/topo-old-mlx4-header.txt"),
    "Package: runc\nStatus: install ok installed\nMaintainer: Ubuntu Developers\nVersion: 1.1.12-0ubuntu2~22.04.1\n\nPackage: docker-ce\nStatus: install ok installed\nVersion: 5:27.1.1-1~ubuntu.22.04~jammy\n",
    "runc\t1.1.12-1.el9\tx86_64\tRed Hat, Inc.\nnvidia-container-toolkit\t1.17.8-1\tx86_64\t(none)\n",
    "runc version 1.4.0-rc.3\ncommit: v1.4.0-rc.3-0-g1\n",
    "GPU 0: NVIDIA H200 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n\
     GPU 1: NVIDIA H200 (UUID: GPU-y)\nNVML: Unable to retrieve NVLink information as all links are inActive\n",
    r#"{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, "cuda_cudart": {"version": "12.4.127"}}"#,
    "CUDA Version 11.8.89\n",
    "#define CUDA_VERSION 12040\n",
    "libcudart.so.12.4.127",
    "0x10de\n",
    "32.0 GT/s PCIe\n",
    "-1\n",
];

/// Fragments that sit on the parsers' decision points.
const TOKENS: &[&str] = &[
    "N/A",
    "[N/A]",
    "99999999999999999999999",
    "-1",
    "0",
    "\r\n",
    "\n",
    "\t",
    " ",
    "<",
    ">",
    "&",
    "&amp;",
    "&#0;",
    "\u{1b}[4m",
    "\u{1b}",
    "0x",
    "NV",
    "NV18",
    "GPU0",
    "GPU 0:",
    "Link 0:",
    "inf",
    "NaN",
    "<gpu>",
    "</gpu>",
    "<gpu id=\"x\">",
    "Active",
    "Not Active",
    "\u{0}",
    "é",
    "GT/s",
    "GB/s",
    "MiB",
    " W",
    ":",
    "=",
    "\"",
    "'",
    ",",
    "[permanent],",
    "(POE)",
    "processor\t: 0",
    "MemTotal:",
    "NVRM version:",
    "Kernel Module",
    "CUDA Version",
    "release ",
    "V1.2.3",
    "NIC Legend:",
    "CPU Affinity",
    "NUMA Affinity",
    "GPU NUMA ID",
    "<![CDATA[",
    "]]>",
    "<!--",
    "-->",
    "<?xml version=\"1.0\" ?>",
    "<!DOCTYPE nvidia_smi_log SYSTEM \"x.dtd\">",
    "<!DOCTYPE x [<!ENTITY e \"e\">]>",
    "<!DOCTYPE nvidia_smi_log [",
    "<!ELEMENT a (#PCDATA)>",
    "<!ATTLIST gpu id CDATA #REQUIRED>",
    "<!ENTITY % p \"x\">",
    "%p;",
    "]>",
    "&e;",
    "\u{9b}",
    "\u{9d}",
    "\u{7f}",
    "\r",
];

/// SplitMix64: small, deterministic, good enough to spread mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(rng: &mut Rng, seed: &str) -> Vec<u8> {
    let mut b = seed.as_bytes().to_vec();
    let rounds = 1 + rng.below(8);
    for _ in 0..rounds {
        let at = rng.below(b.len() + 1);
        match rng.below(9) {
            0 => b.truncate(at),
            1 if at < b.len() => b[at] ^= 1 << rng.below(8),
            2 => b.insert(at, rng.next() as u8),
            3 if at < b.len() => {
                b.remove(at);
            }
            4 | 5 => {
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                b.splice(at..at, t.iter().copied());
            }
            6 => {
                // Replace a run with a token, to break numbers and tags rather than grow them.
                let end = (at + 1 + rng.below(16)).min(b.len());
                let t = TOKENS[rng.below(TOKENS.len())].as_bytes();
                if at <= end {
                    b.splice(at..end, t.iter().copied());
                }
            }
            7 => {
                // Duplicate a slice somewhere else (repeated elements, rows, lines).
                let start = rng.below(b.len() + 1);
                let end = (start + rng.below(512)).min(b.len());
                let chunk = b[start..end].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, chunk);
            }
            _ => {
                // Splice in the tail of another seed.
                let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
                let from = rng.below(other.len() + 1);
                b.truncate(at);
                b.extend_from_slice(&other[from..]);
            }
        }
    }
    b
}

/// Values that keep XML well-formed but probe every field reader.
const VALUES: &[&str] = &[
    "N/A",
    "[N/A]",
    "[Not Supported]",
    "Unknown Error",
    "",
    "  ",
    "Active",
    "Not Active",
    "Enabled",
    "Disabled",
    "Yes",
    "No",
    "Pass-Through",
    "VGPU",
    "Host VSGA",
    "P0",
    "0",
    "-1",
    "-1 C",
    "16x",
    "0x",
    "zz",
    "1e3 %",
    "inf W",
    "NaN W",
    "-0.0 W",
    "4294967296",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999 MiB",
    "143771 MiB",
    "78.46 W",
    "1980 MHz",
    "FFFFFFFFF",
    "233510DE",
    "00000000:00:06.0",
    "é",
    "&amp;",
    "&#x41;",
];

/// Mutations that keep the XML well-formed, so that the field readers (not only the XML
/// parser's error path) see odd input: a leaf's text replaced, a leaf line dropped or doubled.
fn mutate_xml(rng: &mut Rng, seed: &str) -> String {
    let mut lines: Vec<String> = seed.lines().map(str::to_string).collect();
    let rounds = 1 + rng.below(12);
    for _ in 0..rounds {
        let i = rng.below(lines.len());
        let Some(line) = lines.get(i).cloned() else {
            continue;
        };
        let t = line.trim();
        let leaf = t.starts_with('<') && !t.starts_with("</") && t.contains("</");
        if !leaf {
            continue;
        }
        match rng.below(4) {
            0 | 1 => {
                if let (Some(open), Some(close)) = (line.find('>'), line.rfind("</")) {
                    if open < close {
                        let v = VALUES[rng.below(VALUES.len())];
                        lines[i] = format!("{}{v}{}", &line[..=open], &line[close..]);
                    }
                }
            }
            2 => {
                lines.remove(i);
            }
            _ => lines.insert(i, line),
        }
    }
    lines.join("\n")
}

fn random_bytes(rng: &mut Rng) -> Vec<u8> {
    // Mostly characters the formats use, so that line and token logic gets exercised too.
    const ALPHABET: &[u8] = b" \t\n:=<>/.,-0123456789abcdefxXGPUNVLinkMiB";
    let len = rng.below(1024);
    (0..len)
        .map(|_| match rng.below(4) {
            0 => rng.next() as u8,
            _ => ALPHABET[rng.below(ALPHABET.len())],
        })
        .collect()
}

/// Runs every parser on `text` and checks what they return is consistent.
pub(crate) fn run_all(text: &str) {
    let (aer, notices) = kernlog::parse_pcie(text);
    assert!(aer.len() <= kernlog::MAX_EVENTS && notices.len() <= kernlog::MAX_EVENTS);
    for e in &aer {
        assert!(e.errors.len() <= kernlog::MAX_NAMES);
        assert!(e.text.chars().count() <= kernlog::MAX_LINE_CHARS);
    }
    for n in &notices {
        assert!(n.gts.is_finite() && n.width > 0 && n.capable_width > 0);
    }
    if let Some(c) = kernlog::parse_aer_counts(text) {
        assert!(c.by_name.iter().all(|(_, n)| *n > 0));
    }
    let _ = xid::parse_xids(text);
    if let Ok(log) = nvsmi_xml::parse(text) {
        assert!(log.gpus.len() <= nvsmi_xml::MAX_GPUS);
        assert!(log.gpus_left_out == 0 || log.gpus.len() == nvsmi_xml::MAX_GPUS);
        for (i, g) in log.gpus.iter().enumerate() {
            assert_eq!(g.index as usize, i);
            assert_eq!(g.source, "nvidia-smi");
        }
    }
    if let Ok(t) = topo::parse(text) {
        assert_eq!(t.links.len(), t.gpus.len());
        assert_eq!(t.gpu_nic.len(), t.gpus.len());
        assert_eq!(t.cpu_affinity.len(), t.gpus.len());
        assert_eq!(t.numa_affinity.len(), t.gpus.len());
        for row in &t.links {
            assert_eq!(row.len(), t.gpus.len());
        }
        for row in &t.gpu_nic {
            assert_eq!(row.len(), t.nics.len());
        }
    }
    if let Ok(gpus) = nvlink::parse_status(text) {
        for g in gpus {
            assert!(!g.all_inactive || g.links.is_empty());
            for l in g.links {
                assert_eq!(l.active, l.speed_gbps.is_some());
                assert!(l.speed_gbps.is_none_or(|s| s.is_finite() && s >= 0.0));
            }
        }
    }
    if let Ok(m) = procfs::parse_modules(text) {
        assert!(m.iter().all(|m| !m.name.is_empty()));
    }
    let _ = procfs::parse_meminfo_total_kib(text);
    for p in packages::parse_dpkg_status(text)
        .into_iter()
        .chain(packages::parse_rpm_listing(text))
    {
        assert!(packages::watched(&p.name) && !p.version.is_empty());
    }
    for program in [
        "runc",
        "containerd",
        "dockerd",
        "nvidia-ctk",
        "nvidia-container-cli",
    ] {
        if let Some(v) = version::program_version(program, text) {
            assert!(version::Upstream::parse(&v).is_some(), "{v:?}");
        }
    }
    if let Some(u) = version::Upstream::parse(text) {
        assert!(!u.version.is_empty());
        assert_eq!(
            version::compare(&u.version, &u.version),
            std::cmp::Ordering::Equal
        );
    }
    if let Ok(c) = procfs::parse_cpuinfo(text) {
        assert!(c.logical_cpus > 0);
    }
    if let Ok(o) = procfs::parse_os_release(text) {
        assert!(!o.id.is_empty());
    }
    if let Ok((v, _, _)) = procfs::parse_driver_version(text) {
        assert!(!v.is_empty());
    }
    // What reaches a terminal or a Markdown table carries no raw control character.
    let line = crate::render::escape::escape_line(text);
    assert!(
        !line.chars().any(|c| c.is_control() && c != '\t'),
        "{line:?}"
    );
    let cell = crate::render::escape::markdown_cell(text);
    assert!(!cell.contains('<') && !cell.chars().any(|c| c.is_control() && c != '\t'));
    let fact = fact_line(text);
    assert!(fact.chars().count() <= FACT_LINE_CHARS + 1 && !fact.contains('\n'));
    let _ = sysfs::parse_hex_u16(text);
    let _ = sysfs::parse_hex_u32(text);
    if let Some(s) = sysfs::parse_link_speed_gts(text) {
        assert!(s.is_finite() && s > 0.0);
    }
    let _ = sysfs::parse_u32(text);
    let _ = sysfs::parse_i32(text);
    for v in [
        toolkit::parse_version_json(text),
        toolkit::parse_version_txt(text),
        toolkit::parse_nvcc_version(text),
        toolkit::parse_cuda_h(text),
        toolkit::parse_libcudart_name(text),
    ]
    .into_iter()
    .flatten()
    {
        assert!(v.bytes().all(|b| b.is_ascii_digit() || b == b'.'), "{v:?}");
    }
}

fn check(case: usize, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    if catch_unwind(AssertUnwindSafe(|| run_all(&text))).is_err() {
        panic!(
            "case {case}: a parser panicked on input of {} bytes starting {:?}",
            text.len(),
            text.chars().take(300).collect::<String>()
        );
    }
}

#[test]
fn parsers_survive_random_and_mutated_input() {
    let mut rng = Rng(0x6770_7561_7564_6974);
    let mut case = 0;
    for seed in SEEDS {
        check(case, seed.as_bytes());
        case += 1;
    }
    for _ in 0..1000 {
        check(case, &random_bytes(&mut rng));
        case += 1;
    }
    for _ in 0..2000 {
        let seed = SEEDS[rng.below(SEEDS.len())];
        check(case, &mutate(&mut rng, seed));
        case += 1;
    }
    let xml_seeds: Vec<&str> = SEEDS
        .iter()
        .copied()
        .filter(|s| s.contains("<nvidia_smi_log>"))
        .collect();
    let mut parsed = 0;
    for _ in 0..200 {
        let seed = xml_seeds[rng.below(xml_seeds.len())];
        let text = mutate_xml(&mut rng, seed);
        check(case, text.as_bytes());
        parsed += usize::from(nvsmi_xml::parse(&text).is_ok());
        case += 1;
    }
    // The structure-keeping mutations must reach the field readers, not only the XML errors.
    assert!(parsed > 100, "only {parsed} of 200 mutated logs parsed");
}

#[test]
fn parsers_survive_edge_inputs() {
    let huge_line = "9".repeat(100_000);
    let deep = format!(
        "<nvidia_smi_log>{}{}</nvidia_smi_log>",
        "<a>".repeat(5000),
        "</a>".repeat(5000)
    );
    let wide = format!(
        "{}\n",
        (0..5000).map(|i| format!("GPU{i} ")).collect::<String>()
    );
    let many_gpus = format!(
        "<nvidia_smi_log>{}</nvidia_smi_log>",
        "<gpu id=\"00000000:01:00.0\"/>".repeat(2000)
    );
    let entity_bomb = format!(
        "<!DOCTYPE nvidia_smi_log [<!ENTITY a \"{}\">]><nvidia_smi_log><driver_version>{}\
         </driver_version></nvidia_smi_log>",
        "a".repeat(1 << 16),
        "&a;".repeat(1000)
    );
    let billion_laughs = "<?xml version=\"1.0\"?><!DOCTYPE l [<!ENTITY a \"aaaaaaaaaa\">\
        <!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">\
        <!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\"><!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">]>\
        <nvidia_smi_log><driver_version>&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;</driver_version></nvidia_smi_log>";
    let inputs: Vec<String> = vec![
        String::new(),
        "\u{feff}".into(),
        "\r".repeat(1000),
        "\0".repeat(1000),
        huge_line,
        deep,
        wide,
        many_gpus,
        entity_bomb,
        billion_laughs.into(),
        "GPU 0:\n".repeat(10_000),
        "processor : 0\n".repeat(10_000),
    ];
    for (i, input) in inputs.iter().enumerate() {
        check(i, input.as_bytes());
    }
}
