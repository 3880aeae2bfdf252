//! Files under /proc: modules, meminfo, cpuinfo, version, the NVIDIA driver's version file,
//! /etc/os-release (same key=value shape).

use super::text::{first_line, shorten};
use super::ParseError;
use crate::facts::{CpuInfo, KernelModule, ModuleFlavor, OsRelease};
use std::collections::BTreeSet;

/// /proc/modules: `name size refcount deps state address [(taints)]`, one module a line.
///
/// An empty file is `ParseError::Empty` (a kernel with every driver built in has one too; the
/// caller knows which it asked). One unreadable line makes the whole file `Malformed`: a list
/// with a line skipped could miss the very module a check looks for.
pub fn parse_modules(text: &str) -> Result<Vec<KernelModule>, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        let bad = |why: &str| {
            ParseError::Malformed(format!(
                "/proc/modules line {}: {why}: {}",
                n + 1,
                shorten(line.trim(), 80)
            ))
        };
        if fields.len() < 5 {
            return Err(bad("fewer than 5 fields"));
        }
        let size = fields[1]
            .parse::<u64>()
            .map_err(|_| bad("size is not a number"))?;
        // "-" for none; otherwise "a,b," (with "[permanent]," for modules that cannot unload).
        let used_by = fields[3]
            .split(',')
            .filter(|d| !d.is_empty() && *d != "-" && !d.starts_with('['))
            .map(str::to_string)
            .collect();
        let taints = fields[5..]
            .iter()
            .find_map(|f| f.strip_prefix('(').and_then(|f| f.strip_suffix(')')))
            .unwrap_or("")
            .to_string();
        out.push(KernelModule {
            name: fields[0].to_string(),
            size,
            used_by,
            state: fields[4].to_string(),
            taints,
        });
    }
    Ok(out)
}

/// `MemTotal` of /proc/meminfo, in KiB.
pub fn parse_meminfo_total_kib(text: &str) -> Result<u64, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let line = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("MemTotal:"))
        .ok_or_else(|| ParseError::Malformed("/proc/meminfo: no MemTotal line".into()))?;
    let mut it = line.split_whitespace();
    let (value, unit) = (it.next(), it.next());
    match (value.and_then(|v| v.parse::<u64>().ok()), unit) {
        (Some(kib), Some("kB")) => Ok(kib),
        _ => Err(ParseError::Malformed(format!(
            "/proc/meminfo: MemTotal unreadable: {}",
            shorten(line.trim(), 60)
        ))),
    }
}

/// /proc/cpuinfo (x86 and Arm layouts).
///
/// The model is `model name` (x86, some Arm kernels), `cpu` (POWER), else the Arm core named
/// from `CPU implementer` / `CPU part`, else "unknown". Flags are the first `flags` (x86) or
/// `Features` (Arm) line.
pub fn parse_cpuinfo(text: &str) -> Result<CpuInfo, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut logical: u64 = 0;
    let mut model_name = None;
    let mut cpu_line = None;
    let mut vendor_id = None;
    let mut implementer = None;
    let mut part = None;
    let mut flags = None;
    let mut sockets = BTreeSet::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            // Old Arm kernels also print a "Processor : AArch64 Processor" line; only the
            // numbered entries count.
            "processor" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                logical += 1
            }
            "model name" if model_name.is_none() && !value.is_empty() => model_name = Some(value),
            "cpu" if cpu_line.is_none() && !value.is_empty() => cpu_line = Some(value),
            "vendor_id" if vendor_id.is_none() && !value.is_empty() => vendor_id = Some(value),
            "CPU implementer" if implementer.is_none() => implementer = hex(value),
            "CPU part" if part.is_none() => part = hex(value),
            "flags" | "Features" if flags.is_none() => flags = Some(value),
            "physical id" => {
                sockets.insert(value);
            }
            _ => {}
        }
    }
    if logical == 0 {
        return Err(ParseError::Malformed(format!(
            "/proc/cpuinfo: no \"processor\" entries; it starts: {}",
            first_line(text)
        )));
    }
    let logical_cpus = u32::try_from(logical)
        .map_err(|_| ParseError::Malformed("/proc/cpuinfo: too many processors".into()))?;
    let arm_model = implementer.map(|i| arm_core_name(i, part));
    let model = model_name
        .map(str::to_string)
        .or(arm_model)
        .or_else(|| cpu_line.map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    let vendor = vendor_id
        .map(str::to_string)
        .or_else(|| implementer.map(arm_vendor));
    Ok(CpuInfo {
        model,
        vendor,
        logical_cpus,
        sockets: u32::try_from(sockets.len()).ok().filter(|n| *n > 0),
        flags: flags
            .map(|f| f.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

fn hex(value: &str) -> Option<u32> {
    let digits = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))?;
    u32::from_str_radix(digits, 16).ok()
}

/// Arm's MIDR implementer codes, for the vendors of server and Jetson cores.
fn arm_vendor(implementer: u32) -> String {
    match implementer {
        0x41 => "ARM".into(),
        0x42 => "Broadcom".into(),
        0x43 => "Cavium".into(),
        0x46 => "Fujitsu".into(),
        0x48 => "HiSilicon".into(),
        0x4e => "NVIDIA".into(),
        0x50 => "APM".into(),
        0x51 => "Qualcomm".into(),
        0x61 => "Apple".into(),
        0xc0 => "Ampere".into(),
        other => format!("CPU implementer {other:#04x}"),
    }
}

/// "ARM Neoverse-V2" for implementer 0x41 part 0xd4f (Grace); the raw codes otherwise.
fn arm_core_name(implementer: u32, part: Option<u32>) -> String {
    let known = match (implementer, part) {
        (0x41, Some(0xd03)) => Some("Cortex-A53"),
        (0x41, Some(0xd05)) => Some("Cortex-A55"),
        (0x41, Some(0xd07)) => Some("Cortex-A57"),
        (0x41, Some(0xd08)) => Some("Cortex-A72"),
        (0x41, Some(0xd0b)) => Some("Cortex-A76"),
        (0x41, Some(0xd0c)) => Some("Neoverse-N1"),
        (0x41, Some(0xd40)) => Some("Neoverse-V1"),
        (0x41, Some(0xd49)) => Some("Neoverse-N2"),
        (0x41, Some(0xd4f)) => Some("Neoverse-V2"),
        (0x41, Some(0xd84)) => Some("Neoverse-V3"),
        (0x41, Some(0xd8e)) => Some("Neoverse-N3"),
        (0x48, Some(0xd01)) => Some("Kunpeng-920"),
        (0x4e, Some(0x004)) => Some("Carmel"),
        _ => None,
    };
    match (known, part) {
        (Some(core), _) => format!("{} {core}", arm_vendor(implementer)),
        (None, Some(p)) => format!("CPU implementer {implementer:#04x} part {p:#05x}"),
        (None, None) => format!("CPU implementer {implementer:#04x}"),
    }
}

/// /etc/os-release (and /usr/lib/os-release).
///
/// Missing `ID` and `PRETTY_NAME` take the defaults os-release(5) gives them ("linux",
/// "Linux"); a file with no `KEY=value` line at all is malformed.
pub fn parse_os_release(text: &str) -> Result<OsRelease, ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let mut id = None;
    let mut version_id = None;
    let mut pretty_name = None;
    let mut name = None;
    let mut version = None;
    let mut any = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        any = true;
        // One line each (lines() split them); capped so that a hostile file cannot put
        // megabytes into the report.
        let value = super::text::fact_line(&unquote(value.trim()));
        let slot = match key {
            "ID" => &mut id,
            "VERSION_ID" => &mut version_id,
            "PRETTY_NAME" => &mut pretty_name,
            "NAME" => &mut name,
            "VERSION" => &mut version,
            _ => continue,
        };
        *slot = Some(value);
    }
    if !any {
        return Err(ParseError::Malformed(format!(
            "os-release: no KEY=value line; it starts: {}",
            first_line(text)
        )));
    }
    let pretty_name = pretty_name
        .filter(|p| !p.is_empty())
        .or_else(|| match (&name, &version) {
            (Some(n), Some(v)) => Some(format!("{n} {v}")),
            (Some(n), None) => Some(n.clone()),
            _ => None,
        })
        .unwrap_or_else(|| "Linux".to_string());
    Ok(OsRelease {
        id: id
            .filter(|i| !i.is_empty())
            .unwrap_or_else(|| "linux".into()),
        version_id: version_id.filter(|v| !v.is_empty()),
        pretty_name,
    })
}

/// Shell-style quoting as os-release(5) allows it: "double" (with \" \\ \$ \` escapes),
/// 'single', or bare.
fn unquote(value: &str) -> String {
    let mut chars = value.chars();
    match chars.next() {
        Some('\'') => {
            let inner = &value[1..];
            inner.strip_suffix('\'').unwrap_or(inner).to_string()
        }
        Some('"') => {
            let mut out = String::new();
            let mut escaped = false;
            for c in chars {
                if escaped {
                    if !matches!(c, '"' | '\\' | '$' | '`') {
                        out.push('\\');
                    }
                    out.push(c);
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == '"' {
                    break;
                } else {
                    out.push(c);
                }
            }
            out
        }
        _ => value.to_string(),
    }
}

/// /proc/driver/nvidia/version: (driver version, module flavour, first line).
///
/// "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ..."
/// is the open module; "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." (also
/// aarch64) the proprietary one. The line returned is the NVRM line, trimmed.
pub fn parse_driver_version(text: &str) -> Result<(String, ModuleFlavor, String), ParseError> {
    if text.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("NVRM version:"))
        .ok_or_else(|| {
            ParseError::Malformed(format!(
                "/proc/driver/nvidia/version: no \"NVRM version:\" line; it starts: {}",
                first_line(text)
            ))
        })?;
    let flavor = if line.contains("Open Kernel Module") {
        ModuleFlavor::Open
    } else if line.contains("Kernel Module") {
        ModuleFlavor::Proprietary
    } else {
        return Err(ParseError::Malformed(format!(
            "/proc/driver/nvidia/version: no \"Kernel Module\" in: {}",
            shorten(line, 120)
        )));
    };
    let version = line
        .split_whitespace()
        .find(|t| is_version(t))
        .ok_or_else(|| {
            ParseError::Malformed(format!(
                "/proc/driver/nvidia/version: no version number in: {}",
                shorten(line, 120)
            ))
        })?;
    Ok((shorten(version, 64), flavor, super::text::fact_line(line)))
}

/// "580.159.04", "390.116": digits and at least one dot, no empty parts.
fn is_version(t: &str) -> bool {
    t.contains('.')
        && t.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests;
