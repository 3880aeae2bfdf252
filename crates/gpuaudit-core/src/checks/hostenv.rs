//! The environment people work in: env.jupyter, env.ssh.

use super::hostcommon::{plural, storage_of};
use super::{Check, CheckDoc, CheckKind};
use crate::facts::{AuthorizedKey, Facts, JupyterConfig};
use crate::finding::{Finding, Status};
use crate::parse::host::jupyter::{parse_number, parse_string};
use crate::parse::host::mounts::FsClass;
use crate::policy::Policy;
use crate::reading::Reading;

pub const CHECKS: &[Check] = &[
    Check {
        id: "env.jupyter",
        title: "Jupyter settings known to hurt (rate limits, polling monitors, notebooks on network storage, open server)",
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
                     findmnt -T \"$(jupyter server --show-config 2>/dev/null | grep root_dir)\"",
            fix: "Remove the lowered limits (defaults: iopub_data_rate_limit 1000000 bytes/s, \
                  iopub_msg_rate_limit 1000 msgs/s; raise them for chatty training loops); turn \
                  off CPU tracking (c.ResourceUseDisplay.track_cpu_percent = False) or the GPU \
                  dashboard where nobody watches it; keep notebooks on local disk; never run with \
                  an empty token on a public interface (bind to 127.0.0.1 and use ssh -L).",
        },
        run: run_jupyter,
    },
    Check {
        id: "env.ssh",
        title: "sshd and authorized_keys: password login, root login, unrestricted and weak keys",
        kind: CheckKind::Facts,
        doc: CheckDoc {
            what: "sshd's effective settings from /etc/ssh/sshd_config and its Include files \
                   (PasswordAuthentication, KbdInteractiveAuthentication with UsePAM, \
                   PermitRootLogin, PermitEmptyPasswords, and the same inside Match blocks), and \
                   every authorized_keys entry of root and the users in /home: its key type and \
                   size, and whether it is restricted (restrict, command=, from=). Only option \
                   names and key types are kept, never key material or comments.",
            why: "GPU machines are the most valuable thing to hijack on the internet: a \
                  cryptominer on an H100 earns its attacker real money, and password guessing \
                  on port 22 starts minutes after a public IP appears. Password login (the \
                  OpenSSH default when unset) and root login with a password are how such \
                  boxes are taken; an unrestricted key for root left by an image builder or a \
                  former colleague is a standing door; DSA and short RSA keys can be broken.",
            verify: "sudo sshd -T | grep -Ei '^(passwordauthentication|kbdinteractiveauthentication|permitrootlogin|permitemptypasswords|usepam)'\n\
                     sudo cat /root/.ssh/authorized_keys; ls -l /home/*/.ssh/authorized_keys\n\
                     ssh-keygen -lf /root/.ssh/authorized_keys   # key sizes and types",
            fix: "In /etc/ssh/sshd_config.d/10-hardening.conf: `PasswordAuthentication no`, \
                  `KbdInteractiveAuthentication no`, `PermitRootLogin prohibit-password` (or \
                  no), then `sshd -t && systemctl reload ssh`; remove keys nobody owns; give \
                  automation keys `restrict,command=\"...\",from=\"...\"`; replace DSA and RSA \
                  keys under 2048 bits with Ed25519.",
        },
        run: run_ssh,
    },
];

const ID_JUP: &str = "env.jupyter";
const ID_SSH: &str = "env.ssh";

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
                ID_JUP,
                format!("could not look for Jupyter configuration: {r}"),
            )]
        }
    };
    if configs.is_empty() {
        return vec![Finding::pass(
            ID_JUP,
            "no Jupyter configuration file: the defaults apply".to_string(),
        )];
    }
    let mut out = Vec::new();
    for c in configs {
        let n_before = out.len();
        if let Some(e) = &c.error {
            out.push(Finding::skip(
                ID_JUP,
                format!("cannot read {}: {e}", c.path),
            ));
            continue;
        }
        let ev = |f: Finding| f.with("file", &c.path);
        for (key, default, what) in [
            ("iopub_data_rate_limit", 1_000_000.0, "bytes/s"),
            ("iopub_msg_rate_limit", 1000.0, "messages/s"),
        ] {
            let Some(v) = setting(c, key) else { continue };
            let Some(x) = parse_number(v) else { continue };
            // 0 switches the limit off.
            if x > 0.0 && x < default {
                out.push(
                    ev(Finding::warn(ID_JUP, format!("{}: {key} is lowered to {v} {what} (default {default}): cells that print more (training logs, progress bars, images) lose their output with 'IOPub data rate exceeded'", c.path)))
                        .with(key, v)
                        .fix(format!("remove the {key} line from {} (or raise it, e.g. 1e10)", c.path)),
                );
            }
        }
        let truthy = |v: &str| v.trim().eq_ignore_ascii_case("true");
        if setting(c, "track_cpu_percent").is_some_and(truthy) {
            out.push(
                ev(Finding::info(ID_JUP, format!("{}: jupyter-resource-usage tracks CPU: every open notebook tab makes the server walk all processes every few seconds", c.path)))
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
            out.push(ev(Finding::info(ID_JUP, format!("{}: a dashboard extension that polls the GPUs is enabled ({}): it queries NVML about once a second for every open tab", c.path, polling.join(", ")))));
        }
        for key in ["root_dir", "notebook_dir"] {
            let Some(dir) = setting(c, key).and_then(parse_string) else {
                continue;
            };
            if let Some((m, class)) = storage_of(facts, &dir) {
                if matches!(class, FsClass::Network | FsClass::Fuse) {
                    out.push(
                        ev(Finding::warn(ID_JUP, format!("{}: the notebook directory {dir} is on {} ({}): autosaves and checkpoints go over the network, and SQLite files there (IPython history, notebook signatures) lock up ('database is locked')", c.path, m.target, m.fstype)))
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
                ev(Finding::fail(ID_JUP, format!("{}: the server listens on all interfaces with an empty token and no password: anyone who reaches the port runs code on this machine", c.path)))
                    .fix("set a token or password, or bind to 127.0.0.1 (c.ServerApp.ip = '127.0.0.1') and connect with ssh -L 8888:localhost:8888"),
            );
        }
        if setting(c, "disable_check_xsrf").is_some_and(truthy) {
            out.push(ev(Finding::warn(ID_JUP, format!("{}: disable_check_xsrf = True: any web page the user visits can run code in the notebook server", c.path))).fix("remove disable_check_xsrf"));
        }
        if out.len() == n_before {
            out.push(
                ev(Finding::pass(
                    ID_JUP,
                    format!("{}: nothing known to hurt", c.path),
                ))
                .with("settings", &c.settings),
            );
        }
    }
    out
}

fn run_ssh(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let ssh = &facts.host.ssh;
    let cfg = match &ssh.sshd {
        Reading::Value(Some(c)) => c,
        Reading::Value(None) => {
            return vec![Finding::pass(
                ID_SSH,
                "no sshd configuration: no ssh server to judge".to_string(),
            )];
        }
        Reading::Unavailable(r) => {
            return vec![Finding::skip(ID_SSH, format!("cannot judge sshd: {r}"))]
        }
    };
    let mut out = Vec::new();
    let ev = |f: Finding| f.with("files", &cfg.files);
    let yes = |v: Option<&str>| v.is_some_and(|v| v.eq_ignore_ascii_case("yes"));
    // OpenSSH's defaults where a keyword is unset.
    let password = cfg.get("passwordauthentication").unwrap_or("yes");
    let kbd = cfg
        .get("kbdinteractiveauthentication")
        .or(cfg.get("challengeresponseauthentication"))
        .unwrap_or("yes");
    let pam = yes(cfg.get("usepam"));
    let root = cfg.get("permitrootlogin").unwrap_or("prohibit-password");
    let password_on = password.eq_ignore_ascii_case("yes");
    let kbd_password = !password_on && kbd.eq_ignore_ascii_case("yes") && pam;
    let root_yes = root.eq_ignore_ascii_case("yes");
    let fix = "put `PasswordAuthentication no`, `KbdInteractiveAuthentication no` and `PermitRootLogin prohibit-password` first in /etc/ssh/sshd_config.d/10-hardening.conf (the first value wins), then `sshd -t && systemctl reload ssh`";

    if yes(cfg.get("permitemptypasswords")) {
        out.push(ev(Finding::fail(ID_SSH, "sshd permits empty passwords: an account without a password can log in over the network")).fix(fix));
    }
    if password_on || kbd_password {
        let how = if password_on {
            format!(
                "PasswordAuthentication is {}",
                if cfg.get("passwordauthentication").is_some() {
                    "yes"
                } else {
                    "not set (OpenSSH's default is yes)"
                }
            )
        } else {
            "KbdInteractiveAuthentication with UsePAM yes asks for passwords".to_string()
        };
        let msg = format!("sshd accepts passwords ({how}){}: GPU machines are brute-forced within minutes of getting a public address", if root_yes { " and root may log in with one" } else { "" });
        let f = if root_yes {
            Finding::fail(ID_SSH, msg)
        } else {
            Finding::warn(ID_SSH, msg)
        };
        out.push(
            ev(f)
                .with("passwordauthentication", password)
                .with("permitrootlogin", root)
                .fix(fix),
        );
    } else if root_yes {
        out.push(ev(Finding::warn(ID_SSH, "PermitRootLogin yes: root may log in directly (with a key, since passwords are off)")).fix(fix));
    }
    for (m, k, v) in &cfg.matched {
        let risky = match k.as_str() {
            "passwordauthentication" | "permitemptypasswords" => v.eq_ignore_ascii_case("yes"),
            "kbdinteractiveauthentication" | "challengeresponseauthentication" => {
                v.eq_ignore_ascii_case("yes") && pam
            }
            "permitrootlogin" => v.eq_ignore_ascii_case("yes"),
            _ => false,
        };
        if risky {
            out.push(ev(Finding::warn(ID_SSH, format!("sshd turns {k} {v} back on for connections matching 'Match {m}'"))).fix("remove it from the Match block, or narrow the Match to trusted addresses (Match Address 10.0.0.0/8)"));
        }
    }
    if !cfg.ignored.is_empty() {
        out.push(ev(Finding::info(
            ID_SSH,
            format!(
                "lines of the sshd configuration that are not 'Keyword value' were ignored: {}",
                cfg.ignored.join(", ")
            ),
        )));
    }

    match &ssh.authorized_keys {
        Reading::Unavailable(r) => out.push(Finding::skip(
            ID_SSH,
            format!("cannot judge authorized_keys: {r}"),
        )),
        Reading::Value(keys) => {
            let root_keys = !root.eq_ignore_ascii_case("no")
                && !root.eq_ignore_ascii_case("forced-commands-only");
            let unrestricted_root: Vec<&AuthorizedKey> = keys
                .iter()
                .filter(|k| k.user == "root" && !k.is_restricted())
                .collect();
            if root_keys && !unrestricted_root.is_empty() {
                out.push(
                    Finding::warn(ID_SSH, format!(
                        "{} can log in as root with no restriction ({}): whoever holds any of them owns the machine and its GPUs",
                        plural(unrestricted_root.len(), "key", "keys"),
                        unrestricted_root.iter().map(|k| k.key_type.as_str()).collect::<Vec<_>>().join(", ")
                    ))
                    .with("files", unrestricted_root.iter().map(|k| &k.file).collect::<std::collections::BTreeSet<_>>())
                    .fix("remove keys nobody owns from /root/.ssh/authorized_keys; log in as a user and use sudo; give automation keys restrict,command=\"...\",from=\"...\"; or PermitRootLogin no"),
                );
            }
            let weak: Vec<&AuthorizedKey> = keys
                .iter()
                .filter(|k| {
                    k.key_type.starts_with("ssh-dss")
                        || (k.key_type.starts_with("ssh-rsa") && k.bits.is_some_and(|b| b < 2048))
                })
                .collect();
            if !weak.is_empty() {
                out.push(
                    Finding::warn(
                        ID_SSH,
                        format!(
                            "weak keys: {}",
                            weak.iter()
                                .map(|k| format!(
                                    "{} {}{} for {}",
                                    k.key_type,
                                    k.bits.map(|b| b.to_string()).unwrap_or_default(),
                                    if k.bits.is_some() { " bits" } else { "" },
                                    k.user
                                ))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                    .fix("replace them with Ed25519 keys (ssh-keygen -t ed25519)"),
                );
            }
            let others = keys
                .iter()
                .filter(|k| k.user != "root" && !k.is_restricted())
                .count();
            if out
                .iter()
                .all(|f| f.status.severity() < Status::Warn.severity())
            {
                let users: std::collections::BTreeSet<&str> =
                    keys.iter().map(|k| k.user.as_str()).collect();
                out.push(
                    Finding::pass(ID_SSH, format!(
                        "sshd refuses passwords; PermitRootLogin {root}; {} in authorized_keys ({} unrestricted outside root)",
                        plural(keys.len(), "key", "keys"),
                        others
                    ))
                    .with("users", &users),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::SshdConfig;
    use crate::parse::host::mounts::parse_mounts;

    fn statuses(f: &[Finding]) -> Vec<Status> {
        f.iter().map(|f| f.status).collect()
    }

    fn cfg(global: &[(&str, &str)]) -> SshdConfig {
        SshdConfig {
            global: global
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            matched: vec![],
            files: vec!["/etc/ssh/sshd_config".into()],
            ignored: vec![],
        }
    }

    fn key(user: &str, t: &str, bits: u32, opts: &[&str]) -> AuthorizedKey {
        AuthorizedKey {
            file: format!("/{user}/.ssh/authorized_keys"),
            user: user.into(),
            key_type: t.into(),
            bits: Some(bits),
            options: opts.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn ssh_password_and_root_key() {
        let mut f = super::super::hostcommon::facts_with_gpus(1, (9, 0));
        f.host.ssh.sshd = Reading::Value(Some(cfg(&[
            ("passwordauthentication", "yes"),
            ("permitrootlogin", "yes"),
        ])));
        f.host.ssh.authorized_keys = Reading::Value(vec![
            key("root", "ssh-ed25519", 256, &[]),
            key("root", "ssh-rsa", 1024, &[]),
        ]);
        let r = run_ssh(&f, &Policy::default());
        assert_eq!(
            statuses(&r),
            vec![Status::Fail, Status::Warn, Status::Warn],
            "{r:#?}"
        );
        // Unset PasswordAuthentication is OpenSSH's default: yes.
        f.host.ssh.sshd = Reading::Value(Some(cfg(&[])));
        f.host.ssh.authorized_keys = Reading::Value(vec![key(
            "root",
            "ssh-ed25519",
            256,
            &["restrict", "command"],
        )]);
        let r = run_ssh(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.contains("default is yes"));
        // Hardened.
        f.host.ssh.sshd = Reading::Value(Some(cfg(&[
            ("passwordauthentication", "no"),
            ("kbdinteractiveauthentication", "no"),
        ])));
        f.host.ssh.authorized_keys = Reading::Value(vec![key("ann", "ssh-ed25519", 256, &[])]);
        assert_eq!(
            statuses(&run_ssh(&f, &Policy::default())),
            vec![Status::Pass]
        );
    }

    #[test]
    fn ssh_match_absent_and_garbage() {
        let mut f = super::super::hostcommon::facts_with_gpus(1, (9, 0));
        let mut c = cfg(&[
            ("passwordauthentication", "no"),
            ("kbdinteractiveauthentication", "no"),
        ]);
        c.matched.push((
            "User admin".into(),
            "passwordauthentication".into(),
            "yes".into(),
        ));
        f.host.ssh.sshd = Reading::Value(Some(c));
        f.host.ssh.authorized_keys = Reading::Value(vec![]);
        let r = run_ssh(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        f.host.ssh.sshd = Reading::Value(None);
        assert_eq!(
            statuses(&run_ssh(&f, &Policy::default())),
            vec![Status::Pass]
        );
        f.host.ssh.sshd = Reading::unavailable(
            "/etc/ssh/sshd_config: malformed: binary content, not an sshd_config",
        );
        assert_eq!(
            statuses(&run_ssh(&f, &Policy::default())),
            vec![Status::Skip]
        );
    }

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
        let mut f = super::super::hostcommon::facts_with_gpus(1, (9, 0));
        f.host.mounts = Reading::Value(
            parse_mounts("/dev/vda / ext4 rw 0 0\nnas:/nb /mnt/nb nfs4 rw,hard 0 0\n").unwrap(),
        );
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
}
