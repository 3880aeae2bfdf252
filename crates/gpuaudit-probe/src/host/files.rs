//! Reading under the root with machine paths in every message, and the marker a snapshot
//! uses for a file that could not be read where it was collected.

use crate::root::{RootFs, MAX_FILE_BYTES};
use std::fs;
use std::io::{ErrorKind, Read};

/// A snapshot file that starts with this line stands for a file the live audit could not use;
/// the rest of the file is the reason, which the audit reports as is. `collect` writes it
/// where copying the file would leak secrets or where the file could not be read.
pub const UNREADABLE_MARK: &str = "# gpuaudit-unreadable: ";

/// "/etc/ssh/sshd_config" for "etc/ssh/sshd_config": the machine's path. The snapshot's own
/// `cmd/` files have no machine path and stay as they are named in the snapshot.
pub fn abs(rel: &str) -> String {
    let r = rel.trim_start_matches('/');
    if r.starts_with("cmd/") {
        r.to_string()
    } else {
        format!("/{r}")
    }
}

/// "etc/ssh/sshd_config" for "/etc/ssh/sshd_config".
pub fn rel(abs: &str) -> String {
    abs.trim_start_matches('/').to_string()
}

fn reason(e: &std::io::Error) -> String {
    match e.kind() {
        ErrorKind::NotFound => "no such file".into(),
        ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// The file as text. `Ok(None)`: it does not exist. `Err`: "/path: why" (also for a snapshot's
/// unreadable marker, whose reason is passed on as written).
pub fn read_text(root: &RootFs, rel: &str) -> Result<Option<String>, String> {
    match read_bytes(root, rel)? {
        None => Ok(None),
        Some(b) => {
            let t = String::from_utf8_lossy(&b).into_owned();
            if let Some(r) = t.strip_prefix(UNREADABLE_MARK) {
                return Err(r.trim().to_string());
            }
            Ok(Some(t))
        }
    }
}

/// The file's bytes, at most [`MAX_FILE_BYTES`].
pub fn read_bytes(root: &RootFs, rel: &str) -> Result<Option<Vec<u8>>, String> {
    let p = root.path(rel);
    let f = match fs::File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {}", abs(rel), reason(&e))),
    };
    let mut buf = Vec::new();
    f.take(MAX_FILE_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| format!("{}: {}", abs(rel), reason(&e)))?;
    Ok(Some(buf))
}

/// Names in a directory, sorted; an empty list where it does not exist or cannot be read.
pub fn children(root: &RootFs, rel: &str) -> Vec<String> {
    root.list(rel).unwrap_or_default()
}

/// Whether a path exists (following links) and can be looked at: what an unprivileged run
/// cannot see (another user's home) counts as absent, as it does for every program that run
/// starts.
pub fn exists(root: &RootFs, rel: &str) -> bool {
    fs::metadata(root.path(rel)).is_ok()
}

/// `rel` joined with a name.
pub fn join(rel: &str, name: &str) -> String {
    let r = rel.trim_end_matches('/');
    if r.is_empty() {
        name.to_string()
    } else {
        format!("{r}/{name}")
    }
}

/// Match a file name against a pattern with `*` and `?` (as sshd's Include and shells do).
pub fn wildcard(pattern: &str, name: &str) -> bool {
    fn m(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => m(&p[1..], n) || (!n.is_empty() && m(p, &n[1..])),
            (Some('?'), Some(_)) => m(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => m(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Long names against many stars could be slow; names here are short file names.
    n.len() <= 255 && m(&p, &n)
}

/// Expand a path pattern whose components may hold wildcards ("etc/ssh/sshd_config.d/*.conf",
/// "home/*/.jupyter"), sorted; at most `limit` results.
pub fn glob(root: &RootFs, pattern: &str, limit: usize) -> Vec<String> {
    let mut current = vec![String::new()];
    for comp in pattern
        .trim_start_matches('/')
        .split('/')
        .filter(|c| !c.is_empty())
    {
        let mut next = Vec::new();
        for base in &current {
            if comp.contains(['*', '?']) {
                for name in children(root, base) {
                    // Like a shell, '*' does not match hidden names.
                    let visible = !name.starts_with('.') || comp.starts_with('.');
                    if visible && wildcard(comp, &name) {
                        next.push(join(base, &name));
                    }
                }
            } else {
                let p = join(base, comp);
                if exists(root, &p) {
                    next.push(p);
                }
            }
            if next.len() >= limit {
                break;
            }
        }
        next.truncate(limit);
        current = next;
        if current.is_empty() {
            break;
        }
    }
    current.sort();
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_and_glob() {
        assert!(wildcard("*.conf", "50-cloud-init.conf"));
        assert!(!wildcard("*.conf", "x.conf.bak"));
        assert!(wildcard("python3*", "python3.12"));
        assert!(wildcard("a?c", "abc"));
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("etc/ssh/sshd_config.d")).unwrap();
        std::fs::write(d.path().join("etc/ssh/sshd_config.d/b.conf"), "x").unwrap();
        std::fs::write(d.path().join("etc/ssh/sshd_config.d/a.conf"), "x").unwrap();
        std::fs::write(d.path().join("etc/ssh/sshd_config.d/.hidden.conf"), "x").unwrap();
        let r = RootFs::new(d.path());
        assert_eq!(
            glob(&r, "/etc/ssh/sshd_config.d/*.conf", 10),
            vec![
                "etc/ssh/sshd_config.d/a.conf",
                "etc/ssh/sshd_config.d/b.conf"
            ]
        );
        assert_eq!(glob(&r, "etc/nothing/*", 10), Vec::<String>::new());
        assert_eq!(glob(&r, "etc/ssh/sshd_config.d/*.conf", 1).len(), 1);
    }

    #[test]
    fn marker_and_missing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("x"),
            format!("{UNREADABLE_MARK}/etc/x: permission denied\n"),
        )
        .unwrap();
        let r = RootFs::new(d.path());
        assert_eq!(read_text(&r, "x").unwrap_err(), "/etc/x: permission denied");
        assert_eq!(read_text(&r, "missing").unwrap(), None);
    }
}
