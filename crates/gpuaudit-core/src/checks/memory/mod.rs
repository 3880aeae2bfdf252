//! GPU memory: ECC, errors, bandwidth.

pub mod bandwidth;
pub mod ecc;
pub mod errors;
