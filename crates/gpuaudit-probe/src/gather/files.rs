//! Facts from files under the root: procfs, sysfs, /etc, the CUDA toolkit directories. The
//! same code reads the live machine and a snapshot.

use crate::root::RootFs;
use gpuaudit_core::facts::{
    normalize_bus_id, CudaVersion, Dmi, KernelModule, Libc, MachineFacts, PciFunction, Toolkit,
    XidEvent,
};
use gpuaudit_core::parse::{procfs, sysfs, toolkit as tkparse, xid};
use gpuaudit_core::Reading;

const PCI_DEVICES: &str = "sys/bus/pci/devices";
const NVIDIA_VENDOR: u16 = 0x10de;

fn parsed<T, E: std::fmt::Display>(
    root: &RootFs,
    rel: &str,
    f: impl FnOnce(&str) -> Result<T, E>,
) -> Reading<T> {
    match root.read(rel) {
        Ok(text) => match f(&text) {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(format!("{}: {e}", root.display(rel))),
        },
        Err(e) => Reading::Unavailable(e),
    }
}

pub fn machine(root: &RootFs, libc: Reading<Libc>) -> MachineFacts {
    let cpu = parsed(root, "proc/cpuinfo", procfs::parse_cpuinfo);
    let hypervisor = cpu
        .as_ref()
        .map(|c| c.flags.iter().any(|f| f == "hypervisor"));
    let arch = match root.read("proc/cpuinfo") {
        Ok(text) => arch_from_cpuinfo(&text),
        Err(e) => Reading::Unavailable(e),
    };
    // /usr/lib/os-release stands in only where /etc/os-release does not exist: an unreadable
    // one gives its own reason.
    let os = match root.read_text("etc/os-release") {
        Ok(Some(t)) => Ok(t),
        Ok(None) => root.read("usr/lib/os-release"),
        Err(e) => Err(e),
    };
    let os = match os {
        Ok(t) => {
            Reading::from(procfs::parse_os_release(&t).map_err(|e| format!("os-release: {e}")))
        }
        Err(e) => Reading::Unavailable(e),
    };
    MachineFacts {
        hostname: Reading::from(root.read_line("proc/sys/kernel/hostname")),
        os,
        kernel: Reading::from(root.read_line("proc/version")),
        arch,
        cpu,
        memory_total_kib: parsed(root, "proc/meminfo", procfs::parse_meminfo_total_kib),
        libc,
        hypervisor,
        dmi: dmi(root),
    }
}

/// Where the kernel shows the firmware's DMI strings (a link to /sys/devices/virtual/dmi/id).
pub const DMI_DIR: &str = "sys/class/dmi/id";

/// The DMI attributes the report shows (`Dmi`'s fields; all readable without root, unlike
/// the serial numbers and UUIDs beside them, which gpuaudit does not read).
pub const DMI_FILES: [&str; 5] = [
    "sys_vendor",
    "product_name",
    "product_version",
    "board_vendor",
    "board_name",
];

fn dmi(root: &RootFs) -> Dmi {
    let read = |name: &str| -> Reading<String> {
        let rel = format!("{DMI_DIR}/{name}");
        match root.read_line(&rel) {
            Ok(line) => Reading::from(
                sysfs::dmi_value(&line).map_err(|why| format!("{}: {why}", root.display(&rel))),
            ),
            Err(e) => Reading::Unavailable(e),
        }
    };
    Dmi {
        sys_vendor: read(DMI_FILES[0]),
        product_name: read(DMI_FILES[1]),
        product_version: read(DMI_FILES[2]),
        board_vendor: read(DMI_FILES[3]),
        board_name: read(DMI_FILES[4]),
    }
}

/// The CPU architecture from /proc/cpuinfo's layout, so live and snapshot audits agree.
fn arch_from_cpuinfo(text: &str) -> Reading<String> {
    let has = |key: &str| {
        text.lines()
            .any(|l| l.split(':').next().is_some_and(|k| k.trim() == key))
    };
    let flags_lm = text.lines().any(|l| {
        l.starts_with("flags")
            && l.split(':')
                .nth(1)
                .is_some_and(|f| f.split_whitespace().any(|x| x == "lm"))
    });
    if has("vendor_id") {
        Reading::Value(if flags_lm { "x86_64" } else { "i686" }.to_string())
    } else if has("CPU implementer") {
        Reading::Value("aarch64".into())
    } else if text
        .lines()
        .any(|l| l.starts_with("cpu") && l.contains("POWER"))
    {
        Reading::Value("ppc64le".into())
    } else if has("isa") && text.contains("rv64") {
        Reading::Value("riscv64".into())
    } else {
        Reading::unavailable("/proc/cpuinfo: architecture not recognised")
    }
}

/// `ldd --version` output (live, or `cmd/ldd-version.txt` in a snapshot) to the C library.
pub fn libc_from_ldd(text: &str) -> Reading<Libc> {
    let first = text.lines().next().unwrap_or("").trim();
    let lower = text.to_ascii_lowercase();
    if lower.contains("musl") {
        let version = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("Version "))
            .map(|v| v.trim().to_string());
        return Reading::Value(Libc::Musl { version });
    }
    if lower.contains("glibc") || lower.contains("gnu libc") || lower.contains("gnu c library") {
        let version = first
            .split_whitespace()
            .last()
            .filter(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .map(str::to_string);
        return Reading::Value(Libc::Glibc { version });
    }
    Reading::unavailable(format!(
        "ldd --version: not recognised ({})",
        first.chars().take(60).collect::<String>()
    ))
}

/// Where `ldd` is not there to ask: the dynamic loader's file name under the root.
pub fn libc_from_files(root: &RootFs) -> Reading<Libc> {
    for dir in ["lib", "usr/lib"] {
        if let Ok(names) = root.list(dir) {
            if names.iter().any(|n| n.starts_with("ld-musl-")) {
                return Reading::Value(Libc::Musl { version: None });
            }
        }
    }
    for p in [
        "lib64/ld-linux-x86-64.so.2",
        "lib/ld-linux-aarch64.so.1",
        "lib/x86_64-linux-gnu/libc.so.6",
        "lib64/libc.so.6",
        "usr/lib64/libc.so.6",
        "lib/aarch64-linux-gnu/libc.so.6",
    ] {
        if root.exists(p) {
            return Reading::Value(Libc::Glibc { version: None });
        }
    }
    Reading::unavailable("C library not identified")
}

/// NVIDIA display/3D controllers in sysfs (class 0x03xxxx; NVSwitches and audio functions
/// are left out).
pub fn pci_gpus(root: &RootFs) -> Reading<Vec<PciFunction>> {
    let names = match root.list(PCI_DEVICES) {
        Ok(n) => n,
        Err(e) => return Reading::Unavailable(e),
    };
    let mut out = Vec::new();
    for name in names {
        let dir = format!("{PCI_DEVICES}/{name}");
        // What a function is must be readable: a GPU whose directory cannot be read would
        // otherwise vanish from the list without a word, and the checks judge the rest as all.
        let id = |a: &str, parse: fn(&str) -> Option<u32>| -> Result<u32, String> {
            let rel = format!("{dir}/{a}");
            let text = root.read(&rel)?;
            parse(&text).ok_or_else(|| {
                format!(
                    "{}: not a PCI id: '{}'",
                    root.display(&rel),
                    gpuaudit_core::parse::host::truncate(text.trim(), 40)
                )
            })
        };
        let hex16 = |t: &str| sysfs::parse_hex_u16(t).map(u32::from);
        let vendor = match id("vendor", hex16) {
            Ok(v) => v as u16,
            Err(e) => return Reading::Unavailable(unreadable_function(e)),
        };
        if vendor != NVIDIA_VENDOR {
            continue;
        }
        let class = match id("class", sysfs::parse_hex_u32) {
            Ok(c) => c,
            Err(e) => return Reading::Unavailable(unreadable_function(e)),
        };
        // A snapshot holds every NVIDIA function's files (an NVSwitch's, an audio
        // function's), read as a GPU's are, so that it describes the bus as the machine does.
        let display = class >> 16 == 0x03;
        if !display && !root.is_recording() {
            continue;
        }
        let device = match id("device", hex16) {
            Ok(d) => d as u16,
            Err(_) if !display => continue,
            Err(e) => return Reading::Unavailable(unreadable_function(e)),
        };
        let read = |a: &str| -> Result<String, String> { root.read(&format!("{dir}/{a}")) };
        let num = |a: &str, f: fn(&str) -> Option<u32>| -> Reading<u32> {
            match read(a) {
                Ok(t) => f(&t).map(Reading::Value).unwrap_or_else(|| {
                    Reading::unavailable(format!(
                        "{}: unreadable value",
                        root.display(&format!("{dir}/{a}"))
                    ))
                }),
                Err(e) => Reading::Unavailable(e),
            }
        };
        let gts = |a: &str| -> Reading<f64> {
            match read(a) {
                Ok(t) => sysfs::parse_link_speed_gts(&t)
                    .map(Reading::Value)
                    .unwrap_or_else(|| {
                        Reading::unavailable(format!(
                            "{}: '{}'",
                            root.display(&format!("{dir}/{a}")),
                            t.trim()
                        ))
                    }),
                Err(e) => Reading::Unavailable(e),
            }
        };
        let hex16 = |a: &str| -> Reading<u16> {
            match read(a) {
                Ok(t) => sysfs::parse_hex_u16(&t)
                    .map(Reading::Value)
                    .unwrap_or_else(|| {
                        Reading::unavailable(format!(
                            "{}: unreadable value",
                            root.display(&format!("{dir}/{a}"))
                        ))
                    }),
                Err(e) => Reading::Unavailable(e),
            }
        };
        let function = PciFunction {
            bus_id: normalize_bus_id(&name),
            vendor,
            device,
            subsystem_vendor: hex16("subsystem_vendor"),
            subsystem_device: hex16("subsystem_device"),
            class,
            driver: Reading::from(root.link_name(&format!("{dir}/driver"))),
            current_link_gts: gts("current_link_speed"),
            current_link_width: num("current_link_width", sysfs::parse_u32),
            max_link_gts: gts("max_link_speed"),
            max_link_width: num("max_link_width", sysfs::parse_u32),
            numa_node: match read("numa_node") {
                Ok(t) => sysfs::parse_i32(&t)
                    .map(Reading::Value)
                    .unwrap_or_else(|| Reading::unavailable("numa_node: unreadable value")),
                Err(e) => Reading::Unavailable(e),
            },
            local_cpulist: Reading::from(root.read_trimmed(&format!("{dir}/local_cpulist"))),
        };
        if display {
            out.push(function);
        }
    }
    Reading::Value(out)
}

fn unreadable_function(why: String) -> String {
    format!("{why} (so the NVIDIA PCI functions cannot all be told)")
}

pub fn modules(root: &RootFs) -> Reading<Vec<KernelModule>> {
    parsed(root, "proc/modules", procfs::parse_modules)
}

/// Seconds since boot, the first number of /proc/uptime ("350735.47 234388.90").
pub fn uptime(root: &RootFs) -> Reading<f64> {
    match root.read("proc/uptime") {
        Ok(t) => t
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(Reading::Value)
            .unwrap_or_else(|| Reading::unavailable("/proc/uptime: not a number of seconds")),
        Err(e) => Reading::Unavailable(e),
    }
}

pub fn xids_from_text(text: &str) -> Vec<XidEvent> {
    xid::parse_xids(text)
}

/// Every CUDA toolkit under /usr/local (`cuda`, `cuda-X.Y`). `nvcc_output` is what
/// `nvcc --version` printed (live) or `cmd/nvcc-version.txt` (snapshot), used where a
/// toolkit directory has no version file, or where no directory is there at all.
pub fn toolkits(root: &RootFs, nvcc_output: Option<&str>) -> Reading<Vec<Toolkit>> {
    let mut dirs: Vec<String> = Vec::new();
    if let Ok(names) = root.list("usr/local") {
        for n in names {
            if n == "cuda" || n.starts_with("cuda-") {
                dirs.push(format!("usr/local/{n}"));
            }
        }
    }
    let mut out: Vec<Toolkit> = Vec::new();
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for d in &dirs {
        // /usr/local/cuda is usually a link to cuda-X.Y: list it once.
        if let Ok(Some(st)) = root.stat(d) {
            if seen.contains(&st.identity) {
                continue;
            }
            seen.push(st.identity);
        }
        if let Some(t) = toolkit_in(root, d, nvcc_output) {
            // A snapshot holds /usr/local/cuda and the directory it links to as two copies:
            // the same version read from the same file is the same toolkit.
            if !out
                .iter()
                .any(|k| k.version == t.version && k.source == t.source)
            {
                out.push(t);
            }
        }
    }
    if out.is_empty() {
        if let Some(v) = nvcc_output.and_then(tkparse::parse_nvcc_version) {
            if let Some(cuda) = CudaVersion::parse(&v) {
                out.push(Toolkit {
                    path: "nvcc on PATH".into(),
                    version: v,
                    cuda,
                    source: "nvcc --version".into(),
                    forward_compat: false,
                });
            }
        }
    }
    Reading::Value(out)
}

/// `include/cuda.h`'s version define: a snapshot holds that line alone (the header is large;
/// the define is all that is read).
fn cuda_h(root: &RootFs, dir: &str) -> Option<String> {
    let rel = format!("{dir}/include/cuda.h");
    let text = root.unrecorded().read(&rel).ok()?;
    let line: String = text
        .lines()
        .filter(|l| l.trim_start().starts_with("#define CUDA_VERSION"))
        .take(1)
        .collect();
    if line.is_empty() {
        return None;
    }
    root.record(&rel, format!("{line}\n"));
    Some(line)
}

/// The names in `dir/sub` that start with `prefix`: a snapshot holds them as empty files
/// (the names are what is read).
fn names_in(root: &RootFs, dir: &str, sub: &str, prefix: &str) -> Option<Vec<String>> {
    let names: Vec<String> = root
        .unrecorded()
        .list(&format!("{dir}/{sub}"))
        .ok()?
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect();
    for n in &names {
        root.record_marker(&format!("{dir}/{sub}/{n}"));
    }
    Some(names)
}

fn toolkit_in(root: &RootFs, dir: &str, nvcc_output: Option<&str>) -> Option<Toolkit> {
    let file = |f: &str| root.read(&format!("{dir}/{f}")).ok();
    // In the order they are trusted. Live, the first that answers is the version; recording,
    // every source is read, so that the snapshot's reading finds what the machine's would.
    let sources: [(&str, &dyn Fn() -> Option<String>); 5] = [
        ("version.json", &|| {
            file("version.json").and_then(|t| tkparse::parse_version_json(&t))
        }),
        ("version.txt", &|| {
            file("version.txt").and_then(|t| tkparse::parse_version_txt(&t))
        }),
        ("include/cuda.h", &|| {
            cuda_h(root, dir).and_then(|t| tkparse::parse_cuda_h(&t))
        }),
        ("nvcc --version", &|| {
            // nvcc's output speaks for the toolkit on PATH, which is /usr/local/cuda.
            root.exists(&format!("{dir}/bin/nvcc"))
                .then_some(())
                .filter(|_| dir == "usr/local/cuda")
                .and(nvcc_output)
                .and_then(tkparse::parse_nvcc_version)
        }),
        ("lib64/libcudart.so.*", &|| {
            names_in(root, dir, "lib64", "libcudart.so")?
                .iter()
                .filter_map(|n| tkparse::parse_libcudart_name(n))
                .max_by_key(|v| v.len())
        }),
    ];
    let mut found: Option<(String, &str)> = None;
    for (source, read) in sources {
        if found.is_some() && !root.is_recording() {
            break;
        }
        if let Some(v) = read() {
            found.get_or_insert((v, source));
        }
    }
    let forward_compat = names_in(root, dir, "compat", "libcuda.so").is_some_and(|n| !n.is_empty());
    let (version, source) = found?;
    let cuda = CudaVersion::parse(&version)?;
    Some(Toolkit {
        path: format!("/{dir}"),
        version,
        cuda,
        source: source.to_string(),
        forward_compat,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_versions() {
        assert_eq!(
            libc_from_ldd("ldd (Ubuntu GLIBC 2.39-0ubuntu8.4) 2.39\nCopyright"),
            Reading::Value(Libc::Glibc {
                version: Some("2.39".into())
            })
        );
        assert_eq!(
            libc_from_ldd("musl libc (x86_64)\nVersion 1.2.4\n"),
            Reading::Value(Libc::Musl {
                version: Some("1.2.4".into())
            })
        );
        assert!(libc_from_ldd("\u{0}garbage").reason().is_some());
    }

    #[test]
    fn arch_is_read_from_cpuinfo_layout() {
        assert_eq!(
            arch_from_cpuinfo("vendor_id\t: GenuineIntel\nflags\t\t: fpu lm sse\n")
                .value()
                .map(String::as_str),
            Some("x86_64")
        );
        assert_eq!(
            arch_from_cpuinfo("processor\t: 0\nCPU implementer\t: 0x41\n")
                .value()
                .map(String::as_str),
            Some("aarch64")
        );
        assert!(arch_from_cpuinfo("").reason().is_some());
    }
}
