//! Jupyter configuration files in the places Jupyter looks for them.

use super::python::Site;
use crate::root::RootFs;
use crate::root::{abs, join, rel};
use gpuaudit_core::facts::{EnvFacts, JupyterConfig};
use gpuaudit_core::parse::host::jupyter::{parse_json, parse_py, reduce, reduce_json};
use gpuaudit_core::reading::Reading;

const NAMES: &[&str] = &[
    "jupyter_server_config",
    "jupyter_notebook_config",
    "jupyter_lab_config",
];

/// Configuration directories, root-relative, without duplicates.
pub fn config_dirs(root: &RootFs, env: &EnvFacts, sites: &[Site]) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    if let Some(d) = env.get("JUPYTER_CONFIG_DIR").filter(|d| d.starts_with('/')) {
        dirs.push(rel(d));
    }
    if let Some(h) = env.get("HOME").filter(|h| h.starts_with('/')) {
        dirs.push(join(&rel(h), ".jupyter"));
    }
    dirs.push("root/.jupyter".into());
    dirs.extend(root.glob("home/*/.jupyter", 256));
    for d in ["etc/jupyter", "usr/local/etc/jupyter", "usr/etc/jupyter"] {
        dirs.push(d.into());
    }
    for s in sites {
        if let Some((prefix, _)) = s.rel.split_once("/lib/python") {
            if prefix != "usr" && prefix != "usr/local" {
                dirs.push(join(prefix, "etc/jupyter"));
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The configuration files of a directory that exist, root-relative.
pub fn config_files(root: &RootFs, dir: &str) -> Vec<String> {
    let mut files = Vec::new();
    for n in NAMES {
        for ext in ["py", "json"] {
            let f = join(dir, &format!("{n}.{ext}"));
            if root.exists(&f) {
                files.push(f);
            }
        }
        files.extend(root.glob(&join(dir, &format!("{n}.d/*.json")), 64));
    }
    files
}

/// One file's settings; `None` when it sets nothing gpuaudit judges.
pub fn read_file(root: &RootFs, f: &str) -> Option<JupyterConfig> {
    let parsed = match root.read_text(f) {
        Ok(None) => return None,
        Ok(Some(t)) => if f.ends_with(".json") {
            parse_json(&t)
        } else {
            parse_py(&t)
        }
        .map_err(|e| format!("{}: {e}", abs(f))),
        Err(e) => Err(e),
    };
    match parsed {
        Ok(settings) if settings.is_empty() => None,
        Ok(settings) => Some(JupyterConfig {
            path: abs(f),
            settings,
            error: None,
        }),
        Err(e) => Some(JupyterConfig {
            path: abs(f),
            settings: vec![],
            error: Some(e),
        }),
    }
}

/// Every configuration file that sets something judged. A snapshot keeps each reduced to
/// the judged settings (token and password values replaced), the unreadable marker for one
/// that could not be read; files that set nothing judged are left out.
pub fn read(root: &RootFs, env: &EnvFacts, sites: &[Site]) -> Reading<Vec<JupyterConfig>> {
    let quiet = root.unrecorded();
    let mut out = Vec::new();
    for d in config_dirs(&quiet, env, sites) {
        for f in config_files(&quiet, &d) {
            let Some(cfg) = read_file(&quiet, &f) else {
                continue;
            };
            match &cfg.error {
                Some(e) => root.record_mark(&f, e),
                None if f.ends_with(".json") => root.record(&f, reduce_json(&cfg.settings)),
                None => root.record(&f, reduce(&cfg.settings)),
            }
            out.push(cfg);
        }
    }
    Reading::Value(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn finds_files_and_skips_irrelevant_ones() {
        let d = tempfile::tempdir().unwrap();
        let j = d.path().join("root/.jupyter");
        fs::create_dir_all(j.join("jupyter_server_config.d")).unwrap();
        fs::write(
            j.join("jupyter_server_config.py"),
            "c.ServerApp.iopub_data_rate_limit = 1000\n",
        )
        .unwrap();
        fs::write(
            j.join("jupyter_server_config.d/other.json"),
            "{\"ServerApp\": {\"jpserver_extensions\": {\"other\": true}}}",
        )
        .unwrap();
        fs::write(j.join("jupyter_notebook_config.json"), "{ bad").unwrap();
        let root = RootFs::new(d.path());
        let r = read(&root, &EnvFacts::default(), &[]).into_value().unwrap();
        assert_eq!(r.len(), 2, "{r:#?}");
        assert_eq!(r[0].path, "/root/.jupyter/jupyter_server_config.py");
        assert!(r[1]
            .error
            .as_deref()
            .unwrap()
            .starts_with("/root/.jupyter/jupyter_notebook_config.json: malformed"));
    }
}
