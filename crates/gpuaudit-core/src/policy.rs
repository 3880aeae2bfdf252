//! What the user asked for: the workload profile, what was ordered, which GPUs to look at.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The workload the machine is for; it raises or lowers the severity of checks that matter
/// for it. Each check declares what a profile changes in its verdict (`gpuaudit explain ID`
/// prints it, `checks/profiles.rs` tests that it is real); the variants below list those
/// checks, and a test fails when a check declares an effect its profile's list here does not
/// name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Every check at its ordinary severity.
    #[default]
    General,
    /// Multi-GPU training: what warns about the GPUs' links fails. nccl.allreduce and
    /// p2p.bandwidth fail what would warn (slow all-reduce or peer copies, no peer access over
    /// PCIe); nvlink.status fails links down and pairs without NVLink (not those a board's
    /// design leaves to PCIe, as the DGX-1's hybrid cube-mesh does); gpu.uniform fails
    /// GPUs that differ; gpu.virtualization fails MIG; cuda.env fails NCCL_P2P_DISABLE and
    /// NCCL_IB_DISABLE; kernel.modules and net.fabric are stricter about RDMA and
    /// nvidia_peermem; storage.mounts and storage.throughput are stricter about where the data
    /// lives and how fast it reads; host.shm wants 8 GiB of /dev/shm.
    Train,
    /// Serving: what a cold-started worker and every request pay. cuda.context-latency holds
    /// context creation to MLPerf's first-token budgets (450 ms warns, 2000 ms fails, whatever
    /// the number of GPUs); os.persistence (persistence off), net.somaxconn (1024 connections
    /// expected) and net.loopback (the local round trip) are stricter.
    Inference,
    /// Scientific computing: double precision and error correction. compute.gemm fails a low
    /// fp64 GEMM and a model whose fp64 runs below 1/8 of its fp32 rate (1/64 on A10, L4,
    /// L40S, RTX); memory.ecc fails ECC off; gpu.virtualization fails MIG.
    Hpc,
    /// Rendering and graphics: os.persistence off is info instead of a warning; os.graphics
    /// judges graphics readiness (a compute-only data-center GPU, a missing NVIDIA Vulkan ICD
    /// or EGL vendor file, a container without the 'graphics' capability fail).
    Render,
}

impl Profile {
    pub const ALL: [Profile; 5] = [
        Profile::General,
        Profile::Train,
        Profile::Inference,
        Profile::Hpc,
        Profile::Render,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::General => "general",
            Profile::Train => "train",
            Profile::Inference => "inference",
            Profile::Hpc => "hpc",
            Profile::Render => "render",
        }
    }

    /// What the profile is for, in a few words (`--help` lists them).
    pub fn about(self) -> &'static str {
        match self {
            Profile::General => "no workload assumed",
            Profile::Train => {
                "multi-GPU training: NVLink, NCCL, shared memory and storage throughput"
            }
            Profile::Inference => "serving: context latency, persistence mode, accept queue",
            Profile::Hpc => "scientific computing: ECC and fp64",
            Profile::Render => "rendering and graphics",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!("unknown profile '{s}': expected general, train, inference, hpc or render")
            })
    }
}

/// `--expect MODEL[:COUNT]`, e.g. `h100-sxm5-80gb:8`, `a100:2`, `h200`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// The model as the user wrote it (matched loosely against the spec database).
    pub model: String,
    pub count: Option<u32>,
}

impl FromStr for Expectation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (model, count) = match s.rsplit_once(':') {
            Some((m, c)) => {
                let n: u32 = c.trim().parse().map_err(|_| {
                    format!("--expect '{s}': the count after ':' must be a whole number")
                })?;
                if n == 0 {
                    return Err(format!("--expect '{s}': the count must be at least 1"));
                }
                (m.trim(), Some(n))
            }
            None => (s, None),
        };
        if model.is_empty() {
            return Err(format!(
                "--expect '{s}': name a model, e.g. h100-sxm5-80gb:8 or a100:2"
            ));
        }
        Ok(Expectation {
            model: model.to_string(),
            count,
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Policy {
    pub profile: Profile,
    pub expect: Option<Expectation>,
    /// `--gpus`: only these GPU indices; `None` is all.
    pub gpus: Option<Vec<u32>>,
    /// `--full`: the heavy measurements ran (or were asked for).
    pub full: bool,
    /// How many connections a server on this machine should be able to queue (net.somaxconn).
    pub expected_concurrency: Option<u32>,
}

impl Policy {
    /// Whether GPU `index` is among those the user asked to look at.
    pub fn selects(&self, index: u32) -> bool {
        self.gpus.as_ref().is_none_or(|g| g.contains(&index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectation_parses() {
        let e: Expectation = "h100-sxm5-80gb:8".parse().unwrap();
        assert_eq!(e.model, "h100-sxm5-80gb");
        assert_eq!(e.count, Some(8));
        let e: Expectation = "a100".parse().unwrap();
        assert_eq!(e.count, None);
        assert!("h100:x".parse::<Expectation>().is_err());
        assert!(":8".parse::<Expectation>().is_err());
        assert!("h100:0".parse::<Expectation>().is_err());
    }

    #[test]
    fn profile_parses() {
        assert_eq!("TRAIN".parse::<Profile>().unwrap(), Profile::Train);
        assert!("gaming".parse::<Profile>().is_err());
    }
}
