//! Files under /proc: modules, meminfo, cpuinfo, version, the NVIDIA driver's version file,
//! /etc/os-release (same key=value shape).

use super::ParseError;
use crate::facts::{CpuInfo, KernelModule, ModuleFlavor, OsRelease};

/// /proc/modules.
pub fn parse_modules(_text: &str) -> Result<Vec<KernelModule>, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}

/// `MemTotal` of /proc/meminfo, in KiB.
pub fn parse_meminfo_total_kib(_text: &str) -> Result<u64, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}

/// /proc/cpuinfo (x86 and Arm layouts).
pub fn parse_cpuinfo(_text: &str) -> Result<CpuInfo, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}

/// /etc/os-release.
pub fn parse_os_release(_text: &str) -> Result<OsRelease, ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}

/// /proc/driver/nvidia/version: (driver version, module flavour, first line).
pub fn parse_driver_version(_text: &str) -> Result<(String, ModuleFlavor, String), ParseError> {
    Err(ParseError::Malformed("not implemented yet".into()))
}
