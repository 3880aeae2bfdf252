//! What storage.throughput measured in each data directory (fio-like sequential and random I/O).

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

/// storage.throughput in one data directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirThroughput {
    pub path: String,
    /// `Unavailable`: why it was not measured (not writable, too little free space, ...).
    pub result: Reading<IoResult>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoResult {
    /// Sequential write, MB/s (10^6 bytes), including the final fsync.
    pub seq_write_mb_s: f64,
    /// Sequential read, MB/s.
    pub seq_read_mb_s: f64,
    /// 4 KiB random reads at queue depth 1, per second.
    pub rand_read_iops: f64,
    /// Size of the test file, bytes.
    pub file_bytes: u64,
    /// O_DIRECT was used (false: the file system refused it and buffered I/O was used).
    pub direct: bool,
    /// How it was measured, in words.
    pub method: String,
}
