//! gpuaudit-probe: everything that touches the machine.
//!
//! Files under a root ([`root`]), the NVIDIA management library ([`nvml`]), helper commands
//! ([`command`]), the snapshot writer ([`collect`]), and the GPU measurements (run in a child
//! process). Facts come out ([`gather`]); judgement happens in `gpuaudit-core`.

pub mod collect;
pub mod command;
pub mod gather;
pub mod host;
pub mod measure;
pub mod nvml;
pub mod root;
