//! Storage under the data directories.

pub mod mounts;
pub mod throughput;
