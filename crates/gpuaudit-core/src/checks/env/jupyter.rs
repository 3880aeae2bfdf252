//! env.jupyter: Jupyter settings known to hurt.

use crate::checks::common::storage_of;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, JupyterConfig};
use crate::finding::Finding;
use crate::parse::host::jupyter::{parse_number, parse_string};
use crate::parse::host::mounts::FsClass;
use crate::policy::Policy;

const ID: &str = "env.jupyter";

/// Jupyter's own defaults for the iopub rate limits: a lower value is a lowered limit.
pub const IOPUB_DATA_RATE_DEFAULT: f64 = 1_000_000.0;
pub const IOPUB_MSG_RATE_DEFAULT: f64 = 1000.0;

pub const CHECK: Check = Check {
    id: ID,
    title: "Jupyter settings known to hurt (rate limits, polling monitors, notebooks on network storage, open server)",
    looks_at: "Jupyter settings known to hurt (iopub rate limit, polling resource monitors, \
               notebook dir on network storage)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "The Jupyter configuration files (jupyter_server_config / jupyter_notebook_config, \
               .py and .json, and the jupyter_server_config.d drop-ins) in ~/.jupyter, \
               JUPYTER_CONFIG_DIR, /etc/jupyter, /usr/local/etc/jupyter and the Python \
               environments' etc/jupyter: the iopub data and message rate limits, resource \
               monitors that poll the machine (jupyter-resource-usage with CPU tracking, GPU \
               dashboards), the notebook root directory's file system, and whether the server \
               listens on all interfaces without a token or password.",
        why: "A lowered iopub_data_rate_limit drops the output of any cell that prints more than \
              the limit ('IOPub data rate exceeded'), which looks like a hung training loop. \
              Polling monitors wake every few seconds for every open tab and walk all processes \
              (or call NVML). Notebooks on NFS autosave and checkpoint over the network, and \
              IPython's SQLite history locks ('database is locked'). A server on 0.0.0.0 \
              without a token lets anyone who can reach the port run code on the GPU box.",
        verify: "jupyter --paths\n\
                 jupyter server --show-config   # (jupyter_server 2) or: grep -rn 'rate_limit\\|root_dir\\|notebook_dir\\|token\\|ResourceUseDisplay' ~/.jupyter /etc/jupyter\n\
                 # the file system under each running server's root directory\n\
                 jupyter server list --json | python3 -c 'import json, sys; [print(json.loads(l)[\"root_dir\"]) for l in sys.stdin if l.strip()]' | xargs -r -n1 findmnt -T",
        fix: "Remove the lowered limits (defaults: iopub_data_rate_limit 1000000 bytes/s, \
              iopub_msg_rate_limit 1000 msgs/s; raise them for chatty training loops); turn \
              off CPU tracking (c.ResourceUseDisplay.track_cpu_percent = False) or the GPU \
              dashboard where nobody watches it; keep notebooks on local disk; never run with \
              an empty token on a public interface (bind to 127.0.0.1 and use ssh -L).",
    },
    profiles: &[],
    run: run_jupyter,
};

fn setting<'a>(c: &'a JupyterConfig, key: &str) -> Option<&'a str> {
    // The last assignment wins in a Python config file.
    c.settings
        .iter()
        .rev()
        .find(|(k, _)| k.rsplit_once('.').is_some_and(|(_, name)| name == key) || k == key)
        .map(|(_, v)| v.as_str())
}

fn run_jupyter(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let configs = match facts.host.jupyter.get() {
        Ok(c) => c,
        Err(r) => {
            return vec![Finding::skip(
                ID,
                format!("could not look for Jupyter configuration: {r}"),
            )]
        }
    };
    if configs.is_empty() {
        return vec![Finding::pass(
            ID,
            "no Jupyter configuration file: the defaults apply".to_string(),
        )];
    }
    let mut out = Vec::new();
    for c in configs {
        let n_before = out.len();
        if let Some(e) = &c.error {
            out.push(Finding::skip(ID, format!("cannot read {}: {e}", c.path)));
            continue;
        }
        let ev = |f: Finding| f.with("file", &c.path);
        for (key, default, what) in [
            ("iopub_data_rate_limit", IOPUB_DATA_RATE_DEFAULT, "bytes/s"),
            ("iopub_msg_rate_limit", IOPUB_MSG_RATE_DEFAULT, "messages/s"),
        ] {
            let Some(v) = setting(c, key) else { continue };
            let Some(x) = parse_number(v) else { continue };
            // 0 switches the limit off.
            if x > 0.0 && x < default {
                out.push(
                    ev(Finding::warn(ID, format!("{}: {key} is lowered to {v} {what} (default {default}): cells that print more (training logs, progress bars, images) lose their output with 'IOPub data rate exceeded'", c.path)))
                        .with(key, v)
                        .fix(format!("remove the {key} line from {} (or raise it, e.g. 1e10)", c.path)),
                );
            }
        }
        let truthy = |v: &str| v.trim().eq_ignore_ascii_case("true");
        if setting(c, "track_cpu_percent").is_some_and(truthy) {
            out.push(
                ev(Finding::info(ID, format!("{}: jupyter-resource-usage tracks CPU: every open notebook tab makes the server walk all processes every few seconds", c.path)))
                    .fix("c.ResourceUseDisplay.track_cpu_percent = False"),
            );
        }
        let polling: Vec<&str> = c
            .settings
            .iter()
            .filter(|(k, v)| {
                k.contains("server_extensions.")
                    && (k.contains("nvdashboard") || k.contains("system_monitor"))
                    && truthy(v)
            })
            .map(|(k, _)| k.rsplit('.').next().unwrap_or(k))
            .collect();
        if !polling.is_empty() {
            out.push(ev(Finding::info(ID, format!("{}: a dashboard extension that polls the GPUs is enabled ({}): it queries NVML about once a second for every open tab", c.path, polling.join(", ")))));
        }
        for key in ["root_dir", "notebook_dir"] {
            let Some(dir) = setting(c, key).and_then(parse_string) else {
                continue;
            };
            if let Some((m, class)) = storage_of(facts, &dir) {
                if matches!(class, FsClass::Network | FsClass::Fuse) {
                    out.push(
                        ev(Finding::warn(ID, format!("{}: the notebook directory {dir} is on {} ({}): autosaves and checkpoints go over the network, and SQLite files there (IPython history, notebook signatures) lock up ('database is locked')", c.path, m.target, m.fstype)))
                            .with(key, &dir)
                            .fix("keep notebooks on local disk and sync them (git, rsync) instead"),
                    );
                }
            }
        }
        let ip = setting(c, "ip").and_then(parse_string);
        let public = ip
            .as_deref()
            .is_some_and(|ip| matches!(ip, "0.0.0.0" | "*" | "" | "::"));
        let empty = |k: &str| setting(c, k).is_some_and(|v| v == "''");
        let set = |k: &str| setting(c, k).is_some_and(|v| v != "''");
        if public && empty("token") && !set("password") && !set("hashed_password") {
            out.push(
                ev(Finding::fail(ID, format!("{}: the server listens on all interfaces with an empty token and no password: anyone who reaches the port runs code on this machine", c.path)))
                    .fix("set a token or password, or bind to 127.0.0.1 (c.ServerApp.ip = '127.0.0.1') and connect with ssh -L 8888:localhost:8888"),
            );
        }
        if setting(c, "disable_check_xsrf").is_some_and(truthy) {
            out.push(ev(Finding::warn(ID, format!("{}: disable_check_xsrf = True: any web page the user visits can run code in the notebook server", c.path))).fix("remove disable_check_xsrf"));
        }
        if out.len() == n_before {
            out.push(
                ev(Finding::pass(
                    ID,
                    format!("{}: nothing known to hurt", c.path),
                ))
                .with("settings", &c.settings),
            );
        }
    }
    out
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn jcfg(settings: &[(&str, &str)]) -> JupyterConfig {
        JupyterConfig {
            path: "/root/.jupyter/jupyter_server_config.py".into(),
            settings: settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            error: None,
        }
    }

    #[test]
    fn jupyter_limits_nfs_and_open_server() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1)
            .mounts("/dev/vda / ext4 rw 0 0\nnas:/nb /mnt/nb nfs4 rw,hard 0 0\n")
            .build();
        f.host.jupyter = Reading::Value(vec![jcfg(&[
            ("ServerApp.iopub_data_rate_limit", "1000"),
            ("ServerApp.root_dir", "'/mnt/nb/ann'"),
            ("ServerApp.ip", "'0.0.0.0'"),
            ("ServerApp.token", "''"),
            ("ResourceUseDisplay.track_cpu_percent", "True"),
        ])]);
        let r = run_jupyter(&f, &Policy::default());
        assert_eq!(
            statuses(&r),
            vec![Status::Warn, Status::Info, Status::Warn, Status::Fail],
            "{r:#?}"
        );
        f.host.jupyter = Reading::Value(vec![jcfg(&[
            ("ServerApp.iopub_data_rate_limit", "1e10"),
            ("ServerApp.ip", "'127.0.0.1'"),
        ])]);
        assert_eq!(
            statuses(&run_jupyter(&f, &Policy::default())),
            vec![Status::Pass]
        );
        f.host.jupyter = Reading::Value(vec![]);
        assert_eq!(
            statuses(&run_jupyter(&f, &Policy::default())),
            vec![Status::Pass]
        );
        let mut bad = jcfg(&[]);
        bad.error = Some("not JSON".into());
        f.host.jupyter = Reading::Value(vec![bad]);
        assert_eq!(
            statuses(&run_jupyter(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

    fn judged(settings: &[(&str, &str)]) -> Vec<Finding> {
        let mut f = Machine::healthy("h200-sxm-141gb", 1)
            .mounts("/dev/vda / ext4 rw 0 0\ns3fs /mnt/s3 fuse.s3fs rw 0 0\n")
            .build();
        f.host.jupyter = Reading::Value(vec![jcfg(settings)]);
        run_jupyter(&f, &Policy::default())
    }

    #[test]
    fn rate_limits_at_and_below_the_defaults() {
        let st = |k: &str, v: String| statuses(&judged(&[(k, v.as_str())]));
        let data = "ServerApp.iopub_data_rate_limit";
        let msg = "NotebookApp.iopub_msg_rate_limit";
        assert_eq!(
            st(data, format!("{}", IOPUB_DATA_RATE_DEFAULT)),
            vec![Status::Pass]
        );
        assert_eq!(
            st(data, format!("{}", IOPUB_DATA_RATE_DEFAULT - 1.0)),
            vec![Status::Warn]
        );
        assert_eq!(
            st(msg, format!("{}", IOPUB_MSG_RATE_DEFAULT)),
            vec![Status::Pass]
        );
        assert_eq!(
            st(msg, format!("{}", IOPUB_MSG_RATE_DEFAULT - 1.0)),
            vec![Status::Warn]
        );
        // 0 switches the limit off; text that is no number is not judged.
        assert_eq!(st(data, "0".into()), vec![Status::Pass]);
        assert_eq!(st(data, "'fast'".into()), vec![Status::Pass]);
        // The last assignment wins; a bare key name counts too.
        let r = judged(&[(data, "10"), (data, "1e10")]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert_eq!(
            statuses(&judged(&[("iopub_data_rate_limit", "10")])),
            vec![Status::Warn]
        );
        assert_eq!(
            statuses(&judged(&[("ServerApp.iopub_data_rate_limitx", "10")])),
            vec![Status::Pass]
        );
    }

    #[test]
    fn monitors_dirs_servers_and_xsrf() {
        let r = judged(&[(
            "ServerApp.jpserver_extensions.jupyterlab_nvdashboard",
            "True",
        )]);
        assert_eq!(statuses(&r), vec![Status::Info], "{r:#?}");
        assert!(r[0].message.contains("(jupyterlab_nvdashboard)"));
        let r = judged(&[(
            "ServerApp.jpserver_extensions.jupyterlab_nvdashboard",
            "False",
        )]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        let r = judged(&[("ServerApp.jpserver_extensions.other", "True")]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert_eq!(
            statuses(&judged(&[(
                "ResourceUseDisplay.track_cpu_percent",
                "False"
            )])),
            vec![Status::Pass]
        );
        // Notebooks on FUSE: warned; on local disk: fine.
        assert_eq!(
            statuses(&judged(&[("ServerApp.root_dir", "'/mnt/s3/nb'")])),
            vec![Status::Warn]
        );
        assert_eq!(
            statuses(&judged(&[("NotebookApp.notebook_dir", "'/mnt/s3/nb'")])),
            vec![Status::Warn]
        );
        assert_eq!(
            statuses(&judged(&[("ServerApp.root_dir", "'/root/nb'")])),
            vec![Status::Pass]
        );
        // An open server: every public address, an empty token, no password.
        for ip in ["'0.0.0.0'", "'*'", "''", "'::'"] {
            let r = judged(&[("ServerApp.ip", ip), ("ServerApp.token", "''")]);
            assert_eq!(statuses(&r), vec![Status::Fail], "{ip}");
        }
        for pw in ["ServerApp.password", "ServerApp.hashed_password"] {
            let r = judged(&[
                ("ServerApp.ip", "'0.0.0.0'"),
                ("ServerApp.token", "''"),
                (pw, "'<set>'"),
            ]);
            assert_eq!(statuses(&r), vec![Status::Pass], "{pw}");
        }
        let r = judged(&[
            ("ServerApp.ip", "'0.0.0.0'"),
            ("ServerApp.token", "'<set>'"),
        ]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        let r = judged(&[("ServerApp.ip", "'10.0.0.5'"), ("ServerApp.token", "''")]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        let r = judged(&[("ServerApp.disable_check_xsrf", "True")]);
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("disable_check_xsrf"));
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.jupyter = Reading::unavailable("x");
        assert_eq!(
            statuses(&run_jupyter(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }
}
