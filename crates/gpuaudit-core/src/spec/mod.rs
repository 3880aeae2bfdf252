//! The spec database: what each GPU model is on paper, from NVIDIA's datasheets.
//!
//! `data/gpus.toml` at the repository root is embedded at build time. Every entry cites the
//! documents it was read from; a figure NVIDIA does not publish is `None`, never a guess, so a
//! check that needs it skips with a reason instead of comparing against an invented number.
//!
//! [`cuda`] holds the CUDA toolkit / driver table (`data/cuda.toml`).

pub mod attainable;
pub mod cuda;
mod expect;
mod names;
mod raw;
pub mod security;
pub mod xid;

pub use cuda::{
    cuda_table, ArchSupport, BadDriverVersion, CudaTable, CudaTableError, DriverSupport,
    DriverVersion, ToolkitReq, ToolkitUpdate,
};

pub use attainable::{Attainable, GemmAttainable, MemoryAttainable};
pub use expect::{ExpectMatch, GpuEvidence, UnknownModel};

use crate::facts::{ComputeCapability, GemmDtype};
use names::{family_fits, normalize, tokens, variant_words, vocabulary, word_matches};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/gpus.toml");

/// One model as its datasheet describes it. Deserialized from the file's shape
/// (`raw::RawGpuSpec`), which keeps [`GpuSpec::nvlink_kind`] and [`GpuSpec::nvlink`] in step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "raw::RawGpuSpec", into = "raw::RawGpuSpec")]
pub struct GpuSpec {
    /// Stable key, e.g. "h100-sxm5-80gb".
    pub key: String,
    /// The marketing name, e.g. "NVIDIA H100 SXM5 80GB".
    pub name: String,
    /// The product line the model number names, e.g. "A100", "RTX 4090", "RTX PRO 6000".
    /// Every name of the entry (marketing and NVML) contains its words, so a GPU whose
    /// reported name lacks them is another product.
    pub family: String,
    /// Other names users use for it ("h100 sxm 80gb", "4090"); used by [`SpecDb::matching`].
    #[serde(default)]
    pub aliases: Vec<String>,
    /// The names NVML / nvidia-smi report for this model ("NVIDIA H100 80GB HBM3").
    #[serde(default)]
    pub nvml_names: Vec<String>,
    /// PCI device ids (vendor 0x10de).
    pub pci_device_ids: Vec<u16>,
    /// Where two models share a device id (the A2 and the A16 are both 0x25b6), the PCI
    /// subsystem device ids that make this one; empty: any subsystem.
    pub pci_subsystem_device_ids: Vec<u16>,
    pub architecture: String,
    /// "9.0".
    pub compute_capability: String,
    pub sm_count: Option<u32>,
    /// NVIDIA's capacity label ("80GB"); it tracks GiB, see [`GpuSpec::memory_matches`].
    pub memory_gb: Option<f64>,
    pub memory_type: Option<String>,
    /// Peak memory bandwidth, GB/s (1e9 bytes per second).
    pub memory_bandwidth_gbps: Option<f64>,
    /// Board power (TDP / TGP / max TDP), watts. For configurable parts, the maximum.
    pub tdp_w: Option<f64>,
    /// For configurable parts (e.g. H100 NVL 350-400 W), the lowest configuration.
    pub tdp_min_w: Option<f64>,
    pub boost_clock_mhz: Option<u32>,
    pub base_clock_mhz: Option<u32>,
    pub pcie_gen: Option<u32>,
    pub pcie_width: Option<u32>,
    /// NVLink figures (version, links, bandwidth) where the model has NVLink and NVIDIA
    /// states them; `None` otherwise, whether the model has no NVLink or the database does
    /// not know: [`GpuSpec::nvlink_kind`] tells which.
    pub nvlink: Option<NvlinkSpec>,
    /// Whether and how the model connects to other GPUs over NVLink.
    pub nvlink_kind: NvlinkKind,
    /// Form factor: "sxm", "pcie", "superchip", "mezzanine".
    pub form_factor: String,
    pub tflops: Tflops,
    /// Documents the figures come from.
    pub sources: Vec<Source>,
}

/// What the database says about a model's NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvlinkKind {
    /// The database does not say (no NVIDIA document read states it).
    Unknown,
    /// The model has no NVLink: GPU-to-GPU traffic goes over PCIe.
    None,
    /// NVLink through an add-on bridge between two (or four) cards: without a bridge, no
    /// links up is normal.
    Bridge,
    /// NVLink on the board (SXM / mezzanine): to the other GPUs directly or through NVSwitch,
    /// as the board is built. Links are expected up without anything added.
    Direct,
    /// NVLink that reaches other GPUs only through NVSwitch (V100 SXM3 in DGX-2, HGX B200):
    /// links are expected up, and the fabric manager must run.
    Switch,
}

impl NvlinkKind {
    /// Links are part of the board: no links up is a fault, not a missing bridge.
    pub fn is_on_board(self) -> bool {
        matches!(self, NvlinkKind::Direct | NvlinkKind::Switch)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NvlinkKind::Unknown => "unknown",
            NvlinkKind::None => "none",
            NvlinkKind::Bridge => "bridge",
            NvlinkKind::Direct => "direct",
            NvlinkKind::Switch => "switch",
        }
    }
}

impl std::fmt::Display for NvlinkKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// NVLink figures. Built from the file's `nvlink` table; `bridge` mirrors
/// [`NvlinkKind::Bridge`] for the checks that read it.
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
    /// Whether and how this model connects to other GPUs over NVLink.
    pub fn nvlink_kind(&self) -> NvlinkKind {
        self.nvlink_kind
    }

    /// The names `--expect` accepts for this model, most specific first: its key, its
    /// aliases, and its family's short name (`a100`, `rtx-4090`), which stands for every
    /// model of the family.
    pub fn expect_names(&self) -> Vec<String> {
        let mut out = vec![self.key.clone()];
        for a in &self.aliases {
            let a = a.trim().to_ascii_lowercase();
            if !out.contains(&a) {
                out.push(a);
            }
        }
        let short = self.family_short_name();
        if !out.contains(&short) {
            out.push(short);
        }
        out
    }

    /// The family as one lower-case word group: "RTX PRO 6000" -> "rtx-pro-6000".
    pub fn family_short_name(&self) -> String {
        tokens(&self.family).join("-")
    }

    /// Whether a reported name names this model's family: it carries the family's words and
    /// no variant word (Ti, SUPER, D, Max-Q, SFF, Laptop) the family lacks. "Tesla
    /// V100S-PCIE-32GB" does not name an A100, "NVIDIA GeForce RTX 3080 Ti" not an RTX 3080.
    pub fn family_fits(&self, reported_name: &str) -> bool {
        family_fits(&self.family, reported_name)
    }

    /// Whether a reported name is exactly one of this model's names (NVML or marketing),
    /// ignoring case, separators and the words NVIDIA, Tesla, GeForce.
    pub fn has_exact_name(&self, reported_name: &str) -> bool {
        let wanted = normalize(reported_name);
        !wanted.is_empty()
            && (self.nvml_names.iter().any(|n| normalize(n) == wanted)
                || normalize(&self.name) == wanted)
    }

    /// Whether a PCI function with this device id (and subsystem device id, where read) is
    /// this model.
    pub fn has_pci_id(&self, device: u16, subsystem_device: Option<u16>) -> bool {
        self.pci_device_ids.contains(&device)
            && (self.pci_subsystem_device_ids.is_empty()
                || subsystem_device.is_none_or(|s| self.pci_subsystem_device_ids.contains(&s)))
    }

    pub fn compute_capability(&self) -> Option<ComputeCapability> {
        parse_cc(&self.compute_capability)
    }

    /// The datasheet's dense peak a GEMM of this dtype is compared with. fp64 GEMMs run on
    /// the fp64 tensor cores where the GPU has them (A100, H100/H200: cuBLAS uses DMMA), so
    /// that figure comes first.
    pub fn gemm_peak(&self, d: GemmDtype) -> Option<f64> {
        let t = &self.tflops;
        match d {
            GemmDtype::Fp64 => t.fp64_tensor.or(t.fp64),
            GemmDtype::Fp32 => t.fp32,
            GemmDtype::Tf32 => t.tf32,
            GemmDtype::Fp16 => t.fp16,
            GemmDtype::Bf16 => t.bf16,
            GemmDtype::Fp8 => t.fp8,
        }
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

/// A reported GPU name as the database compares names: lower case, the words NVIDIA, Tesla,
/// GeForce and GPU dropped, separators collapsed ("NVIDIA H100 80GB HBM3" -> "h100 80gb hbm3").
pub fn normalize_name(name: &str) -> String {
    normalize(name)
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

/// PCI ids read as "no value": an unprogrammed or unreadable register reads 0x0000 or 0xffff.
fn readable_pci_id(id: u16) -> Option<u16> {
    (id != 0 && id != 0xffff).then_some(id)
}

impl SpecDb {
    /// Parses and checks a database: unique keys, a valid compute capability, at least one
    /// PCI id and one source per entry, positive figures, a family every name of the entry
    /// carries, and no PCI id in two entries unless both name the subsystems that tell them
    /// apart, and those differ.
    pub fn parse(text: &str) -> Result<SpecDb, SpecError> {
        let db: SpecDb = toml::from_str(text)?;
        db.validate()?;
        Ok(db)
    }

    fn validate(&self) -> Result<(), SpecError> {
        let bad = |key: &str, what: String| Err(SpecError::Invalid(format!("{key}: {what}")));
        let mut keys = HashSet::new();
        let mut ids: BTreeMap<u16, Vec<&GpuSpec>> = BTreeMap::new();
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
            if tokens(&g.family).is_empty() {
                return bad(&g.key, "family must name the product line".into());
            }
            for n in std::iter::once(&g.name).chain(g.nvml_names.iter()) {
                if !g.family_fits(n) {
                    return bad(
                        &g.key,
                        format!("name {n:?} does not carry the family {:?}", g.family),
                    );
                }
            }
            for id in &g.pci_device_ids {
                let sharing = ids.entry(*id).or_default();
                for other in sharing.iter() {
                    let apart = !g.pci_subsystem_device_ids.is_empty()
                        && !other.pci_subsystem_device_ids.is_empty()
                        && !g
                            .pci_subsystem_device_ids
                            .iter()
                            .any(|s| other.pci_subsystem_device_ids.contains(s));
                    if !apart {
                        return bad(
                            &g.key,
                            format!(
                                "PCI id {id:#06x} is also listed by {} (two entries may share a device id only with disjoint pci_subsystem_device_ids)",
                                other.key
                            ),
                        );
                    }
                }
                sharing.push(g);
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
            if let (Some(base), Some(boost)) = (g.base_clock_mhz, g.boost_clock_mhz) {
                if base > boost {
                    return bad(&g.key, "base_clock_mhz exceeds boost_clock_mhz".into());
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

    /// The model of a GPU the driver reported: [`identify_evidence`](Self::identify_evidence)
    /// from its PCI device and subsystem ids, name and memory size.
    pub fn identify_gpu(&self, g: &crate::facts::GpuFacts) -> Option<&GpuSpec> {
        self.identify_evidence(&GpuEvidence::of(g))
    }

    /// Which model a GPU is, from its PCI device id, name and memory size (see
    /// [`identify_evidence`](Self::identify_evidence)).
    pub fn identify(
        &self,
        pci_device_id: Option<u16>,
        name: Option<&str>,
        memory_mib: Option<u64>,
    ) -> Option<&GpuSpec> {
        self.identify_evidence(&GpuEvidence {
            pci_device_id,
            name,
            memory_mib,
            ..GpuEvidence::default()
        })
    }

    /// The entries a PCI function's ids name: one, or several where models share a device id
    /// and the subsystem was not read. Ids 0x0000 and 0xffff name nothing.
    pub fn by_pci_id(&self, device: u16, subsystem_device: Option<u16>) -> Vec<&GpuSpec> {
        let Some(device) = readable_pci_id(device) else {
            return Vec::new();
        };
        self.gpus
            .iter()
            .filter(|g| g.has_pci_id(device, subsystem_device))
            .collect()
    }

    /// The entries whose NVML or marketing name is exactly this name (normalised).
    pub fn by_exact_name(&self, name: &str) -> Vec<&GpuSpec> {
        self.gpus
            .iter()
            .filter(|g| g.has_exact_name(name))
            .collect()
    }

    /// Which model a GPU is.
    ///
    /// 1. The PCI device id (and the subsystem id where two models share a device id), where
    ///    given and known.
    /// 2. Otherwise the reported name: an exact (normalised) NVML or marketing name, else the
    ///    loose [`matching`](Self::matching) rules on the name.
    /// 3. Where several entries remain, the one whose NVML name is the reported name, then
    ///    the one whose memory label is nearest the reported memory (compared in GiB).
    pub fn identify_evidence(&self, e: &GpuEvidence) -> Option<&GpuSpec> {
        let by_id = match e.pci_device_id {
            Some(id) => self.by_pci_id(id, e.pci_subsystem_device_id),
            None => Vec::new(),
        };
        let name = e.name.filter(|n| !normalize(n).is_empty());
        let candidates = if !by_id.is_empty() {
            by_id
        } else {
            let name = name?;
            let exact = self.by_exact_name(name);
            if exact.is_empty() {
                self.matching(name)
            } else {
                exact
            }
        };
        if candidates.len() <= 1 {
            return candidates.into_iter().next();
        }
        if let Some(name) = name {
            let named: Vec<&&GpuSpec> = candidates
                .iter()
                .filter(|g| g.has_exact_name(name))
                .collect();
            if named.len() == 1 {
                return Some(named[0]);
            }
        }
        if let Some(mib) = e.memory_mib {
            let gib = mib as f64 / 1024.0;
            if let Some(best) = candidates
                .iter()
                .filter_map(|g| g.memory_gb.map(|gb| (*g, (gb - gib).abs())))
                .min_by(|a, b| a.1.total_cmp(&b.1))
            {
                return Some(best.0);
            }
        }
        candidates.into_iter().next()
    }

    /// The models a loose name such as `h100`, `a100-80gb`, `rtx4090` or `h100-sxm5-80gb`
    /// stands for (the `:COUNT` of `--expect` must be stripped first).
    ///
    /// Rules:
    /// - A query equal to an entry's key (ignoring case) names that entry alone.
    /// - Otherwise the query and each entry's key, name, family, aliases and NVML names are
    ///   split into lower-case words at every character that is not a letter or digit; the
    ///   words "nvidia", "tesla", "geforce" and "gpu" are dropped; a memory word "40g" is read
    ///   as "40gb". Two adjacent words of an entry also count joined ("rtx" "4090" gives
    ///   "rtx4090").
    /// - An entry matches when every query word is one of its words, except that the query
    ///   word "sxm" also matches "sxm2", "sxm4", "sxm5".
    ///
    /// - An entry whose family has a variant word (Ti, SUPER, D, Max-Q, SFF, ...) matches only
    ///   a query that says it: `rtx 2080` is not an RTX 2080 Ti, `rtx pro 6000` not the Max-Q.
    ///
    /// Words match whole, so `h100` never matches H800, H20, H200 or GH200, `v100` never
    /// matches the V100S, and `l40` never matches the L40S. An empty or unknown name matches
    /// nothing.
    pub fn matching(&self, query: &str) -> Vec<&GpuSpec> {
        let q = query.trim().to_ascii_lowercase();
        if let Some(g) = self.gpus.iter().find(|g| g.key == q) {
            return vec![g];
        }
        let words = tokens(&q);
        if words.is_empty() {
            return Vec::new();
        }
        let asked_variants = variant_words(&q);
        self.gpus
            .iter()
            .filter(|g| {
                let vocab = vocabulary(g);
                words
                    .iter()
                    .all(|w| vocab.iter().any(|v| word_matches(w, v)))
                    && variant_words(&g.family)
                        .iter()
                        .all(|v| asked_variants.contains(v))
            })
            .collect()
    }

    /// The family short names (`a100`, `h100`, `rtx-4090`, ...), sorted: what a refusal of
    /// an unknown `--expect` model offers.
    pub fn family_short_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.gpus.iter().map(|g| g.family_short_name()).collect();
        names.sort();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests;
