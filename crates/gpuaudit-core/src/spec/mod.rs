//! The spec database: what each GPU model is on paper, from NVIDIA's datasheets.
//!
//! `data/gpus.toml` at the repository root is embedded at build time. Every entry cites the
//! documents it was read from; a figure NVIDIA does not publish is `None`, never a guess, so a
//! check that needs it skips with a reason instead of comparing against an invented number.
//!
//! [`cuda`] holds the CUDA toolkit / driver table (`data/cuda.toml`).

pub mod cuda;

pub use cuda::{
    cuda_table, ArchSupport, BadDriverVersion, CudaTable, CudaTableError, DriverSupport,
    DriverVersion, ToolkitReq, ToolkitUpdate,
};

use crate::facts::ComputeCapability;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/gpus.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Stable key, e.g. "h100-sxm5-80gb".
    pub key: String,
    /// The marketing name, e.g. "NVIDIA H100 SXM5 80GB".
    pub name: String,
    /// Other names users use for it ("h100 sxm 80gb", "4090"); used by [`SpecDb::matching`].
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The names NVML / nvidia-smi report for this model ("NVIDIA H100 80GB HBM3").
    #[serde(default)]
    pub nvml_names: Vec<String>,
    /// PCI device ids (vendor 0x10de).
    pub pci_device_ids: Vec<u16>,
    pub architecture: String,
    /// "9.0".
    pub compute_capability: String,
    #[serde(default)]
    pub sm_count: Option<u32>,
    /// NVIDIA's capacity label ("80GB"); it tracks GiB, see [`GpuSpec::memory_matches`].
    #[serde(default)]
    pub memory_gb: Option<f64>,
    #[serde(default)]
    pub memory_type: Option<String>,
    /// Peak memory bandwidth, GB/s (1e9 bytes per second).
    #[serde(default)]
    pub memory_bandwidth_gbps: Option<f64>,
    /// Board power (TDP / TGP / max TDP), watts. For configurable parts, the maximum.
    #[serde(default)]
    pub tdp_w: Option<f64>,
    /// For configurable parts (e.g. H100 NVL 350-400 W), the lowest configuration.
    #[serde(default)]
    pub tdp_min_w: Option<f64>,
    #[serde(default)]
    pub boost_clock_mhz: Option<u32>,
    #[serde(default)]
    pub base_clock_mhz: Option<u32>,
    #[serde(default)]
    pub pcie_gen: Option<u32>,
    #[serde(default)]
    pub pcie_width: Option<u32>,
    /// `None` where the model has no GPU-to-GPU NVLink.
    #[serde(default)]
    pub nvlink: Option<NvlinkSpec>,
    /// Form factor: "sxm", "pcie", "superchip", "mezzanine".
    pub form_factor: String,
    pub tflops: Tflops,
    /// Documents the figures come from.
    pub sources: Vec<Source>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkSpec {
    pub version: u32,
    /// Links per GPU, where NVIDIA states it.
    #[serde(default)]
    pub links: Option<u32>,
    /// Total bidirectional NVLink bandwidth per GPU, GB/s (as datasheets state it).
    pub bandwidth_gbps: f64,
    /// NVLink needs an add-on bridge (PCIe cards): no links up is normal without one.
    #[serde(default)]
    pub bridge: bool,
}

/// Dense (no sparsity) peak TFLOPS per data type (TOPS for int8); `None` where the GPU has no
/// such unit or NVIDIA gives no figure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tflops {
    pub fp64: Option<f64>,
    pub fp64_tensor: Option<f64>,
    pub fp32: Option<f64>,
    pub tf32: Option<f64>,
    pub fp16: Option<f64>,
    pub bf16: Option<f64>,
    pub fp8: Option<f64>,
    pub int8: Option<f64>,
}

impl Tflops {
    /// Every figure with its dtype name, absent ones included.
    pub fn entries(&self) -> [(&'static str, Option<f64>); 8] {
        [
            ("fp64", self.fp64),
            ("fp64_tensor", self.fp64_tensor),
            ("fp32", self.fp32),
            ("tf32", self.tf32),
            ("fp16", self.fp16),
            ("bf16", self.bf16),
            ("fp8", self.fp8),
            ("int8", self.int8),
        ]
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub title: String,
    pub url: String,
}

/// The reported memory may fall this far below the label: GDDR6 boards with ECC on give up
/// 1/16 (a T4 16GB shows 15360 MiB), HBM boards keep a little for the driver (an H100 80GB
/// shows 81559 MiB of 81920).
const MEMORY_LOW: f64 = 0.90;
/// Nothing reports more than its label; a little slack for rounding of labels such as "141GB".
const MEMORY_HIGH: f64 = 1.02;

impl GpuSpec {
    pub fn compute_capability(&self) -> Option<ComputeCapability> {
        parse_cc(&self.compute_capability)
    }

    /// The label in MiB (labels are GiB: "40GB" is 40960 MiB).
    pub fn memory_mib(&self) -> Option<f64> {
        self.memory_gb.map(|gb| gb * 1024.0)
    }

    /// Whether a reported total memory is what this model's label promises: within
    /// [0.90, 1.02] of the label in MiB. `None` where the label is unknown.
    pub fn memory_matches(&self, reported_mib: u64) -> Option<bool> {
        let label = self.memory_mib()?;
        let ratio = reported_mib as f64 / label;
        Some((MEMORY_LOW..=MEMORY_HIGH).contains(&ratio))
    }

    /// The architecture row of the CUDA table: first toolkit and driver that support it.
    pub fn arch_support(&self) -> Option<&'static ArchSupport> {
        cuda_table().architecture(self.compute_capability()?)
    }

    /// The oldest driver that supports this GPU's architecture.
    pub fn min_driver(&self) -> Option<&'static DriverVersion> {
        self.arch_support().map(|a| &a.min_driver)
    }
}

fn parse_cc(s: &str) -> Option<ComputeCapability> {
    let (a, b) = s.split_once('.')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    Some(ComputeCapability {
        major: a.parse().ok()?,
        minor: b.parse().ok()?,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("data/gpus.toml: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("data/gpus.toml: {0}")]
    Invalid(String),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpecDb {
    #[serde(rename = "gpu")]
    pub gpus: Vec<GpuSpec>,
}

impl SpecDb {
    /// Parses and checks a database: unique keys, a valid compute capability, at least one
    /// PCI id and one source per entry, positive figures, and no PCI id in two entries.
    pub fn parse(text: &str) -> Result<SpecDb, SpecError> {
        let db: SpecDb = toml::from_str(text)?;
        db.validate()?;
        Ok(db)
    }

    fn validate(&self) -> Result<(), SpecError> {
        let bad = |key: &str, what: String| Err(SpecError::Invalid(format!("{key}: {what}")));
        let mut keys = HashSet::new();
        let mut ids: BTreeMap<u16, &str> = BTreeMap::new();
        for g in &self.gpus {
            if g.key.trim().is_empty() || g.key != g.key.trim().to_ascii_lowercase() {
                return bad(&g.key, "key must be lower case, non-empty".into());
            }
            if !keys.insert(g.key.as_str()) {
                return bad(&g.key, "key listed twice".into());
            }
            if g.compute_capability().is_none() {
                return bad(
                    &g.key,
                    format!("bad compute capability {:?}", g.compute_capability),
                );
            }
            if g.sources.is_empty() {
                return bad(&g.key, "cites no source".into());
            }
            if g.pci_device_ids.is_empty() {
                return bad(&g.key, "has no PCI device id".into());
            }
            for id in &g.pci_device_ids {
                if let Some(other) = ids.insert(*id, &g.key) {
                    return bad(
                        &g.key,
                        format!("PCI id {id:#06x} is also listed by {other}"),
                    );
                }
            }
            let mut figures: Vec<(&str, Option<f64>)> = vec![
                ("memory_gb", g.memory_gb),
                ("memory_bandwidth_gbps", g.memory_bandwidth_gbps),
                ("tdp_w", g.tdp_w),
                ("tdp_min_w", g.tdp_min_w),
                ("sm_count", g.sm_count.map(f64::from)),
                ("boost_clock_mhz", g.boost_clock_mhz.map(f64::from)),
                ("base_clock_mhz", g.base_clock_mhz.map(f64::from)),
                ("pcie_gen", g.pcie_gen.map(f64::from)),
                ("pcie_width", g.pcie_width.map(f64::from)),
            ];
            figures.extend(g.tflops.entries());
            if let Some(n) = &g.nvlink {
                figures.push(("nvlink.bandwidth_gbps", Some(n.bandwidth_gbps)));
                figures.push(("nvlink.version", Some(f64::from(n.version))));
                figures.push(("nvlink.links", n.links.map(f64::from)));
            }
            for (name, v) in figures {
                if let Some(v) = v {
                    if !(v.is_finite() && v > 0.0) {
                        return bad(&g.key, format!("{name} must be positive, is {v}"));
                    }
                }
            }
            if let (Some(min), Some(max)) = (g.tdp_min_w, g.tdp_w) {
                if min > max {
                    return bad(&g.key, "tdp_min_w exceeds tdp_w".into());
                }
            }
        }
        Ok(())
    }

    /// The database compiled into the binary.
    pub fn embedded() -> &'static SpecDb {
        static DB: OnceLock<SpecDb> = OnceLock::new();
        DB.get_or_init(|| {
            // The embedded file is checked by a test; a broken one is a build defect, and an
            // empty database makes identification fail softly rather than crash.
            SpecDb::parse(EMBEDDED).unwrap_or(SpecDb { gpus: Vec::new() })
        })
    }

    pub fn by_key(&self, key: &str) -> Option<&GpuSpec> {
        self.gpus.iter().find(|g| g.key == key)
    }

    /// The model of a GPU the driver reported: [`identify`](Self::identify) from its PCI
    /// device id, name and memory size.
    pub fn identify_gpu(&self, g: &crate::facts::GpuFacts) -> Option<&GpuSpec> {
        self.identify(
            g.pci_device_id.value().copied(),
            g.name.value().map(String::as_str),
            g.memory.total_mib.value().copied(),
        )
    }

    /// Which model a GPU is.
    ///
    /// 1. The PCI device id, where given and known.
    /// 2. Otherwise the reported name: an exact (normalised) NVML or marketing name, else the
    ///    loose [`matching`](Self::matching) rules on the name.
    /// 3. Where several entries remain, the one whose memory label is nearest the reported
    ///    memory (compared in GiB), then the one whose NVML name is the reported name.
    pub fn identify(
        &self,
        pci_device_id: Option<u16>,
        name: Option<&str>,
        memory_mib: Option<u64>,
    ) -> Option<&GpuSpec> {
        let by_id: Vec<&GpuSpec> = match pci_device_id {
            Some(id) => self
                .gpus
                .iter()
                .filter(|g| g.pci_device_ids.contains(&id))
                .collect(),
            None => Vec::new(),
        };
        let wanted = name.map(normalize);
        let candidates = if !by_id.is_empty() {
            by_id
        } else {
            let wanted = wanted.as_deref()?;
            if wanted.is_empty() {
                return None;
            }
            let exact: Vec<&GpuSpec> = self
                .gpus
                .iter()
                .filter(|g| {
                    g.nvml_names.iter().any(|n| normalize(n) == wanted)
                        || normalize(&g.name) == wanted
                })
                .collect();
            if exact.is_empty() {
                self.matching(name.unwrap_or_default())
            } else {
                exact
            }
        };
        if candidates.len() <= 1 {
            return candidates.into_iter().next();
        }
        if let Some(mib) = memory_mib {
            let gib = mib as f64 / 1024.0;
            if let Some(best) = candidates
                .iter()
                .filter_map(|g| g.memory_gb.map(|gb| (*g, (gb - gib).abs())))
                .min_by(|a, b| a.1.total_cmp(&b.1))
            {
                return Some(best.0);
            }
        }
        if let Some(wanted) = wanted.as_deref() {
            if let Some(g) = candidates
                .iter()
                .find(|g| g.nvml_names.iter().any(|n| normalize(n) == wanted))
            {
                return Some(g);
            }
        }
        candidates.into_iter().next()
    }

    /// The models a loose name such as `h100`, `a100-80gb`, `rtx4090` or `h100-sxm5-80gb`
    /// stands for (the `:COUNT` of `--expect` must be stripped first).
    ///
    /// Rules:
    /// - A query equal to an entry's key (ignoring case) names that entry alone.
    /// - Otherwise the query and each entry's key, name, aliases and NVML names are split into
    ///   lower-case words at every character that is not a letter or digit; the words
    ///   "nvidia", "tesla", "geforce" and "gpu" are dropped; a memory word "40g" is read as
    ///   "40gb". Two adjacent words of an entry also count joined ("rtx" "4090" gives
    ///   "rtx4090").
    /// - An entry matches when every query word is one of its words, except that the query
    ///   word "sxm" also matches "sxm2", "sxm4", "sxm5".
    ///
    /// Words match whole, so `h100` never matches H800, H20, H200 or GH200, and `l40` never
    /// matches the L40S. An empty or unknown name matches nothing.
    pub fn matching(&self, query: &str) -> Vec<&GpuSpec> {
        let q = query.trim().to_ascii_lowercase();
        if let Some(g) = self.gpus.iter().find(|g| g.key == q) {
            return vec![g];
        }
        let words = tokens(&q);
        if words.is_empty() {
            return Vec::new();
        }
        self.gpus
            .iter()
            .filter(|g| {
                let vocab = vocabulary(g);
                words
                    .iter()
                    .all(|w| vocab.iter().any(|v| word_matches(w, v)))
            })
            .collect()
    }
}

const NOISE: [&str; 4] = ["nvidia", "tesla", "geforce", "gpu"];

/// Lower case, noise words dropped, separators collapsed:
/// "NVIDIA H100 80GB HBM3" -> "h100 80gb hbm3".
fn normalize(s: &str) -> String {
    tokens(s).join(" ")
}

fn tokens(s: &str) -> Vec<String> {
    s.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty() && !NOISE.contains(t))
        .map(canonical_word)
        .collect()
}

/// "40g" -> "40gb": users write both.
fn canonical_word(t: &str) -> String {
    match t.strip_suffix('g') {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => format!("{n}gb"),
        _ => t.to_string(),
    }
}

fn vocabulary(g: &GpuSpec) -> HashSet<String> {
    let mut vocab = HashSet::new();
    let names = [&g.key, &g.name]
        .into_iter()
        .chain(g.aliases.iter())
        .chain(g.nvml_names.iter());
    for n in names {
        let words = tokens(n);
        for pair in words.windows(2) {
            vocab.insert(format!("{}{}", pair[0], pair[1]));
        }
        vocab.extend(words);
    }
    vocab
}

fn word_matches(query: &str, word: &str) -> bool {
    if query == word {
        return true;
    }
    query == "sxm"
        && word
            .strip_prefix("sxm")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests;
