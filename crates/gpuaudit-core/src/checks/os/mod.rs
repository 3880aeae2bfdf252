//! The operating system around the GPUs: platform, persistence mode, NUMA placement.

pub mod numa;
pub mod persistence;
pub mod platform;
