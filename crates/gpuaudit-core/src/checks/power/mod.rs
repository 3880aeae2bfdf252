//! The power limit.

pub mod limit;
