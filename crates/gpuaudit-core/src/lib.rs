//! gpuaudit-core: the pure half of gpuaudit.
//!
//! Data flows one way: sources (in `gpuaudit-probe`) fill [`facts`]; [`checks`] turn facts
//! into [`finding`]s; [`report`] gathers them; [`render`] prints them. Nothing in this crate
//! touches the machine.

pub mod checks;
pub mod compare;
pub mod facts;
pub mod figures;
pub mod finding;
pub mod fleet;
pub mod parse;
pub mod policy;
pub mod reading;
pub mod render;
pub mod report;
pub mod spec;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod units;

pub use facts::Facts;
pub use finding::{Cause, Evidence, Finding, Status};
pub use policy::{Expectation, Policy, Profile};
pub use reading::Reading;
pub use report::Report;
