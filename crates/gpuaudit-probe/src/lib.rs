//! gpuaudit-probe: everything that touches the machine.
//!
//! Files under a root ([`root`]), the NVIDIA management library, `nvidia-smi`, and the GPU
//! measurements (run in a child process). Facts come out; judgement happens in
//! `gpuaudit-core`.

pub mod measure;
pub mod root;
