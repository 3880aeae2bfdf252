//! env.ssh: sshd settings and authorized_keys.

use crate::checks::common::plural;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{AuthorizedKey, Facts};
use crate::finding::{Finding, Status};
use crate::policy::Policy;
use crate::reading::Reading;

const ID: &str = "env.ssh";

/// RSA keys shorter than this (bits) are weak (NIST SP 800-57: 2048 bits and more).
pub const RSA_MIN_BITS: u32 = 2048;

pub const CHECK: Check = Check {
    id: ID,
    title: "sshd and authorized_keys: password login, root login, unrestricted and weak keys",
    looks_at: "sshd and authorized_keys settings: password login, root login, keys without \
               restrictions",
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
              no), then `sudo sshd -t && sudo systemctl reload ssh` (Debian, Ubuntu; `sudo \
              systemctl reload sshd` on the RHEL family); remove keys nobody owns; give \
              automation keys `restrict,command=\"...\",from=\"...\"`; replace DSA and RSA \
              keys under 2048 bits with Ed25519.",
    },
    profiles: &[],
    run: run_ssh,
};

fn run_ssh(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    let ssh = &facts.host.ssh;
    let cfg = match &ssh.sshd {
        Reading::Value(Some(c)) => c,
        Reading::Value(None) => {
            return vec![Finding::pass(
                ID,
                "no sshd configuration: no ssh server to judge".to_string(),
            )];
        }
        Reading::Unavailable(r) => {
            return vec![Finding::skip(ID, format!("cannot judge sshd: {r}"))]
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
    let fix = "put `PasswordAuthentication no`, `KbdInteractiveAuthentication no` and `PermitRootLogin prohibit-password` first in /etc/ssh/sshd_config.d/10-hardening.conf (the first value wins), then `sudo sshd -t && sudo systemctl reload ssh` (Debian, Ubuntu; `sudo systemctl reload sshd` on the RHEL family)";

    if yes(cfg.get("permitemptypasswords")) {
        out.push(ev(Finding::fail(ID, "sshd permits empty passwords: an account without a password can log in over the network")).fix(fix));
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
            Finding::fail(ID, msg)
        } else {
            Finding::warn(ID, msg)
        };
        out.push(
            ev(f)
                .with("passwordauthentication", password)
                .with("permitrootlogin", root)
                .fix(fix),
        );
    } else if root_yes {
        out.push(ev(Finding::warn(ID, "PermitRootLogin yes: root may log in directly (with a key, since passwords are off)")).fix(fix));
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
            out.push(ev(Finding::warn(ID, format!("sshd turns {k} {v} back on for connections matching 'Match {m}'"))).fix("remove it from the Match block, or narrow the Match to trusted addresses (Match Address 10.0.0.0/8)"));
        }
    }
    if !cfg.ignored.is_empty() {
        out.push(ev(Finding::info(
            ID,
            format!(
                "lines of the sshd configuration that are not 'Keyword value' were ignored: {}",
                cfg.ignored.join(", ")
            ),
        )));
    }

    match &ssh.authorized_keys {
        Reading::Unavailable(r) => out.push(Finding::skip(
            ID,
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
                    Finding::warn(ID, format!(
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
                        || (k.key_type.starts_with("ssh-rsa")
                            && k.bits.is_some_and(|b| b < RSA_MIN_BITS))
                })
                .collect();
            if !weak.is_empty() {
                out.push(
                    Finding::warn(
                        ID,
                        format!(
                            "weak keys: {}",
                            weak.iter()
                                .map(|k| format!(
                                    "{}{} for {}",
                                    k.key_type,
                                    k.bits.map(|b| format!(" {b} bits")).unwrap_or_default(),
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
            if out.iter().all(|f| f.status < Status::Warn) {
                let users: std::collections::BTreeSet<&str> =
                    keys.iter().map(|k| k.user.as_str()).collect();
                out.push(
                    Finding::pass(ID, format!(
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
    use crate::testing::{statuses, Machine};

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
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
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
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
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

    fn hardened() -> SshdConfig {
        cfg(&[
            ("passwordauthentication", "no"),
            ("kbdinteractiveauthentication", "no"),
        ])
    }

    fn judged(c: SshdConfig, keys: Vec<AuthorizedKey>) -> Vec<Finding> {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.ssh.sshd = Reading::Value(Some(c));
        f.host.ssh.authorized_keys = Reading::Value(keys);
        run_ssh(&f, &Policy::default())
    }

    #[test]
    fn passwords_through_pam_empty_passwords_and_root() {
        // Keyboard-interactive asks for passwords only with PAM.
        let mut c = cfg(&[("passwordauthentication", "no"), ("usepam", "yes")]);
        let r = judged(c.clone(), vec![]);
        assert_eq!(statuses(&r), vec![Status::Warn], "{r:#?}");
        assert!(r[0]
            .message
            .contains("KbdInteractiveAuthentication with UsePAM yes"));
        c.global
            .push(("challengeresponseauthentication".into(), "no".into()));
        assert_eq!(statuses(&judged(c, vec![])), vec![Status::Pass]);
        let c = cfg(&[("passwordauthentication", "no"), ("usepam", "no")]);
        assert_eq!(statuses(&judged(c, vec![])), vec![Status::Pass]);
        let mut c = hardened();
        c.global.push(("permitemptypasswords".into(), "yes".into()));
        assert_eq!(statuses(&judged(c, vec![])), vec![Status::Fail]);
        let mut c = hardened();
        c.global.push(("permitrootlogin".into(), "yes".into()));
        let r = judged(c, vec![]);
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert!(r[0].message.starts_with("PermitRootLogin yes"));
    }

    #[test]
    fn match_blocks_ignored_lines_and_keys() {
        let mut c = hardened();
        for (k, v) in [
            ("permitemptypasswords", "yes"),
            ("permitrootlogin", "yes"),
            ("challengeresponseauthentication", "yes"),
            ("x11forwarding", "yes"),
            ("passwordauthentication", "no"),
        ] {
            c.matched
                .push(("Address 10.0.0.0/8".into(), k.into(), v.into()));
        }
        let r = judged(c.clone(), vec![]);
        // Keyboard-interactive without PAM asks for nothing.
        assert_eq!(statuses(&r), vec![Status::Warn, Status::Warn], "{r:#?}");
        c.global.push(("usepam".into(), "yes".into()));
        c.global
            .push(("kbdinteractiveauthentication".into(), "no".into()));
        assert_eq!(judged(c, vec![]).len(), 3);
        let mut c = hardened();
        c.ignored.push("/etc/ssh/sshd_config:7".into());
        let r = judged(c, vec![]);
        assert_eq!(statuses(&r), vec![Status::Info, Status::Pass]);
        assert!(r[0].message.contains("/etc/ssh/sshd_config:7"));
        // Root keys do not matter when root may not log in with a key.
        for root in ["no", "forced-commands-only"] {
            let mut c = hardened();
            c.global.push(("permitrootlogin".into(), root.into()));
            let r = judged(c, vec![key("root", "ssh-ed25519", 256, &[])]);
            assert_eq!(statuses(&r), vec![Status::Pass], "{root}");
        }
        // RSA: 2048 bits is enough, one less is weak; DSA always is.
        let r = judged(hardened(), vec![key("ann", "ssh-rsa", RSA_MIN_BITS, &[])]);
        assert_eq!(statuses(&r), vec![Status::Pass]);
        let r = judged(
            hardened(),
            vec![key("ann", "ssh-rsa", RSA_MIN_BITS - 1, &[])],
        );
        assert_eq!(statuses(&r), vec![Status::Warn]);
        assert_eq!(r[0].message, "weak keys: ssh-rsa 2047 bits for ann");
        let mut dsa = key("bob", "ssh-dss", 1024, &[]);
        dsa.bits = None;
        let r = judged(hardened(), vec![dsa]);
        assert_eq!(r[0].message, "weak keys: ssh-dss for bob");
        // The pass counts keys and the unrestricted ones outside root.
        let r = judged(
            hardened(),
            vec![
                key("ann", "ssh-ed25519", 256, &[]),
                key("ci", "ssh-ed25519", 256, &["from"]),
                key("root", "ssh-ed25519", 256, &["restrict"]),
            ],
        );
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert_eq!(
            r[0].message,
            "sshd refuses passwords; PermitRootLogin prohibit-password; 3 keys in authorized_keys (1 unrestricted outside root)"
        );
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.host.ssh.sshd = Reading::Value(Some(hardened()));
        f.host.ssh.authorized_keys = Reading::unavailable("not root");
        let r = run_ssh(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
    }
}
