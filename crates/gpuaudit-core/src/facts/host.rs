//! Facts about the software stack and the host around the GPU: libraries, frameworks,
//! environment, containers, storage, network, Jupyter, ssh.

use crate::reading::Reading;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostFacts {
    /// /dev/shm size in bytes (from the mount table).
    pub shm_bytes: Reading<u64>,
}

impl HostFacts {
    pub fn unread(reason: &str) -> Self {
        HostFacts {
            shm_bytes: Reading::unavailable(reason),
        }
    }
}
