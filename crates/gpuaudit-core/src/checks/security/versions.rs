//! security.versions: the driver, CUDA toolkit, NVIDIA container toolkit, runc, containerd and
//! Docker Engine versions against the fixed versions of their security bulletins
//! (`data/security.toml`).

use crate::checks::cuda::driver::driver_is_old;
use crate::checks::{Check, CheckDoc, CheckKind};
use crate::facts::{Facts, Origin, Package, VirtualizationMode};
use crate::finding::{Cause, Finding, Status};
use crate::parse::version::{compare, Upstream};
use crate::parse::xid::iso;
use crate::policy::Policy;
use crate::reading::Reading;
use crate::render::escape::escape_line;
use crate::spec::security::{security_table, Bulletin, Exposure, Product, SecurityTable, Severity};
use serde::Serialize;

const ID: &str = "security.versions";

macro_rules! stale_days {
    () => {
        183
    };
}
/// The table is said to be possibly out of date when the audit is this many days after the
/// date it was last checked against its sources (about 6 months: NVIDIA publishes GPU driver
/// bulletins quarterly, so two may be missing).
pub const STALE_DAYS: i64 = stale_days!();
/// At most this many bulletins are named in one finding (the evidence lists them all).
pub const NAMED: usize = 3;

/// Programs that answer for a product, in the order they are believed.
const PROGRAMS: &[(Product, &[&str])] = &[
    (
        Product::ContainerToolkit,
        &["nvidia-ctk", "nvidia-container-cli"],
    ),
    (Product::Runc, &["runc"]),
    (Product::Containerd, &["containerd"]),
    (Product::Docker, &["dockerd"]),
];

/// Packages that install a product, in the order they are believed.
const PACKAGES: &[(Product, &[&str])] = &[
    (
        Product::ContainerToolkit,
        &[
            "nvidia-container-toolkit",
            "nvidia-container-toolkit-base",
            "libnvidia-container-tools",
            "libnvidia-container1",
        ],
    ),
    (Product::Runc, &["runc", "moby-runc"]),
    (
        Product::Containerd,
        &["containerd.io", "containerd", "moby-containerd"],
    ),
    (
        Product::Docker,
        &["docker-ce", "docker.io", "moby-engine", "docker"],
    ),
];

/// The products only the host sees: inside a container, these are the image's, not what
/// runs the container.
const HOST_ONLY: [Product; 4] = [
    Product::ContainerToolkit,
    Product::Runc,
    Product::Containerd,
    Product::Docker,
];

pub const CHECK: Check = Check {
    id: ID,
    title: "Driver, CUDA toolkit, container toolkit, runc, containerd, Docker against their security bulletins",
    looks_at: "the NVIDIA driver, CUDA toolkit, NVIDIA container toolkit, runc, containerd and \
               Docker Engine versions against the fixed versions of their security bulletins \
               (data/security.toml, per driver branch); what a tenant can see apart from what only \
               the host can",
    kind: CheckKind::Facts,
    doc: CheckDoc {
        what: concat!(
            "The installed versions of the NVIDIA driver (NVML / nvidia-smi), the CUDA \
             toolkit(s), and on a host the NVIDIA Container Toolkit, runc, containerd and \
             Docker Engine: each program's own `--version` (nvidia-ctk, nvidia-container-cli, \
             runc, containerd, dockerd), else the package database (/var/lib/dpkg/status, \
             readable by anyone; `rpm -qa` on RPM systems). Each is held against the embedded, \
             dated table of bulletins (data/security.toml: NVIDIA's GPU display driver, CUDA \
             toolkit and container toolkit bulletins 2024-2026 per Linux driver branch, runc's, \
             containerd's and Docker Engine's advisories), each with its affected and fixed \
             versions and source. A version inside an affected range fails where the bulletin \
             is a container escape rated high or critical, warns for other high or critical \
             ones and informs for medium and low ones (and for the CUDA toolkit's, which concern tools \
             a person runs on files of their choosing); a driver branch a bulletin lists no fix \
             for (end of life) is said to be possibly affected, with the branch to move to. A \
             build of the distribution (Ubuntu, Debian, Red Hat ...) may carry the fix without \
             the upstream version: it warns instead of failing. Inside a container the host's \
             container toolkit, runc, containerd and Docker are not visible (host only); in a \
             vGPU guest the host's Virtual GPU Manager is not. The table is dated: an audit \
             more than ",
            stale_days!(),
            " days after it says newer bulletins may be missing."
        ),
        why: "A container escape in the stack that starts GPU containers (CVE-2024-0132 and \
              CVE-2025-23266 in the NVIDIA Container Toolkit, CVE-2024-21626 and the November \
              2025 procfs breakouts in runc) lets one tenant's image take the host and every \
              other tenant's GPUs and data on a shared node; a driver privilege escalation does \
              the same from any process that can open /dev/nvidia*. A node that runs one passes \
              every performance check.",
        verify: "nvidia-smi --query-gpu=driver_version --format=csv,noheader\n\
                 cat /proc/driver/nvidia/version\n\
                 nvidia-ctk --version\n\
                 nvidia-container-cli --version\n\
                 runc --version\n\
                 containerd --version\n\
                 dockerd --version\n\
                 dpkg-query -W -f='${Package} ${Version}\\n' nvidia-container-toolkit libnvidia-container-tools runc containerd.io docker-ce\n\
                 rpm -q nvidia-container-toolkit runc containerd.io docker-ce\n\
                 # the bulletins: https://www.nvidia.com/en-us/security/",
        fix: "Update what a bulletin concerns to its fixed version or later: the driver within its \
              branch (an end-of-life branch to a supported one), then reboot; the container \
              toolkit with `sudo apt-get install --only-upgrade nvidia-container-toolkit` (RHEL \
              family: `sudo dnf upgrade nvidia-container-toolkit`); runc and containerd with \
              `sudo apt-get install --only-upgrade containerd.io runc` (`sudo dnf upgrade \
              containerd.io runc`), Docker with `sudo apt-get install --only-upgrade docker-ce` \
              (`sudo dnf upgrade docker-ce`), then `sudo systemctl restart containerd docker`. \
              A distribution's build: check its tracker for the CVE.",
    },
    profiles: &[],
    run: run_versions,
};

/// One installed copy of a product, as read.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Installed {
    pub product: Product,
    /// As read ("5:27.1.1-1~ubuntu.22.04~jammy", "1.1.12").
    pub version: String,
    /// Where it was read, in words ("`runc --version` (/usr/bin/runc)").
    pub source: String,
    /// A build of the distribution, which may carry fixes without the upstream version.
    pub distribution_build: Option<String>,
}

/// What was found of a product.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Found {
    Installed(Vec<Installed>),
    /// Present, or maybe present, but its version was not read: why.
    Unknown(String),
    /// Not installed (the package database and the usual program paths were read).
    Absent,
}

/// Vendors whose packages are the upstream's own builds.
fn upstream_vendor(vendor: &str) -> bool {
    let v = vendor.to_ascii_lowercase();
    ["docker", "nvidia", "containerd.io"]
        .iter()
        .any(|u| v.contains(u))
}

/// Whether a version's revision names a distribution's build: Ubuntu's "0ubuntu2", Debian's
/// "+deb12u1" (Docker's own packages write "~ubuntu.22.04~jammy", which is not).
fn distribution_revision(revision: &str) -> bool {
    let b = revision.as_bytes();
    revision.contains("+deb")
        || revision
            .match_indices("ubuntu")
            .any(|(i, _)| i > 0 && b[i - 1].is_ascii_digit())
}

/// Who built it, where that is a distribution: from the package's vendor where known, else
/// from the version's revision.
fn distribution_build(version: &str, package: Option<&Package>) -> Option<String> {
    if let Some(v) = package.and_then(|p| p.vendor.as_deref()) {
        return (!upstream_vendor(v)).then(|| v.to_string());
    }
    let rev = Upstream::parse(version)?.revision?;
    distribution_revision(&rev).then(|| format!("revision {rev}"))
}

fn driver(facts: &Facts) -> Found {
    match &facts.driver.version {
        Reading::Value(v) => {
            let via = facts
                .driver
                .query
                .value()
                .map(|q| q.split(' ').next().unwrap_or(q).to_string())
                .unwrap_or_else(|| "the driver".into());
            Found::Installed(vec![Installed {
                product: Product::Driver,
                version: v.clone(),
                source: format!("driver version from {via}"),
                distribution_build: None,
            }])
        }
        Reading::Unavailable(r) => Found::Unknown(format!("driver version not read: {r}")),
    }
}

fn toolkits(facts: &Facts) -> Found {
    match &facts.toolkit {
        Reading::Value(t) if t.is_empty() => Found::Absent,
        Reading::Value(t) => Found::Installed(
            t.iter()
                .map(|t| Installed {
                    product: Product::CudaToolkit,
                    version: t.version.clone(),
                    source: format!("{} ({})", t.path, t.source),
                    distribution_build: None,
                })
                .collect(),
        ),
        Reading::Unavailable(r) => Found::Unknown(format!("CUDA toolkit not read: {r}")),
    }
}

/// A product of the container stack: the program's own answer first, the package after.
fn stack(facts: &Facts, product: Product) -> Found {
    let v = &facts.host.versions;
    let programs: &[&str] = PROGRAMS
        .iter()
        .find(|(p, _)| *p == product)
        .map_or(&[], |(_, n)| n);
    let packages: &[&str] = PACKAGES
        .iter()
        .find(|(p, _)| *p == product)
        .map_or(&[], |(_, n)| n);
    let package = packages.iter().find_map(|n| v.package(n));
    let mut unknown = None;
    if let Reading::Value(list) = &v.programs {
        for name in programs {
            let Some(p) = list.iter().find(|p| p.program == *name) else {
                continue;
            };
            match &p.version {
                Reading::Value(ver) => {
                    return Found::Installed(vec![Installed {
                        product,
                        version: ver.clone(),
                        source: format!("`{name} --version` ({})", p.path),
                        distribution_build: distribution_build(ver, package),
                    }])
                }
                Reading::Unavailable(r) => {
                    unknown.get_or_insert_with(|| r.clone());
                }
            }
        }
    }
    if let Some(p) = package {
        let db = v.packages.value().map_or("", |d| d.source.as_str());
        return Found::Installed(vec![Installed {
            product,
            version: p.version.clone(),
            source: format!("package {} ({db})", p.name),
            distribution_build: distribution_build(&p.version, Some(p)),
        }]);
    }
    if let Some(r) = unknown {
        return Found::Unknown(r);
    }
    match (&v.programs, &v.packages) {
        (Reading::Value(_), Reading::Value(_)) => Found::Absent,
        // No package database, but the programs were looked for: not at the usual paths.
        (Reading::Value(_), Reading::Unavailable(_)) => Found::Absent,
        (Reading::Unavailable(r), _) => Found::Unknown(format!("versions not read: {r}")),
    }
}

/// What a bulletin makes of a version: its status, and the bulletin.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Hit {
    pub id: String,
    pub cves: Vec<String>,
    pub severity: &'static str,
    #[serde(skip)]
    pub rank: Severity,
    pub escape: bool,
    /// The version to move to.
    pub fix: String,
    /// The source lists no fix for the version's branch and says it may be affected.
    pub maybe: bool,
    pub status: Status,
    #[serde(skip)]
    pub impact: String,
    pub url: String,
}

/// The status a bulletin gives an affected version: a container escape rated high or
/// critical fails, other high or critical bulletins warn, medium and low ones inform. The CUDA
/// toolkit's bulletins inform whatever their rating: they concern tools a person runs on a
/// file of their choosing (nvdisasm, cuobjdump, nvJPEG, Nsight scripts), which neither a
/// tenant's container nor a GPU job reaches.
pub(crate) fn bulletin_status(b: &Bulletin) -> Status {
    if b.product == Product::CudaToolkit {
        Status::Info
    } else if b.escape && b.severity >= Severity::High {
        Status::Fail
    } else if b.severity >= Severity::High {
        Status::Warn
    } else {
        Status::Info
    }
}

pub(crate) fn hits(table: &SecurityTable, product: Product, version: &str) -> Vec<Hit> {
    let mut out: Vec<Hit> = table
        .of(product)
        .filter_map(|b| {
            let (fix, maybe) = match b.exposure(version) {
                Exposure::Unaffected => return None,
                Exposure::Affected { fix } => (fix, false),
                Exposure::Maybe { fix } => (fix, true),
            };
            Some(Hit {
                id: b.id.clone(),
                cves: b.cves.clone(),
                severity: b.severity.as_str(),
                rank: b.severity,
                escape: b.escape,
                fix,
                maybe,
                status: bulletin_status(b),
                impact: b.impact.clone(),
                url: b.url.clone(),
            })
        })
        .collect();
    // The worst first, then the most severe; among equals, the newest bulletin (the table
    // lists them oldest first).
    out.reverse();
    out.sort_by_key(|h| std::cmp::Reverse((h.status, h.rank)));
    out
}

fn upstream_of(v: &str) -> String {
    Upstream::parse(v).map_or_else(|| v.to_string(), |u| u.version)
}

/// The version that leaves every hit behind: the highest of their fixes.
pub(crate) fn target(hits: &[Hit]) -> Option<&str> {
    hits.iter()
        .map(|h| h.fix.as_str())
        .max_by(|a, b| compare(&upstream_of(a), &upstream_of(b)))
}

fn product_fix(product: Product, to: &str) -> String {
    match product {
        Product::Driver => format!(
            "install NVIDIA driver {to} or later (https://www.nvidia.com/Download/index.aspx, \
             or the distribution's driver packages), then reboot"
        ),
        Product::CudaToolkit => format!(
            "install CUDA toolkit {to} or later (https://developer.nvidia.com/cuda-downloads); \
             the bulletins concern its tools (nvdisasm, cuobjdump, nvJPEG, Nsight)"
        ),
        Product::ContainerToolkit => format!(
            "update the NVIDIA Container Toolkit to {to} or later: `sudo apt-get install \
             --only-upgrade nvidia-container-toolkit` (RHEL family: `sudo dnf upgrade \
             nvidia-container-toolkit`)"
        ),
        Product::Runc => format!(
            "update runc to {to} or later: `sudo apt-get install --only-upgrade containerd.io runc` \
             (RHEL family: `sudo dnf upgrade containerd.io runc`; Docker's containerd.io ships \
             runc), then `sudo systemctl restart containerd`"
        ),
        Product::Containerd => format!(
            "update containerd to {to} or later: `sudo apt-get install --only-upgrade containerd.io` \
             (RHEL family: `sudo dnf upgrade containerd.io`), then `sudo systemctl restart containerd`"
        ),
        Product::Docker => format!(
            "update Docker Engine to {to} or later: `sudo apt-get install --only-upgrade docker-ce` \
             (RHEL family: `sudo dnf upgrade docker-ce`), then `sudo systemctl restart docker`"
        ),
    }
}

fn describe(h: &Hit) -> String {
    let mut kind = h.severity.to_string();
    if h.escape {
        kind.push_str(", container escape");
    }
    let ids = if h.cves.len() > 3 {
        format!("{} and {} more", h.cves[..2].join(", "), h.cves.len() - 2)
    } else {
        h.cves.join(", ")
    };
    let fix = if h.maybe {
        format!("no fix on this branch: may be affected, move to {}", h.fix)
    } else {
        format!("fixed in {}", h.fix)
    };
    format!("{ids} ({kind}): {}; {fix}", h.impact)
}

/// The finding of one installed copy.
fn judge(table: &SecurityTable, i: &Installed, note: Option<&str>) -> Finding {
    let version = escape_line(&i.version).into_owned();
    let source = escape_line(&i.source).into_owned();
    let name = i.product.name();
    let with_note = |m: String| match note {
        Some(n) => format!("{m}; {n}"),
        None => m,
    };
    let Some(up) = Upstream::parse(&i.version) else {
        return Finding::skip(
            ID,
            with_note(format!(
                "{name} version '{version}' ({source}) is not a version gpuaudit can compare"
            )),
        )
        .with("product", name)
        .with("version", &version);
    };
    let hits = hits(table, i.product, &up.version);
    let ev = |f: Finding| {
        f.with("product", name)
            .with("version", &version)
            .with("upstream_version", &up.version)
            .with("source", &source)
            .with("distribution_build", &i.distribution_build)
            .with("bulletins", &hits)
            .with("table_checked", &table.checked)
    };
    if hits.is_empty() {
        let n = table.of(i.product).count();
        let none = if n == 1 {
            format!("the table's one {name} bulletin does not concern it")
        } else {
            format!("none of the {n} {name} bulletins of the table concerns it")
        };
        return ev(Finding::pass(
            ID,
            with_note(format!("{name} {version} ({source}): {none}")),
        ));
    }
    let mut status = hits.iter().map(|h| h.status).max().unwrap_or(Status::Info);
    let mut parts: Vec<String> = hits.iter().take(NAMED).map(describe).collect();
    if hits.len() > NAMED {
        parts.push(format!("{} more bulletins", hits.len() - NAMED));
    }
    let to = target(&hits).unwrap_or("the newest release");
    let mut msg = format!(
        "{name} {version} ({source}): {} {} concern{} it: {}",
        hits.len(),
        if hits.len() == 1 {
            "bulletin"
        } else {
            "bulletins"
        },
        if hits.len() == 1 { "s" } else { "" },
        parts.join("; ")
    );
    if let Some(d) = &i.distribution_build {
        msg.push_str(&format!(
            "; this is a distribution's build ({}): it may carry the fix without the upstream version, check the distribution's tracker for the CVE",
            escape_line(d)
        ));
        status = status.min(Status::Warn);
    }
    msg.push_str(&format!("; move to {to} or later"));
    ev(Finding::new(ID, status, with_note(msg)).fix(product_fix(i.product, to)))
}

/// Days since 1970 of a date or time ("2026-12-02", "2026-12-02T10:00:00Z").
fn day_of(s: &str) -> Option<i64> {
    let t = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    iso(&t).map(|(_, secs)| secs.div_euclid(86_400))
}

/// The day of the audit: when the snapshot was collected, or today on the live machine.
fn audit_day(facts: &Facts) -> Option<i64> {
    match &facts.origin {
        Origin::Snapshot { collected_at, .. } => collected_at.as_deref().and_then(day_of),
        Origin::Live => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .and_then(|d| i64::try_from(d.as_secs() / 86_400).ok()),
    }
}

fn run_versions(facts: &Facts, _policy: &Policy) -> Vec<Finding> {
    judge_all(facts, audit_day(facts))
}

pub(crate) fn judge_all(facts: &Facts, today: Option<i64>) -> Vec<Finding> {
    let table = match security_table() {
        Ok(t) => t,
        Err(e) => {
            return vec![Finding::skip(
                ID,
                format!("the bulletin table could not be read: {e}"),
            )]
        }
    };
    let mut out = Vec::new();
    let inside = facts.host.container.inside.value().cloned().flatten();
    let vgpu = facts
        .gpu_list()
        .iter()
        .any(|g| g.virtualization.value() == Some(&VirtualizationMode::Vgpu));
    let driver_note = if vgpu {
        Some("this is a vGPU guest: the host's Virtual GPU Manager has bulletins of its own and is not visible from here (host only)".to_string())
    } else {
        inside.as_ref().map(|k| {
            format!(
                "inside a {} container: this is the host's driver (the kernel module is shared)",
                escape_line(k)
            )
        })
    };
    let mut absent = Vec::new();
    let mut unknown: Vec<(Product, String)> = Vec::new();
    for product in Product::ALL {
        if HOST_ONLY.contains(&product) && inside.is_some() {
            continue;
        }
        let found = match product {
            Product::Driver => driver(facts),
            Product::CudaToolkit => toolkits(facts),
            p => stack(facts, p),
        };
        let note = (product == Product::Driver)
            .then_some(driver_note.as_deref())
            .flatten();
        match found {
            Found::Installed(list) => {
                // A driver cuda.driver finds too old is one problem: its upgrade is also what
                // these bulletins ask for.
                let old = product == Product::Driver && driver_is_old(facts);
                out.extend(list.iter().map(|i| {
                    let f = judge(table, i, note);
                    if old && f.status >= Status::Warn {
                        f.caused_by(Cause::check(crate::checks::cuda::driver::CHECK.id))
                    } else {
                        f
                    }
                }));
            }
            Found::Absent => absent.push(product.name()),
            Found::Unknown(r) => unknown.push((product, r)),
        }
    }
    // Reasons shared by several products are said once.
    let mut said: Vec<&str> = Vec::new();
    let mut names: Vec<Vec<&str>> = Vec::new();
    for (p, r) in &unknown {
        match said.iter().position(|s| s == r) {
            Some(i) => names[i].push(p.name()),
            None => {
                said.push(r);
                names.push(vec![p.name()]);
            }
        }
    }
    for (r, n) in said.iter().zip(&names) {
        out.push(
            Finding::skip(
                ID,
                format!("{}: version not known: {}", n.join(", "), escape_line(r)),
            )
            .with("products", n),
        );
    }
    if let Some(k) = &inside {
        out.push(
            Finding::skip(
                ID,
                format!(
                    "host only: inside a {} container the host's NVIDIA Container Toolkit, runc, containerd and Docker Engine are not visible; run gpuaudit on the host, or ask the provider for their versions",
                    escape_line(k)
                ),
            )
            .with("products", HOST_ONLY.map(Product::name)),
        );
    }
    if !absent.is_empty() {
        out.push(
            Finding::pass(ID, format!("not installed: {}", absent.join(", ")))
                .with("products", &absent),
        );
    }
    if let (Some(today), Some(checked)) = (today, day_of(&table.checked)) {
        let age = today - checked;
        if age > STALE_DAYS {
            out.push(
                Finding::info(
                    ID,
                    format!(
                        "the bulletin table was checked against its sources on {}, {age} days before this audit: it may miss bulletins published since (update gpuaudit)",
                        table.checked
                    ),
                )
                .with("table_checked", &table.checked)
                .with("age_days", age),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
