//! The environment people work in: Jupyter, ssh.

pub mod jupyter;
pub mod ssh;
