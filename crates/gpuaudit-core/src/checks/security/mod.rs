//! Security posture: the versions of the stack against their security bulletins.

pub mod versions;
