//! Parsers for the host around the GPU: the mount table, the loader's cache, library file
//! names, Python installs, container runtime configuration, sshd, Jupyter, RDMA, and the
//! listing files a snapshot carries for what is not a plain file (symbolic-link targets,
//! device nodes, redacted authorized_keys).
//!
//! Each is a pure function of its input and never panics, whatever the bytes.

pub mod container;
pub mod cudaenv;
pub mod fabric;
pub mod graphics;
pub mod jupyter;
pub mod ldcache;
pub mod libs;
pub mod listing;
pub mod mounts;
pub mod python;
pub mod sshd;

/// Binary content (NUL bytes, or mostly undecodable text) in what should be a text file.
pub(crate) fn looks_binary(text: &str) -> bool {
    if text.contains('\0') {
        return true;
    }
    let total = text.chars().count();
    let bad = text
        .chars()
        .filter(|c| *c == char::REPLACEMENT_CHARACTER || (c.is_control() && !c.is_whitespace()))
        .count();
    total > 0 && bad * 10 > total
}

/// At most `n` characters of `s`, with "..." where it was cut (for quoting bad input in
/// messages).
pub fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}...", s.chars().take(n).collect::<String>())
    }
}
