//! sshd's configuration (with its Include files) and the authorized_keys of root and /home.

use crate::root::RootFs;
use crate::root::{abs, normalize, rel};
use gpuaudit_core::facts::{AuthorizedKey, SshFacts, SshdConfig};
use gpuaudit_core::parse::host::listing::{format_keys, parse_keys};
use gpuaudit_core::parse::host::sshd::{
    expand_keys_file, fold, key_bits, parse_key_line, parse_sshd_file, reduce_file, Directive,
};
use gpuaudit_core::reading::Reading;

pub const SSHD: &str = "etc/ssh/sshd_config";
pub const KEYS_FILE: &str = "cmd/authorized-keys.txt";

/// (file as a machine path, its directives, its bad line numbers): the pieces of the
/// configuration in the order sshd reads them, Includes expanded in place.
pub type Segment = (String, Vec<Directive>, Vec<usize>);

/// The most files one configuration may pull in through Include (sshd_config.d of a real
/// machine holds a handful): an Include of its own directory, or a tree of them, is refused
/// past this, instead of reading millions of files.
pub const MAX_INCLUDED_FILES: usize = 256;

/// An Include chain deeper than this is not followed further (sshd's own limit is 16).
const MAX_INCLUDE_DEPTH: usize = 4;

/// The Include expansion in progress: which files were read, how many.
struct Expansion {
    /// Root-relative files already expanded: each is read once (a second Include of it adds
    /// nothing, as the first value of a keyword wins).
    visited: std::collections::HashSet<String>,
    out: Vec<Segment>,
}

fn expand(root: &RootFs, file_rel: &str, depth: usize, x: &mut Expansion) -> Result<(), String> {
    let file_rel = normalize(file_rel);
    if !x.visited.insert(file_rel.clone()) {
        return Ok(());
    }
    if x.visited.len() > MAX_INCLUDED_FILES {
        return Err(format!(
            "{}: Include pulls in more than {MAX_INCLUDED_FILES} files; not read",
            abs(SSHD)
        ));
    }
    let text = match root.read_text(&file_rel)? {
        Some(t) => t,
        None => return Ok(()),
    };
    let (directives, bad) =
        parse_sshd_file(&text).map_err(|e| format!("{}: {e}", abs(&file_rel)))?;
    let mut current: Vec<Directive> = Vec::new();
    let mut bad = Some(bad);
    for d in directives {
        if d.1 != "include" {
            current.push(d);
            continue;
        }
        x.out.push((
            abs(&file_rel),
            std::mem::take(&mut current),
            bad.take().unwrap_or_default(),
        ));
        if depth >= MAX_INCLUDE_DEPTH {
            continue;
        }
        for pattern in d.2.split_whitespace() {
            // Relative to /etc/ssh, as sshd reads it; resolved inside the root either way
            // ("../../../etc/shadow" stops at the root's /etc/shadow).
            let p = if pattern.starts_with('/') {
                rel(pattern)
            } else {
                format!("etc/ssh/{pattern}")
            };
            for f in root.glob(&p, MAX_INCLUDED_FILES + 1) {
                expand(root, &f, depth + 1, x)?;
            }
        }
    }
    x.out
        .push((abs(&file_rel), current, bad.take().unwrap_or_default()));
    Ok(())
}

/// The segments of sshd's configuration; `Ok(None)` when there is no sshd_config.
pub fn segments(root: &RootFs) -> Result<Option<Vec<Segment>>, String> {
    if root.read_text(SSHD)?.is_none() {
        return Ok(None);
    }
    let mut x = Expansion {
        visited: Default::default(),
        out: Vec::new(),
    };
    expand(root, SSHD, 0, &mut x)?;
    Ok(Some(x.out))
}

#[cfg(test)]
fn read_sshd(root: &RootFs) -> Reading<Option<SshdConfig>> {
    sshd_of(segments(root))
}

fn sshd_of(segs: Result<Option<Vec<Segment>>, String>) -> Reading<Option<SshdConfig>> {
    match segs {
        Ok(None) => Reading::Value(None),
        Ok(Some(s)) => Reading::Value(Some(fold(&s))),
        Err(e) => Reading::unavailable(e),
    }
}

/// (user, home) of root and of each directory in /home.
fn users(root: &RootFs) -> Vec<(String, String)> {
    let mut u = vec![("root".to_string(), "/root".to_string())];
    for h in root.glob("home/*", 256) {
        let name = h.rsplit('/').next().unwrap_or(&h).to_string();
        u.push((name, abs(&h)));
    }
    u
}

/// Parse the real authorized_keys files under the root (key material is read to size RSA keys
/// and dropped).
pub fn keys_from_files(
    root: &RootFs,
    sshd: Option<&SshdConfig>,
) -> Result<Vec<AuthorizedKey>, String> {
    let patterns = sshd
        .and_then(|c| c.get("authorizedkeysfile"))
        .unwrap_or(".ssh/authorized_keys .ssh/authorized_keys2")
        .to_string();
    let mut keys = Vec::new();
    let mut unreadable = Vec::new();
    for (user, home) in users(root) {
        for p in patterns.split_whitespace().filter(|p| *p != "none") {
            let file = expand_keys_file(p, &user, &home);
            match root.read_text(&rel(&file)) {
                Ok(None) => {}
                Ok(Some(t)) => {
                    for line in t.lines() {
                        if let Some(Ok(k)) = parse_key_line(line) {
                            keys.push(AuthorizedKey {
                                file: file.clone(),
                                user: user.clone(),
                                bits: key_bits(&k.key_type, &k.blob),
                                key_type: k.key_type,
                                options: k.options,
                            });
                        }
                    }
                }
                Err(e) => unreadable.push(e),
            }
        }
    }
    if !unreadable.is_empty() {
        return Err(format!(
            "cannot read {} (run as root to check every key)",
            unreadable.join("; ")
        ));
    }
    Ok(keys)
}

pub fn read_keys(root: &RootFs, sshd: Option<&SshdConfig>) -> Reading<Vec<AuthorizedKey>> {
    if !root.is_live() {
        match root.read_text(KEYS_FILE) {
            Ok(Some(t)) => {
                return parse_keys(&t)
                    .map_err(|e| format!("{}: {e}", abs(KEYS_FILE)))
                    .into()
            }
            Err(e) => return Reading::unavailable(e),
            Ok(None) => {}
        }
    }
    keys_from_files(root, sshd).into()
}

/// sshd's configuration and the authorized keys. A snapshot keeps sshd_config and each
/// Include file reduced line by line (line numbers kept: the judged keywords, `Match` and
/// `Include` as written, the rest `Keyword omitted`), and the keys as a listing without key
/// material or comments; the files themselves stay on the machine.
pub fn read(root: &RootFs) -> SshFacts {
    let quiet = root.unrecorded();
    let segs = segments(&quiet);
    match &segs {
        Ok(None) => {}
        Ok(Some(segs)) => {
            let mut done: Vec<&str> = Vec::new();
            for (file, _, _) in segs {
                if done.contains(&file.as_str()) {
                    continue;
                }
                done.push(file);
                if let Ok(Some(t)) = quiet.read_text(&rel(file)) {
                    root.record(&rel(file), reduce_file(&t));
                }
            }
        }
        Err(e) => root.record_mark(SSHD, e),
    }
    let sshd = sshd_of(segs);
    let keys = read_keys(&quiet, sshd.value().and_then(|c| c.as_ref()));
    root.record_reading(KEYS_FILE, &keys, |k| format_keys(k));
    SshFacts {
        sshd,
        authorized_keys: keys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn includes_expand_in_place_and_first_value_wins() {
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("etc/ssh");
        fs::create_dir_all(s.join("sshd_config.d")).unwrap();
        fs::write(s.join("sshd_config"), "Include /etc/ssh/sshd_config.d/*.conf\nPasswordAuthentication yes\nPermitRootLogin yes\n").unwrap();
        fs::write(
            s.join("sshd_config.d/50-cloud-init.conf"),
            "PasswordAuthentication no\n",
        )
        .unwrap();
        let root = RootFs::new(d.path());
        let c = read_sshd(&root).into_value().unwrap().unwrap();
        assert_eq!(c.get("passwordauthentication"), Some("no"));
        assert_eq!(c.get("permitrootlogin"), Some("yes"));
        assert_eq!(
            c.files,
            vec![
                "/etc/ssh/sshd_config",
                "/etc/ssh/sshd_config.d/50-cloud-init.conf"
            ]
        );
        fs::write(s.join("sshd_config.d/50-cloud-init.conf"), "\0\0\0ELF").unwrap();
        let r = read_sshd(&root);
        assert!(
            r.reason()
                .unwrap()
                .starts_with("/etc/ssh/sshd_config.d/50-cloud-init.conf: malformed"),
            "{r:?}"
        );
    }

    #[test]
    fn include_bombs_are_bounded_and_stay_in_the_root() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(
            outside.path().join("passwd"),
            "PasswordAuthentication yes\n",
        )
        .unwrap();
        let d = tempfile::tempdir().unwrap();
        let s = d.path().join("etc/ssh");
        fs::create_dir_all(s.join("sshd_config.d")).unwrap();
        // Every file includes the whole directory, itself included.
        fs::write(
            s.join("sshd_config"),
            "Include /etc/ssh/sshd_config.d/*\nPermitRootLogin no\n",
        )
        .unwrap();
        for i in 0..40 {
            fs::write(
                s.join(format!("sshd_config.d/{i:02}.conf")),
                "Include /etc/ssh/sshd_config.d/*\nInclude sshd_config\nX11Forwarding no\n",
            )
            .unwrap();
        }
        let t0 = std::time::Instant::now();
        let c = read_sshd(&RootFs::new(d.path()))
            .into_value()
            .unwrap()
            .unwrap();
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
        // Each file once.
        assert_eq!(c.files.len(), 41, "{:?}", c.files);
        assert_eq!(c.get("permitrootlogin"), Some("no"));
        // More files than the limit: refused with the reason, not read for minutes.
        for i in 40..(MAX_INCLUDED_FILES + 5) {
            fs::write(
                s.join(format!("sshd_config.d/{i:03}.conf")),
                "X11Forwarding no\n",
            )
            .unwrap();
        }
        let r = read_sshd(&RootFs::new(d.path()));
        assert!(r.reason().unwrap().contains("more than 256 files"), "{r:?}");
        // An Include that climbs out of the root, or names a file outside it, reads the root's
        // own files: the real one never decides the verdict.
        let rel_up = "../".repeat(12) + &outside.path().join("passwd").to_string_lossy();
        fs::write(
            s.join("sshd_config"),
            format!(
                "Include {rel_up}\nInclude {}\n",
                outside.path().join("passwd").display()
            ),
        )
        .unwrap();
        fs::remove_dir_all(s.join("sshd_config.d")).unwrap();
        let c = read_sshd(&RootFs::new(d.path()))
            .into_value()
            .unwrap()
            .unwrap();
        assert_eq!(c.get("passwordauthentication"), None, "{c:?}");
        assert_eq!(c.files, vec!["/etc/ssh/sshd_config"]);
    }

    #[test]
    fn keys_are_read_without_material() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("root/.ssh")).unwrap();
        fs::write(
            d.path().join("root/.ssh/authorized_keys"),
            "# comment\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA me@laptop\nfrom=\"10.0.0.1\",no-pty ssh-ed25519 AAAA ci\ngarbage\n",
        )
        .unwrap();
        fs::create_dir_all(d.path().join("home/ann")).unwrap();
        let root = RootFs::new(d.path());
        let k = keys_from_files(&root, None).unwrap();
        assert_eq!(k.len(), 2);
        assert_eq!(k[0].user, "root");
        assert!(!k[0].is_restricted());
        assert!(k[1].is_restricted());
        assert_eq!(k[1].options, vec!["from", "no-pty"]);
    }
}
