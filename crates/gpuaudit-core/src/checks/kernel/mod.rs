//! The kernel modules.

pub mod modules;
