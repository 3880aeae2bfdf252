//! Environment variables of CUDA, NCCL, the loader and PyTorch, and GPU architecture lists.

/// Variables read by name.
const NAMES: &[&str] = &[
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "TORCH_CUDA_ARCH_LIST",
    "PYTORCH_CUDA_ALLOC_CONF",
    "PYTORCH_NVML_BASED_CUDA_CHECK",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HUGGINGFACE_HUB_CACHE",
    "TRANSFORMERS_CACHE",
    "HF_DATASETS_CACHE",
    "TORCH_HOME",
    "XDG_CACHE_HOME",
    "HOME",
    "PATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "CONDA_EXE",
    "JUPYTER_CONFIG_DIR",
    "KUBERNETES_SERVICE_HOST",
    "container",
];

/// Whether gpuaudit reads (and a snapshot keeps) this variable. Everything else, where
/// secrets live, is never looked at.
pub fn is_read_variable(name: &str) -> bool {
    NAMES.contains(&name) || name.starts_with("CUDA_") || name.starts_with("NCCL_")
}

/// CUDA_VISIBLE_DEVICES as the CUDA runtime reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VisibleDevices {
    /// Entries up to the first invalid one (CUDA stops there), and the rest that it ignores.
    List {
        visible: Vec<DeviceRef>,
        ignored: Vec<String>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceRef {
    Index(u32),
    /// "GPU-8f6c..." (a prefix is enough for CUDA).
    Uuid(String),
    /// "MIG-..." or "MIG-GPU-.../1/0".
    Mig(String),
}

/// Parse CUDA_VISIBLE_DEVICES. `gpu_count` is how many GPUs the driver has: an index at or
/// beyond it is invalid, and CUDA ignores it and everything after it.
pub fn parse_visible_devices(value: &str, gpu_count: Option<u32>) -> VisibleDevices {
    let mut visible = Vec::new();
    let mut ignored = Vec::new();
    let mut stopped = false;
    for raw in value.split(',') {
        let e = raw.trim();
        if stopped {
            ignored.push(e.to_string());
            continue;
        }
        let d = if let Ok(i) = e.parse::<i64>() {
            match u32::try_from(i) {
                Ok(i) if gpu_count.is_none_or(|n| i < n) => Some(DeviceRef::Index(i)),
                _ => None,
            }
        } else if e.starts_with("GPU-") {
            Some(DeviceRef::Uuid(e.to_string()))
        } else if e.starts_with("MIG-") {
            Some(DeviceRef::Mig(e.to_string()))
        } else {
            None
        };
        match d {
            Some(d) if !visible.contains(&d) => visible.push(d),
            Some(_) | None => {
                // A duplicate or an invalid entry ends the list, as in the CUDA runtime.
                stopped = true;
                ignored.push(e.to_string());
            }
        }
    }
    VisibleDevices::List { visible, ignored }
}

/// One entry of TORCH_CUDA_ARCH_LIST: compute capability, and whether PTX is kept too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArchSpec {
    pub major: u32,
    pub minor: u32,
    pub ptx: bool,
}

/// TORCH_CUDA_ARCH_LIST: "7.0;8.0;9.0+PTX", "8.6 9.0", "8.0 9.0a", or names ("Ampere",
/// "Hopper", as torch.utils.cpp_extension accepts). Unknown entries are returned as errors.
pub fn parse_torch_arch_list(value: &str) -> (Vec<ArchSpec>, Vec<String>) {
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for e in value
        .split([';', ' ', ','])
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (core, ptx) = match e.strip_suffix("+PTX") {
            Some(c) => (c, true),
            None => (e, false),
        };
        let named: &[(u32, u32)] = match core.to_ascii_lowercase().as_str() {
            "kepler" => &[(3, 5), (3, 7)],
            "maxwell" => &[(5, 0), (5, 2)],
            "pascal" => &[(6, 0), (6, 1)],
            "volta" => &[(7, 0)],
            "turing" => &[(7, 5)],
            "ampere" => &[(8, 0), (8, 6)],
            "ada" => &[(8, 9)],
            "hopper" => &[(9, 0)],
            "blackwell" => &[(10, 0), (12, 0)],
            _ => &[],
        };
        if !named.is_empty() {
            for (major, minor) in named {
                out.push(ArchSpec {
                    major: *major,
                    minor: *minor,
                    ptx,
                });
            }
            continue;
        }
        let core = core.trim_end_matches(['a', 'f']);
        let parsed = core
            .split_once('.')
            .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)));
        match parsed {
            Some((major, minor)) => out.push(ArchSpec { major, minor, ptx }),
            None => bad.push(e.to_string()),
        }
    }
    (out, bad)
}

/// torch._C._cuda_getArchFlags() / torch.cuda.get_arch_list(): "sm_50 sm_60 sm_90" or
/// "['sm_50', 'sm_90']" -> ["sm_50", "sm_60", "sm_90"].
pub fn parse_arch_flags(s: &str) -> Vec<String> {
    s.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '[' | ']' | '\'' | '"'))
        .map(str::trim)
        .filter(|t| t.starts_with("sm_") || t.starts_with("compute_"))
        .map(str::to_string)
        .collect()
}

/// How a compiled architecture list serves a GPU of compute capability `major.minor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Machine code that runs on it as is ("sm_90", or "sm_80" on an 8.6 GPU).
    Sass(String),
    /// Only PTX that the driver must compile at first use (slow start; newest features
    /// missing).
    PtxOnly(String),
    /// Nothing: "no kernel image is available for execution on the device".
    None,
}

fn arch_number(tok: &str, prefix: &str) -> Option<(u32, u32, bool)> {
    let n = tok.strip_prefix(prefix)?;
    // "90a" / "100f": architecture-specific variants run only on that exact capability.
    let specific = n.ends_with('a') || n.ends_with('f');
    let n = n.trim_end_matches(['a', 'f']);
    let v: u32 = n.parse().ok()?;
    Some((v / 10, v % 10, specific))
}

pub fn coverage(arch_list: &[String], major: u32, minor: u32) -> Coverage {
    let mut best_sass: Option<(u32, &str)> = None;
    for a in arch_list {
        if let Some((ma, mi, specific)) = arch_number(a, "sm_") {
            // Machine code runs on the same major revision with an equal or higher minor;
            // the "a"/"f" variants only on the exact capability.
            let ok = ma == major && (mi == minor || (!specific && mi <= minor));
            if ok && best_sass.is_none_or(|(b, _)| mi >= b) {
                best_sass = Some((mi, a));
            }
        }
    }
    if let Some((_, a)) = best_sass {
        return Coverage::Sass(a.to_string());
    }
    let mut best_ptx: Option<(u32, &str)> = None;
    for a in arch_list {
        if let Some((ma, mi, specific)) = arch_number(a, "compute_") {
            let v = ma * 10 + mi;
            let gpu = major * 10 + minor;
            let ok = if specific { v == gpu } else { v <= gpu };
            if ok && best_ptx.is_none_or(|(b, _)| v >= b) {
                best_ptx = Some((v, a));
            }
        }
    }
    match best_ptx {
        Some((_, a)) => Coverage::PtxOnly(a.to_string()),
        None => Coverage::None,
    }
}

/// TORCH_CUDA_ARCH_LIST entries as an architecture list ("9.0+PTX" -> sm_90, compute_90).
pub fn specs_as_arch_list(specs: &[ArchSpec]) -> Vec<String> {
    let mut v = Vec::new();
    for s in specs {
        v.push(format!("sm_{}{}", s.major, s.minor));
        if s.ptx {
            v.push(format!("compute_{}{}", s.major, s.minor));
        }
    }
    v
}

/// Truthy as CUDA and NCCL read their switches: "1" (and, leniently, "true", "yes").
pub fn is_set(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_devices() {
        let VisibleDevices::List { visible, ignored } = parse_visible_devices("0", Some(2));
        assert_eq!(visible, vec![DeviceRef::Index(0)]);
        assert!(ignored.is_empty());
        let VisibleDevices::List { visible, ignored } = parse_visible_devices("0,5,1", Some(2));
        assert_eq!(visible, vec![DeviceRef::Index(0)]);
        assert_eq!(ignored, vec!["5", "1"]);
        let VisibleDevices::List { visible, .. } = parse_visible_devices("", Some(2));
        assert!(visible.is_empty());
        let VisibleDevices::List { visible, .. } = parse_visible_devices("-1", Some(2));
        assert!(visible.is_empty());
        let VisibleDevices::List { visible, .. } = parse_visible_devices("GPU-abc,MIG-x", None);
        assert_eq!(visible.len(), 2);
        let VisibleDevices::List { visible, ignored } = parse_visible_devices("1,1", Some(2));
        assert_eq!(visible.len(), 1);
        assert_eq!(ignored, vec!["1"]);
    }

    #[test]
    fn torch_arch_list() {
        let (s, bad) = parse_torch_arch_list("7.0;8.0;9.0+PTX");
        assert_eq!(s.len(), 3);
        assert!(s[2].ptx);
        assert!(bad.is_empty());
        let (s, _) = parse_torch_arch_list("8.6 9.0a Hopper");
        assert_eq!(s.len(), 3);
        let (_, bad) = parse_torch_arch_list("8.0;sm_90;x");
        assert_eq!(bad, vec!["sm_90", "x"]);
        assert_eq!(
            specs_as_arch_list(&parse_torch_arch_list("9.0+PTX").0),
            vec!["sm_90", "compute_90"]
        );
    }

    #[test]
    fn arch_flags_and_coverage() {
        let l = parse_arch_flags("sm_50 sm_60 sm_70 sm_75 sm_80 sm_86");
        assert_eq!(l.len(), 6);
        assert_eq!(
            parse_arch_flags("['sm_80', 'sm_90']"),
            vec!["sm_80", "sm_90"]
        );
        // No sm_90 and no PTX: an H100 cannot run it.
        assert_eq!(coverage(&l, 9, 0), Coverage::None);
        // sm_86 machine code runs on an 8.9 GPU.
        assert_eq!(coverage(&l, 8, 9), Coverage::Sass("sm_86".into()));
        assert_eq!(coverage(&l, 8, 0), Coverage::Sass("sm_80".into()));
        let l = parse_arch_flags("sm_80 compute_80");
        assert_eq!(coverage(&l, 9, 0), Coverage::PtxOnly("compute_80".into()));
        let l = parse_arch_flags("sm_90a");
        assert_eq!(coverage(&l, 9, 0), Coverage::Sass("sm_90a".into()));
        let l = parse_arch_flags("sm_80a");
        assert_eq!(coverage(&l, 8, 6), Coverage::None);
        assert_eq!(coverage(&[], 9, 0), Coverage::None);
        assert_eq!(
            coverage(&["sm_x".into(), "compute_".into()], 9, 0),
            Coverage::None
        );
    }

    #[test]
    fn variables() {
        assert!(is_read_variable("CUDA_VISIBLE_DEVICES"));
        assert!(is_read_variable("NCCL_IB_DISABLE"));
        assert!(!is_read_variable("AWS_SECRET_ACCESS_KEY"));
        assert!(!is_read_variable("HF_TOKEN"));
        assert!(is_set("1"));
        assert!(!is_set("0"));
    }
}
