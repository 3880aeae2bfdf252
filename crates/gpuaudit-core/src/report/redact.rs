//! `--redact`: a report made fit to share in public. Hostnames, IP and MAC addresses,
//! InfiniBand GUIDs, GPU serials and UUIDs, user names and the snapshot's path are replaced
//! with placeholders; what settles an argument with a provider stays (versions of the driver,
//! VBIOS, CUDA and kernel, PCI bus ids, model names, every figure, every status).
//!
//! One [`Redactor`] holds one mapping: the same value gets the same placeholder in every
//! report given to it (`gpuaudit compare A.json B.json --redact` still lines the same GPU up),
//! numbered per kind in the order first seen.
//!
//! How: the values the report names in its structured fields are collected first
//! (`machine.hostname`, `gpus[].uuid`, `gpus[].serial`, `audit.snapshot`, the users env.ssh
//! lists), then every string of the report's JSON (every value, so that a field added later
//! is covered too, and the keys of evidence) is scanned for the patterns (addresses, GPU/MIG
//! UUIDs, mount servers, home directories, `USER=`), and last every occurrence of every
//! collected value is replaced, longest first, as a whole token: `node1` is not replaced
//! inside `node10`, nor a user `gpu` inside `gpu.identity`. UUIDs and the snapshot path,
//! which nothing else can be, are replaced wherever they occur (`MIG-GPU-<uuid>/1/0`).
//!
//! Versions are not addresses: a dotted quad is taken for an IPv4 address only where it is
//! not in a field that holds a version (`*version*`, `kernel`, `vbios`, `pci_bus_id`, `libc`,
//! `os`, `schema`, dates) and not after a word that names a version ("cuDNN 9.1.0.70",
//! "version 1.2.3.4", "v1.2.3.4"), nor glued to more of a version (`1.2.3.4.5`, `1.2.3.4+cu121`);
//! octets with a leading zero (`96.00.10.00`, as VBIOS versions are written) are no address.
//! Addresses that identify nothing stay: 0.0.0.0, 127.0.0.0/8, 255.255.255.255, `::`, `::1`,
//! a network written as a CIDR prefix with its host bits zero (`10.0.0.0/8` in a fix), and
//! the documentation ranges (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32).
//! Default accounts (root, ubuntu, ec2-user, ...) name nobody and stay too.
//!
//! Placeholders: `host-N`, `serial-N`, `user-N`, `ipv4-N`, `ipv6-N`, `mac-N`, `guid-N`,
//! `snapshot-N`; a UUID keeps its shape and prefix, `GPU-00000000-0000-0000-ffff-00000000000N`
//! (`MIG-...` for a MIG device; the `ffff` group marks it as redacted), so that what parses a
//! UUID still does. A placeholder is never taken for a value again: redacting a redacted
//! report changes nothing. Fields that hold a word of gpuaudit's own vocabulary (`status`,
//! `check`, `mode`, `virtualization`, `unit`, ...) are left as they are: a host called `vm`
//! does not turn `"virtualization": "vm"` into a placeholder.

use super::Report;
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::OnceLock;

/// The kinds of value that are replaced, each numbered on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Host,
    Uuid,
    Serial,
    User,
    Ipv4,
    Ipv6,
    Mac,
    Guid,
    Snapshot,
}

impl Kind {
    const ALL: [Kind; 9] = [
        Kind::Host,
        Kind::Uuid,
        Kind::Serial,
        Kind::User,
        Kind::Ipv4,
        Kind::Ipv6,
        Kind::Mac,
        Kind::Guid,
        Kind::Snapshot,
    ];

    fn prefix(self) -> &'static str {
        match self {
            Kind::Host => "host",
            Kind::Uuid => "uuid",
            Kind::Serial => "serial",
            Kind::User => "user",
            Kind::Ipv4 => "ipv4",
            Kind::Ipv6 => "ipv6",
            Kind::Mac => "mac",
            Kind::Guid => "guid",
            Kind::Snapshot => "snapshot",
        }
    }

    /// An address or identifier found by its pattern: not replaced in a field that holds a
    /// version, where a dotted quad is a version.
    fn is_pattern_only(self) -> bool {
        matches!(self, Kind::Ipv4 | Kind::Ipv6 | Kind::Mac | Kind::Guid)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix())
    }
}

/// The UUID's shape of a placeholder: the original's prefix ("GPU-", "MIG-" or none) and the
/// number in the last group.
fn uuid_placeholder(original: &str, n: usize) -> String {
    // "GPU-" of "GPU-<uuid>"; a bare UUID that starts with letters (`abcdefab-...`) has none.
    let prefix = original
        .find('-')
        .filter(|&i| original.len() == i + 1 + 36)
        .filter(|&i| original[..i].chars().all(|c| c.is_ascii_alphabetic()))
        .map(|i| &original[..=i])
        .unwrap_or("");
    format!("{prefix}00000000-0000-0000-ffff-{n:012}")
}

/// Whether a value already is a placeholder of its kind (so that redacting twice is
/// redacting once).
fn is_placeholder(kind: Kind, value: &str) -> bool {
    if kind == Kind::Uuid {
        return re(
            &RE_PLACEHOLDER_UUID,
            r"^(?:[A-Za-z]+-)?00000000-0000-0000-ffff-\d{12}$",
        )
        .is_match(value);
    }
    value
        .strip_prefix(kind.prefix())
        .and_then(|r| r.strip_prefix('-'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Accounts every image has, that name no person.
const DEFAULT_ACCOUNTS: &[&str] = &[
    "root",
    "nobody",
    "ubuntu",
    "ec2-user",
    "centos",
    "debian",
    "admin",
    "azureuser",
    "cloud-user",
    "opc",
    "rocky",
    "fedora",
    "user",
    "shared",
];

/// JSON fields whose text is a version, a date or a slot address: no address pattern is
/// looked for in them (collected values still are replaced).
fn is_version_field(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    // `nvidia_wheels`: [["nvidia-cudnn-cu13", "9.13.0.50"]], a package and its version.
    k.contains("version")
        || k.contains("wheel")
        || k.contains("package")
        || k.contains("vbios")
        || k.contains("bus_id")
        || k.ends_with("_at")
        || matches!(
            k.as_str(),
            "kernel" | "libc" | "os" | "schema" | "cuda" | "driver" | "nccl" | "torch"
        )
}

/// JSON fields whose value is a word of gpuaudit's own (a status, a check id, a mode, a
/// unit): nothing in them is replaced.
fn is_vocabulary_field(key: &str) -> bool {
    matches!(
        key,
        "schema"
            | "check"
            | "status"
            | "mode"
            | "profile"
            | "virtualization"
            | "compute_capability_source"
            | "direction"
            | "host_memory"
            | "unit"
            | "dtype"
            | "key"
            | "driver_binding"
    )
}

/// Words after which a dotted quad is a version: "cuDNN 9.1.0.70", "version 1.2.3.4".
const VERSION_WORDS: &[&str] = &[
    "version", "ver", "v", "driver", "vbios", "bios", "firmware", "fw", "cuda", "cudnn", "nccl",
    "cublas", "cublaslt", "cufft", "tensorrt", "trt", "kernel", "release", "build", "libc",
    "glibc", "torch", "pytorch", "python", "toolkit", "ofed", "mlnx", "rev", "revision",
];

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}")))
}

static RE_PLACEHOLDER_UUID: OnceLock<Regex> = OnceLock::new();
static RE_IPV4: OnceLock<Regex> = OnceLock::new();
static RE_IPV6: OnceLock<Regex> = OnceLock::new();
static RE_MAC: OnceLock<Regex> = OnceLock::new();
static RE_GUID: OnceLock<Regex> = OnceLock::new();
static RE_UUID: OnceLock<Regex> = OnceLock::new();
static RE_USER: OnceLock<Regex> = OnceLock::new();
static RE_NFS_HOST: OnceLock<Regex> = OnceLock::new();

/// A character that continues a token (a hostname, a serial, a word).
fn is_token_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text[start..end]` stands alone: the characters around it do not continue it. A
/// `.`, `-`, `:` or `+` between it and more of a token joins them (`node1.example`,
/// `gpu.identity`, `node1-b`), at the end of a sentence it does not (`on node1.`).
fn stands_alone(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().rev();
    let after = text[end..].chars();
    alone_on(before) && alone_on(after)
}

/// As [`stands_alone`], or followed by a port or a prefix length (`node1:8888`,
/// `10.0.0.1/24`).
fn stands_alone_or_port(text: &str, start: usize, end: usize) -> bool {
    alone_on(text[..start].chars().rev())
        && (alone_on(text[end..].chars()) || is_cidr_or_port(text, end))
}

fn alone_on(mut side: impl Iterator<Item = char>) -> bool {
    match side.next() {
        None => true,
        Some(c) if is_token_char(c) => false,
        Some('.' | '-' | ':' | '+') => !side.next().is_some_and(is_token_char),
        Some(_) => true,
    }
}

/// The word before `start`, lowercased ("cudnn" in "cuDNN 9.1.0.70", "version" in
/// "driver_version=1.2.3.4").
fn word_before(text: &str, start: usize) -> String {
    let head = text[..start].trim_end_matches([' ', '=', ':', '"', '\'', '(']);
    let word: String = head
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric())
        .collect();
    word.chars().rev().collect::<String>().to_ascii_lowercase()
}

/// The token before `start` in a list ("9.14.0" in "(9.14.0, 9.13.0.50)"), where one is.
fn list_item_before(text: &str, start: usize) -> Option<&str> {
    let head = text[..start].trim_end_matches(' ');
    let head = head.strip_suffix([',', ';', '/'])?.trim_end_matches(' ');
    let from = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .map_or(0, |i| i + 1);
    Some(&head[from..])
}

/// A dotted number that is no IPv4 address: two, three, five or more parts ("9.14.0").
fn is_other_dotted_number(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() != 4
        && parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether the dotted quad at `start` reads as a version: after a word that names one, or
/// in a list after another version ("(9.14.0, 9.13.0.50)").
fn in_version_context(text: &str, start: usize) -> bool {
    is_version_word(&word_before(text, start))
        || list_item_before(text, start).is_some_and(is_other_dotted_number)
}

/// "cuDNN", "version", "driver_version", "libcublas": a word that names what has a version.
fn is_version_word(word: &str) -> bool {
    VERSION_WORDS.contains(&word) || word.ends_with("version") || word.starts_with("lib")
}

fn ipv4_to_keep(ip: std::net::Ipv4Addr, cidr: Option<u8>) -> bool {
    let o = ip.octets();
    ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_broadcast()
        || matches!(
            (o[0], o[1], o[2]),
            (192, 0, 2) | (198, 51, 100) | (203, 0, 113)
        )
        // A network, its host bits zero (`10.0.0.0/8`); a /32 is one host.
        || cidr.is_some_and(|p| u32::from(ip).checked_shl(u32::from(p)) == Some(0))
}

fn ipv6_to_keep(ip: std::net::Ipv6Addr) -> bool {
    let s = ip.segments();
    ip.is_unspecified() || ip.is_loopback() || (s[0] == 0x2001 && s[1] == 0x0db8)
}

/// The IPv4 addresses of a text, as byte ranges.
fn ipv4_in(text: &str) -> Vec<(usize, usize)> {
    let ipv4 = re(
        &RE_IPV4,
        r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])",
    );
    ipv4.find_iter(text)
        .filter(|m| stands_alone_or_port(text, m.start(), m.end()))
        .filter(|m| {
            let before = text[..m.start()].chars().next_back();
            // `v1.2.3.4`, `-1.2.3.4` glued to a word; `x1.2.3.4` is caught by stands_alone.
            !matches!(before, Some('v' | 'V')) && !in_version_context(text, m.start())
        })
        .filter(|m| {
            let Ok(ip) = m.as_str().parse::<std::net::Ipv4Addr>() else {
                return false;
            };
            !ipv4_to_keep(ip, cidr_after(text, m.end()))
        })
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// `10.0.0.0/8` or `10.1.2.3:2049`: an address followed by its prefix or port still is one.
fn is_cidr_or_port(text: &str, end: usize) -> bool {
    let rest = &text[end..];
    let Some(tail) = rest.strip_prefix('/').or_else(|| rest.strip_prefix(':')) else {
        return false;
    };
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && alone_on(tail[digits..].chars())
}

fn cidr_after(text: &str, end: usize) -> Option<u8> {
    let tail = text[end..].strip_prefix('/')?;
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn ipv6_in(text: &str) -> Vec<(usize, usize)> {
    // Candidates: runs of hex digits and colons with at least two colons; the standard
    // library's parser says which are addresses ("10:24:13" and MAC addresses are not).
    let ipv6 = re(&RE_IPV6, r"[0-9A-Fa-f:]*:[0-9A-Fa-f]*:[0-9A-Fa-f:]*");
    ipv6.find_iter(text)
        .filter(|m| {
            let before = text[..m.start()].chars().next_back();
            let after = text[m.end()..].chars().next();
            !before.is_some_and(|c| is_token_char(c) || c == '.')
                && !after.is_some_and(|c| is_token_char(c) || c == '.')
        })
        .filter(|m| {
            m.as_str()
                .parse::<std::net::Ipv6Addr>()
                .is_ok_and(|ip| !ipv6_to_keep(ip))
        })
        .map(|m| (m.start(), m.end()))
        .collect()
}

fn pattern_in(text: &str, cell: &'static OnceLock<Regex>, pattern: &str) -> Vec<(usize, usize)> {
    re(cell, pattern)
        .find_iter(text)
        .filter(|m| stands_alone(text, m.start(), m.end()))
        .filter(|m| {
            m.as_str()
                .bytes()
                .any(|b| b.is_ascii_hexdigit() && b != b'0')
        })
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// MAC addresses (6 bytes) and IPoIB hardware addresses (20 bytes), `:` or `-` separated.
fn mac_in(text: &str) -> Vec<(usize, usize)> {
    pattern_in(
        text,
        &RE_MAC,
        r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){19}|[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}",
    )
}

/// InfiniBand GUIDs as sysfs writes them (`506b:4b03:00f3:8d2a`).
fn guid_in(text: &str) -> Vec<(usize, usize)> {
    pattern_in(text, &RE_GUID, r"[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3}")
}

/// GPU and MIG UUIDs anywhere in the text (a GPU `--gpus` left out of `gpus[]` is still
/// named in messages), also inside a longer id (`MIG-GPU-<uuid>/1/0`).
fn uuid_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_UUID,
        r"(?:GPU|MIG)-[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    )
    .find_iter(text)
    .filter(|m| !text[m.end()..].starts_with(|c: char| c.is_ascii_hexdigit()))
    .map(|m| (m.start(), m.end()))
    .collect()
}

/// The server of a network mount's source (`fileserver:/export`, `nfs.example.com:/vol`,
/// `alice@box:/data` of sshfs); not a URL's scheme (`https://`), not an address (those are
/// the address patterns').
fn mount_hosts_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_NFS_HOST,
        r"(?:^|[\s(=,@\[])([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):/",
    )
    .captures_iter(text)
    .filter_map(|c| c.get(1))
    .filter(|m| !text[m.end()..].starts_with("://"))
    .filter(|m| m.as_str().bytes().any(|b| b.is_ascii_alphabetic()))
    .filter(|m| m.as_str().len() > 1)
    .map(|m| (m.start(), m.end()))
    .collect()
}

/// User names: home directories (`/home/alice/`, `/Users/alice`) and `USER=`/`LOGNAME=`.
fn users_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_USER,
        r"(?:/home/|/Users/|\bUSER=|\bLOGNAME=)([A-Za-z_][A-Za-z0-9_.-]*[A-Za-z0-9_]|[A-Za-z_])",
    )
    .captures_iter(text)
    .filter_map(|c| c.get(1))
    .filter(|m| !text[m.end()..].starts_with(|c: char| c.is_alphanumeric()))
    .map(|m| (m.start(), m.end()))
    .collect()
}

/// The report could not be turned into JSON and back.
#[derive(Debug, thiserror::Error)]
#[error("cannot redact the report: {0}")]
pub struct RedactError(serde_json::Error);

/// One mapping from values to placeholders, shared by every report redacted with it.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    placeholders: HashMap<String, (Kind, String)>,
    counts: HashMap<Kind, usize>,
    /// Every value, in the order first seen (for [`Redactor::mapping`]).
    order: Vec<String>,
}

impl Redactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The placeholder of a value, numbering it when new; None where the value is left as
    /// it is (empty, a placeholder already, a default account).
    fn register(&mut self, kind: Kind, value: &str) -> Option<String> {
        let value = value.trim();
        if value.is_empty() || is_placeholder(kind, value) {
            return None;
        }
        if kind == Kind::User && DEFAULT_ACCOUNTS.contains(&value) {
            return None;
        }
        if kind == Kind::Host && value == "localhost" {
            return None;
        }
        if let Some((_, p)) = self.placeholders.get(value) {
            return Some(p.clone());
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let placeholder = match kind {
            Kind::Uuid => uuid_placeholder(value, *n),
            _ => format!("{}-{n}", kind.prefix()),
        };
        self.placeholders
            .insert(value.to_string(), (kind, placeholder.clone()));
        self.order.push(value.to_string());
        Some(placeholder)
    }

    /// Every value replaced so far with its kind and placeholder, in the order first seen.
    pub fn mapping(&self) -> Vec<(Kind, &str, &str)> {
        self.order
            .iter()
            .filter_map(|v| {
                let (k, p) = self.placeholders.get(v)?;
                Some((*k, v.as_str(), p.as_str()))
            })
            .collect()
    }

    /// How many values of each kind were replaced.
    pub fn counts(&self) -> Vec<(Kind, usize)> {
        Kind::ALL
            .iter()
            .filter_map(|k| self.counts.get(k).map(|n| (*k, *n)))
            .collect()
    }

    /// The report with every sensitive value replaced and `audit.redacted` set. Findings keep
    /// their checks, statuses and GPUs, the summary its counts: only text changes.
    ///
    /// An error only where the report could not be turned into JSON and back (it always
    /// can: field names and vocabulary are never replaced); nothing unredacted comes out.
    pub fn redact(&mut self, report: &Report) -> Result<Report, RedactError> {
        self.collect_structured(report);
        let mut json = serde_json::to_value(report).map_err(RedactError)?;
        self.collect_patterns(&json, None, false);
        self.replace(&mut json, None, false);
        let mut out: Report = serde_json::from_value(json).map_err(RedactError)?;
        // Text only: the verdict stands as it was.
        for (f, o) in out.findings.iter_mut().zip(&report.findings) {
            f.check.clone_from(&o.check);
            f.status = o.status;
            f.gpu = o.gpu;
        }
        out.summary = report.summary.clone();
        out.audit.redacted = true;
        Ok(out)
    }

    /// A free text beside the reports (the file a report was read from, its stem) with the
    /// values this mapping holds replaced, and those it shows by their pattern (a home
    /// directory's user, an address) added: redact the reports first, so a file named after
    /// a host gets that host's placeholder.
    pub fn redact_text(&mut self, s: &str) -> String {
        self.collect_text(s, false);
        let mut v = Value::String(s.to_string());
        self.replace(&mut v, None, false);
        match v {
            Value::String(out) => out,
            _ => s.to_string(),
        }
    }

    /// The values the report names in its fields.
    fn collect_structured(&mut self, report: &Report) {
        if let Some(h) = &report.machine.hostname {
            if let Some(p) = self.register(Kind::Host, h) {
                // The short name of a fully qualified one is the same host.
                if let Some((short, _)) = h.trim().split_once('.') {
                    if !short.is_empty()
                        && !short.bytes().all(|b| b.is_ascii_digit())
                        && !self.placeholders.contains_key(short)
                    {
                        self.placeholders
                            .insert(short.to_string(), (Kind::Host, p.clone()));
                        self.order.push(short.to_string());
                    }
                }
            }
        }
        for g in &report.gpus {
            if let Some(u) = &g.uuid {
                self.register(Kind::Uuid, u);
            }
            if let Some(s) = &g.serial {
                self.register(Kind::Serial, s);
            }
        }
        if let Some(s) = &report.audit.snapshot {
            self.register(Kind::Snapshot, s);
        }
        for f in report.findings.iter().filter(|f| f.check == "env.ssh") {
            if let Some(Value::Array(users)) = f.evidence.get("users") {
                for u in users.iter().filter_map(Value::as_str) {
                    self.register(Kind::User, u);
                }
            }
        }
    }

    /// The values every string of the report shows by their pattern, in document order.
    /// `in_map`: under a finding's `evidence`, where keys are data too; elsewhere they are
    /// the report's field names.
    fn collect_patterns(&mut self, v: &Value, key: Option<&str>, in_map: bool) {
        if key.is_some_and(is_vocabulary_field) && !in_map {
            return;
        }
        match v {
            Value::String(s) => self.collect_text(s, key.is_some_and(is_version_field)),
            Value::Array(a) => a.iter().for_each(|x| self.collect_patterns(x, key, in_map)),
            Value::Object(o) => {
                for (k, x) in o {
                    if in_map {
                        self.collect_text(k, false);
                    }
                    self.collect_patterns(x, Some(k), in_map || k == "evidence");
                }
            }
            _ => {}
        }
    }

    fn collect_text(&mut self, s: &str, version_field: bool) {
        let mut found: Vec<(usize, usize, Kind)> = Vec::new();
        let mut add = |kind: Kind, ranges: Vec<(usize, usize)>| {
            found.extend(ranges.into_iter().map(|(a, b)| (a, b, kind)))
        };
        add(Kind::Uuid, uuid_in(s));
        add(Kind::User, users_in(s));
        add(Kind::Host, mount_hosts_in(s));
        if !version_field {
            add(Kind::Mac, mac_in(s));
            add(Kind::Guid, guid_in(s));
            add(Kind::Ipv6, ipv6_in(s));
            add(Kind::Ipv4, ipv4_in(s));
        }
        // Numbered in the order they appear in the text; of two matches that overlap the
        // longer wins (the last groups of an IPv6 address are no GUID).
        found.sort_by_key(|&(a, b, kind)| (a, std::cmp::Reverse(b), kind));
        let mut end = 0;
        for (a, b, kind) in found {
            if a < end {
                continue;
            }
            end = b;
            // The first kind to claim a value keeps it.
            if !self.placeholders.contains_key(&s[a..b]) {
                self.register(kind, &s[a..b]);
            }
        }
    }

    fn replace(&self, v: &mut Value, key: Option<&str>, in_map: bool) {
        if key.is_some_and(is_vocabulary_field) && !in_map {
            return;
        }
        match v {
            Value::String(s) => *s = self.replace_text(s, key.is_some_and(is_version_field)),
            Value::Array(a) => a.iter_mut().for_each(|x| self.replace(x, key, in_map)),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut x) in old {
                    self.replace(&mut x, Some(&k), in_map || k == "evidence");
                    let k = if in_map {
                        self.replace_text(&k, false)
                    } else {
                        k
                    };
                    o.insert(k, x);
                }
            }
            _ => {}
        }
    }

    /// Every collected value in the text replaced where it stands alone, longest first.
    /// An address is replaced only where its pattern takes it for one here: a value seen as
    /// an address in one string may be a version in another ("libcudnn 9.13.0.50").
    fn replace_text(&self, s: &str, version_field: bool) -> String {
        let mut values: Vec<(&str, &str, Kind)> = self
            .placeholders
            .iter()
            .filter(|(_, (k, _))| !(version_field && k.is_pattern_only()))
            .filter(|(v, _)| s.contains(v.as_str()))
            .map(|(v, (k, p))| (v.as_str(), p.as_str(), *k))
            .collect();
        if values.is_empty() {
            return s.to_string();
        }
        let addresses: Vec<(usize, usize)> = if values.iter().any(|v| v.2.is_pattern_only()) {
            [ipv4_in(s), ipv6_in(s), mac_in(s), guid_in(s)].concat()
        } else {
            Vec::new()
        };
        values.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.0.cmp(b.0)));
        let mut taken: Vec<(usize, usize, &str)> = Vec::new();
        for (value, placeholder, kind) in values {
            for (at, _) in s.match_indices(value) {
                let end = at + value.len();
                if taken.iter().any(|(a, b, _)| at < *b && *a < end) {
                    continue;
                }
                let here = match kind {
                    k if k.is_pattern_only() => addresses.contains(&(at, end)),
                    Kind::Uuid | Kind::Snapshot => true,
                    _ => stands_alone_or_port(s, at, end),
                };
                if here {
                    taken.push((at, end, placeholder));
                }
            }
        }
        taken.sort_by_key(|t| t.0);
        let mut out = String::with_capacity(s.len());
        let mut last = 0;
        for (a, b, p) in taken {
            out.push_str(&s[last..a]);
            out.push_str(p);
            last = b;
        }
        out.push_str(&s[last..]);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Finding, Status};
    use crate::policy::Policy;
    use crate::testing::Machine;

    /// A report of a healthy 2-GPU machine with the given hostname, UUIDs and serials, and
    /// one extra finding per message given.
    fn report(host: &str, ids: &[(&str, &str)], messages: &[&str]) -> Report {
        let facts = Machine::healthy("h200-sxm-141gb", ids.len() as u32).build();
        let mut r = Report::build(&facts, &Policy::default());
        r.machine.hostname = Some(host.to_string());
        for (g, (uuid, serial)) in r.gpus.iter_mut().zip(ids) {
            g.uuid = Some(uuid.to_string());
            g.serial = Some(serial.to_string());
        }
        for m in messages {
            r.findings.push(Finding::info("net.fabric", *m));
        }
        r.summary = super::super::Summary::of(&r.findings);
        r
    }

    const U0: &str = "GPU-af03aa1e-6321-baa2-b263-f86bf40e0757";
    const U1: &str = "GPU-1b1ea7c7-1c4b-ed49-1c72-26c65f2dd207";

    fn last_message(r: &Report) -> &str {
        r.findings.last().map(|f| f.message.as_str()).unwrap_or("")
    }

    fn one(text: &str) -> String {
        let r = report("node7", &[(U0, "1653824017950")], &[text]);
        let out = Redactor::new().redact(&r).unwrap();
        last_message(&out).to_string()
    }

    #[test]
    fn a_file_name_beside_the_reports_is_redacted_with_their_mapping() {
        let mut red = Redactor::new();
        red.redact(&report(
            "node17",
            &[(U0, "1653824017950")],
            &["/home/alice/x"],
        ))
        .unwrap();
        // The host the report named, the user its text showed, and a new user by pattern.
        // A name runs on through a dot (node17.json could be a host's name): the caller
        // redacts a file's stem on its own.
        assert_eq!(
            red.redact_text("/home/alice/reports/node17.json"),
            "/home/user-1/reports/node17.json"
        );
        assert_eq!(red.redact_text("node17"), "host-1");
        assert_eq!(
            red.redact_text("/home/carol/node170.json"),
            "/home/user-2/node170.json"
        );
        assert_eq!(red.redact_text("/tmp/a.json"), "/tmp/a.json");
    }

    #[test]
    fn every_kind_of_value_gets_its_placeholder() {
        let r = report(
            "gpu-node-17.corp.example.com",
            &[(U0, "1653824017950"), (U1, "1653824017951")],
            &[
                "on gpu-node-17.corp.example.com (gpu-node-17): GPU 0 is GPU-af03aa1e-6321-baa2-b263-f86bf40e0757, serial 1653824017950",
                "nfs4 10.4.0.35:/export from fe80::1c2b:3dff:fe4e:5f60 via 00:1a:2b:3c:4d:5e, node guid 506b:4b03:00f3:8d2a",
                "/home/alice/.venv/bin/python; USER=bob",
            ],
        );
        let mut red = Redactor::new();
        let out = red.redact(&r).unwrap();
        assert_eq!(out.machine.hostname.as_deref(), Some("host-1"));
        assert_eq!(
            out.gpus[0].uuid.as_deref(),
            Some("GPU-00000000-0000-0000-ffff-000000000001")
        );
        assert_eq!(
            out.gpus[1].uuid.as_deref(),
            Some("GPU-00000000-0000-0000-ffff-000000000002")
        );
        assert_eq!(out.gpus[0].serial.as_deref(), Some("serial-1"));
        assert_eq!(out.gpus[1].serial.as_deref(), Some("serial-2"));
        let n = out.findings.len();
        assert_eq!(
            out.findings[n - 3].message,
            "on host-1 (host-1): GPU 0 is GPU-00000000-0000-0000-ffff-000000000001, serial serial-1"
        );
        assert_eq!(
            out.findings[n - 2].message,
            "nfs4 ipv4-1:/export from ipv6-1 via mac-1, node guid guid-1"
        );
        assert_eq!(
            out.findings[n - 1].message,
            "/home/user-1/.venv/bin/python; USER=user-2"
        );
        assert!(out.audit.redacted);
        assert!(!r.audit.redacted);
        let kinds: Vec<Kind> = red.counts().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                Kind::Host,
                Kind::Uuid,
                Kind::Serial,
                Kind::User,
                Kind::Ipv4,
                Kind::Ipv6,
                Kind::Mac,
                Kind::Guid
            ]
        );
    }

    #[test]
    fn the_snapshot_path_and_the_users_env_ssh_lists_are_replaced() {
        let mut r = report(
            "n1",
            &[(U0, "1")],
            &["weak keys: ssh-rsa 1024 bits for carol"],
        );
        r.audit.snapshot = Some("/srv/snaps/customer-x-node".into());
        r.audit.snapshot_description = Some("taken from /srv/snaps/customer-x-node".into());
        r.findings
            .push(Finding::pass("env.ssh", "x").with("users", ["carol", "root"]));
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(out.audit.snapshot.as_deref(), Some("snapshot-1"));
        assert_eq!(
            out.audit.snapshot_description.as_deref(),
            Some("taken from snapshot-1")
        );
        let n = out.findings.len();
        assert_eq!(
            out.findings[n - 2].message,
            "weak keys: ssh-rsa 1024 bits for user-1"
        );
        // root names nobody: it stays.
        assert_eq!(
            out.findings[n - 1].evidence.get("users"),
            Some(&serde_json::json!(["user-1", "root"]))
        );
    }

    #[test]
    fn the_server_of_a_network_mount_is_a_host() {
        assert_eq!(
            one("/data is on /mnt (nfs4 from fileserver:/export); fs2.example.com:/vol"),
            "/data is on /mnt (nfs4 from host-2:/export); host-3:/vol"
        );
        assert_eq!(one("sshfs alice@box:/data"), "sshfs alice@host-2:/data");
        for keep in [
            "see https://docs.nvidia.com/x and C:/Windows",
            "10.0.0.0/8",
            "ratio 1:/2",
        ] {
            assert_eq!(one(keep), keep);
        }
        // An address stays an address.
        assert_eq!(
            one("nfs4 from 10.0.0.2:/export"),
            "nfs4 from ipv4-1:/export"
        );
    }

    #[test]
    fn placeholders_are_numbered_in_first_seen_order_and_stay_the_same() {
        assert_eq!(
            one("10.0.0.9 then 10.0.0.8 then 10.0.0.9 again"),
            "ipv4-1 then ipv4-2 then ipv4-1 again"
        );
    }

    #[test]
    fn one_redactor_gives_the_same_value_the_same_placeholder_in_every_report() {
        let a = report("alpha", &[(U0, "111"), (U1, "222")], &["peer 10.1.1.1"]);
        let b = report("beta", &[(U1, "222")], &["peer 10.1.1.2 and 10.1.1.1"]);
        let mut red = Redactor::new();
        let ra = red.redact(&a).unwrap();
        let rb = red.redact(&b).unwrap();
        assert_eq!(ra.machine.hostname.as_deref(), Some("host-1"));
        assert_eq!(rb.machine.hostname.as_deref(), Some("host-2"));
        // U1 is GPU 1 of a and GPU 0 of b: one placeholder.
        assert_eq!(ra.gpus[1].uuid, rb.gpus[0].uuid);
        assert_eq!(ra.gpus[1].serial, rb.gpus[0].serial);
        assert_eq!(rb.gpus[0].serial.as_deref(), Some("serial-2"));
        assert_eq!(last_message(&rb), "peer ipv4-2 and ipv4-1");
        // Two redactors: each numbers from 1.
        let alone = Redactor::new().redact(&b).unwrap();
        assert_eq!(alone.machine.hostname.as_deref(), Some("host-1"));
        assert_eq!(
            alone.gpus[0].uuid.as_deref(),
            Some("GPU-00000000-0000-0000-ffff-000000000001")
        );
        let mapping = red.mapping();
        assert_eq!(mapping[0], (Kind::Host, "alpha", "host-1"));
        assert!(mapping.contains(&(Kind::Host, "beta", "host-2")));
    }

    #[test]
    fn ipv4_addresses_are_found_in_their_usual_company() {
        assert_eq!(
            one("rw,addr=10.0.0.2,clientaddr=10.0.0.5"),
            "rw,addr=ipv4-1,clientaddr=ipv4-2"
        );
        assert_eq!(one("10.4.0.35:/export on /data"), "ipv4-1:/export on /data");
        assert_eq!(
            one("listening on 172.16.4.2:8888."),
            "listening on ipv4-1:8888."
        );
        assert_eq!(one("a host at 8.8.8.8/32"), "a host at ipv4-1/32");
        assert_eq!(one("(192.168.1.20)"), "(ipv4-1)");
        assert_eq!(one("x10.0.0.1:80"), "x10.0.0.1:80");
        // A list of addresses is no list of versions.
        assert_eq!(one("peers 10.0.0.1, 10.0.0.2"), "peers ipv4-1, ipv4-2");
        // A number or a dotted name before it is no version.
        assert_eq!(one("port 22, 10.0.0.1"), "port 22, ipv4-1");
        assert_eq!(one("(eth0.100, 10.0.0.1)"), "(eth0.100, ipv4-1)");
        assert_eq!(
            one("node7:8888 and node7:80.5"),
            "host-1:8888 and node7:80.5"
        );
    }

    #[test]
    fn addresses_that_identify_nothing_stay() {
        for keep in [
            "bind to 127.0.0.1 or 0.0.0.0",
            "Match Address 10.0.0.0/8",
            "broadcast 255.255.255.255",
            "docs 192.0.2.7 and 2001:db8::7 and 198.51.100.1 and 203.0.113.9",
            "ip = '::' or ::1",
        ] {
            assert_eq!(one(keep), keep);
        }
        // A prefix with host bits set is an address on a network: it goes; so does a /32.
        assert_eq!(one("from 10.0.0.1/8"), "from ipv4-1/8");
        assert_eq!(one("from 10.0.0.0/32"), "from ipv4-1/32");
        assert_eq!(one("from 10.1.0.0/16"), "from 10.1.0.0/16");
        assert_eq!(one("from 10.1.0.0/15"), "from ipv4-1/15");
    }

    #[test]
    fn versions_are_not_ipv4_addresses() {
        for keep in [
            "libcublas 13.0.2.14, libcublasLt 13.0.2.14",
            "libcublas.so.13 -> libcublas.so.13.0.2.14 [ld.so.cache] version 13.0.2.",
            "cuDNN 9.1.0.70",
            "version 1.2.3.4",
            "driver_version=1.2.3.4",
            "v1.2.3.4 and V1.2.3.4",
            "1.2.3.4.5",
            "torch 2.1.0.1+cu121",
            "1.2.3.4+cu121",
            "VBIOS 96.00.A5.00.1A and 92.00.36.00 and 90.04.84.00",
            "driver 580.159.04, CUDA 12.4, kernel 5.15.0-1045-aws",
            "256.1.2.3",
            "2 versions of libcudnn.so.9 on this machine (9.14.0, 9.13.0.50); a program",
        ] {
            assert_eq!(one(keep), keep);
        }
    }

    #[test]
    fn the_fields_that_hold_versions_are_named_so() {
        for key in [
            "driver_version",
            "Version",
            "nvidia_wheels",
            "python_packages",
            "vbios",
            "pci_bus_id",
            "audited_at",
            "kernel",
            "libc",
            "os",
            "schema",
            "cuda",
            "driver",
            "nccl",
            "torch",
        ] {
            assert!(is_version_field(key), "{key}");
        }
        for key in ["source", "options", "message", "kernels", "attach", "host"] {
            assert!(!is_version_field(key), "{key}");
        }
    }

    #[test]
    fn a_placeholder_is_known_by_its_whole_form() {
        assert!(is_placeholder(Kind::Host, "host-12"));
        assert!(is_placeholder(
            Kind::Uuid,
            "GPU-00000000-0000-0000-ffff-000000000012"
        ));
        assert!(is_placeholder(
            Kind::Uuid,
            "00000000-0000-0000-ffff-000000000012"
        ));
        for (kind, not) in [
            (Kind::Host, "host-"),
            (Kind::Host, "host-1a"),
            (Kind::Host, "host1"),
            (Kind::Host, "serial-1"),
            (Kind::Serial, "serial-x"),
            (Kind::Uuid, "GPU-00000000-0000-0000-0000-000000000012"),
            (Kind::Uuid, "GPU-00000000-0000-0000-ffff-000000000012x"),
        ] {
            assert!(!is_placeholder(kind, not), "{kind} {not}");
        }
    }

    #[test]
    fn a_dotted_quad_seen_as_an_address_stays_a_version_where_it_is_one() {
        let mut r = report(
            "n1",
            &[(U0, "1")],
            &["peer 9.13.0.50 answered", "libcudnn 9.13.0.50"],
        );
        r.findings.push(
            Finding::pass("cuda.libraries", "x")
                .with("nvidia_wheels", [["nvidia-cudnn-cu13", "9.13.0.50"]]),
        );
        let out = Redactor::new().redact(&r).unwrap();
        let n = out.findings.len();
        assert_eq!(out.findings[n - 3].message, "peer ipv4-1 answered");
        assert_eq!(out.findings[n - 2].message, "libcudnn 9.13.0.50");
        assert_eq!(
            out.findings[n - 1].evidence.get("nvidia_wheels"),
            Some(&serde_json::json!([["nvidia-cudnn-cu13", "9.13.0.50"]]))
        );
    }

    #[test]
    fn a_version_field_is_not_searched_for_addresses() {
        let mut r = report("n1", &[(U0, "1")], &[]);
        r.machine.kernel = Some("10.1.2.3-custom".into());
        r.machine.driver_version = Some("10.1.2.3".into());
        r.gpus[0].vbios = Some("10.1.2.3".into());
        r.findings.push(
            Finding::info("cuda.libraries", "x")
                .with("cudnn_version", "10.1.2.3")
                .with("server", "10.1.2.4"),
        );
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(out.machine.kernel.as_deref(), Some("10.1.2.3-custom"));
        assert_eq!(out.machine.driver_version.as_deref(), Some("10.1.2.3"));
        assert_eq!(out.gpus[0].vbios.as_deref(), Some("10.1.2.3"));
        let f = out.findings.last().unwrap();
        assert_eq!(f.evidence.get("cudnn_version").unwrap(), "10.1.2.3");
        assert_eq!(f.evidence.get("server").unwrap(), "ipv4-1");
    }

    #[test]
    fn pci_bus_ids_times_and_bitmasks_are_not_addresses() {
        for keep in [
            "GPU 1 (00000000:18:00.0) and 0000:18:00.0 and 18:00.0",
            "at 2026-12-01T10:24:13Z, 10:24:13",
            "throttle 0x0000000000000004",
            "std::net::Ipv6Addr",
        ] {
            assert_eq!(one(keep), keep);
        }
        let facts = Machine::healthy("h200-sxm-141gb", 1).build();
        let r = Report::build(&facts, &Policy::default());
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(out.gpus[0].pci_bus_id, r.gpus[0].pci_bus_id);
    }

    #[test]
    fn ipv6_and_mac_addresses() {
        assert_eq!(
            one("gid fe80:0000:0000:0000:506b:4b03:00f3:8d2a and 2a01:4f8:c17:1::2"),
            "gid ipv6-1 and ipv6-2"
        );
        // Next to the documentation range, not in it.
        assert_eq!(
            one("2001:4860:4860::8888 and 2a01:db8::1"),
            "ipv6-1 and ipv6-2"
        );
        assert_eq!(
            one("ether 00:1A:2B:3C:4D:5E, 00-1a-2b-3c-4d-5f"),
            "ether mac-1, mac-2"
        );
        // An IPoIB hardware address is 20 bytes.
        assert_eq!(
            one("link/infiniband 80:00:00:48:fe:80:00:00:00:00:00:00:50:6b:4b:03:00:f3:8d:2a"),
            "link/infiniband mac-1"
        );
        // The all-zero MAC and GUID name nothing.
        assert_eq!(
            one("00:00:00:00:00:00 0000:0000:0000:0000"),
            "00:00:00:00:00:00 0000:0000:0000:0000"
        );
    }

    #[test]
    fn a_hostname_that_is_a_prefix_of_another_is_not_replaced_inside_it() {
        let a = report(
            "node1",
            &[(U0, "1")],
            &["node1 and node10 and node1-b and node1."],
        );
        let b = report("node10", &[(U1, "2")], &["node10 then node1"]);
        let mut red = Redactor::new();
        let ra = red.redact(&a).unwrap();
        // node10 was not known when a was redacted: it is not node1.
        assert_eq!(
            last_message(&ra),
            "host-1 and node10 and node1-b and host-1."
        );
        let rb = red.redact(&b).unwrap();
        assert_eq!(last_message(&rb), "host-2 then host-1");
    }

    #[test]
    fn a_value_inside_a_longer_word_stays() {
        let r = report(
            "gpu",
            &[(U0, "1650")],
            &["gpu.identity on gpu: gpus and 16500 and 1650 and a1650"],
        );
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(
            last_message(&out),
            "gpu.identity on host-1: gpus and 16500 and serial-1 and a1650"
        );
        assert!(out.findings.iter().all(|f| !f.check.contains("host-")));
    }

    #[test]
    fn a_hostname_that_is_a_word_of_the_report_leaves_its_fields_alone() {
        let mut r = report("vm", &[(U0, "1")], &["on vm"]);
        r.machine.virtualization = Some("vm".into());
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(out.machine.virtualization.as_deref(), Some("vm"));
        assert_eq!(out.machine.hostname.as_deref(), Some("host-1"));
        assert_eq!(last_message(&out), "on host-1");
    }

    #[test]
    fn user_names_from_home_directories_and_default_accounts() {
        assert_eq!(
            one("/home/alice/x, /Users/bob, /home/alice, /home/ubuntu/y, /home/*/.ssh"),
            "/home/user-1/x, /Users/user-2, /home/user-1, /home/ubuntu/y, /home/*/.ssh"
        );
        // Once known, the name is replaced where it stands alone.
        assert_eq!(
            one("/home/dave/a for dave, davey"),
            "/home/user-1/a for user-1, davey"
        );
        assert_eq!(one("USER=eve LOGNAME=eve"), "USER=user-1 LOGNAME=user-1");
    }

    #[test]
    fn uuids_outside_the_gpu_list_are_replaced_and_keep_their_prefix() {
        assert_eq!(
            one("MIG-1b1ea7c7-1c4b-ed49-1c72-26c65f2dd207 and GPU-00000000-0000-0000-0000-000000000060"),
            "MIG-00000000-0000-0000-ffff-000000000002 and GPU-00000000-0000-0000-ffff-000000000003"
        );
    }

    #[test]
    fn a_uuid_is_replaced_wherever_it_occurs_and_a_bare_one_gets_no_prefix() {
        assert_eq!(
            one(&format!("MIG-{U0}/1/0 and x{U0}")),
            "MIG-GPU-00000000-0000-0000-ffff-000000000001/1/0 and xGPU-00000000-0000-0000-ffff-000000000001"
        );
        // One --gpus left out of the report: found by its pattern.
        assert_eq!(
            one(&format!("MIG-{U1}/2/0")),
            "MIG-GPU-00000000-0000-0000-ffff-000000000002/2/0"
        );
        assert_eq!(
            uuid_placeholder("abcdefab-1c4b-ed49-1c72-26c65f2dd207", 3),
            "00000000-0000-0000-ffff-000000000003"
        );
        assert_eq!(
            uuid_placeholder("MIG-1b1ea7c7-1c4b-ed49-1c72-26c65f2dd207", 3),
            "MIG-00000000-0000-0000-ffff-000000000003"
        );
    }

    #[test]
    fn redacting_twice_is_redacting_once() {
        let r = report(
            "node-a",
            &[(U0, "1653824017950"), (U1, "1653824017951")],
            &["10.0.0.1 /home/zed/x 00:1a:2b:3c:4d:5e fe80::1"],
        );
        let once = Redactor::new().redact(&r).unwrap();
        let twice = Redactor::new().redact(&once).unwrap();
        assert_eq!(
            serde_json::to_value(&once).unwrap(),
            serde_json::to_value(&twice).unwrap()
        );
        let mut red = Redactor::new();
        red.redact(&once).unwrap();
        assert!(red.mapping().is_empty(), "{:?}", red.mapping());
    }

    #[test]
    fn findings_and_summary_are_unchanged() {
        let mut r = report("pass", &[(U0, "fail")], &["pass"]);
        r.findings.push(Finding::warn("env.ssh", "x").gpu(0));
        r.summary = super::super::Summary::of(&r.findings);
        let out = Redactor::new().redact(&r).unwrap();
        let key = |r: &Report| -> Vec<(String, Status, Option<u32>)> {
            r.findings
                .iter()
                .map(|f| (f.check.clone(), f.status, f.gpu))
                .collect()
        };
        assert_eq!(key(&out), key(&r));
        assert_eq!(out.summary, r.summary);
        assert_eq!(out.exit_code(), r.exit_code());
        assert_eq!(last_message(&out), "x");
        assert_eq!(out.findings[out.findings.len() - 2].message, "host-1");
    }

    #[test]
    fn the_json_says_redacted_only_when_it_is_and_old_reports_still_read() {
        let r = report("n", &[(U0, "1")], &[]);
        let plain = serde_json::to_value(&r).unwrap();
        assert!(plain["audit"].get("redacted").is_none());
        let out = Redactor::new().redact(&r).unwrap();
        let red = serde_json::to_value(&out).unwrap();
        assert_eq!(red["audit"]["redacted"], true);
        let back: Report = serde_json::from_value(plain).unwrap();
        assert!(!back.audit.redacted);
    }
}
