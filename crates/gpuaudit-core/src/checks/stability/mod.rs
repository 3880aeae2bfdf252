//! Behaviour under sustained load.

pub mod burn;
