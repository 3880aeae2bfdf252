//! The NVIDIA Fabric Manager: its log (/var/log/fabricmanager.log), the version it prints
//! (`nv-fabricmanager --version`), and which PCI device ids are NVSwitches.

use crate::facts::FabricManagerLog;
use crate::render::escape::escape_line;
use std::collections::VecDeque;

/// The log's last error lines kept (each escaped and cut to [`MAX_LINE_CHARS`]).
pub const MAX_ERRORS_KEPT: usize = 5;
/// A log line is kept up to this many characters.
pub const MAX_LINE_CHARS: usize = 300;
/// A version string is at most this long ("550.90.07" is 9).
const MAX_VERSION_CHARS: usize = 32;

/// NVSwitch PCI device ids, from the NVSwitch driver's own tables
/// (NVIDIA/open-gpu-kernel-modules, src/common/nvswitch/kernel/nvswitch.c:
/// `nvswitch_lr10_device_ids`, the A100 generation, and the management endpoints of
/// `nvswitch_ls10_device_ids`, the H100 generation; LS10's 0x22A8-0x22AF are the bridge
/// functions of the same switch, not switches of their own).
pub const LR10_DEVICE_IDS: &[u16] = &[
    0x1AE8, 0x1AF0, 0x1AF1, 0x1AF2, 0x1AF3, 0x1AF4, 0x1AF5, 0x1AF6, 0x1AF7, 0x1AF8, 0x1AF9, 0x1AFA,
    0x1AFB, 0x1AFC, 0x1AFD, 0x1AFE, 0x1AFF,
];
pub const LS10_DEVICE_IDS: &[u16] = &[
    0x22A0, 0x22A1, 0x22A2, 0x22A3, 0x22A4, 0x22A5, 0x22A6, 0x22A7,
];

/// Whether an NVIDIA PCI device id is an NVSwitch (its management function).
pub fn is_nvswitch_device(device: u16) -> bool {
    LR10_DEVICE_IDS.contains(&device) || LS10_DEVICE_IDS.contains(&device)
}

/// The switch generation a device id names, for the evidence.
pub fn generation(device: u16) -> Option<&'static str> {
    if LR10_DEVICE_IDS.contains(&device) {
        Some("LR10 (A100 generation)")
    } else if LS10_DEVICE_IDS.contains(&device) {
        Some("LS10 (H100 generation)")
    } else {
        None
    }
}

/// A driver-style version ("550.90.07", "535.104.05"): digits and dots, a dot inside.
fn version_token(t: &str) -> Option<String> {
    let t = t.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let ok = t.len() <= MAX_VERSION_CHARS
        && t.contains('.')
        && !t.starts_with('.')
        && !t.ends_with('.')
        && !t.contains("..")
        && t.chars().all(|c| c.is_ascii_digit() || c == '.');
    ok.then(|| t.to_string())
}

/// The first version after the word `after` (case-insensitive) in `line`.
fn version_after(line: &str, after: &str) -> Option<String> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find(&after.to_ascii_lowercase())? + after.len();
    line.get(at..)?
        .split_whitespace()
        .take(3)
        .find_map(version_token)
}

/// The version `nv-fabricmanager --version` prints ("Fabric Manager version is : 550.90.07"):
/// the first version after the word "version", else the first version in the text.
pub fn parse_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| version_after(l, "version"))
        .or_else(|| text.split_whitespace().find_map(version_token))
}

/// "fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver
/// version 530.41.03": (the fabric manager's, the driver's).
fn mismatch(line: &str) -> Option<(String, String)> {
    let lower = line.to_ascii_lowercase();
    if !lower.contains("match with driver version") {
        return None;
    }
    let fm = version_after(line, "interface version")?;
    let driver = version_after(line, "match with driver version")?;
    Some((fm, driver))
}

fn is_error(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    l.contains("[error]") || l.contains("[fatal]") || l.contains("failed") || l.contains("fatal")
}

/// What a fabric manager log says: its version, a version mismatch, its last errors, and
/// whether the switches were configured after the last error.
pub fn parse_log(text: &str) -> FabricManagerLog {
    let mut log = FabricManagerLog::default();
    let mut errors: VecDeque<String> = VecDeque::new();
    for line in text.lines() {
        log.lines += 1;
        if let Some(v) = version_after(line, "fabric manager version") {
            log.version = Some(v);
        }
        let m = mismatch(line);
        let error = m.is_some() || is_error(line);
        if let Some(m) = m {
            log.mismatch = Some(m);
        }
        if error {
            log.error_count += 1;
            log.configured = false;
            if errors.len() == MAX_ERRORS_KEPT {
                errors.pop_front();
            }
            let cut: String = line.trim().chars().take(MAX_LINE_CHARS).collect();
            errors.push_back(escape_line(&cut).into_owned());
        }
        if line.contains("Successfully configured all the available NVSwitches") {
            log.configured = true;
        }
    }
    log.errors = errors.into();
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLISHED: &str = include_str!("testdata/fabricmanager-published.log");

    #[test]
    fn nvswitch_device_ids_are_the_drivers() {
        assert!(is_nvswitch_device(0x1af1), "A100 generation");
        assert!(is_nvswitch_device(0x22a3), "H100 generation");
        assert!(is_nvswitch_device(0x1ae8));
        assert!(is_nvswitch_device(0x22a0));
        assert!(is_nvswitch_device(0x22a7));
        assert!(
            !is_nvswitch_device(0x22a8),
            "the bridge function of an LS10"
        );
        assert!(!is_nvswitch_device(0x2335), "an H200 GPU");
        assert!(!is_nvswitch_device(0x1ae9));
        assert_eq!(generation(0x1af1), Some("LR10 (A100 generation)"));
        assert_eq!(generation(0x22a3), Some("LS10 (H100 generation)"));
        assert_eq!(generation(0x2335), None);
    }

    #[test]
    fn versions() {
        assert_eq!(
            parse_version("Fabric Manager version is : 550.90.07\n").as_deref(),
            Some("550.90.07")
        );
        assert_eq!(
            parse_version("nv-fabricmanager 535.104.05").as_deref(),
            Some("535.104.05")
        );
        assert_eq!(parse_version("version: unknown\n"), None);
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("1..2 .5 5. x"), None);
        assert_eq!(
            parse_version(&format!("version {}", "1.".repeat(20) + "1")),
            None
        );
        assert_eq!(version_token("(550.90.07)").as_deref(), Some("550.90.07"));
        assert_eq!(version_token("550"), None);
        // The version is the third word after "version" at the latest.
        assert_eq!(
            version_after("version is : 1.2", "version").as_deref(),
            Some("1.2")
        );
        assert_eq!(version_after("version a b c 1.2", "version"), None);
    }

    #[test]
    fn the_published_log_lines() {
        let log = parse_log(PUBLISHED);
        assert_eq!(
            log.mismatch,
            Some(("530.30.02".to_string(), "530.41.03".to_string()))
        );
        assert!(log.error_count >= 3, "{log:?}");
        assert!(log.errors.len() <= MAX_ERRORS_KEPT);
        assert!(log
            .errors
            .iter()
            .any(|e| e.contains("detected NVSwitch non-fatal error 12028")));
        // The configured line comes before the errors that follow it.
        assert!(!log.configured);
        assert_eq!(log.lines, PUBLISHED.lines().count());
    }

    #[test]
    fn configured_after_the_last_error_and_the_version_line() {
        let text = "[Jul 09 2024 18:14:07] [ERROR] [tid 12727] detected NVSwitch non-fatal error 12028 on fid 0\n\
                    [Jul 09 2024 18:20:00] [INFO] [tid 1] Fabric Manager version 550.90.07 is running\n\
                    Successfully configured all the available NVSwitches to route GPU NVLink traffic.\n";
        let log = parse_log(text);
        assert!(log.configured);
        assert_eq!(log.version.as_deref(), Some("550.90.07"));
        assert_eq!(log.error_count, 1);
        assert_eq!(log.mismatch, None);
        assert_eq!(log.lines, 3);
    }

    #[test]
    fn errors_are_bounded_and_escaped() {
        let mut text = String::new();
        for i in 0..20 {
            text.push_str(&format!("[ERROR] line {i} \x1b[2J{}\n", "x".repeat(1000)));
        }
        let log = parse_log(&text);
        assert_eq!(log.error_count, 20);
        assert_eq!(log.errors.len(), MAX_ERRORS_KEPT);
        assert!(
            log.errors[0].starts_with("[ERROR] line 15 "),
            "{}",
            log.errors[0]
        );
        assert!(log.errors.iter().all(|e| !e.contains('\x1b')));
        assert!(log
            .errors
            .iter()
            .all(|e| e.chars().count() <= MAX_LINE_CHARS + 8));
        assert!(is_error(
            "request to query NVSwitch device information failed"
        ));
        assert!(is_error("[FATAL] x"));
        assert!(is_error("detected NVSwitch fatal error 20034 on fid 0"));
        assert!(is_error("[Error] x"));
        assert!(!is_error("[INFO] multicast group 0 is freed."));
    }

    #[test]
    fn arbitrary_bytes_do_not_panic() {
        // A fuzz-style pass over many byte patterns (the parse::xid pattern).
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..2000 {
            let mut bytes = Vec::new();
            for _ in 0..(seed % 200) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let pick = b"0123456789. versionmatch with driver interface[ERROR]\n\xff\xc3";
                bytes.push(pick[(seed % pick.len() as u64) as usize]);
            }
            let text = String::from_utf8_lossy(&bytes);
            let log = parse_log(&text);
            assert!(log.errors.len() <= MAX_ERRORS_KEPT);
            let _ = parse_version(&text);
        }
    }
}
