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

/// What the NVIDIA container toolkit mounts into a container, from NVIDIA_DRIVER_CAPABILITIES
/// ("compute,utility", "all", ...). Source: the toolkit's "Driver Capabilities" table
/// (https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html):
/// `compute` is required for CUDA and OpenCL, `graphics` for OpenGL and Vulkan, `utility` for
/// nvidia-smi and NVML; unset or empty means the default, `utility,compute`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverCapabilities {
    /// The capabilities named (lower case), with `all` and the default expanded.
    pub granted: Vec<String>,
    /// Whether the value was unset or empty (the default applies).
    pub default: bool,
    /// Names the toolkit does not know (it refuses to start such a container).
    pub unknown: Vec<String>,
}

/// Every capability the toolkit knows, as `all` grants them.
pub const DRIVER_CAPABILITIES: &[&str] = &[
    "compute", "compat32", "graphics", "utility", "video", "display",
];

/// What an unset or empty NVIDIA_DRIVER_CAPABILITIES grants.
pub const DEFAULT_DRIVER_CAPABILITIES: &[&str] = &["utility", "compute"];

impl DriverCapabilities {
    pub fn has(&self, cap: &str) -> bool {
        self.granted.iter().any(|c| c == cap)
    }
}

/// Parse NVIDIA_DRIVER_CAPABILITIES (`None`: unset).
pub fn parse_driver_capabilities(value: Option<&str>) -> DriverCapabilities {
    let v = value.map(str::trim).unwrap_or("");
    let caps = |l: &[&str]| l.iter().map(|c| c.to_string()).collect::<Vec<_>>();
    if v.is_empty() {
        return DriverCapabilities {
            granted: caps(DEFAULT_DRIVER_CAPABILITIES),
            default: true,
            unknown: vec![],
        };
    }
    let mut granted = Vec::new();
    let mut unknown = Vec::new();
    for c in v.split(',').map(|c| c.trim().to_ascii_lowercase()) {
        if c.is_empty() {
            continue;
        }
        if c == "all" {
            granted.extend(caps(DRIVER_CAPABILITIES));
        } else if DRIVER_CAPABILITIES.contains(&c.as_str()) {
            granted.push(c);
        } else {
            unknown.push(c);
        }
    }
    granted.sort();
    granted.dedup();
    DriverCapabilities {
        granted,
        default: false,
        unknown,
    }
}

/// NCCL_IB_HCA as NCCL reads it (NCCL's environment variable documentation,
/// https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-hca): a
/// comma-separated list of HCA names, each optionally with `:port`; a leading `^` makes it an
/// exclude list, a following `=` makes the names exact (otherwise each is a prefix: `mlx5_1`
/// also selects mlx5_10 ... mlx5_19).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HcaList {
    pub exclude: bool,
    pub exact: bool,
    /// (name, port) per entry.
    pub entries: Vec<(String, Option<u32>)>,
}

/// Parse NCCL_IB_HCA; an entry whose port is not a number keeps no port (NCCL's own parser
/// reads it as no port too).
pub fn parse_hca_list(value: &str) -> HcaList {
    let mut v = value.trim();
    let exclude = v.starts_with('^');
    if exclude {
        v = &v[1..];
    }
    let exact = v.starts_with('=');
    if exact {
        v = &v[1..];
    }
    let entries = v
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once(':') {
            Some((n, p)) => (n.trim().to_string(), p.trim().parse::<u32>().ok()),
            None => (e.to_string(), None),
        })
        .collect();
    HcaList {
        exclude,
        exact,
        entries,
    }
}

impl HcaList {
    /// Whether entry `i` names this device port.
    pub fn entry_matches(&self, i: usize, device: &str, port: u32) -> bool {
        let Some((name, p)) = self.entries.get(i) else {
            return false;
        };
        let name_ok = if self.exact {
            device == name
        } else {
            device.starts_with(name.as_str())
        };
        name_ok && p.is_none_or(|p| p == port)
    }

    /// Whether NCCL uses this device port under the list.
    pub fn selects(&self, device: &str, port: u32) -> bool {
        let named = (0..self.entries.len()).any(|i| self.entry_matches(i, device, port));
        named != self.exclude
    }
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

    #[test]
    fn driver_capabilities() {
        let d = parse_driver_capabilities(None);
        assert!(d.default && d.has("compute") && d.has("utility") && !d.has("graphics"));
        assert_eq!(parse_driver_capabilities(Some(" ")), d);
        let u = parse_driver_capabilities(Some("utility"));
        assert!(!u.default && !u.has("compute") && u.has("utility"));
        let a = parse_driver_capabilities(Some("ALL"));
        assert_eq!(a.granted.len(), DRIVER_CAPABILITIES.len());
        let g = parse_driver_capabilities(Some("compute, graphics,,gaming"));
        assert_eq!(g.granted, vec!["compute", "graphics"]);
        assert_eq!(g.unknown, vec!["gaming"]);
    }

    #[test]
    fn hca_lists() {
        let l = parse_hca_list("mlx5");
        assert!(!l.exclude && !l.exact);
        assert!(l.selects("mlx5_0", 1) && l.selects("mlx5_11", 2) && !l.selects("ibp1s0", 1));
        let l = parse_hca_list("=mlx5_0:1,mlx5_1:1");
        assert!(l.exact);
        assert_eq!(
            l.entries,
            vec![("mlx5_0".into(), Some(1)), ("mlx5_1".into(), Some(1))]
        );
        assert!(l.selects("mlx5_0", 1) && !l.selects("mlx5_0", 2) && !l.selects("mlx5_10", 1));
        let l = parse_hca_list("^=mlx5_1,mlx5_4");
        assert!(l.exclude && l.exact);
        assert!(l.selects("mlx5_0", 1) && !l.selects("mlx5_1", 1) && !l.selects("mlx5_4", 1));
        // Without '=', mlx5_1 is a prefix: it names mlx5_10 too.
        let l = parse_hca_list("mlx5_1");
        assert!(l.selects("mlx5_10", 1) && !l.selects("mlx5_2", 1));
        let l = parse_hca_list("mlx5_0:x, ");
        assert_eq!(l.entries, vec![("mlx5_0".into(), None)]);
        assert!(!l.entry_matches(5, "mlx5_0", 1));
        let l = parse_hca_list("^");
        assert!(l.exclude && l.entries.is_empty() && l.selects("mlx5_0", 1));
    }
}
