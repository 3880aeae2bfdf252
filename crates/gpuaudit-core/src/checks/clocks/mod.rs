//! The GPU clocks: what limits them now, and how high they may go.

pub mod max;
pub mod throttle;
