//! The spec database: what each GPU model is on paper, from NVIDIA's datasheets.
//!
//! `data/gpus.toml` at the repository root is embedded at build time. Every entry cites the
//! datasheet it was read from.
//!
//! [`cuda`] holds the CUDA toolkit / driver table (`data/cuda.toml`).

pub mod cuda;

pub use cuda::{
    cuda_table, ArchSupport, BadDriverVersion, CudaTable, CudaTableError, DriverSupport,
    DriverVersion, ToolkitReq, ToolkitUpdate,
};

use crate::facts::ComputeCapability;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

const EMBEDDED: &str = include_str!("../../../../data/gpus.toml");

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Stable key, e.g. "h100-sxm5-80gb".
    pub key: String,
    /// The marketing name, e.g. "NVIDIA H100 SXM5 80GB".
    pub name: String,
    /// Other names users and NVML use for it ("H100 80GB HBM3", ...).
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
    pub sm_count: u32,
    pub memory_gb: f64,
    pub memory_type: String,
    /// Peak memory bandwidth, GB/s.
    pub memory_bandwidth_gbps: f64,
    /// Board power (TDP / TGP / max TDP), watts. For configurable parts, the maximum.
    pub tdp_w: f64,
    /// For configurable parts (e.g. H100 NVL 350-400 W), the lowest configuration.
    #[serde(default)]
    pub tdp_min_w: Option<f64>,
    pub boost_clock_mhz: u32,
    #[serde(default)]
    pub base_clock_mhz: Option<u32>,
    pub pcie_gen: u32,
    pub pcie_width: u32,
    #[serde(default)]
    pub nvlink: Option<NvlinkSpec>,
    /// Form factor: "sxm", "pcie", "superchip", "mezzanine".
    pub form_factor: String,
    pub tflops: Tflops,
    /// Datasheets the figures come from.
    pub sources: Vec<Source>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NvlinkSpec {
    pub version: u32,
    /// Links per GPU.
    pub links: u32,
    /// Total bidirectional NVLink bandwidth per GPU, GB/s (as datasheets state it).
    pub bandwidth_gbps: f64,
}

/// Dense (no sparsity) peak TFLOPS per data type; `None` where the GPU has no such unit or the
/// datasheet gives no figure.
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub title: String,
    pub url: String,
}

impl GpuSpec {
    pub fn compute_capability(&self) -> Option<ComputeCapability> {
        let (a, b) = self.compute_capability.split_once('.')?;
        Some(ComputeCapability {
            major: a.parse().ok()?,
            minor: b.parse().ok()?,
        })
    }

    pub fn memory_mib(&self) -> f64 {
        self.memory_gb * 1e9 / (1024.0 * 1024.0)
    }
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
    pub fn parse(text: &str) -> Result<SpecDb, SpecError> {
        let db: SpecDb = toml::from_str(text)?;
        Ok(db)
    }

    /// The database compiled into the binary.
    pub fn embedded() -> &'static SpecDb {
        static DB: OnceLock<SpecDb> = OnceLock::new();
        DB.get_or_init(|| {
            // The embedded file is checked by a test; a broken one is a build defect.
            SpecDb::parse(EMBEDDED).unwrap_or(SpecDb { gpus: Vec::new() })
        })
    }

    pub fn by_key(&self, key: &str) -> Option<&GpuSpec> {
        self.gpus.iter().find(|g| g.key == key)
    }

    /// Which model a GPU is: by PCI device id first; where one id covers several models
    /// (memory variants), the memory size and then the reported name decide.
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
        let candidates = if by_id.is_empty() {
            let name = normalize(name?);
            self.gpus
                .iter()
                .filter(|g| {
                    g.nvml_names.iter().any(|n| normalize(n) == name) || normalize(&g.name) == name
                })
                .collect()
        } else {
            by_id
        };
        if candidates.len() <= 1 {
            return candidates.into_iter().next();
        }
        // Several models share the id (or the name): the memory size picks one.
        if let Some(mib) = memory_mib {
            let gb = mib as f64 * 1024.0 * 1024.0 / 1e9;
            if let Some(best) = candidates.iter().min_by(|a, b| {
                (a.memory_gb - gb)
                    .abs()
                    .total_cmp(&(b.memory_gb - gb).abs())
            }) {
                return Some(best);
            }
        }
        if let Some(name) = name.map(normalize) {
            if let Some(g) = candidates
                .iter()
                .find(|g| g.nvml_names.iter().any(|n| normalize(n) == name))
            {
                return Some(g);
            }
        }
        candidates.into_iter().next()
    }

    /// The models a loose name such as `h100`, `a100-80gb` or `h100-sxm5-80gb` stands for.
    pub fn matching(&self, query: &str) -> Vec<&GpuSpec> {
        let q = tokens(query);
        if q.is_empty() {
            return Vec::new();
        }
        self.gpus
            .iter()
            .filter(|g| {
                let mut have = tokens(&g.key);
                have.extend(tokens(&g.name));
                for a in g.aliases.iter().chain(g.nvml_names.iter()) {
                    have.extend(tokens(a));
                }
                q.iter().all(|t| have.contains(t))
            })
            .collect()
    }
}

/// Lower case, "nvidia" dropped, separators collapsed: "NVIDIA H100 80GB HBM3" -> "h100 80gb hbm3".
fn normalize(s: &str) -> String {
    tokens(s).join(" ")
}

fn tokens(s: &str) -> Vec<String> {
    s.to_ascii_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty() && *t != "nvidia")
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_database_parses() {
        let db = SpecDb::parse(EMBEDDED).expect("data/gpus.toml must parse");
        assert!(!db.gpus.is_empty());
        for g in &db.gpus {
            assert!(!g.sources.is_empty(), "{} cites no datasheet", g.key);
            assert!(
                g.compute_capability().is_some(),
                "{}: bad compute capability",
                g.key
            );
        }
    }

    #[test]
    fn h200_is_identified_by_pci_id() {
        let db = SpecDb::embedded();
        let g = db
            .identify(Some(0x2335), Some("NVIDIA H200"), Some(143771))
            .unwrap();
        assert_eq!(g.key, "h200-sxm-141gb");
    }
}
