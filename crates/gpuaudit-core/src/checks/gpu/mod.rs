//! The GPUs themselves: which are there, what they are, whether they are alike, how they are
//! virtualised and which driver holds them.

pub mod driver_binding;
pub mod identity;
pub mod present;
pub mod uniform;
pub mod virtualization;
