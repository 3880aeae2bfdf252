use super::*;
use crate::facts::{InstalledPackages, ProgramVersion, VersionFacts};
use crate::spec::security::Unlisted;
use crate::testing::Machine;

const CHECKED_DAY: i64 = 20_789; // 2026-12-02

fn program(name: &str, path: &str, version: &str) -> ProgramVersion {
    ProgramVersion {
        program: name.into(),
        path: path.into(),
        version: Reading::Value(version.into()),
    }
}

fn pkg(name: &str, version: &str, vendor: Option<&str>) -> Package {
    Package {
        name: name.into(),
        version: version.into(),
        arch: Some("amd64".into()),
        vendor: vendor.map(str::to_string),
    }
}

fn facts(programs: Vec<ProgramVersion>, packages: Vec<Package>) -> Facts {
    Machine::healthy("h200-sxm-141gb", 2)
        .with(|f| {
            f.host.versions = VersionFacts {
                packages: Reading::Value(InstalledPackages {
                    source: "/var/lib/dpkg/status".into(),
                    packages,
                }),
                programs: Reading::Value(programs),
            };
            f.host.container.inside = Reading::Value(None);
        })
        .build()
}

fn run(f: &Facts) -> Vec<Finding> {
    judge_all(f, Some(CHECKED_DAY))
}

fn of<'a>(out: &'a [Finding], product: &str) -> &'a Finding {
    out.iter()
        .find(|f| f.evidence.get("product").and_then(|v| v.as_str()) == Some(product))
        .unwrap_or_else(|| panic!("no finding for {product}: {out:#?}"))
}

fn bulletin(severity: Severity, escape: bool) -> Bulletin {
    Bulletin {
        id: "X".into(),
        title: "t".into(),
        updated: "2026-01-01".into(),
        product: Product::Runc,
        cves: vec!["CVE-1".into()],
        severity,
        cvss: None,
        escape,
        unlisted: Unlisted::Affected,
        impact: "i".into(),
        url: "https://x".into(),
        source: None,
        move_to: None,
        ranges: vec![],
    }
}

#[test]
fn status_by_severity_and_escape() {
    use Severity::*;
    assert_eq!(bulletin_status(&bulletin(Critical, true)), Status::Fail);
    assert_eq!(bulletin_status(&bulletin(High, true)), Status::Fail);
    assert_eq!(bulletin_status(&bulletin(Medium, true)), Status::Info);
    assert_eq!(bulletin_status(&bulletin(Critical, false)), Status::Warn);
    assert_eq!(bulletin_status(&bulletin(High, false)), Status::Warn);
    assert_eq!(bulletin_status(&bulletin(Medium, false)), Status::Info);
    assert_eq!(bulletin_status(&bulletin(Low, false)), Status::Info);
    let mut cuda = bulletin(Critical, true);
    cuda.product = Product::CudaToolkit;
    assert_eq!(bulletin_status(&cuda), Status::Info);
}

#[test]
fn old_container_toolkit_and_runc_fail() {
    let f = facts(
        vec![
            program("nvidia-ctk", "/usr/bin/nvidia-ctk", "1.16.1"),
            program("runc", "/usr/bin/runc", "1.1.11"),
        ],
        vec![pkg(
            "nvidia-container-toolkit",
            "1.16.1-1",
            Some("NVIDIA CORPORATION <cudatools@nvidia.com>"),
        )],
    );
    let out = run(&f);
    let t = of(&out, "NVIDIA Container Toolkit");
    assert_eq!(t.status, Status::Fail, "{t:#?}");
    assert!(
        t.message
            .contains("`nvidia-ctk --version` (/usr/bin/nvidia-ctk)"),
        "{}",
        t.message
    );
    assert!(t.message.contains("CVE-2025-23266"), "{}", t.message);
    // The critical escapes first: CVE-2025-23266 (the newest), then CVE-2024-0132.
    let named: Vec<&str> = t
        .evidence
        .get("bulletins")
        .and_then(|b| b.as_array())
        .unwrap()
        .iter()
        .map(|b| b["id"].as_str().unwrap())
        .collect();
    assert_eq!(named[..3], ["NVIDIA-5659", "NVIDIA-5582", "NVIDIA-5616"]);
    assert!(
        t.message
            .contains("CVE-2024-0132, CVE-2024-0133 (critical, container escape)"),
        "{}",
        t.message
    );
    assert!(
        t.message.contains("move to 1.19.1 or later"),
        "{}",
        t.message
    );
    assert!(t.message.contains("3 more bulletins"), "{}", t.message);
    assert!(t
        .fix
        .as_deref()
        .unwrap()
        .contains("sudo apt-get install --only-upgrade nvidia-container-toolkit"));
    let r = of(&out, "runc");
    assert_eq!(r.status, Status::Fail);
    assert!(
        r.message
            .contains("CVE-2024-21626 (high, container escape)"),
        "{}",
        r.message
    );
    assert!(r.message.contains("fixed in 1.1.12"), "{}", r.message);
    assert!(
        r.message.contains("move to 1.3.6 or later"),
        "{}",
        r.message
    );
    // Not found at all: containerd and Docker.
    let absent = out
        .iter()
        .find(|f| f.message.starts_with("not installed"))
        .unwrap();
    assert_eq!(absent.status, Status::Pass);
    assert_eq!(absent.message, "not installed: containerd, Docker Engine");
}

#[test]
fn fixed_versions_pass() {
    let f = facts(
        vec![
            program("nvidia-ctk", "/usr/bin/nvidia-ctk", "1.19.1"),
            program("runc", "/usr/bin/runc", "1.3.6"),
            program("containerd", "/usr/bin/containerd", "2.0.4"),
            program("dockerd", "/usr/bin/dockerd", "27.1.1"),
        ],
        vec![],
    );
    let out = run(&f);
    for p in [
        "NVIDIA Container Toolkit",
        "runc",
        "containerd",
        "Docker Engine",
        "NVIDIA driver",
    ] {
        assert_eq!(of(&out, p).status, Status::Pass, "{p}: {out:#?}");
    }
    assert!(of(&out, "runc")
        .message
        .contains("none of the 3 runc bulletins"));
    assert!(of(&out, "containerd")
        .message
        .ends_with("the table's one containerd bulletin does not concern it"));
    // The test machine's toolkit (13.0.88) is before the January 2026 CUDA toolkit fix.
    let cuda = of(&out, "CUDA toolkit");
    assert_eq!(cuda.status, Status::Info, "{cuda:#?}");
    assert!(cuda.message.contains("move to 13.1"));
}

#[test]
fn the_program_is_believed_before_the_package() {
    let f = facts(
        vec![program("runc", "/usr/local/sbin/runc", "1.3.6")],
        vec![pkg("runc", "1.1.11-1", Some("Docker <support@docker.com>"))],
    );
    assert_eq!(of(&run(&f), "runc").status, Status::Pass);
    // Without a program answer, the package: its source says so.
    let f = facts(
        vec![],
        vec![pkg(
            "containerd.io",
            "1.6.28-1",
            Some("Containerd team <help@containerd.io>"),
        )],
    );
    let c = of(&run(&f), "containerd").clone();
    assert_eq!(c.status, Status::Info, "{c:#?}");
    assert!(
        c.message
            .contains("package containerd.io (/var/lib/dpkg/status)"),
        "{}",
        c.message
    );
    assert!(c.message.contains("CVE-2024-40635"));
    // A program that did not answer, and no package: the reason.
    let mut p = program("dockerd", "/usr/bin/dockerd", "");
    p.version = Reading::unavailable("/usr/bin/dockerd: timed out after 5 s");
    let out = run(&facts(vec![p.clone()], vec![]));
    let s = out
        .iter()
        .find(|f| f.message.starts_with("Docker Engine"))
        .unwrap();
    assert_eq!(s.status, Status::Skip);
    assert!(s.message.contains("timed out after 5 s"));
    // ... and with a package, the package.
    let out = run(&facts(
        vec![p],
        vec![pkg(
            "docker-ce",
            "5:27.1.0-1~ubuntu.22.04~jammy",
            Some("Docker <support@docker.com>"),
        )],
    ));
    let d = of(&out, "Docker Engine");
    assert_eq!(d.status, Status::Warn, "{d:#?}");
    assert!(d.message.contains("CVE-2024-41110 (critical)"));
    assert_eq!(
        d.evidence.get("distribution_build"),
        Some(&serde_json::Value::Null)
    );
}

#[test]
fn a_distribution_build_warns_instead_of_failing() {
    let f = facts(
        vec![program("runc", "/usr/bin/runc", "1.1.7-0ubuntu1~22.04.2")],
        vec![],
    );
    let r = of(&run(&f), "runc").clone();
    assert_eq!(r.status, Status::Warn, "{r:#?}");
    assert!(r
        .message
        .contains("distribution's build (revision 0ubuntu1~22.04.2)"));
    let f = facts(
        vec![],
        vec![pkg("runc", "1.1.12-1.el9", Some("Red Hat, Inc."))],
    );
    let r = of(&run(&f), "runc").clone();
    assert_eq!(r.status, Status::Warn);
    assert!(r.message.contains("(Red Hat, Inc.)"));
    assert!(distribution_revision("1.2.5+ds1-1+deb12u1"));
    assert!(distribution_revision("0ubuntu2"));
    assert!(!distribution_revision("1~ubuntu.22.04~jammy"));
    assert!(!distribution_revision("ubuntu"));
    assert!(upstream_vendor("NVIDIA CORPORATION <cudatools@nvidia.com>"));
    assert!(!upstream_vendor(
        "Ubuntu Developers <ubuntu-devel-discuss@lists.ubuntu.com>"
    ));
    // A medium bulletin stays information.
    let f = facts(
        vec![],
        vec![pkg("containerd", "1.7.12-0ubuntu2~22.04.1", None)],
    );
    assert_eq!(of(&run(&f), "containerd").status, Status::Info);
}

#[test]
fn driver_branches() {
    let with_driver = |v: &str| {
        let mut f = facts(vec![], vec![]);
        f.driver.version = Reading::Value(v.into());
        f
    };
    // R580 before the May 2026 fix: a warning (no container escape), naming it.
    let d = of(&run(&with_driver("580.95.05")), "NVIDIA driver").clone();
    assert_eq!(d.status, Status::Warn, "{d:#?}");
    assert!(
        d.message
            .contains("NVIDIA driver 580.95.05 (driver version from nvml)"),
        "{}",
        d.message
    );
    assert!(d.message.contains("fixed in 580.159.03"));
    assert!(d.message.contains("move to 580.159.03 or later"));
    // R550 is end of life: no fix on its branch.
    let d = of(&run(&with_driver("550.163.01")), "NVIDIA driver").clone();
    assert_eq!(d.status, Status::Warn);
    assert!(
        d.message
            .contains("no fix on this branch: may be affected, move to"),
        "{}",
        d.message
    );
    assert_eq!(
        of(&run(&with_driver("595.71.05")), "NVIDIA driver").status,
        Status::Pass
    );
    assert_eq!(d.caused_by, None);
    // A driver cuda.driver finds too old for the GPUs (R470 on Hopper): one problem.
    let d = of(&run(&with_driver("470.256.02")), "NVIDIA driver").clone();
    assert_eq!(d.status, Status::Warn);
    assert_eq!(d.caused_by, Some(Cause::check("cuda.driver")));
    // An unknown driver version skips with why.
    let mut f = facts(vec![], vec![]);
    f.driver.version = Reading::unavailable("NVML: driver not loaded");
    let out = run(&f);
    assert!(out.iter().any(|x| x.status == Status::Skip
        && x.message == "NVIDIA driver: version not known: driver version not read: NVML: driver not loaded"));
    // A version that is not one.
    let d = of(&run(&with_driver("N/A")), "NVIDIA driver").clone();
    assert_eq!(d.status, Status::Skip);
}

#[test]
fn tenant_and_host() {
    // Inside a container: the host's stack is not judged, the driver is (the host's).
    let mut f = facts(vec![program("runc", "/usr/bin/runc", "1.1.11")], vec![]);
    f.host.container.inside = Reading::Value(Some("kubernetes".into()));
    let out = run(&f);
    assert!(!out
        .iter()
        .any(|x| x.evidence.get("product").and_then(|v| v.as_str()) == Some("runc")));
    let host = out
        .iter()
        .find(|x| x.message.starts_with("host only"))
        .unwrap();
    assert_eq!(host.status, Status::Skip);
    assert!(host.message.contains("inside a kubernetes container"));
    assert!(of(&out, "NVIDIA driver")
        .message
        .contains("this is the host's driver"));
    // A vGPU guest: the host's Virtual GPU Manager is not visible.
    let mut f = facts(vec![], vec![]);
    if let Reading::Value(g) = &mut f.gpus {
        g[0].virtualization = Reading::Value(VirtualizationMode::Vgpu);
    }
    let d = of(&run(&f), "NVIDIA driver").clone();
    assert!(d.message.contains("Virtual GPU Manager"), "{}", d.message);
    // Versions not read (a snapshot collected before): one skip naming the products.
    let f = Machine::healthy("h200-sxm-141gb", 2).build();
    let out = run(&f);
    let s = out
        .iter()
        .find(|x| x.message.contains("versions not read"))
        .unwrap();
    assert!(
        s.message.starts_with(
            "NVIDIA Container Toolkit, runc, containerd, Docker Engine: version not known"
        ),
        "{}",
        s.message
    );
}

#[test]
fn a_stale_table_is_said() {
    let f = facts(vec![], vec![]);
    let stale = |day| {
        judge_all(&f, Some(day))
            .into_iter()
            .filter(|x| x.message.starts_with("the bulletin table"))
            .count()
    };
    assert_eq!(day_of("2026-12-02"), Some(CHECKED_DAY));
    assert_eq!(stale(CHECKED_DAY + STALE_DAYS), 0);
    assert_eq!(stale(CHECKED_DAY + STALE_DAYS + 1), 1);
    assert_eq!(stale(CHECKED_DAY - 400), 0);
    let out = judge_all(&f, Some(CHECKED_DAY + 200));
    let s = out
        .iter()
        .find(|x| x.message.starts_with("the bulletin table"))
        .unwrap();
    assert_eq!(s.status, Status::Info);
    assert!(s.message.contains("2026-12-02, 200 days before this audit"));
    assert_eq!(
        judge_all(&f, None).len(),
        judge_all(&f, Some(CHECKED_DAY)).len()
    );
    assert_eq!(day_of("2026-12-02T23:59:59Z"), Some(CHECKED_DAY));
}

#[test]
fn targets_and_descriptions() {
    let t = security_table().unwrap();
    let h = hits(t, Product::Runc, "1.1.11");
    assert_eq!(h.len(), 3);
    assert_eq!(h[0].status, Status::Fail);
    // The worst first, the newest first among equals.
    assert_eq!(h[0].id, "CVE-2025-31133");
    assert_eq!(h[1].id, "CVE-2024-21626");
    assert_eq!(target(&h), Some("1.3.6"));
    assert!(describe(&h[2]).contains("(low): "));
    assert!(describe(&h[2]).contains("may be affected, move to 1.3.6"));
    assert_eq!(target(&[]), None);
    let d = hits(t, Product::Driver, "535.100.01");
    assert!(
        describe(&d[0]).contains("CVE-2025-33221, CVE-2026-24182 and 9 more (high)"),
        "{}",
        describe(&d[0])
    );
}

/// The audit's day: a snapshot's collection day, else today; the check runs on it.
#[test]
fn the_audit_day_is_the_snapshots_or_today() {
    let mut f = facts(vec![], vec![]);
    let today = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        / 86_400;
    let live = audit_day(&f).unwrap();
    assert!((live - today).abs() <= 1, "{live} vs {today}");
    let stale = |f: &Facts| {
        (CHECK.run)(f, &Policy::default())
            .iter()
            .any(|x| x.message.starts_with("the bulletin table"))
    };
    f.origin = Origin::Snapshot {
        path: "x".into(),
        description: None,
        collected_at: Some("2027-07-01T00:00:00Z".into()),
    };
    assert_eq!(audit_day(&f), day_of("2027-07-01"));
    assert!(stale(&f));
    f.origin = Origin::Snapshot {
        path: "x".into(),
        description: None,
        collected_at: Some("2026-12-03T00:00:00Z".into()),
    };
    assert!(!stale(&f));
    assert!(!(CHECK.run)(&f, &Policy::default()).is_empty());
}

/// Exactly as many bulletins and CVEs as are named: no "more"; no toolkit at all is
/// "not installed".
#[test]
fn bounds_are_said_only_when_reached() {
    let t = security_table().unwrap();
    let mut h = hits(t, Product::Runc, "1.1.11");
    assert_eq!(h.len(), NAMED);
    let out = run(&facts(
        vec![program("runc", "/usr/bin/runc", "1.1.11")],
        vec![],
    ));
    let r = of(&out, "runc");
    assert!(!r.message.contains("more bulletins"), "{}", r.message);
    h[0].cves = vec!["CVE-1".into(), "CVE-2".into(), "CVE-3".into()];
    let d = describe(&h[0]);
    assert!(d.contains("CVE-1, CVE-2, CVE-3 ("), "{d}");
    let mut f = facts(vec![], vec![]);
    f.toolkit = Reading::Value(vec![]);
    let out = run(&f);
    assert!(
        out.iter().any(|x| x.status == Status::Pass
            && x.message.starts_with("not installed")
            && x.message.contains("CUDA toolkit")),
        "{out:#?}"
    );
}
