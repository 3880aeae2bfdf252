//! Parsers: text the machine gives (procfs, sysfs, nvidia-smi output, toolkit files) into
//! facts. Pure functions of their input; they never panic, whatever the bytes.

pub mod fabric_manager;
pub mod gpu_information;
pub mod host;
pub mod kernlog;
pub mod nvlink;
pub mod nvsmi_xml;
pub mod packages;
pub mod pci_config;
pub mod procfs;
#[cfg(test)]
mod robustness;
pub mod sysfs;
mod text;
pub use text::{fact_line, FACT_LINE_CHARS};
pub mod toolkit;
pub mod topo;
pub mod version;
pub mod xid;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input is empty (a truncated or never-written file).
    #[error("empty")]
    Empty,
    /// nvidia-smi printed an error instead of XML; the first line of what it printed.
    #[error("nvidia-smi did not produce XML: {0}")]
    NotXml(String),
    #[error("malformed: {0}")]
    Malformed(String),
}
