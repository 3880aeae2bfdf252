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
use aho_corasick::{AhoCorasick, MatchKind};
use regex::Regex;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
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
    Email,
    Instance,
    Path,
}

impl Kind {
    const ALL: [Kind; 12] = [
        Kind::Host,
        Kind::Uuid,
        Kind::Serial,
        Kind::User,
        Kind::Ipv4,
        Kind::Ipv6,
        Kind::Mac,
        Kind::Guid,
        Kind::Snapshot,
        Kind::Email,
        Kind::Instance,
        Kind::Path,
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
            Kind::Email => "email",
            Kind::Instance => "instance",
            Kind::Path => "path",
        }
    }

    /// An address or identifier found by its pattern: not replaced in a field that holds a
    /// version, where a dotted quad is a version; replaced where the pattern finds it in the
    /// text at hand (not by a search for the value).
    fn is_pattern_only(self) -> bool {
        matches!(self, Kind::Ipv4 | Kind::Ipv6 | Kind::Mac | Kind::Guid)
    }

    /// Values written in either case that are the same value: DNS names, hexadecimal ids,
    /// e-mail addresses. Their keys are lower case.
    fn ignores_case(self) -> bool {
        matches!(
            self,
            Kind::Host
                | Kind::Uuid
                | Kind::Email
                | Kind::Instance
                | Kind::Mac
                | Kind::Guid
                | Kind::Ipv6
        )
    }
}

/// The key a value of `kind` is known by: lower case where the case does not matter.
fn key_of(kind: Kind, value: &str) -> std::borrow::Cow<'_, str> {
    if kind.ignores_case() && value.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(value.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(value)
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

/// The UUID of a `GPU-<uuid>` / `MIG-<uuid>` without its prefix, where it has one.
fn bare_uuid(value: &str) -> Option<&str> {
    let (head, rest) = value.split_once('-')?;
    (rest.len() == 36 && !head.is_empty() && head.bytes().all(|b| b.is_ascii_alphabetic()))
        .then_some(rest)
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
    // A path's placeholder is a path: `/path-1`.
    let value = if kind == Kind::Path {
        value.strip_prefix('/').unwrap_or("")
    } else {
        value
    };
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
static RE_EMAIL: OnceLock<Regex> = OnceLock::new();
static RE_USER_AT_HOST: OnceLock<Regex> = OnceLock::new();
static RE_INSTANCE: OnceLock<Regex> = OnceLock::new();
static RE_EXPORT: OnceLock<Regex> = OnceLock::new();
static RE_PLACEHOLDER_ANY: OnceLock<Regex> = OnceLock::new();

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

/// The word before `start` ("cuDNN" in "cuDNN 9.1.0.70", "version" in
/// "driver_version=1.2.3.4").
fn word_before(text: &str, start: usize) -> &str {
    let head = text[..start].trim_end_matches([' ', '=', ':', '"', '\'', '(']);
    let from = head
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphanumeric())
        .last()
        .map_or(head.len(), |(i, _)| i);
    &head[from..]
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
    is_version_word(word_before(text, start))
        || list_item_before(text, start).is_some_and(is_other_dotted_number)
}

/// "cuDNN", "version", "driver_version", "libcublas": a word that names what has a version.
fn is_version_word(word: &str) -> bool {
    let ends = |suffix: &str| {
        word.len() >= suffix.len()
            && word.as_bytes()[word.len() - suffix.len()..].eq_ignore_ascii_case(suffix.as_bytes())
    };
    VERSION_WORDS.iter().any(|w| w.eq_ignore_ascii_case(word))
        || ends("version")
        || word.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("lib"))
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
        .filter(|m| {
            stands_alone_or_port(text, m.start(), m.end())
                || (after_ipv4_mapped_prefix(text, m.start())
                    && (alone_on(text[m.end()..].chars()) || is_cidr_or_port(text, m.end())))
        })
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

/// `::ffff:10.4.0.35`: an IPv4 address mapped into IPv6 (as a socket of both families names a
/// peer that came over IPv4) is that IPv4 address, replaced as one.
fn after_ipv4_mapped_prefix(text: &str, start: usize) -> bool {
    const MAPPED: &[u8] = b"::ffff:";
    let head = &text.as_bytes()[..start];
    head.len() >= MAPPED.len()
        && head[head.len() - MAPPED.len()..].eq_ignore_ascii_case(MAPPED)
        && alone_on(text[..start - MAPPED.len()].chars().rev())
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
    let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
    tail[..digits].parse().ok()
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
/// named in messages), also inside a longer id (`MIG-GPU-<uuid>/1/0`); and bare UUIDs that
/// stand alone (a GPU's without its prefix, an Azure VM id, a file system's UUID): a UUID
/// is made to tell one thing from every other. The nil UUID names nothing.
fn uuid_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_UUID,
        r"(?:(?:GPU|MIG)-)?[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
    )
    .find_iter(text)
    .filter(|m| !text[m.end()..].starts_with(|c: char| c.is_ascii_hexdigit()))
    .filter(|m| {
        let prefixed = m.as_str().starts_with(['G', 'M']);
        prefixed || {
            let before = text[..m.start()].chars().next_back();
            let after = text[m.end()..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '-')
                && !after.is_some_and(|c| c.is_alphanumeric() || c == '-')
        }
    })
    .filter(|m| m.as_str().bytes().any(|b| b.is_ascii_hexdigit() && b != b'0'))
    .map(|m| (m.start(), m.end()))
    .collect()
}

/// E-mail addresses (`alice@example.com`), whole.
fn emails_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_EMAIL,
        r"[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}",
    )
    .find_iter(text)
    .filter(|m| stands_alone(text, m.start(), m.end()))
    .map(|m| (m.start(), m.end()))
    .collect()
}

/// `user@host` without a domain (the kernel's builder, `(buildd@lcy02-amd64-080)`; sshfs's
/// `alice@box:/data`): the user and the host, each as its kind. An e-mail address is
/// [`emails_in`]'s.
fn user_at_host_in(text: &str) -> Vec<(usize, usize, Kind)> {
    let mut out = Vec::new();
    for c in re(
        &RE_USER_AT_HOST,
        r"([A-Za-z_][A-Za-z0-9._-]*)@([A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)",
    )
    .captures_iter(text)
    {
        let (Some(user), Some(host)) = (c.get(1), c.get(2)) else {
            continue;
        };
        // `alice@example.com`, `pkg@1.2.3`: an address, or no host at all.
        if text[host.end()..].starts_with('.')
            && text[host.end() + 1..].starts_with(|c: char| c.is_alphanumeric())
        {
            continue;
        }
        if !alone_on(text[..user.start()].chars().rev()) {
            continue;
        }
        out.push((user.start(), user.end(), Kind::User));
        if host.as_str().bytes().any(|b| b.is_ascii_alphabetic()) {
            out.push((host.start(), host.end(), Kind::Host));
        }
    }
    out
}

/// Cloud instance ids: AWS `i-` and 8 or 17 hexadecimal digits.
fn instances_in(text: &str) -> Vec<(usize, usize)> {
    re(&RE_INSTANCE, r"\bi-(?:[0-9a-f]{17}|[0-9a-f]{8})\b")
        .find_iter(text)
        .filter(|m| stands_alone(text, m.start(), m.end()))
        .map(|m| (m.start(), m.end()))
        .collect()
}

/// Paths that name nothing of their own: the file system's top, the system's directories,
/// the places every machine has. A data directory or an export with one of these names is
/// no one's secret.
const GENERIC_PATHS: &[&str] = &[
    "/",
    "/tmp",
    "/var/tmp",
    "/dev/shm",
    "/mnt",
    "/media",
    "/data",
    "/datasets",
    "/scratch",
    "/home",
    "/root",
    "/srv",
    "/opt",
    "/export",
    "/exports",
    "/work",
    "/workspace",
    "/raid",
];

/// Whether a path is private: someone chose its name. Generic ones, and the caches gpuaudit
/// looks at by itself (`~/.cache/huggingface/hub`, `~/.cache/torch`: the user in a home
/// directory is replaced as a user), are not.
fn is_private_path(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    let p = if p.is_empty() { "/" } else { p };
    p.starts_with('/') && !GENERIC_PATHS.contains(&p) && !p.contains("/.cache/")
}

/// The exported path of a network mount's source (`nas01:/export/datasets`,
/// `10.0.0.2:/vol/team`), where it is private ([`is_private_path`]); not a URL's.
fn export_paths_in(text: &str) -> Vec<(usize, usize)> {
    re(
        &RE_EXPORT,
        r"(?:^|[\s(=,@\[])(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(/[^\s,;()\[\]'\x22]*)",
    )
    .captures_iter(text)
    .filter_map(|c| {
        let server = c.get(0)?.as_str().trim_start_matches([' ', '\t', '\n', '(', '=', ',', '@', '[']);
        let server = server.split(":/").next()?;
        let named = server.len() > 1 && server.bytes().any(|b| b.is_ascii_alphabetic());
        let address = server.starts_with('[')
            || (server.bytes().filter(|&b| b == b'.').count() == 3
                && server.bytes().all(|b| b.is_ascii_digit() || b == b'.'));
        let path = c.get(1)?;
        let end = path.start() + path.as_str().trim_end_matches(['.', ':']).len();
        let p = &text[path.start()..end];
        ((named || address) && !p.starts_with("//") && is_private_path(p)).then_some((path.start(), end))
    })
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

/// The report could not be redacted.
#[derive(Debug, thiserror::Error)]
pub enum RedactError {
    /// It could not be turned into JSON and back.
    #[error("cannot redact the report: {0}")]
    Json(serde_json::Error),
    /// More values to replace than one search can hold.
    #[error("cannot redact the report: {0}")]
    TooMany(aho_corasick::BuildError),
}

/// One mapping from values to placeholders, shared by every report redacted with it.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    /// Each value by its key ([`key_of`]): its kind and placeholder.
    placeholders: HashMap<String, (Kind, String)>,
    counts: HashMap<Kind, usize>,
    /// Every key, in the order first seen (for [`Redactor::mapping`]).
    order: Vec<String>,
    /// The values searched for in every text, built when the mapping has changed.
    search: Option<Search>,
    /// The addresses of each text of the report being redacted, as its patterns found them
    /// while collecting (so that replacing does not look for them again); emptied after.
    addresses: HashMap<String, Vec<(usize, usize)>>,
}

/// Every value that is searched for (not the addresses, which their patterns find), in one
/// automaton: one pass over a text finds them all, however many there are.
#[derive(Debug, Clone)]
struct Search {
    /// How many values the mapping had when this was built.
    values: usize,
    automaton: AhoCorasick,
    /// Per pattern of the automaton: its key, kind and placeholder.
    patterns: Vec<(String, Kind, String)>,
}

/// A hostname that reads as a machine's name rather than a word (`gpu-node-17`, `node1`: a
/// digit or a hyphen in it): its variants are the same host (`gpu-node-17-ib0`, `node1-b`,
/// `gpu-node-17.corp.example.com`). A host called `gpu` or `nvidia` is replaced only where
/// it stands alone, so that `nvidia-smi` stays.
fn is_distinctive_host(host: &str) -> bool {
    host.bytes().any(|b| b.is_ascii_digit() || b == b'-') && host.len() >= 3
}

/// As [`alone_on`], or joined to the rest of a name by `-`, `_` or `.` (a variant of a host).
fn variant_on(mut side: impl Iterator<Item = char>) -> bool {
    match side.next() {
        None | Some('-' | '_' | '.') => true,
        Some(c) if is_token_char(c) => false,
        Some(':' | '+') => !side.next().is_some_and(is_token_char),
        Some(_) => true,
    }
}

/// A path stands alone where no more of a path or a name continues it: `/data/x` is under
/// `/data`, `/data2` and `/old/data` are other paths.
fn path_stands_alone(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let mut after = text[end..].chars();
    let continues = |c: char| is_token_char(c) || c == '-';
    !before.is_some_and(|c| continues(c) || matches!(c, '/' | '.' | '~'))
        && match after.next() {
            None | Some('/') => true,
            Some('.') => !after.next().is_some_and(is_token_char),
            Some(c) => !continues(c),
        }
}

impl Redactor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The placeholder of a value, numbering it when new; None where the value is left as
    /// it is (empty, a placeholder already, a default account, a generic path).
    fn register(&mut self, kind: Kind, value: &str) -> Option<String> {
        let value = value.trim();
        if value.is_empty() || is_placeholder(kind, value) {
            return None;
        }
        if kind == Kind::User && DEFAULT_ACCOUNTS.contains(&value) {
            return None;
        }
        if kind == Kind::Host && value.eq_ignore_ascii_case("localhost") {
            return None;
        }
        if kind == Kind::Path && !is_private_path(value) {
            return None;
        }
        let key = key_of(kind, value);
        if let Some((_, p)) = self.placeholders.get(key.as_ref()) {
            return Some(p.clone());
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let placeholder = match kind {
            Kind::Uuid => uuid_placeholder(value, *n),
            Kind::Path => format!("/path-{n}"),
            _ => format!("{}-{n}", kind.prefix()),
        };
        let key = key.into_owned();
        self.placeholders
            .insert(key.clone(), (kind, placeholder.clone()));
        self.order.push(key);
        Some(placeholder)
    }

    /// `value` known by the placeholder `placeholder` too (a short hostname, a UUID without
    /// its prefix), where it is not known already.
    fn alias(&mut self, kind: Kind, value: &str, placeholder: String) {
        let key = key_of(kind, value).into_owned();
        if key.is_empty() || self.placeholders.contains_key(&key) {
            return;
        }
        self.placeholders.insert(key.clone(), (kind, placeholder));
        self.order.push(key);
    }

    fn is_known(&self, kind: Kind, value: &str) -> bool {
        self.placeholders.contains_key(key_of(kind, value).as_ref())
    }

    /// Every value replaced so far with its kind and placeholder, in the order first seen
    /// (values whose case does not matter in lower case).
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
        let mut json = serde_json::to_value(report).map_err(RedactError::Json)?;
        self.note_all_placeholders(&json);
        self.collect_structured(report);
        self.collect_patterns(&json, None, false);
        self.prepare()?;
        self.replace(&mut json, None, false);
        self.addresses = HashMap::new();
        let mut out: Report = serde_json::from_value(json).map_err(RedactError::Json)?;
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
    /// a host gets that host's placeholder (`gpu-node-17-b.json` too: see
    /// [`is_distinctive_host`]).
    pub fn redact_text(&mut self, s: &str) -> Result<String, RedactError> {
        self.note_placeholders(s);
        self.collect_text(s, false);
        self.prepare()?;
        let out = self.replace_text(s, false);
        self.addresses = HashMap::new();
        Ok(out)
    }

    /// The values the report names in its fields.
    fn collect_structured(&mut self, report: &Report) {
        if let Some(h) = &report.machine.hostname {
            if let Some(p) = self.register(Kind::Host, h) {
                // The short name of a fully qualified one is the same host.
                if let Some((short, _)) = h.trim().split_once('.') {
                    if !short.bytes().all(|b| b.is_ascii_digit()) {
                        self.alias(Kind::Host, short, p);
                    }
                }
            }
        }
        for g in &report.gpus {
            if let Some(u) = &g.uuid {
                if let Some(p) = self.register(Kind::Uuid, u) {
                    // The UUID without its `GPU-`: as CUDA and some tools print it.
                    if let (Some(bare), Some(bare_p)) = (bare_uuid(u.trim()), bare_uuid(&p)) {
                        self.alias(Kind::Uuid, bare, bare_p.to_string());
                    }
                }
            }
            if let Some(s) = &g.serial {
                self.register(Kind::Serial, s);
            }
        }
        if let Some(s) = &report.audit.snapshot {
            self.register(Kind::Snapshot, s);
        }
        for f in &report.findings {
            if f.check == "env.ssh" {
                if let Some(Value::Array(users)) = f.evidence.get("users") {
                    for u in users.iter().filter_map(Value::as_str) {
                        self.register(Kind::User, u);
                    }
                }
            }
            // The data directories the storage checks judged, and their mount points.
            if f.check.starts_with("storage.") {
                for key in ["path", "resolved", "mountpoint"] {
                    if let Some(p) = f.evidence.get(key).and_then(Value::as_str) {
                        self.register(Kind::Path, p);
                    }
                }
            }
        }
    }

    /// The values every string of the report shows by their pattern, in document order.
    /// `in_map`: under a finding's `evidence`, where keys are data too; elsewhere they are
    /// the report's field names.
    /// The placeholders a text already holds (a redacted report redacted again, with a value
    /// the earlier redaction left): each kind's numbering goes on after the highest, so that
    /// a new value never gets a placeholder that already names another.
    fn note_placeholders(&mut self, s: &str) {
        if !s.contains('-') {
            return;
        }
        let found = re(
            &RE_PLACEHOLDER_ANY,
            r"\b(host|serial|user|ipv4|ipv6|mac|guid|snapshot|email|instance|path)-([0-9]{1,12})\b|-0000-0000-ffff-([0-9]{12})\b",
        );
        for c in found.captures_iter(s) {
            let (kind, n) = match (c.get(1), c.get(2), c.get(3)) {
                (Some(k), Some(n), _) => (
                    Kind::ALL.into_iter().find(|x| x.prefix() == k.as_str()),
                    n.as_str(),
                ),
                (_, _, Some(n)) => (Some(Kind::Uuid), n.as_str()),
                _ => continue,
            };
            if let (Some(kind), Ok(n)) = (kind, n.parse::<usize>()) {
                let count = self.counts.entry(kind).or_insert(0);
                *count = (*count).max(n);
            }
        }
    }

    /// [`Redactor::note_placeholders`] of every string of a report (keys too).
    fn note_all_placeholders(&mut self, v: &Value) {
        match v {
            Value::String(s) => self.note_placeholders(s),
            Value::Array(a) => a.iter().for_each(|x| self.note_all_placeholders(x)),
            Value::Object(o) => {
                for (k, x) in o {
                    self.note_placeholders(k);
                    self.note_all_placeholders(x);
                }
            }
            _ => {}
        }
    }

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
        let add = |found: &mut Vec<_>, kind: Kind, ranges: Vec<(usize, usize)>| {
            found.extend(ranges.into_iter().map(|(a, b)| (a, b, kind)))
        };
        let f = &mut found;
        add(f, Kind::Uuid, uuid_in(s));
        add(f, Kind::Email, emails_in(s));
        add(f, Kind::Instance, instances_in(s));
        add(f, Kind::Path, export_paths_in(s));
        add(f, Kind::User, users_in(s));
        add(f, Kind::Host, mount_hosts_in(s));
        f.extend(user_at_host_in(s));
        if !version_field {
            add(f, Kind::Mac, mac_in(s));
            add(f, Kind::Guid, guid_in(s));
            add(f, Kind::Ipv6, ipv6_in(s));
            add(f, Kind::Ipv4, ipv4_in(s));
        }
        // Numbered in the order they appear in the text; of two matches that overlap the
        // longer wins (the last groups of an IPv6 address are no GUID).
        found.sort_by_key(|&(a, b, kind)| (a, std::cmp::Reverse(b), kind));
        let mut end = 0;
        let mut addresses = Vec::new();
        for (a, b, kind) in found {
            if a < end {
                continue;
            }
            end = b;
            // The first kind to claim a value keeps it.
            if !self.is_known(kind, &s[a..b]) {
                self.register(kind, &s[a..b]);
            }
            if kind.is_pattern_only() {
                addresses.push((a, b));
            }
        }
        if !addresses.is_empty() && !self.addresses.contains_key(s) {
            self.addresses.insert(s.to_string(), addresses);
        }
    }

    /// The automaton of every value searched for, rebuilt where values were added since.
    fn prepare(&mut self) -> Result<(), RedactError> {
        if self
            .search
            .as_ref()
            .is_some_and(|s| s.values == self.placeholders.len())
        {
            return Ok(());
        }
        let patterns: Vec<(String, Kind, String)> = self
            .order
            .iter()
            .filter_map(|k| {
                let (kind, p) = self.placeholders.get(k)?;
                (!kind.is_pattern_only()).then(|| (k.clone(), *kind, p.clone()))
            })
            .collect();
        // The builder fails only past its size limits (billions of states), which no report
        // reaches; should one, the report is not redacted rather than redacted in part.
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(patterns.iter().map(|p| p.0.as_str()))
            .map_err(RedactError::TooMany)?;
        self.search = Some(Search {
            values: self.placeholders.len(),
            automaton,
            patterns,
        });
        Ok(())
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

    /// Every collected value in the text replaced where it stands alone, longest first; in
    /// time linear in the text and the occurrences found, however many values are known.
    /// An address is replaced only where its pattern takes it for one here: a value seen as
    /// an address in one string may be a version in another ("libcudnn 9.13.0.50").
    fn replace_text(&self, s: &str, version_field: bool) -> String {
        // (start, end, placeholder) of every occurrence that may be replaced.
        let mut candidates: Vec<(usize, usize, &str)> = Vec::new();
        if !version_field {
            // Those collecting found here (in order, none overlapping), else those the
            // patterns find now.
            let found;
            let ranges = match self.addresses.get(s) {
                Some(r) => r.as_slice(),
                None => {
                    found = [ipv4_in(s), ipv6_in(s), mac_in(s), guid_in(s)].concat();
                    found.as_slice()
                }
            };
            for &(a, b) in ranges {
                if let Some((kind, p)) =
                    self.placeholders.get(key_of(Kind::Ipv6, &s[a..b]).as_ref())
                {
                    if kind.is_pattern_only() {
                        candidates.push((a, b, p));
                    }
                }
            }
        }
        let addresses = candidates.len();
        if let Some(search) = &self.search {
            for m in search.automaton.find_overlapping_iter(s) {
                let (a, b) = (m.start(), m.end());
                let Some((key, kind, p)) = search.patterns.get(m.pattern().as_usize()) else {
                    continue;
                };
                let text = &s[a..b];
                if !kind.ignores_case() && text != key {
                    continue;
                }
                let here = match kind {
                    Kind::Uuid | Kind::Snapshot => true,
                    Kind::Path => path_stands_alone(s, a, b),
                    Kind::Host if is_distinctive_host(key) => {
                        stands_alone_or_port(s, a, b)
                            || (variant_on(s[..a].chars().rev()) && variant_on(s[b..].chars()))
                    }
                    _ => stands_alone_or_port(s, a, b),
                };
                if here {
                    candidates.push((a, b, p));
                }
            }
        }
        if candidates.is_empty() {
            return s.to_string();
        }
        if candidates.len() == addresses && self.addresses.contains_key(s) {
            // Only the addresses collecting found: in order, none overlapping.
            return splice(s, candidates.iter().map(|&(a, b, p)| (a, (b, p))));
        }
        // Longest first; of two as long, the first in the text. Taken occurrences never
        // overlap, so one before and one after say whether another would.
        candidates.sort_by_key(|&(a, b, _)| (std::cmp::Reverse(b - a), a));
        let mut taken: BTreeMap<usize, (usize, &str)> = BTreeMap::new();
        for (a, b, p) in candidates {
            let before = taken
                .range(..=a)
                .next_back()
                .is_some_and(|(_, (end, _))| *end > a);
            let after = taken.range(a..).next().is_some_and(|(start, _)| *start < b);
            if !before && !after {
                taken.insert(a, (b, p));
            }
        }
        splice(s, taken)
    }
}

/// `s` with each range (start, (end, placeholder)), in order and none overlapping, replaced.
fn splice<'a>(s: &str, ranges: impl IntoIterator<Item = (usize, (usize, &'a str))>) -> String {
    let mut out = String::with_capacity(s.len());
    let mut last = 0;
    for (a, (b, p)) in ranges {
        out.push_str(&s[last..a]);
        out.push_str(p);
        last = b;
    }
    out.push_str(&s[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Finding, Status};
    use crate::policy::Policy;
    use crate::testing::Machine;
    use crate::Reading;

    /// A report of a healthy 2-GPU machine with the given hostname, UUIDs and serials, and
    /// one extra finding per message given. Its kernel and driver name no builder (`user@host`,
    /// which [`builders_of_the_kernel_and_the_driver_are_a_user_and_a_host`] redacts), so that
    /// the tests' values are numbered from 1.
    fn report(host: &str, ids: &[(&str, &str)], messages: &[&str]) -> Report {
        let facts = Machine::healthy("h200-sxm-141gb", ids.len() as u32)
            .with(|f| {
                f.machine.kernel = Reading::Value("Linux version 6.8.0-60-generic".into());
                f.driver.proc_version = Reading::Value("NVRM version: 580.159.04".into());
            })
            .build();
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
        // A host's name with a digit or a hyphen in it is that host's in a longer name too.
        assert_eq!(
            red.redact_text("/home/alice/reports/node17.json").unwrap(),
            "/home/user-1/reports/host-1.json"
        );
        assert_eq!(red.redact_text("node17").unwrap(), "host-1");
        assert_eq!(
            red.redact_text("/home/carol/node170.json").unwrap(),
            "/home/user-2/node170.json"
        );
        assert_eq!(red.redact_text("/tmp/a.json").unwrap(), "/tmp/a.json");
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
            "/data is on /mnt (nfs4 from host-2:/export); host-3:/path-1"
        );
        assert_eq!(one("sshfs alice@box:/data"), "sshfs user-1@host-2:/data");
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
        // node10 was not known when a was redacted: it is not node1; node1-b is a name of
        // node1's (a second audit's file, an interface's name).
        assert_eq!(
            last_message(&ra),
            "host-1 and node10 and host-1-b and host-1."
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

    /// Redacted with a fresh redactor: the messages of the extra findings, in order.
    fn messages(r: &Report, n: usize) -> Vec<String> {
        let out = Redactor::new().redact(r).unwrap();
        let len = out.findings.len();
        out.findings[len - n..]
            .iter()
            .map(|f| f.message.clone())
            .collect()
    }

    #[test]
    fn a_file_stem_with_a_suffix_is_its_hosts() {
        let mut red = Redactor::new();
        red.redact(&report("gpu-node-17", &[(U0, "1")], &[]))
            .unwrap();
        assert_eq!(red.redact_text("gpu-node-17-b").unwrap(), "host-1-b");
        assert_eq!(red.redact_text("gpu-node-17_2").unwrap(), "host-1_2");
        assert_eq!(red.redact_text("old-gpu-node-17").unwrap(), "old-host-1");
        // Another host's name that only begins the same stays.
        assert_eq!(red.redact_text("gpu-node-170").unwrap(), "gpu-node-170");
    }

    #[test]
    fn a_hosts_variants_are_the_host_but_a_word_stays_a_word() {
        let r = report(
            "gpu-node-17",
            &[(U0, "1")],
            &["gpu-node-17-ib0 up, bmc-gpu-node-17 and gpu-node-17.corp.example.com"],
        );
        assert_eq!(
            messages(&r, 1),
            ["host-1-ib0 up, bmc-host-1 and host-1.corp.example.com"]
        );
        // A host named as a word (no digit, no hyphen) is replaced where it stands alone.
        let r = report(
            "nvidia",
            &[(U0, "1")],
            &["nvidia-smi on nvidia, nvidia_uvm"],
        );
        assert_eq!(messages(&r, 1), ["nvidia-smi on host-1, nvidia_uvm"]);
    }

    #[test]
    fn a_hostname_in_upper_case_is_the_same_host() {
        let r = report(
            "gpu-node-17.corp.example.com",
            &[(U0, "1")],
            &["GPU-NODE-17.CORP.EXAMPLE.COM, Gpu-Node-17 and GPU-NODE-17-IB0"],
        );
        assert_eq!(messages(&r, 1), ["host-1, host-1 and host-1-IB0"]);
    }

    #[test]
    fn an_ipv4_address_mapped_into_ipv6_is_the_ipv4_address() {
        assert_eq!(
            one("peer ::ffff:10.4.0.35 and [::FFFF:10.4.0.35]:8888 is 10.4.0.35"),
            "peer ::ffff:ipv4-1 and [::FFFF:ipv4-1]:8888 is ipv4-1"
        );
        assert_eq!(one("::ffff:127.0.0.1"), "::ffff:127.0.0.1");
    }

    #[test]
    fn a_known_uuid_without_its_prefix_or_in_upper_case_is_the_same_uuid() {
        let bare = &U0["GPU-".len()..];
        let upper = U0.to_ascii_uppercase();
        assert_eq!(
            one(&format!("cuda uuid {bare}; {upper}")),
            "cuda uuid 00000000-0000-0000-ffff-000000000001; GPU-00000000-0000-0000-ffff-000000000001"
        );
        // A UUID no field names (an Azure VM id, a file system's) is one by its shape; the
        // nil UUID names nothing.
        assert_eq!(
            one("vmId 8a9c2e4f-3b1d-4c6e-9f2a-1b3c5d7e9f0a; nil 00000000-0000-0000-0000-000000000000"),
            "vmId 00000000-0000-0000-ffff-000000000002; nil 00000000-0000-0000-0000-000000000000"
        );
    }

    #[test]
    fn e_mail_addresses_are_replaced_whole() {
        assert_eq!(
            one("ask alice@example.com or Bob.Smith+gpu@corp.example.co.uk (ALICE@EXAMPLE.COM)."),
            "ask email-1 or email-2 (email-1)."
        );
    }

    #[test]
    fn builders_of_the_kernel_and_the_driver_are_a_user_and_a_host() {
        let facts = Machine::healthy("h200-sxm-141gb", 1)
            .with(|f| {
                f.machine.kernel = Reading::Value(
                    "Linux version 6.8.0-60-generic (buildd@lcy02-amd64-080) (gcc 13.3.0) #63"
                        .into(),
                )
            })
            .build();
        let mut r = Report::build(&facts, &Policy::default());
        r.findings.push(Finding::info(
            "net.fabric",
            "root@node9 and sshfs carol@box:/data",
        ));
        let out = Redactor::new().redact(&r).unwrap();
        let kernel = out.machine.kernel.unwrap_or_default();
        assert!(
            kernel.starts_with("Linux version 6.8.0-60-generic (user-"),
            "{kernel}"
        );
        assert!(
            !kernel.contains("buildd") && !kernel.contains("lcy02"),
            "{kernel}"
        );
        assert!(kernel.ends_with(") (gcc 13.3.0) #63"), "{kernel}");
        let m = &out.findings.last().unwrap().message;
        // root names nobody; the hosts are hosts.
        assert!(
            m.starts_with("root@host-") && m.contains(" and sshfs user-"),
            "{m}"
        );
        assert!(
            !m.contains("node9") && !m.contains("carol") && !m.contains("box"),
            "{m}"
        );
        // No domain: not an e-mail address; a package pinned to a version is no user.
        assert_eq!(one("pip install torch@2.1.0"), "pip install torch@2.1.0");
    }

    #[test]
    fn cloud_instance_ids_are_replaced() {
        assert_eq!(
            one("instance i-0abc1234def567890 (was i-0abc1234); api-0abc1234 stays"),
            "instance instance-1 (was instance-2); api-0abc1234 stays"
        );
    }

    #[test]
    fn data_directories_and_exported_paths_are_private_and_generic_paths_are_not() {
        let mut r = report(
            "n1",
            &[(U0, "1")],
            &[
                "/mnt/customer-x/train is on /mnt/customer-x (nfs4 from nas01:/export/customer-x)",
                "10.0.0.2:/vol/team-y, /mnt/customer-x/train/shard0, /mnt/customer-xy",
                "/data is on / (ext4 from /dev/nvme0n1); nas01:/export; /root/.cache/torch",
            ],
        );
        r.findings.push(
            Finding::pass("storage.mounts", "x")
                .with("path", "/mnt/customer-x/train")
                .with("mountpoint", "/mnt/customer-x"),
        );
        r.findings.push(
            Finding::pass("storage.mounts", "y")
                .with("path", "/data")
                .with("mountpoint", "/"),
        );
        r.findings
            .push(Finding::info("storage.mounts", "z").with("path", "/root/.cache/torch"));
        let out = Redactor::new().redact(&r).unwrap();
        let n = out.findings.len();
        let m: Vec<&str> = out.findings[n - 6..n - 3]
            .iter()
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(
            m,
            [
                "/path-1 is on /path-2 (nfs4 from host-2:/path-3)",
                "ipv4-1:/path-4, /path-1/shard0, /mnt/customer-xy",
                "/data is on / (ext4 from /dev/nvme0n1); host-2:/export; /root/.cache/torch",
            ]
        );
        assert_eq!(out.findings[n - 3].evidence.get("path").unwrap(), "/path-1");
        assert_eq!(
            out.findings[n - 3].evidence.get("mountpoint").unwrap(),
            "/path-2"
        );
        assert_eq!(out.findings[n - 2].evidence.get("path").unwrap(), "/data");
        assert_eq!(
            out.findings[n - 1].evidence.get("path").unwrap(),
            "/root/.cache/torch"
        );
    }

    #[test]
    fn board_part_numbers_stay() {
        let mut r = report("n1", &[(U0, "1")], &["board 692-2G520-0200-000"]);
        r.gpus[0].board_part_number = Some("692-2G520-0200-000".into());
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(
            out.gpus[0].board_part_number.as_deref(),
            Some("692-2G520-0200-000")
        );
        assert_eq!(last_message(&out), "board 692-2G520-0200-000");
    }

    #[test]
    fn every_new_kind_redacted_twice_is_redacted_once() {
        let mut r = report(
            "gpu-node-17.corp.example.com",
            &[(U0, "1653824017950")],
            &[&format!(
                "GPU-NODE-17-ib0 ::ffff:10.4.0.35 {} a@b.example.com buildd@lcy02 \
                 i-0abc1234def567890 nas01:/export/x 8a9c2e4f-3b1d-4c6e-9f2a-1b3c5d7e9f0a",
                &U0[4..]
            )],
        );
        r.findings
            .push(Finding::pass("storage.mounts", "x").with("path", "/mnt/p"));
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
    fn a_value_new_to_a_redacted_report_gets_a_number_its_placeholders_do_not_have() {
        // Redacted by an older gpuaudit that kept the kernel's builder: host-1 is the machine.
        let mut r = report("n1", &[(U0, "1653824017950")], &["on host-3 and ipv4-2"]);
        r.machine.hostname = Some("host-1".into());
        r.machine.kernel = Some("Linux version 6.8.0 (builder@sandboxing) #1".into());
        r.findings
            .push(Finding::info("net.fabric", "10.1.2.3 and /home/alice/"));
        let out = Redactor::new().redact(&r).unwrap();
        assert_eq!(out.machine.hostname.as_deref(), Some("host-1"));
        assert_eq!(
            out.machine.kernel.as_deref(),
            Some("Linux version 6.8.0 (user-1@host-4) #1")
        );
        assert_eq!(last_message(&out), "ipv4-3 and /home/user-2/");
    }

    #[test]
    fn a_message_of_60000_addresses_is_redacted_whole() {
        // Every value was once searched for on its own, over the whole text: 14 s for this
        // message. Now one pass of the automaton and of each pattern; the test pins that all
        // of them are replaced, numbered in order, with the text between kept.
        let text: Vec<String> = (0..60_000u32)
            .map(|i| format!("10.{}.{}.{}", 1 + i / 65536, (i / 256) % 256, i % 256))
            .collect();
        let r = report("n1", &[(U0, "1")], &[&text.join(" ")]);
        let out = Redactor::new().redact(&r).unwrap();
        let want: Vec<String> = (1..=60_000).map(|n| format!("ipv4-{n}")).collect();
        assert!(
            last_message(&out) == want.join(" "),
            "not every address replaced in order"
        );
        // As many values found by search (user names of home directories), each named twice.
        let homes: Vec<String> = (0..30_000).map(|i| format!("/home/u{i}/")).collect();
        let homes = homes.join(" ");
        let r = report("n1", &[(U0, "1")], &[&format!("{homes} {homes}")]);
        let out = Redactor::new().redact(&r).unwrap();
        let want: Vec<String> = (1..=30_000).map(|n| format!("/home/user-{n}/")).collect();
        let want = want.join(" ");
        assert!(
            last_message(&out) == format!("{want} {want}"),
            "not every user replaced"
        );
    }
}
