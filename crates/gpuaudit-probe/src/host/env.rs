//! The environment variables gpuaudit reads: the process's own on the live machine,
//! `cmd/env.json` in a snapshot.

use crate::root::RootFs;
use gpuaudit_core::facts::EnvFacts;
use gpuaudit_core::parse::host::cudaenv::is_read_variable;
use gpuaudit_core::parse::host::listing::parse_env;
use gpuaudit_core::reading::Reading;

pub const SNAPSHOT_FILE: &str = "cmd/env.json";

/// The process environment, reduced to the variables gpuaudit reads.
pub fn live_env() -> EnvFacts {
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.to_string_lossy().into_owned();
            is_read_variable(&k).then(|| (k, v.to_string_lossy().into_owned()))
        })
        .collect();
    vars.sort();
    EnvFacts { vars }
}

pub fn read_env(root: &RootFs) -> Reading<EnvFacts> {
    if root.is_live() {
        return Reading::Value(live_env());
    }
    match root.read_text(SNAPSHOT_FILE) {
        Ok(Some(t)) => parse_env(&t)
            .map_err(|e| format!("{}: {e}", crate::root::abs(SNAPSHOT_FILE)))
            .into(),
        Ok(None) => Reading::unavailable(format!(
            "the snapshot has no {SNAPSHOT_FILE} (the environment gpuaudit collect ran in)"
        )),
        Err(e) => Reading::unavailable(e),
    }
}
