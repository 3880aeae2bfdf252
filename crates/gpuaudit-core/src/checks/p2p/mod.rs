//! Peer-to-peer copies between GPUs.

pub mod bandwidth;
