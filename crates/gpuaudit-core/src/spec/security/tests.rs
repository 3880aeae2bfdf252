//! The table against each bulletin's own figures: per branch, the last affected version is
//! concerned and the fixed version is not.

use super::*;

fn table() -> &'static SecurityTable {
    security_table().expect("data/security.toml parses")
}

fn bulletin(id: &str) -> &'static Bulletin {
    table()
        .bulletins
        .iter()
        .find(|b| b.id == id)
        .unwrap_or_else(|| panic!("{id} is not in the table"))
}

fn up(v: &str) -> String {
    Upstream::parse(v).expect("a version").version
}

fn exposure(id: &str, v: &str) -> Exposure {
    bulletin(id).exposure(&up(v))
}

fn affected(fix: &str) -> Exposure {
    Exposure::Affected { fix: fix.into() }
}

fn maybe(fix: &str) -> Exposure {
    Exposure::Maybe { fix: fix.into() }
}

/// The version just before `v`: its last number one lower ("570.195.03" → "570.195.02",
/// "1.4.0-rc.3" → "1.4.0-rc.2"); a last number of 0 gets a "~" (sorts before it).
fn just_below(v: &str) -> String {
    let i = v.rfind(|c: char| !c.is_ascii_digit()).map_or(0, |i| i + 1);
    match v[i..].parse::<u64>() {
        Ok(n) if n > 0 => format!("{}{:0w$}", &v[..i], n - 1, w = v.len() - i),
        _ => format!("{v}~"),
    }
}

#[test]
fn just_below_is_below() {
    assert_eq!(just_below("570.195.03"), "570.195.02");
    assert_eq!(just_below("1.17.8"), "1.17.7");
    assert_eq!(just_below("1.4.0-rc.3"), "1.4.0-rc.2");
    assert_eq!(just_below("13.0"), "13.0~");
    assert_eq!(just_below("27.1.10"), "27.1.09");
}

#[test]
fn the_table_parses_and_is_dated() {
    let t = table();
    assert!(is_date(&t.checked));
    assert!(t.bulletins.len() >= 20);
    for p in Product::ALL {
        assert!(t.of(p).count() > 0, "{p:?} has no bulletin");
    }
}

/// Every range of every entry: its fixed version is not concerned, the version just below it
/// is (unless it is before `introduced`), and a `last_affected` version is.
#[test]
fn every_range_fixed_passes_and_the_version_before_fails() {
    for b in &table().bulletins {
        for r in &b.ranges {
            if let Some(f) = &r.fixed {
                assert_eq!(
                    b.exposure(&up(f)),
                    Exposure::Unaffected,
                    "{} {} fixed {f}",
                    b.id,
                    r.branch
                );
                let below = just_below(f);
                assert!(
                    matches!(b.exposure(&up(&below)), Exposure::Affected { .. }),
                    "{} {}: {below} should be affected",
                    b.id,
                    r.branch
                );
            }
            if let Some(l) = &r.last_affected {
                assert!(
                    matches!(b.exposure(&up(l)), Exposure::Affected { .. }),
                    "{} {}: last affected {l}",
                    b.id,
                    r.branch
                );
            }
        }
    }
}

#[test]
fn container_toolkit_bulletins() {
    // 5582: "All versions up to and including v1.16.1", updated version v1.16.2.
    assert_eq!(exposure("NVIDIA-5582", "1.16.1"), affected("1.16.2"));
    assert_eq!(exposure("NVIDIA-5582", "1.16.1-1"), affected("1.16.2"));
    assert_eq!(exposure("NVIDIA-5582", "1.16.2"), Exposure::Unaffected);
    assert_eq!(exposure("NVIDIA-5582", "1.10.0"), affected("1.16.2"));
    // 5659: "All versions up to and including 1.17.7", 1.17.8.
    assert_eq!(exposure("NVIDIA-5659", "1.17.7"), affected("1.17.8"));
    assert_eq!(exposure("NVIDIA-5659", "1.17.8-1"), Exposure::Unaffected);
    assert_eq!(exposure("NVIDIA-5659", "1.18.0"), Exposure::Unaffected);
    let b = bulletin("NVIDIA-5659");
    assert_eq!(b.cves, ["CVE-2025-23266", "CVE-2025-23267"]);
    assert_eq!((b.severity, b.escape), (Severity::Critical, true));
    // 5616: up to and including 1.17.3, 1.17.4; 5599: up to 1.17.0, 1.17.1; 5585: up to
    // 1.16.2, v1.17; 5850: up to 1.19.0, 1.19.1.
    assert_eq!(exposure("NVIDIA-5616", "1.17.3"), affected("1.17.4"));
    assert_eq!(exposure("NVIDIA-5616", "1.17.4"), Exposure::Unaffected);
    assert_eq!(exposure("NVIDIA-5599", "1.17.0"), affected("1.17.1"));
    assert_eq!(exposure("NVIDIA-5585", "1.16.2"), affected("1.17.0"));
    assert_eq!(exposure("NVIDIA-5850", "1.19.0"), affected("1.19.1"));
    assert_eq!(exposure("NVIDIA-5850", "1.19.1"), Exposure::Unaffected);
}

#[test]
fn runc_bulletins_per_branch() {
    // CVE-2024-21626: ">= v1.0.0-rc93, < 1.1.12".
    assert_eq!(exposure("CVE-2024-21626", "1.1.11"), affected("1.1.12"));
    assert_eq!(exposure("CVE-2024-21626", "1.0.0-rc93"), affected("1.1.12"));
    assert_eq!(
        exposure("CVE-2024-21626", "1.0.0-rc92"),
        Exposure::Unaffected
    );
    assert_eq!(exposure("CVE-2024-21626", "1.1.12"), Exposure::Unaffected);
    assert_eq!(exposure("CVE-2024-21626", "1.2.0"), Exposure::Unaffected);
    // The November 2025 trio: fixed in 1.2.8, 1.3.3, 1.4.0-rc.3; "affects all known runc
    // versions": 1.1 has no fix, move to 1.2.8.
    let id = "CVE-2025-31133";
    assert_eq!(exposure(id, "1.2.7"), affected("1.2.8"));
    assert_eq!(exposure(id, "1.2.8"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.3.2"), affected("1.3.3"));
    assert_eq!(exposure(id, "1.3.3"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.4.0-rc.2"), affected("1.4.0-rc.3"));
    assert_eq!(exposure(id, "1.4.0-rc.3"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.4.0"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.1.15"), affected("1.2.8"));
    assert_eq!(exposure(id, "1.1.12-0ubuntu2~22.04.1"), affected("1.2.8"));
    assert_eq!(exposure(id, "1.5.1"), Exposure::Unaffected);
    // CVE-2026-41579: 1.3.6, 1.4.3, 1.5.0-rc.3; 1.2 gets no fix (may be affected).
    assert_eq!(exposure("CVE-2026-41579", "1.3.5"), affected("1.3.6"));
    assert_eq!(exposure("CVE-2026-41579", "1.4.2"), affected("1.4.3"));
    assert_eq!(
        exposure("CVE-2026-41579", "1.5.0-rc.2"),
        affected("1.5.0-rc.3")
    );
    assert_eq!(exposure("CVE-2026-41579", "1.2.9"), maybe("1.3.6"));
    assert_eq!(exposure("CVE-2026-41579", "1.5.0"), Exposure::Unaffected);
}

#[test]
fn containerd_and_docker_per_branch() {
    // CVE-2024-40635: prior to 1.6.38, 1.7.27 and 2.0.4.
    let id = "CVE-2024-40635";
    assert_eq!(exposure(id, "1.6.37"), affected("1.6.38"));
    assert_eq!(exposure(id, "1.6.38"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.7.26"), affected("1.7.27"));
    assert_eq!(exposure(id, "1.7.27-1"), Exposure::Unaffected);
    assert_eq!(exposure(id, "2.0.3"), affected("2.0.4"));
    assert_eq!(exposure(id, "2.0.4"), Exposure::Unaffected);
    assert_eq!(exposure(id, "2.1.0"), Exposure::Unaffected);
    assert_eq!(exposure(id, "1.5.18"), affected("1.6.38"));
    // CVE-2024-41110: the affected ranges of its advisory; 27.1.1 fixes it.
    let id = "CVE-2024-41110";
    assert_eq!(exposure(id, "27.1.0"), affected("27.1.1"));
    assert_eq!(
        exposure(id, "5:27.1.1-1~ubuntu.22.04~jammy"),
        Exposure::Unaffected
    );
    assert_eq!(exposure(id, "27.0.3"), affected("27.1.1"));
    assert_eq!(exposure(id, "25.0.5"), affected("27.1.1"));
    assert_eq!(exposure(id, "25.0.6"), Exposure::Unaffected);
    assert_eq!(exposure(id, "23.0.14"), affected("27.1.1"));
    assert_eq!(exposure(id, "23.0.15"), Exposure::Unaffected);
    assert_eq!(exposure(id, "20.10.27"), affected("27.1.1"));
    assert_eq!(exposure(id, "20.10.28"), Exposure::Unaffected);
    assert_eq!(exposure(id, "19.03.15"), affected("27.1.1"));
    assert_eq!(exposure(id, "18.09.9"), Exposure::Unaffected);
    assert_eq!(exposure(id, "28.0.0"), Exposure::Unaffected);
}

/// Driver bulletins, per Linux branch, as NVIDIA's tables give them (the "Tesla" rows).
#[test]
fn driver_bulletins_per_branch() {
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "NVIDIA-5520",
            &[
                ("470", "470.239.06"),
                ("535", "535.161.07"),
                ("550", "550.54.14"),
            ],
        ),
        (
            "NVIDIA-5551",
            &[
                ("470", "470.256.02"),
                ("535", "535.183.01"),
                ("550", "550.90.07"),
            ],
        ),
        (
            "NVIDIA-5586",
            &[("535", "535.216.01"), ("550", "550.127.05")],
        ),
        (
            "NVIDIA-5614",
            &[
                ("535", "535.230.02"),
                ("550", "550.144.03"),
                ("570", "570.86.15"),
            ],
        ),
        (
            "NVIDIA-5630",
            &[
                ("535", "535.247.01"),
                ("550", "550.163.01"),
                ("570", "570.133.07"),
                ("575", "575.51.02"),
            ],
        ),
        (
            "NVIDIA-5670",
            &[("535", "535.261.03"), ("570", "570.172.08")],
        ),
        (
            "NVIDIA-5703",
            &[
                ("535", "535.274.02"),
                ("570", "570.195.03"),
                ("580", "580.95.05"),
            ],
        ),
        (
            "NVIDIA-5747",
            &[
                ("535", "535.288.01"),
                ("570", "570.211.01"),
                ("580", "580.126.09"),
                ("590", "590.48.01"),
            ],
        ),
        (
            "NVIDIA-5821",
            &[
                ("535", "535.309.01"),
                ("580", "580.159.03"),
                ("595", "595.71.05"),
            ],
        ),
    ];
    for (id, branches) in cases {
        let b = bulletin(id);
        assert_eq!(b.product, Product::Driver);
        assert_eq!(b.ranges.len(), branches.len(), "{id}");
        for (branch, fixed) in *branches {
            let r = b.ranges.iter().find(|r| r.branch == *branch).expect(branch);
            assert_eq!(r.fixed.as_deref(), Some(*fixed), "{id} R{branch}");
            assert_eq!(b.exposure(fixed), Exposure::Unaffected);
            assert_eq!(
                b.exposure(&just_below(fixed)),
                affected(fixed),
                "{id} R{branch}"
            );
        }
    }
    // October 2025: R550 is end of life (no fix listed): may be affected, move to R570's fix;
    // R590 came after the bulletin.
    assert_eq!(exposure("NVIDIA-5703", "550.163.01"), maybe("570.195.03"));
    assert_eq!(exposure("NVIDIA-5703", "470.256.02"), maybe("535.274.02"));
    assert_eq!(exposure("NVIDIA-5703", "590.44.01"), Exposure::Unaffected);
    // May 2026: R590 is between two listed branches: move to R595.
    assert_eq!(exposure("NVIDIA-5821", "590.48.01"), maybe("595.71.05"));
    // The H200 machines' driver (580.95.05) against May 2026.
    assert_eq!(exposure("NVIDIA-5821", "580.95.05"), affected("580.159.03"));
}

#[test]
fn cuda_toolkit_bulletins() {
    assert_eq!(exposure("NVIDIA-5661", "12.9.86"), affected("13.0"));
    assert_eq!(exposure("NVIDIA-5661", "13.0.88"), Exposure::Unaffected);
    assert_eq!(exposure("NVIDIA-5755", "13.0.88"), affected("13.1"));
    assert_eq!(exposure("NVIDIA-5755", "13.1"), Exposure::Unaffected);
}

#[test]
fn a_bad_table_is_refused() {
    let ok = "checked = \"2026-12-02\"\n[[bulletin]]\nid = \"X\"\ntitle = \"t\"\nupdated = \"2026-01-01\"\nproduct = \"runc\"\ncves = [\"CVE-1\"]\nseverity = \"high\"\nescape = true\nunlisted = \"affected\"\nimpact = \"i\"\nurl = \"https://x\"\n[[bulletin.range]]\nbranch = \"*\"\nfixed = \"1.0\"\n";
    assert!(SecurityTable::parse(ok).is_ok());
    for (from, to) in [
        ("checked = \"2026-12-02\"", "checked = \"soon\""),
        ("updated = \"2026-01-01\"", "updated = \"2026\""),
        ("[\"CVE-1\"]", "[\"GHSA-1\"]"),
        ("https://x", "http://x"),
        ("fixed = \"1.0\"", "fixed = \"one\""),
        ("fixed = \"1.0\"", "introduced = \"1.0\""),
        ("product = \"runc\"", "product = \"crun\""),
    ] {
        assert!(SecurityTable::parse(&ok.replace(from, to)).is_err(), "{to}");
    }
    let twice = format!("{ok}{}", &ok[ok.find("[[bulletin]]").unwrap()..]);
    assert!(SecurityTable::parse(&twice).is_err());
    let no_range = &ok[..ok.find("[[bulletin.range]]").unwrap()];
    assert!(SecurityTable::parse(no_range).is_err());
}
