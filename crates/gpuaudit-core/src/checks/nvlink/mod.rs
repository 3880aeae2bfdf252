//! NVLink and the GPU-to-GPU topology.

pub mod fabric;
pub mod status;
