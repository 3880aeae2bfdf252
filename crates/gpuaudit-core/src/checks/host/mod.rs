//! Host resources the GPU jobs share.

pub mod shm;
