//! The network: accept queue, loopback latency, the RDMA fabric.

pub mod fabric;
pub mod loopback;
pub mod placement;
pub mod somaxconn;
