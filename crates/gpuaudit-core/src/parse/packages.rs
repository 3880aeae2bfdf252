//! The package database: dpkg's status file (`/var/lib/dpkg/status`, readable by anyone) and
//! the listing `rpm -qa --qf` gives, reduced to the packages gpuaudit judges
//! ([`WATCHED`], [`WATCHED_PREFIXES`]), with their versions and who built them.
//!
//! Both are bounded: at most [`MAX_PACKAGES`] packages are kept, each field one line of at most
//! [`MAX_FIELD_CHARS`] characters; a line that is not `Field: value` is skipped.

use crate::facts::Package;

/// Packages whose versions a check reads (security.versions; the fabric manager's for the
/// NVLink fabric checks).
pub const WATCHED: &[&str] = &[
    // The NVIDIA container toolkit (its packages since 1.x: toolkit, toolkit-base, the
    // library and its CLI; nvidia-docker2 and nvidia-container-runtime are the old wrappers).
    "nvidia-container-toolkit",
    "nvidia-container-toolkit-base",
    "libnvidia-container-tools",
    "libnvidia-container1",
    "nvidia-docker2",
    "nvidia-container-runtime",
    // runc: the distributions' package, Fedora's moby-runc.
    "runc",
    "moby-runc",
    // containerd: Docker's containerd.io (which also ships runc), the distributions'.
    "containerd.io",
    "containerd",
    "moby-containerd",
    // Docker Engine: Docker's docker-ce, Debian/Ubuntu's docker.io, Fedora/Azure's moby-engine.
    "docker-ce",
    "docker.io",
    "moby-engine",
    "docker",
];

/// Package name prefixes read as well: the fabric manager ("nvidia-fabricmanager-570",
/// "nvidia-fabric-manager"), the driver's packages, the CUDA toolkit's.
pub const WATCHED_PREFIXES: &[&str] = &[
    "nvidia-fabricmanager",
    "nvidia-fabric-manager",
    "nvidia-driver",
    "cuda-toolkit",
];

/// At most this many watched packages are kept (a database is not a list of these).
pub const MAX_PACKAGES: usize = 256;
/// One field's value, at most.
pub const MAX_FIELD_CHARS: usize = 256;

pub fn watched(name: &str) -> bool {
    WATCHED.contains(&name) || WATCHED_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn field(v: &str) -> String {
    let v = v.trim();
    match v.char_indices().nth(MAX_FIELD_CHARS) {
        Some((i, _)) => v[..i].to_string(),
        None => v.to_string(),
    }
}

/// The watched packages dpkg lists as installed (`Status: install ok installed`; also
/// `hold ok installed`), in the file's order. Stanzas are separated by blank lines; a
/// continuation line (starting with a space) belongs to the field before it and is not read.
pub fn parse_dpkg_status(text: &str) -> Vec<Package> {
    let mut out = Vec::new();
    let mut cur = Stanza::default();
    for line in text.lines().chain(std::iter::once("")) {
        if line.trim().is_empty() {
            if let Some(p) = cur.take() {
                if out.len() < MAX_PACKAGES {
                    out.push(p);
                }
            }
            continue;
        }
        if line.starts_with([' ', '\t']) {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k {
            "Package" => cur.name = Some(field(v)),
            "Status" => cur.installed = v.split_whitespace().nth(2) == Some("installed"),
            "Version" => cur.version = Some(field(v)),
            "Architecture" => cur.arch = Some(field(v)),
            "Maintainer" => cur.vendor = Some(field(v)),
            _ => {}
        }
    }
    out
}

#[derive(Default)]
struct Stanza {
    name: Option<String>,
    version: Option<String>,
    arch: Option<String>,
    vendor: Option<String>,
    installed: bool,
}

impl Stanza {
    fn take(&mut self) -> Option<Package> {
        let s = std::mem::take(self);
        let name = s.name?;
        if !s.installed || !watched(&name) || name.is_empty() {
            return None;
        }
        Some(Package {
            name,
            version: s.version.filter(|v| !v.is_empty())?,
            arch: s.arch.filter(|a| !a.is_empty()),
            vendor: s.vendor.filter(|v| !v.is_empty()),
        })
    }
}

/// dpkg's status file again, from packages: one stanza each with the fields
/// [`parse_dpkg_status`] reads. What `collect` writes (so the snapshot holds these packages
/// only, not the machine's whole software list).
pub fn format_dpkg_status(packages: &[Package]) -> String {
    let mut s = String::new();
    for p in packages {
        s.push_str(&format!(
            "Package: {}\nStatus: install ok installed\n",
            one_line(&p.name)
        ));
        if let Some(a) = &p.arch {
            s.push_str(&format!("Architecture: {}\n", one_line(a)));
        }
        if let Some(v) = &p.vendor {
            s.push_str(&format!("Maintainer: {}\n", one_line(v)));
        }
        s.push_str(&format!("Version: {}\n\n", one_line(&p.version)));
    }
    s
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// The query format of the rpm listing: name, version-release, architecture, vendor.
pub const RPM_QUERY_FORMAT: &str = "%{NAME}\\t%{VERSION}-%{RELEASE}\\t%{ARCH}\\t%{VENDOR}\\n";

/// `rpm -qa --qf` with [`RPM_QUERY_FORMAT`]: one package a line, tab-separated; the watched
/// ones kept. rpm writes `(none)` for a vendor it does not know.
pub fn parse_rpm_listing(text: &str) -> Vec<Package> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split('\t');
        let (Some(name), Some(version)) = (f.next(), f.next()) else {
            continue;
        };
        let (name, version) = (field(name), field(version));
        if name.is_empty() || version.is_empty() || !watched(&name) {
            continue;
        }
        let known = |s: Option<&str>| s.map(field).filter(|s| !s.is_empty() && s != "(none)");
        out.push(Package {
            name,
            version,
            arch: known(f.next()),
            vendor: known(f.next()),
        });
        if out.len() == MAX_PACKAGES {
            break;
        }
    }
    out
}

/// The listing again, as [`parse_rpm_listing`] reads it.
pub fn format_rpm_listing(packages: &[Package]) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    packages
        .iter()
        .map(|p| {
            format!(
                "{}\t{}\t{}\t{}\n",
                clean(&p.name),
                clean(&p.version),
                clean(p.arch.as_deref().unwrap_or("(none)")),
                clean(p.vendor.as_deref().unwrap_or("(none)"))
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stanzas as dpkg writes them (Ubuntu 22.04 with Docker's and NVIDIA's repositories),
    /// with a package removed but not purged and one that is not watched.
    const STATUS: &str = "Package: adduser\nStatus: install ok installed\nPriority: important\nVersion: 3.118ubuntu5\nDescription: add and remove users\n multi-line description\n\n\
Package: nvidia-container-toolkit\nStatus: install ok installed\nPriority: optional\nSection: utils\nInstalled-Size: 2476\nMaintainer: NVIDIA CORPORATION <cudatools@nvidia.com>\nArchitecture: amd64\nVersion: 1.16.1-1\nDepends: nvidia-container-toolkit-base (= 1.16.1-1), libnvidia-container-tools (>= 1.16.1-1)\n\n\
Package: runc\nStatus: deinstall ok config-files\nVersion: 1.1.7-0ubuntu1~22.04.1\n\n\
Package: containerd.io\nStatus: install ok installed\nMaintainer: Containerd team <help@containerd.io>\nArchitecture: amd64\nVersion: 1.6.28-1\nProvides: containerd, runc\n\n\
Package: docker-ce\nStatus: hold ok installed\nMaintainer: Docker <support@docker.com>\nArchitecture: amd64\nVersion: 5:27.1.1-1~ubuntu.22.04~jammy\n";

    #[test]
    fn dpkg_status_keeps_installed_watched_packages() {
        let p = parse_dpkg_status(STATUS);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["nvidia-container-toolkit", "containerd.io", "docker-ce"]
        );
        assert_eq!(p[0].version, "1.16.1-1");
        assert_eq!(p[0].arch.as_deref(), Some("amd64"));
        assert_eq!(
            p[0].vendor.as_deref(),
            Some("NVIDIA CORPORATION <cudatools@nvidia.com>")
        );
        assert_eq!(p[2].version, "5:27.1.1-1~ubuntu.22.04~jammy");
        // What collect writes reads back to the same packages.
        assert_eq!(parse_dpkg_status(&format_dpkg_status(&p)), p);
        // A stanza without a version, or not installed, is left out; CRLF line ends read.
        assert!(parse_dpkg_status("Package: runc\nStatus: install ok installed\n").is_empty());
        assert!(parse_dpkg_status(
            "Package: runc\nStatus: install ok half-installed\nVersion: 1\n"
        )
        .is_empty());
        assert_eq!(
            parse_dpkg_status(
                "Package: runc\r\nStatus: install ok installed\r\nVersion: 1.1.12\r\n"
            )
            .len(),
            1
        );
        assert!(watched("nvidia-fabricmanager-570") && watched("nvidia-fabric-manager"));
        assert!(!watched("nvidia-settings"));
    }

    #[test]
    fn rpm_listing() {
        let t =
            "runc\t1.1.12-1.el9\tx86_64\tRed Hat, Inc.\nbash\t5.1.8-9.el9\tx86_64\tRed Hat, Inc.\n\
nvidia-container-toolkit\t1.17.8-1\tx86_64\t(none)\nbroken line\ncontainerd.io\t1.7.27-3.1.el9\n";
        let p = parse_rpm_listing(t);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].vendor.as_deref(), Some("Red Hat, Inc."));
        assert_eq!(p[1].vendor, None);
        assert_eq!(p[2].arch, None);
        assert_eq!(parse_rpm_listing(&format_rpm_listing(&p)), p);
    }

    #[test]
    fn bounded() {
        let many: String = (0..MAX_PACKAGES + 10)
            .map(|i| {
                format!("Package: nvidia-driver-{i}\nStatus: install ok installed\nVersion: 1\n\n")
            })
            .collect();
        assert_eq!(parse_dpkg_status(&many).len(), MAX_PACKAGES);
        let rpm: String = (0..MAX_PACKAGES + 10)
            .map(|i| format!("nvidia-driver-{i}\t1-1\tx86_64\tNVIDIA\n"))
            .collect();
        assert_eq!(parse_rpm_listing(&rpm).len(), MAX_PACKAGES);
        let long = format!(
            "Package: runc\nStatus: install ok installed\nVersion: {}\n",
            "1".repeat(MAX_FIELD_CHARS * 4)
        );
        assert_eq!(
            parse_dpkg_status(&long)[0].version.chars().count(),
            MAX_FIELD_CHARS
        );
    }

    /// Arbitrary bytes (and mutations of a real status file) never panic, and every package
    /// kept is watched, named, versioned and bounded.
    #[test]
    fn arbitrary_bytes() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..3000 {
            let mut b: Vec<u8> = if round % 2 == 0 {
                STATUS.as_bytes().to_vec()
            } else {
                (0..(next() % 600)).map(|_| next() as u8).collect()
            };
            for _ in 0..(next() % 12) {
                if b.is_empty() {
                    break;
                }
                let at = (next() as usize) % b.len();
                match next() % 4 {
                    0 => b[at] = next() as u8,
                    1 => {
                        b.remove(at);
                    }
                    2 => b.insert(at, [b'\n', b':', b' ', b'\t', 0xff][(next() % 5) as usize]),
                    _ => b.truncate(at),
                }
            }
            let text = String::from_utf8_lossy(&b);
            for p in parse_dpkg_status(&text)
                .into_iter()
                .chain(parse_rpm_listing(&text))
            {
                assert!(watched(&p.name) && !p.version.is_empty());
                assert!(p.version.chars().count() <= MAX_FIELD_CHARS);
                assert!(!p.version.contains('\n'));
            }
        }
    }
}
