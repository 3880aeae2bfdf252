//! os.platform: the distribution, kernel, architecture and C library.

use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, Libc};
use crate::finding::{Evidence, Finding};
use crate::policy::Policy;

const ID: &str = "os.platform";

/// The architectures NVIDIA's Linux driver supports (ppc64le for older releases).
pub const SUPPORTED_ARCHS: &[&str] = &["x86_64", "aarch64", "ppc64le"];

pub const CHECK: Check = Check {
    id: ID,
    title: "Distribution, kernel, architecture and C library",
    looks_at: "distribution, kernel, architecture, C library (musl is not supported by the \
               driver)",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: "/etc/os-release, the kernel version, the CPU architecture and the C library.",
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
    if os.is_none() && m.kernel.value().is_none() {
        return vec![Finding::skip(
            ID,
            format!(
                "platform not read: {}",
                m.os.reason().or(m.kernel.reason()).unwrap_or("?")
            ),
        )];
    }
    let kernel_short = m
        .kernel
        .value()
        .and_then(|k| k.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_else(|| "?".into());
    vec![Finding::pass(
        ID,
        format!(
            "{}, kernel {kernel_short}, {}{}",
            os.unwrap_or_else(|| "unknown distribution".into()),
            m.arch
                .value()
                .cloned()
                .unwrap_or_else(|| "unknown architecture".into()),
            match m.libc.value() {
                Some(Libc::Glibc { version: Some(v) }) => format!(", glibc {v}"),
                Some(Libc::Glibc { version: None }) => ", glibc".into(),
                _ => String::new(),
            }
        ),
    )
    .evidence(ev)]
}
