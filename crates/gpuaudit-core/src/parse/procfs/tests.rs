use super::*;

const CPUINFO: &str = include_str!("../../../../../fixtures/snapshots/h200-x2-vm/proc/cpuinfo");
const MEMINFO: &str = include_str!("../../../../../fixtures/snapshots/h200-x2-vm/proc/meminfo");
const MODULES: &str = include_str!("../../../../../fixtures/snapshots/h200-x2-vm/proc/modules");
const OS_RELEASE: &str =
    include_str!("../../../../../fixtures/snapshots/h200-x2-vm/etc/os-release");
const NV_VERSION: &str =
    include_str!("../../../../../fixtures/snapshots/h200-x2-vm/proc/driver/nvidia/version");

#[test]
fn modules_fixture() {
    let m = parse_modules(MODULES).unwrap();
    assert_eq!(
        m,
        vec![
            KernelModule {
                name: "nvidia_uvm".into(),
                size: 1830912,
                used_by: vec![],
                state: "Live".into(),
                taints: "O".into(),
            },
            KernelModule {
                name: "nvidia".into(),
                size: 14299136,
                used_by: vec![],
                state: "Live".into(),
                taints: "O".into(),
            },
        ]
    );
}

#[test]
fn modules_with_users_permanent_and_no_taints() {
    let text = "nvidia_drm 126976 4 - Live 0xffffffffc1c2a000 (POE)\n\
                nvidia_modeset 1556480 7 nvidia_drm, Live 0xffffffffc1a80000 (POE)\n\
                nvidia 56774656 531 nvidia_uvm,nvidia_peermem,nvidia_modeset, Live 0x0000000000000000 (POE)\r\n\
                \n\
                nf_nat 49152 3 [permanent], Live 0x0000000000000000\n\
                drm 622592 6 drm_kms_helper,nvidia_drm, Loading 0xffffffffc0e7a000\n";
    let m = parse_modules(text).unwrap();
    assert_eq!(m.len(), 5);
    assert_eq!(m[0].taints, "POE");
    assert_eq!(m[1].used_by, vec!["nvidia_drm"]);
    assert_eq!(
        m[2].used_by,
        vec!["nvidia_uvm", "nvidia_peermem", "nvidia_modeset"]
    );
    assert_eq!(m[2].size, 56774656);
    assert!(m[3].used_by.is_empty());
    assert_eq!(m[3].taints, "");
    assert_eq!(m[4].state, "Loading");
}

#[test]
fn modules_errors() {
    assert_eq!(parse_modules("").unwrap_err(), ParseError::Empty);
    assert!(matches!(
        parse_modules("nvidia 14299136 - - Live 0x0 (O)\nnvidia_uvm 18"),
        Err(ParseError::Malformed(m)) if m.contains("line 2")
    ));
    assert!(matches!(
        parse_modules("nvidia 99999999999999999999999 - - Live 0x0"),
        Err(ParseError::Malformed(m)) if m.contains("size")
    ));
}

#[test]
fn meminfo() {
    assert_eq!(parse_meminfo_total_kib(MEMINFO).unwrap(), 263998500);
    assert_eq!(
        parse_meminfo_total_kib("MemFree: 1 kB\r\nMemTotal:  2048 kB\r\n").unwrap(),
        2048
    );
    assert_eq!(parse_meminfo_total_kib("").unwrap_err(), ParseError::Empty);
    for bad in [
        "MemFree: 1 kB\n",
        "MemTotal: 12\n",
        "MemTotal: 12 MB\n",
        "MemTotal: -1 kB\n",
        "MemTotal: 99999999999999999999999 kB\n",
    ] {
        assert!(
            matches!(parse_meminfo_total_kib(bad), Err(ParseError::Malformed(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn cpuinfo_x86_fixture() {
    let c = parse_cpuinfo(CPUINFO).unwrap();
    assert_eq!(c.model, "Intel(R) Xeon(R) Processor");
    assert_eq!(c.vendor.as_deref(), Some("GenuineIntel"));
    // The snapshot keeps two of the VM's processor entries.
    assert_eq!(c.logical_cpus, 2);
    assert_eq!(c.sockets, Some(1));
    assert!(c.flags.iter().any(|f| f == "hypervisor"));
    assert!(c.flags.iter().any(|f| f == "avx512f"));
}

#[test]
fn cpuinfo_two_sockets_and_no_physical_id() {
    let mut text = String::new();
    for cpu in 0..4 {
        text.push_str(&format!(
            "processor\t: {cpu}\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\
             physical id\t: {}\nflags\t\t: fpu sse2 avx2\n\n",
            cpu / 2
        ));
    }
    let c = parse_cpuinfo(&text).unwrap();
    assert_eq!(c.logical_cpus, 4);
    assert_eq!(c.sockets, Some(2));
    assert_eq!(c.flags, vec!["fpu", "sse2", "avx2"]);

    let c = parse_cpuinfo("processor : 0\nmodel name : Virtual CPU\n").unwrap();
    assert_eq!(c.sockets, None);
    assert!(c.flags.is_empty());
    assert_eq!(c.vendor, None);
}

/// A Grace (Neoverse-V2) host as an aarch64 kernel prints it: no model name, no vendor_id.
const GRACE: &str = "processor\t: 0\n\
BogoMIPS\t: 2000.00\n\
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 dgh bti\n\
CPU implementer\t: 0x41\n\
CPU architecture: 8\n\
CPU variant\t: 0x0\n\
CPU part\t: 0xd4f\n\
CPU revision\t: 0\n\
\n\
processor\t: 1\n\
BogoMIPS\t: 2000.00\n\
Features\t: fp asimd\n\
CPU implementer\t: 0x41\n\
CPU architecture: 8\n\
CPU variant\t: 0x0\n\
CPU part\t: 0xd4f\n\
CPU revision\t: 0\n";

#[test]
fn cpuinfo_arm() {
    let c = parse_cpuinfo(GRACE).unwrap();
    assert_eq!(c.model, "ARM Neoverse-V2");
    assert_eq!(c.vendor.as_deref(), Some("ARM"));
    assert_eq!(c.logical_cpus, 2);
    assert_eq!(c.sockets, None);
    assert!(c.flags.iter().any(|f| f == "sve2"));

    let unknown = GRACE.replace("0xd4f", "0xfff").replace("0x41", "0x99");
    let c = parse_cpuinfo(&unknown).unwrap();
    assert_eq!(c.model, "CPU implementer 0x99 part 0xfff");
    assert_eq!(c.vendor.as_deref(), Some("CPU implementer 0x99"));

    // Old Arm kernels: a "Processor" line on top that is not a CPU entry.
    let old = "Processor\t: AArch64 Processor rev 1 (aarch64)\nprocessor\t: 0\nprocessor\t: 1\n";
    let c = parse_cpuinfo(old).unwrap();
    assert_eq!(c.logical_cpus, 2);
    assert_eq!(c.model, "unknown");
}

#[test]
fn cpuinfo_errors() {
    assert_eq!(parse_cpuinfo("\n\n").unwrap_err(), ParseError::Empty);
    assert!(matches!(
        parse_cpuinfo("garbage\x00\x01"),
        Err(ParseError::Malformed(m)) if m.contains("no \"processor\"")
    ));
}

#[test]
fn os_release_fixture() {
    let o = parse_os_release(OS_RELEASE).unwrap();
    assert_eq!(
        o,
        OsRelease {
            id: "ubuntu".into(),
            version_id: Some("24.04".into()),
            pretty_name: "Ubuntu 24.04.3 LTS".into(),
        }
    );
}

#[test]
fn os_release_quoting() {
    let text = "# comment\nNAME='Rocky Linux'\r\nID=\"rocky\"\nVERSION_ID=9.4\n\
                PRETTY_NAME=\"Rocky \\\"Blue\\\" Linux \\$9\"  \nANSI_COLOR=\"0;32\"\nnot a line\n";
    let o = parse_os_release(text).unwrap();
    assert_eq!(o.id, "rocky");
    assert_eq!(o.version_id.as_deref(), Some("9.4"));
    assert_eq!(o.pretty_name, "Rocky \"Blue\" Linux $9");

    // Defaults from os-release(5), and PRETTY_NAME built from NAME and VERSION.
    let o = parse_os_release("NAME=Alpine\nVERSION=\"3.20\"\n").unwrap();
    assert_eq!(o.id, "linux");
    assert_eq!(o.version_id, None);
    assert_eq!(o.pretty_name, "Alpine 3.20");
    let o = parse_os_release("VARIANT=x\n").unwrap();
    assert_eq!(o.pretty_name, "Linux");
    // An unterminated quote keeps what is there.
    let o = parse_os_release("ID=\"debian\nPRETTY_NAME='Debian").unwrap();
    assert_eq!(o.id, "debian");
    assert_eq!(o.pretty_name, "Debian");

    assert_eq!(parse_os_release("").unwrap_err(), ParseError::Empty);
    assert!(matches!(
        parse_os_release("just words\n"),
        Err(ParseError::Malformed(_))
    ));
}

#[test]
fn driver_version_variants() {
    let (v, f, line) = parse_driver_version(NV_VERSION).unwrap();
    assert_eq!(v, "580.159.04");
    assert_eq!(f, ModuleFlavor::Open);
    assert!(line.starts_with("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64"));
    assert!(!line.ends_with(' '));

    let cases = [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc version 12.3.0\n",
            "535.104.05",
            ModuleFlavor::Proprietary,
        ),
        (
            "NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.54.15  Tue Mar  5 19:47:40 UTC 2024\n",
            "550.54.15",
            ModuleFlavor::Proprietary,
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.124.06  Release Build  (dvs-builder@U16-I3-D08-1-2)  Wed Feb 26 01:08:25 UTC 2025\r\n",
            "570.124.06",
            ModuleFlavor::Open,
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  390.116  Sun Jan 27 07:21:36 PST 2019\n",
            "390.116",
            ModuleFlavor::Proprietary,
        ),
    ];
    for (text, version, flavor) in cases {
        let (v, f, _) = parse_driver_version(text).unwrap();
        assert_eq!((v.as_str(), f), (version, flavor), "{text}");
    }

    assert_eq!(parse_driver_version("").unwrap_err(), ParseError::Empty);
    for bad in [
        "GCC version: gcc 12\n",
        "NVRM version: something else 1.2\n",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  unknown\n",
    ] {
        assert!(
            matches!(parse_driver_version(bad), Err(ParseError::Malformed(_))),
            "{bad:?}"
        );
    }
}
