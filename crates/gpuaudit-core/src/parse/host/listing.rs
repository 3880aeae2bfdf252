//! The listing files a snapshot carries for what cannot be copied as a plain file: where the
//! CUDA libraries resolve through symbolic links, the /dev/nvidia* nodes, authorized_keys
//! without their keys, the audit's identity, the environment variables read, and the data
//! directories.
//!
//! Each format has a writer and a parser, and `parse(format(x)) == x` (tested), so the audit of
//! a snapshot sees exactly what the live audit saw. Tab-separated fields escape `\`, tab and
//! newline as `\\`, `\t`, `\n`.

use crate::facts::{AuthorizedKey, DataDir, DeviceNode, EnvFacts, LibraryCopy, LibrarySource};
use crate::parse::ParseError;

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\t' => o.push_str("\\t"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            c => o.push(c),
        }
    }
    o
}

fn unesc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            o.push(c);
            continue;
        }
        match it.next() {
            Some('t') => o.push('\t'),
            Some('n') => o.push('\n'),
            Some('r') => o.push('\r'),
            Some('\\') => o.push('\\'),
            Some(x) => {
                o.push('\\');
                o.push(x);
            }
            None => o.push('\\'),
        }
    }
    o
}

fn rows(text: &str) -> impl Iterator<Item = (usize, Vec<String>)> + '_ {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i + 1, l.split('\t').map(unesc).collect()))
}

fn opt(s: &str) -> Option<String> {
    (s != "-" && !s.is_empty()).then(|| s.to_string())
}

fn dash(s: &Option<String>) -> String {
    s.as_deref().map(esc).unwrap_or_else(|| "-".into())
}

pub const LIBRARIES_HEADER: &str =
    "# gpuaudit cuda-libraries/1: source<TAB>path<TAB>resolved file<TAB>version (- unknown)";

/// `cmd/cuda-libraries.txt`.
pub fn format_libraries(copies: &[LibraryCopy]) -> String {
    let mut s = format!("{LIBRARIES_HEADER}\n");
    for c in copies {
        s.push_str(&format!(
            "{}\t{}\t{}\t{}\n",
            esc(&c.source.label()),
            esc(&c.path),
            esc(&c.file),
            dash(&c.version)
        ));
    }
    s
}

pub fn parse_libraries(text: &str) -> Result<Vec<LibraryCopy>, ParseError> {
    if crate::parse::host::looks_binary(text) {
        return Err(ParseError::Malformed("binary content".into()));
    }
    let mut out = Vec::new();
    for (n, f) in rows(text) {
        if f.len() < 4 {
            return Err(ParseError::Malformed(format!(
                "line {n}: expected 4 tab-separated fields"
            )));
        }
        let source = LibrarySource::from_label(&f[0])
            .ok_or_else(|| ParseError::Malformed(format!("line {n}: unknown source '{}'", f[0])))?;
        let library = super::libs::library_of(&f[2])
            .or_else(|| f[1].rsplit('/').next().and_then(super::libs::library_of))
            .map(|(l, _)| l)
            .ok_or_else(|| {
                ParseError::Malformed(format!("line {n}: '{}' is not a CUDA library", f[2]))
            })?;
        out.push(LibraryCopy {
            library: library.to_string(),
            path: f[1].clone(),
            file: f[2].clone(),
            version: opt(&f[3]),
            source,
        });
    }
    Ok(out)
}

pub const DEVICES_HEADER: &str =
    "# gpuaudit dev-nodes/1: path<TAB>mode (octal)<TAB>uid<TAB>gid<TAB>type (c: character device, f: other)";

/// `cmd/dev-nodes.txt`.
pub fn format_devices(nodes: &[DeviceNode]) -> String {
    let mut s = format!("{DEVICES_HEADER}\n");
    for d in nodes {
        s.push_str(&format!(
            "{}\t{:o}\t{}\t{}\t{}\n",
            esc(&d.path),
            d.mode,
            d.uid,
            d.gid,
            if d.char_device { "c" } else { "f" }
        ));
    }
    s
}

pub fn parse_devices(text: &str) -> Result<Vec<DeviceNode>, ParseError> {
    let mut out = Vec::new();
    for (n, f) in rows(text) {
        let bad =
            || ParseError::Malformed(format!("line {n}: expected path, mode, uid, gid, type"));
        if f.len() < 5 {
            return Err(bad());
        }
        out.push(DeviceNode {
            path: f[0].clone(),
            mode: u32::from_str_radix(f[1].trim(), 8).map_err(|_| bad())?,
            uid: f[2].trim().parse().map_err(|_| bad())?,
            gid: f[3].trim().parse().map_err(|_| bad())?,
            char_device: f[4].trim() == "c",
        });
    }
    Ok(out)
}

pub const KEYS_HEADER: &str = "# gpuaudit authorized-keys/1: file<TAB>user<TAB>key type<TAB>bits (- unknown)<TAB>option names (comma-separated); no key material, no comments";

/// `cmd/authorized-keys.txt`.
pub fn format_keys(keys: &[AuthorizedKey]) -> String {
    let mut s = format!("{KEYS_HEADER}\n");
    for k in keys {
        s.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            esc(&k.file),
            esc(&k.user),
            esc(&k.key_type),
            k.bits.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
            esc(&k.options.join(","))
        ));
    }
    s
}

pub fn parse_keys(text: &str) -> Result<Vec<AuthorizedKey>, ParseError> {
    let mut out = Vec::new();
    for (n, f) in rows(text) {
        if f.len() < 4 {
            return Err(ParseError::Malformed(format!(
                "line {n}: expected file, user, key type, bits, options"
            )));
        }
        out.push(AuthorizedKey {
            file: f[0].clone(),
            user: f[1].clone(),
            key_type: f[2].clone(),
            bits: f[3].trim().parse().ok(),
            options: f
                .get(4)
                .map(|o| {
                    o.split(',')
                        .map(str::trim)
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    Ok(out)
}

/// `cmd/id.txt`: "uid=1000 gid=1000 groups=1000,44", or the output of `id`
/// ("uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)").
pub fn format_identity(uid: u32, groups: &[u32]) -> String {
    let g: Vec<String> = groups.iter().map(u32::to_string).collect();
    format!(
        "uid={uid} gid={} groups={}\n",
        groups.first().copied().unwrap_or(uid),
        g.join(",")
    )
}

pub fn parse_identity(text: &str) -> Result<(u32, Vec<u32>), ParseError> {
    let num = |s: &str| {
        s.split('(')
            .next()
            .and_then(|n| n.trim().parse::<u32>().ok())
    };
    let mut uid = None;
    let mut groups: Vec<u32> = Vec::new();
    let mut gid = None;
    for tok in text.split_whitespace() {
        if let Some(v) = tok.strip_prefix("uid=") {
            uid = num(v);
        } else if let Some(v) = tok.strip_prefix("gid=") {
            gid = num(v);
        } else if let Some(v) = tok.strip_prefix("groups=") {
            groups = v.split(',').filter_map(num).collect();
        }
    }
    let uid = uid.ok_or_else(|| ParseError::Malformed("no uid=".into()))?;
    if let Some(g) = gid {
        if !groups.contains(&g) {
            groups.insert(0, g);
        }
    }
    Ok((uid, groups))
}

/// `cmd/env.json`: `{"NAME": "value", ...}` with only the variables gpuaudit reads.
pub fn format_env(env: &EnvFacts) -> String {
    let mut m = serde_json::Map::new();
    for (k, v) in &env.vars {
        m.insert(k.clone(), serde_json::Value::String(v.clone()));
    }
    serde_json::to_string_pretty(&serde_json::Value::Object(m)).unwrap_or_else(|_| "{}".into())
        + "\n"
}

pub fn parse_env(text: &str) -> Result<EnvFacts, ParseError> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ParseError::Malformed(format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| ParseError::Malformed("not a JSON object".into()))?;
    let mut vars: Vec<(String, String)> = obj
        .iter()
        .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
        .filter(|(k, _)| super::cudaenv::is_read_variable(k))
        .collect();
    vars.sort();
    Ok(EnvFacts { vars })
}

/// `cmd/data-dirs.json`: the data directories the collecting run looked at.
pub fn format_data_dirs(dirs: &[DataDir]) -> String {
    serde_json::to_string_pretty(dirs).unwrap_or_else(|_| "[]".into()) + "\n"
}

pub fn parse_data_dirs(text: &str) -> Result<Vec<DataDir>, ParseError> {
    serde_json::from_str(text)
        .map_err(|e| ParseError::Malformed(format!("not a data-dir list: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reading::Reading;

    #[test]
    fn libraries_round_trip() {
        let c = vec![
            LibraryCopy {
                library: "libnccl".into(),
                path: "/opt/my\tdir/libnccl.so.2".into(),
                file: "libnccl.so.2.18.1".into(),
                version: Some("2.18.1".into()),
                source: LibrarySource::LdLibraryPath,
            },
            LibraryCopy {
                library: "libnccl".into(),
                path: "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2".into(),
                file: "libnccl.so.2".into(),
                version: Some("2.21.5".into()),
                source: LibrarySource::Wheel {
                    package: "nvidia-nccl-cu12".into(),
                },
            },
            LibraryCopy {
                library: "libcuda".into(),
                path: "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into(),
                file: "libcuda.so.1".into(),
                version: None,
                source: LibrarySource::LdCache,
            },
        ];
        assert_eq!(parse_libraries(&format_libraries(&c)).unwrap(), c);
        assert!(parse_libraries("ld.so.cache\t/x/libfoo.so\tlibfoo.so\t-\n").is_err());
        assert!(parse_libraries("bogus\t/x/libnccl.so\tlibnccl.so\t-\n").is_err());
        assert!(parse_libraries("only\ttwo\n").is_err());
    }

    #[test]
    fn devices_keys_identity_round_trip() {
        let d = vec![DeviceNode {
            path: "/dev/nvidia0".into(),
            mode: 0o666,
            uid: 0,
            gid: 0,
            char_device: true,
        }];
        assert_eq!(parse_devices(&format_devices(&d)).unwrap(), d);
        assert!(parse_devices("/dev/nvidia0\t999\t0\t0\tc\n").is_err());
        let k = vec![AuthorizedKey {
            file: "/root/.ssh/authorized_keys".into(),
            user: "root".into(),
            key_type: "ssh-rsa".into(),
            bits: Some(1024),
            options: vec!["from".into(), "no-pty".into()],
        }];
        assert_eq!(parse_keys(&format_keys(&k)).unwrap(), k);
        assert_eq!(
            parse_identity(&format_identity(1000, &[1000, 44])).unwrap(),
            (1000, vec![1000, 44])
        );
        assert_eq!(
            parse_identity("uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)").unwrap(),
            (1000, vec![1000, 44])
        );
        assert!(parse_identity("garbage").is_err());
    }

    #[test]
    fn env_round_trip_keeps_only_read_variables() {
        let e = EnvFacts {
            vars: vec![
                ("CUDA_VISIBLE_DEVICES".into(), "0".into()),
                ("LD_LIBRARY_PATH".into(), "/a:/b".into()),
            ],
        };
        assert_eq!(parse_env(&format_env(&e)).unwrap(), e);
        let p = parse_env(r#"{"AWS_SECRET_ACCESS_KEY": "x", "NCCL_DEBUG": "INFO"}"#).unwrap();
        assert_eq!(p.vars, vec![("NCCL_DEBUG".to_string(), "INFO".to_string())]);
        assert!(parse_env("not json").is_err());
        assert!(parse_env("[1]").is_err());
    }

    #[test]
    fn data_dirs_round_trip() {
        let d = vec![DataDir {
            path: "/data".into(),
            role: "--data-dir".into(),
            exists: true,
            unreadable: None,
            resolved: Some("/mnt/nfs/data".into()),
            writable: Reading::unavailable("not checked"),
        }];
        assert_eq!(parse_data_dirs(&format_data_dirs(&d)).unwrap(), d);
    }
}
