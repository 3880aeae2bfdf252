//! Containers and their GPU runtime.

pub mod runtime;
