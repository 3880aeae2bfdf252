//! `gpuaudit collect` for the host checks: everything [`super::gather`] reads, written so that
//! gathering from the snapshot gives the same facts. Files that may hold secrets are reduced
//! (sshd_config, Jupyter configs, containerd's config.toml); what is not a plain file goes
//! under `cmd/`; a reading that failed is written as the unreadable marker with its reason.

use super::{
    container, env, fabric, graphics, jupyter, libraries, python, ssh, storage, versions,
    HostOptions,
};
use crate::root::join;
use crate::root::RootFs;
use gpuaudit_core::facts::ContainerdConfig;
use gpuaudit_core::parse::host::jupyter::{reduce, reduce_json};
use gpuaudit_core::parse::host::listing::{
    format_data_dirs, format_devices, format_env, format_identity, format_keys, format_libraries,
};
use gpuaudit_core::parse::host::python::metadata_header;
use gpuaudit_core::parse::host::sshd::reduce_file;
use gpuaudit_core::reading::Reading;

/// containerd's config reduced to what the check reads (its registry credentials stay home).
fn containerd_toml(c: &ContainerdConfig) -> String {
    let mut s = String::from(
        "# reduced by gpuaudit collect: only the runtimes and CDI settings\nversion = 2\n",
    );
    s.push_str("[plugins.\"io.containerd.grpc.v1.cri\"]\n");
    if let Some(b) = c.cdi_enabled {
        s.push_str(&format!("enable_cdi = {b}\n"));
    }
    s.push_str("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n");
    if let Some(d) = &c.default_runtime {
        s.push_str(&format!("default_runtime_name = {}\n", toml_str(d)));
    }
    for r in &c.runtimes {
        s.push_str(&format!(
            "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{}]\n",
            toml_str(r)
        ));
    }
    s
}

fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Record into `w`'s snapshot what the host sources read (not yet through the recording
/// reader: this list is kept in step with them by `tests/host_parity.rs`).
pub fn record(w: &RootFs, opts: &HostOptions) {
    let quiet = w.unrecorded();
    let root = &quiet;

    // Plain copies.
    for rel in [
        storage::MOUNTS,
        "proc/1/cgroup",
        "proc/sys/net/core/somaxconn",
        "proc/meminfo",
        "proc/modules",
        ".dockerenv",
        "run/.containerenv",
        container::DOCKER,
    ] {
        w.keep(rel);
    }

    // The environment and what derives from it.
    let envr = env::read_env(root);
    // cmd/env.json marks a snapshot that has a host part; one collected from a snapshot
    // without it must not claim one.
    if super::has_host_part(root) {
        w.record_reading(env::SNAPSHOT_FILE, &envr, format_env);
    }
    let env_value = envr.value().cloned().unwrap_or_default();
    w.record_reading(
        storage::DATA_DIRS_FILE,
        &storage::data_dirs(root, opts, &env_value),
        |d| format_data_dirs(d),
    );

    // Python environments: a marker in every site-packages directory (so the same ones are
    // found), the interpreters, torch/version.py, the NVIDIA wheels' metadata headers.
    let sites = python::discover(root, &env_value);
    for s in &sites {
        w.record_marker(&join(&s.rel, ".gpuaudit-site"));
        if let Some(i) = &s.interpreter {
            w.record_marker(&crate::root::rel(i));
        }
        if python::has_torch(root, s) {
            w.keep(&join(&s.rel, "torch/version.py"));
        }
        for (_, _, dist) in python::nvidia_wheels(root, s) {
            let meta = join(&dist, "METADATA");
            if let Ok(Some(t)) = root.read_text(&meta) {
                w.record(&meta, metadata_header(&t));
            }
        }
    }
    if root.is_live() {
        if opts.ask_interpreter {
            let q = python::query_all(root, &sites, opts.interpreter_timeout);
            match serde_json::to_string_pretty(&q) {
                Ok(s) => w.record(python::QUERY_FILE, s),
                Err(e) => w.record_note(format!("{}: {e}", python::QUERY_FILE)),
            }
        }
    } else {
        w.keep(python::QUERY_FILE);
    }

    // Libraries, resolved.
    w.record_reading(
        libraries::LISTING,
        &libraries::read(root, &env_value, &sites),
        |l| format_libraries(l),
    );

    // Containers.
    let mounts = storage::read_mounts(root);
    let c = container::read(root, &env_value, mounts.value().map(Vec::as_slice));
    w.record_reading(container::DEVICES_FILE, &c.devices, |d| format_devices(d));
    w.record_reading(container::IDENTITY_FILE, &c.identity, |(u, g)| {
        format_identity(*u, g)
    });
    if let Some(t) = c.toolkit.value() {
        for p in t.found.iter().chain(t.engines.iter()) {
            if p.starts_with("/etc/") {
                w.keep(&crate::root::rel(p));
            } else {
                w.record_marker(&crate::root::rel(p));
            }
        }
    }
    match container::read_containerd(root) {
        Reading::Value(Some(cd)) => w.record(container::CONTAINERD, containerd_toml(&cd)),
        Reading::Value(None) => {}
        Reading::Unavailable(why) => w.record_mark(container::CONTAINERD, &why),
    }
    for f in container::cdi_files(root) {
        w.keep(&f);
    }

    // Installed versions: the package database (reduced), the programs' answers.
    versions::record(w);

    // Fabric.
    for dev in root.children(fabric::IB) {
        for f in fabric::DEVICE_FILES {
            w.keep(&join(&join(fabric::IB, &dev), f));
        }
        let pdir = join(&join(fabric::IB, &dev), "ports");
        for p in root.children(&pdir) {
            for f in fabric::PORT_FILES {
                w.keep(&join(&join(&pdir, &p), f));
            }
        }
    }
    for n in fabric::physical_nics(root) {
        let base = join(fabric::NET, &n);
        for f in fabric::NIC_FILES {
            // A NIC that is down refuses to tell its speed; leave the file out, as the reader
            // then does.
            if let Ok(Some(b)) = root.read_bytes(&join(&base, f)) {
                w.record(&join(&base, f), &b);
            }
        }
        let driver = root
            .link_name(&join(&base, "device/driver"))
            .ok()
            .flatten()
            .unwrap_or_default();
        w.record(&join(&base, "device/driver"), driver);
    }

    // The graphics loaders' manifests (small JSON files naming a library), copied.
    for f in graphics::files(root, graphics::VULKAN_DIRS)
        .into_iter()
        .chain(graphics::files(root, graphics::EGL_DIRS))
    {
        w.keep(&f);
    }

    // Jupyter, reduced.
    for d in jupyter::config_dirs(root, &env_value, &sites) {
        for f in jupyter::config_files(root, &d) {
            let Some(cfg) = jupyter::read_file(root, &f) else {
                continue;
            };
            match &cfg.error {
                Some(e) => w.record_mark(&f, e),
                None if f.ends_with(".json") => w.record(&f, reduce_json(&cfg.settings)),
                None => w.record(&f, reduce(&cfg.settings)),
            }
        }
    }

    // sshd, reduced file by file (line numbers kept), and authorized_keys without keys.
    match ssh::segments(root) {
        Ok(None) => {}
        Ok(Some(segs)) => {
            let mut done: Vec<&str> = Vec::new();
            for (file, _, _) in &segs {
                if done.contains(&file.as_str()) {
                    continue;
                }
                done.push(file);
                if let Ok(Some(t)) = root.read_text(&crate::root::rel(file)) {
                    w.record(&crate::root::rel(file), reduce_file(&t));
                }
            }
        }
        Err(e) => w.record_mark(ssh::SSHD, &e),
    }
    let sshd = ssh::read_sshd(root);
    w.record_reading(
        ssh::KEYS_FILE,
        &ssh::read_keys(root, sshd.value().and_then(|c| c.as_ref())),
        |k| format_keys(k),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containerd_reduction_reads_back() {
        let c = ContainerdConfig {
            runtimes: vec!["nvidia".into(), "runc".into()],
            default_runtime: Some("nvidia".into()),
            cdi_enabled: Some(true),
        };
        let back =
            gpuaudit_core::parse::host::container::parse_containerd_toml(&containerd_toml(&c))
                .unwrap();
        assert_eq!(back, c);
    }
}
