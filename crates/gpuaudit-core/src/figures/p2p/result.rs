//! What the p2p group measured: GPU <-> GPU copies, every ordered pair and pattern.

use crate::figures::common::Verify;
use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pMatrix {
    pub gpus: Vec<u32>,
    pub size_bytes: u64,
    /// Every ordered pair.
    pub pairs: Vec<P2pPair>,
    /// Every unordered pair, copies both ways at once.
    #[serde(default)]
    pub bidirectional: Vec<P2pBidir>,
    /// One GPU to all the others and all to one at once (nvbandwidth's one_to_all and
    /// all_to_one_memcpy_ce); `--full` and bench only, empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<P2pPattern>,
}

/// Which way the copies of a [`P2pPattern`] go.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// `gpu` copies to every other GPU at once.
    OneToAll,
    /// Every other GPU copies to `gpu` at once.
    AllToOne,
}

impl PatternKind {
    pub fn label(self) -> &'static str {
        match self {
            PatternKind::OneToAll => "one_to_all",
            PatternKind::AllToOne => "all_to_one",
        }
    }
}

/// Copies between one GPU and all the others at the same time (copy engines, each on its own
/// stream, one start and one end for all).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pPattern {
    pub kind: PatternKind,
    /// The one GPU: the source of one-to-all, the destination of all-to-one.
    pub gpu: u32,
    pub peers: Vec<u32>,
    pub size_bytes: u64,
    /// All the copies' bytes over the time from the common start to the last end; a figure
    /// only when every copy's data verified.
    pub gbps: Reading<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

impl P2pMatrix {
    pub fn pair(&self, src: u32, dst: u32) -> Option<&P2pPair> {
        self.pairs.iter().find(|p| p.src == src && p.dst == dst)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pPair {
    pub src: u32,
    pub dst: u32,
    /// `cuDeviceCanAccessPeer(dst -> src)`: whether direct peer copies are possible.
    pub peer_access: bool,
    /// One direction, GB/s.
    pub gbps: Reading<f64>,
    /// Back-to-back 4-byte copies, µs per copy.
    pub latency_us: Reading<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify: Option<Verify>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct P2pBidir {
    pub a: u32,
    pub b: u32,
    /// Both directions together, GB/s.
    pub gbps: Reading<f64>,
}
