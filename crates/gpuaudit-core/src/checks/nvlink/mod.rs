//! NVLink and the GPU-to-GPU topology.

pub mod status;
