//! The PCIe link between each GPU and the host.

pub mod acs;
pub mod aer;
pub mod bandwidth;
pub mod link;
