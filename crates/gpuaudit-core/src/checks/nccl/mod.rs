//! NCCL collectives across the GPUs.

pub mod allreduce;
