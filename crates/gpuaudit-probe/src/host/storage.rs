//! The mount table and the data directories.

use super::HostOptions;
use crate::root::abs;
use crate::root::RootFs;
use gpuaudit_core::facts::{DataDir, EnvFacts, Mount};
use gpuaudit_core::parse::host::listing::parse_data_dirs;
use gpuaudit_core::parse::host::mounts::{normalize_path, parse_mounts};
use gpuaudit_core::reading::Reading;
use std::path::{Path, PathBuf};

pub const MOUNTS: &str = "proc/mounts";
pub const DATA_DIRS_FILE: &str = "cmd/data-dirs.json";

pub fn read_mounts(root: &RootFs) -> Reading<Vec<Mount>> {
    match root.read_text(MOUNTS) {
        Ok(Some(t)) => parse_mounts(&t)
            .map_err(|e| format!("{}: {e}", abs(MOUNTS)))
            .into(),
        Ok(None) => Reading::unavailable(format!("{}: no such file", abs(MOUNTS))),
        Err(e) => Reading::unavailable(e),
    }
}

/// The Hugging Face hub cache and the torch cache, as those libraries locate them.
pub fn default_caches(env: &EnvFacts) -> Vec<(String, &'static str)> {
    let home = env.get("HOME").filter(|h| !h.is_empty());
    let xdg = env
        .get("XDG_CACHE_HOME")
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .or_else(|| home.map(|h| format!("{}/.cache", h.trim_end_matches('/'))));
    let mut out = Vec::new();
    let hf = env
        .get("HF_HUB_CACHE")
        .or(env.get("HUGGINGFACE_HUB_CACHE"))
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| {
            env.get("HF_HOME")
                .filter(|v| !v.is_empty())
                .map(|h| format!("{}/hub", h.trim_end_matches('/')))
        })
        .or_else(|| xdg.as_ref().map(|x| format!("{x}/huggingface/hub")));
    if let Some(h) = hf {
        out.push((h, "Hugging Face cache"));
    }
    let torch = env
        .get("TORCH_HOME")
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| xdg.as_ref().map(|x| format!("{x}/torch")));
    if let Some(t) = torch {
        out.push((t, "torch cache"));
    }
    out
}

fn live_dir(root: &RootFs, path: &Path, role: &str) -> DataDir {
    let machine_path = path.to_string_lossy();
    let (exists, unreadable) = match root.stat(&machine_path) {
        Ok(found) => (found.is_some(), None),
        Err(why) => (false, Some(why)),
    };
    let resolved = root.real_path(&machine_path);
    let writable = if let Some(why) = &unreadable {
        Reading::Unavailable(why.clone())
    } else if !exists {
        Reading::unavailable("does not exist")
    } else {
        Reading::Value(can_write(path))
    };
    DataDir {
        path: path.to_string_lossy().into_owned(),
        role: role.to_string(),
        exists,
        unreadable,
        resolved,
        writable,
    }
}

/// access(W_OK): this user may create files there (and the file system is not read-only).
pub fn can_write(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

pub fn data_dirs(root: &RootFs, opts: &HostOptions, env: &EnvFacts) -> Reading<Vec<DataDir>> {
    if root.is_live() {
        let cwd = std::env::current_dir().ok();
        if !opts.data_dirs.is_empty() {
            return Reading::Value(
                opts.data_dirs
                    .iter()
                    .map(|p| {
                        let p: PathBuf = match (&cwd, p.is_absolute()) {
                            (Some(c), false) => c.join(p),
                            _ => p.clone(),
                        };
                        live_dir(root, &p, "--data-dir")
                    })
                    .collect(),
            );
        }
        let mut out = Vec::new();
        if let Some(c) = cwd {
            out.push(live_dir(root, &c, "current directory"));
        }
        for (p, role) in default_caches(env) {
            out.push(live_dir(root, Path::new(&p), role));
        }
        return Reading::Value(out);
    }
    let recorded: Result<Vec<DataDir>, String> = match root.read_text(DATA_DIRS_FILE) {
        Ok(Some(t)) => parse_data_dirs(&t).map_err(|e| format!("{}: {e}", abs(DATA_DIRS_FILE))),
        Ok(None) => Err(format!(
            "the snapshot has no {DATA_DIRS_FILE} (the data directories gpuaudit collect looked at); name them with --data-dir"
        )),
        Err(e) => Err(e),
    };
    if opts.data_dirs.is_empty() {
        return recorded.into();
    }
    let recorded = recorded.unwrap_or_default();
    Reading::Value(
        opts.data_dirs
            .iter()
            .map(|p| {
                let given = p.to_string_lossy();
                let path = normalize_path(&format!("/{}", given.trim_start_matches('/')));
                if let Some(d) = recorded.iter().find(|d| d.path == path) {
                    return d.clone();
                }
                let (exists, unreadable) = match root.stat(&path) {
                    Ok(found) => (found.is_some(), None),
                    Err(why) => (false, Some(why)),
                };
                DataDir {
                    exists,
                    unreadable,
                    path,
                    role: "--data-dir".into(),
                    resolved: None,
                    writable: Reading::unavailable("a snapshot: not checked"),
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caches_follow_the_libraries_rules() {
        let env = |v: &[(&str, &str)]| EnvFacts {
            vars: v
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
        };
        assert_eq!(
            default_caches(&env(&[("HOME", "/root")])),
            vec![
                (
                    "/root/.cache/huggingface/hub".to_string(),
                    "Hugging Face cache"
                ),
                ("/root/.cache/torch".to_string(), "torch cache")
            ]
        );
        let c = default_caches(&env(&[
            ("HOME", "/root"),
            ("HF_HOME", "/data/hf"),
            ("TORCH_HOME", "/data/torch"),
        ]));
        assert_eq!(c[0].0, "/data/hf/hub");
        assert_eq!(c[1].0, "/data/torch");
        assert!(default_caches(&env(&[])).is_empty());
    }
}
