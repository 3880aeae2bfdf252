//! os.platform: the distribution, kernel, architecture and C library.

use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, Libc};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;

const ID: &str = "os.platform";

/// The architectures NVIDIA's Linux driver supports (ppc64le for older releases).
pub const SUPPORTED_ARCHS: &[&str] = &["x86_64", "aarch64", "ppc64le"];

/// os-release IDs of distributions built on musl (Alpine, Void's musl flavour, Chimera).
pub const MUSL_DISTRIBUTIONS: &[&str] = &["alpine", "chimera", "void-musl"];

/// os-release IDs of distributions built on glibc alone, where `ldd --version` was not read.
pub const GLIBC_DISTRIBUTIONS: &[&str] = &[
    "ubuntu",
    "debian",
    "rhel",
    "centos",
    "rocky",
    "almalinux",
    "fedora",
    "amzn",
    "ol",
    "sles",
    "sled",
    "opensuse-leap",
    "opensuse-tumbleweed",
    "arch",
    "pop",
    "linuxmint",
    "azurelinux",
    "mariner",
    "cos",
    "flatcar",
];

pub const CHECK: Check = Check {
    id: ID,
    title: "Distribution, kernel, architecture and C library",
    looks_at: "distribution, kernel, architecture, C library (musl is not supported by the \
               driver)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "/etc/os-release, the kernel version, the CPU architecture and the C library \
               (`ldd --version`; where it was not read, the distribution tells: Alpine is \
               musl, the glibc distributions listed in the code are glibc). It passes only on \
               what was read: an unread distribution, architecture or C library is a skip \
               with the reason.",
        why: "The NVIDIA driver and CUDA support glibc on x86_64 and aarch64 (and ppc64le for \
              older releases); musl-based images (Alpine) cannot load the driver's libraries.",
        verify: "cat /etc/os-release; uname -rm; ldd --version",
        fix: "Use a glibc-based image (Ubuntu, Debian, RHEL family) for CUDA work.",
    },
    profiles: &[],
    run: platform,
};

fn platform(facts: &Facts, _: &Policy) -> Vec<Finding> {
    let m = &facts.machine;
    let mut ev = Evidence::new();
    let os = m.os.value().map(|o| o.pretty_name.clone());
    if let Some(o) = &os {
        ev.insert("os", o);
    }
    if let Some(k) = m.kernel.value() {
        ev.insert("kernel", k);
    }
    if let Some(a) = m.arch.value() {
        ev.insert("arch", a);
    }
    if let Some(l) = m.libc.value() {
        ev.insert("libc", l);
    }
    if let Some(Libc::Musl { .. }) = m.libc.value() {
        return vec![Finding::fail(
            ID,
            "The C library is musl: the NVIDIA driver's user-space libraries need glibc",
        )
        .evidence(ev)
        .fix("Use a glibc-based image (Ubuntu, Debian, RHEL family).")];
    }
    if let Some(a) = m.arch.value() {
        if !SUPPORTED_ARCHS.contains(&a.as_str()) {
            return vec![Finding::fail(
                ID,
                format!("Architecture {a} is not supported by the NVIDIA driver"),
            )
            .evidence(ev)];
        }
    }
    // The C library decides whether the driver's libraries load; where `ldd --version` was
    // not read, the distribution tells (every glibc distribution below ships glibc only).
    let libc = match (m.libc.value(), m.os.value()) {
        (Some(Libc::Glibc { version: Some(v) }), _) => Some(format!("glibc {v}")),
        (Some(Libc::Glibc { version: None }), _) => Some("glibc".to_string()),
        (Some(Libc::Musl { .. }), _) => None,
        (None, Some(o)) if MUSL_DISTRIBUTIONS.contains(&o.id.as_str()) => {
            return vec![Finding::fail(
                ID,
                format!("{} uses the musl C library: the NVIDIA driver's user-space libraries need glibc", o.pretty_name),
            )
            .evidence(ev)
            .fix("Use a glibc-based image (Ubuntu, Debian, RHEL family).")]
        }
        (None, Some(o)) if GLIBC_DISTRIBUTIONS.contains(&o.id.as_str()) => {
            Some(format!("glibc (the C library {} ships)", o.id))
        }
        (None, _) => None,
    };
    // Pass only on what was read: the distribution, and a C library known to be glibc.
    let missing: Vec<String> = [
        m.os.reason().map(|r| format!("distribution ({r})")),
        m.arch.reason().map(|r| format!("architecture ({r})")),
        libc.is_none().then(|| {
            format!(
                "C library ({})",
                m.libc.reason().unwrap_or("not told by the distribution")
            )
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !missing.is_empty() {
        return vec![
            Finding::skip(ID, format!("platform not read: {}", missing.join("; "))).evidence(ev),
        ];
    }
    let kernel = m
        .kernel
        .value()
        .and_then(|k| k.split_whitespace().nth(2))
        .map(|k| format!(", kernel {k}"))
        .unwrap_or_default();
    vec![Finding::pass(
        ID,
        format!(
            "{}{kernel}, {}, {}",
            os.unwrap_or_default(),
            m.arch.value().cloned().unwrap_or_default(),
            libc.unwrap_or_default()
        ),
    )
    .evidence(ev)]
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::OsRelease;
    use crate::finding::Status;
    use crate::reading::Reading;
    use crate::testing::{statuses, Machine};

    fn os(id: &str, name: &str) -> Reading<OsRelease> {
        Reading::Value(OsRelease {
            id: id.into(),
            version_id: None,
            pretty_name: name.into(),
        })
    }

    #[test]
    fn platform_read_and_judged() {
        let f = Machine::healthy("h200-sxm-141gb", 1).build();
        let r = platform(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert_eq!(
            r[0].message,
            "Ubuntu 24.04.3 LTS, kernel 6.8.0-60-generic, x86_64, glibc 2.39"
        );
        let mut g = f.clone();
        g.machine.libc = Reading::Value(Libc::Glibc { version: None });
        g.machine.kernel = Reading::unavailable("x");
        assert_eq!(
            platform(&g, &Policy::default())[0].message,
            "Ubuntu 24.04.3 LTS, x86_64, glibc"
        );
        let mut m = f.clone();
        m.machine.libc = Reading::Value(Libc::Musl { version: None });
        let r = platform(&m, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0].message.contains("musl"));
        let mut a = f.clone();
        a.machine.arch = Reading::Value("riscv64".into());
        assert_eq!(
            statuses(&platform(&a, &Policy::default())),
            vec![Status::Fail]
        );
        for ok in SUPPORTED_ARCHS {
            a.machine.arch = Reading::Value(ok.to_string());
            assert_eq!(
                statuses(&platform(&a, &Policy::default())),
                vec![Status::Pass]
            );
        }
    }

    #[test]
    fn an_unread_distribution_is_no_pass() {
        // Seen: pass "unknown distribution, kernel ..." with /etc/os-release unreadable.
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.machine.os = Reading::unavailable("/etc/os-release: permission denied");
        let r = platform(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        assert_eq!(
            r[0].message,
            "platform not read: distribution (/etc/os-release: permission denied)"
        );
        f.machine.arch = Reading::unavailable("uname failed");
        let r = platform(&f, &Policy::default());
        assert!(r[0].message.contains("; architecture (uname failed)"));
        // A musl C library fails whatever else was read.
        f.machine.libc = Reading::Value(Libc::Musl { version: None });
        assert_eq!(
            statuses(&platform(&f, &Policy::default())),
            vec![Status::Fail]
        );
    }

    #[test]
    fn an_unread_c_library_is_told_by_the_distribution_or_not_at_all() {
        let mut f = Machine::healthy("h200-sxm-141gb", 1).build();
        f.machine.libc = Reading::unavailable("no ldd");
        let r = platform(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Pass]);
        assert!(r[0].message.ends_with("glibc (the C library ubuntu ships)"));
        f.machine.os = os("alpine", "Alpine Linux v3.20");
        let r = platform(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Fail]);
        assert!(r[0]
            .message
            .starts_with("Alpine Linux v3.20 uses the musl C library"));
        f.machine.os = os("nixos", "NixOS 24.05");
        let r = platform(&f, &Policy::default());
        assert_eq!(statuses(&r), vec![Status::Skip]);
        assert_eq!(r[0].message, "platform not read: C library (no ldd)");
        for id in GLIBC_DISTRIBUTIONS {
            f.machine.os = os(id, id);
            assert_eq!(
                statuses(&platform(&f, &Policy::default())),
                vec![Status::Pass],
                "{id}"
            );
        }
        for id in MUSL_DISTRIBUTIONS {
            f.machine.os = os(id, id);
            assert_eq!(
                statuses(&platform(&f, &Policy::default())),
                vec![Status::Fail],
                "{id}"
            );
        }
    }
}
