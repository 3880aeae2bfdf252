//! The machine's health history: what the kernel log says happened to the GPUs.

pub mod xid;
