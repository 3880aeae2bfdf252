//! The operating system around the GPUs: platform, persistence mode, NUMA placement, the
//! graphics stack.

pub mod graphics;
pub mod numa;
pub mod persistence;
pub mod platform;
