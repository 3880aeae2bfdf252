//! gpuaudit-probe: everything that touches the machine.
//!
//! Files under a root ([`root`]), the NVIDIA management library ([`nvml`], read in a child
//! process), helper commands ([`command`]) and every other child process ([`process`]), what
//! must be cleaned up on exit ([`cleanup`]), the snapshot ([`collect`]: the gather on a
//! recording [`root::RootFs`]), and the GPU measurements (run in a child process). Facts come
//! out ([`gather`]); judgement happens in `gpuaudit-core`.

pub mod cleanup;
pub mod collect;
pub mod command;
pub mod gather;
pub mod host;
pub mod kernlog;
pub mod measure;
pub mod nvml;
pub mod pcipath;
pub mod process;
pub mod rehearse;
pub mod root;
pub mod time;
