//! The registry: every check once, in catalog order. It is the single source of the check ids:
//! `gpuaudit checks`, reports (findings come in this order), `explain` and the catalog table of
//! docs/DESIGN.md (generated from it, see [`catalog_table`]) all read it.
//!
//! A new check is a file `checks/<area>/<name>.rs` named from its id (`pcie.link` is
//! `pcie/link.rs`, `gpu.driver-binding` is `gpu/driver_binding.rs`) holding `pub const CHECK`,
//! and one line here; the tests below fail until both exist and DESIGN.md's table is
//! regenerated.

use super::*;

/// Every check, in catalog order. Ids never change once released; new checks get new ids.
pub const ALL: &[&Check] = &[
    &gpu::present::CHECK,
    &gpu::identity::CHECK,
    &gpu::uniform::CHECK,
    &gpu::virtualization::CHECK,
    &gpu::driver_binding::CHECK,
    &pcie::link::CHECK,
    &pcie::aer::CHECK,
    &pcie::bandwidth::CHECK,
    &pcie::acs::CHECK,
    &power::limit::CHECK,
    &clocks::throttle::CHECK,
    &clocks::max::CHECK,
    &nvlink::status::CHECK,
    &nvlink::fabric::CHECK,
    &p2p::bandwidth::CHECK,
    &nccl::allreduce::CHECK,
    &cuda::driver::CHECK,
    &cuda::toolkit_compat::CHECK,
    &cuda::libraries::CHECK,
    &cuda::framework::CHECK,
    &cuda::env::CHECK,
    &cuda::context_latency::CHECK,
    &kernel::modules::CHECK,
    &os::platform::CHECK,
    &os::persistence::CHECK,
    &os::numa::CHECK,
    &os::graphics::CHECK,
    &memory::ecc::CHECK,
    &memory::errors::CHECK,
    &health::xid::CHECK,
    &memory::bandwidth::CHECK,
    &compute::gemm::CHECK,
    &stability::burn::CHECK,
    &net::somaxconn::CHECK,
    &net::loopback::CHECK,
    &net::fabric::CHECK,
    &net::placement::CHECK,
    &storage::mounts::CHECK,
    &storage::throughput::CHECK,
    &workload::pipeline::CHECK,
    &host::shm::CHECK,
    &container::runtime::CHECK,
    &security::versions::CHECK,
    &env::jupyter::CHECK,
    &env::ssh::CHECK,
];

/// The catalog table of docs/DESIGN.md: one row per check, its id and what it looks at.
pub fn catalog_table() -> String {
    let mut t = String::from("| id | looks at |\n|---|---|\n");
    for c in ALL {
        t.push_str(&format!(
            "| {} | {} |\n",
            c.id,
            c.looks_at.replace('|', "\\|")
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    const DESIGN_BEGIN: &str = "<!-- BEGIN catalog: generated from the check registry";
    const DESIGN_END: &str = "<!-- END catalog -->";

    fn checks_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/checks")
    }

    /// `checks/<area>/<name>.rs` of an id: "gpu.driver-binding" -> gpu/driver_binding.rs.
    fn file_of(id: &str) -> PathBuf {
        let (area, name) = id.split_once('.').unwrap_or((id, ""));
        checks_dir()
            .join(area)
            .join(format!("{}.rs", name.replace('-', "_")))
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("a directory entry").path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                rust_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn ids_are_unique_and_area_dot_name() {
        let mut seen = BTreeSet::new();
        for c in ALL {
            assert!(seen.insert(c.id), "{} registered twice", c.id);
            let (area, name) = c.id.split_once('.').unwrap_or_else(|| panic!("{}", c.id));
            let word = |s: &str| {
                !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            };
            assert!(word(area) && word(name), "{}: not area.name", c.id);
        }
    }

    #[test]
    fn every_check_file_is_registered() {
        let mut files = Vec::new();
        rust_files(&checks_dir(), &mut files);
        let mut defining = 0;
        for f in &files {
            let text =
                std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            if !text
                .lines()
                .any(|l| l.starts_with("pub const CHECK: Check = "))
            {
                continue;
            }
            defining += 1;
            let rel = f.strip_prefix(checks_dir()).expect("under src/checks");
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            assert_eq!(
                parts.len(),
                2,
                "{}: a check lives in checks/<area>/<name>.rs",
                rel.display()
            );
            let id = format!(
                "{}.{}",
                parts[0],
                parts[1].trim_end_matches(".rs").replace('_', "-")
            );
            assert!(
                ALL.iter().any(|c| c.id == id),
                "{} defines a check but {id} is not in the registry (checks/registry.rs)",
                rel.display()
            );
            assert!(
                text.contains(&format!("const ID: &str = \"{id}\";")),
                "{}: the file's check must have the id {id} it is named from",
                rel.display()
            );
        }
        assert_eq!(defining, ALL.len(), "check files against registered checks");
    }

    #[test]
    fn every_registered_check_lives_in_the_file_named_from_its_id() {
        for c in ALL {
            let f = file_of(c.id);
            let text = std::fs::read_to_string(&f)
                .unwrap_or_else(|e| panic!("{}: {}: {e}", c.id, f.display()));
            assert!(
                text.contains(&format!("const ID: &str = \"{}\";", c.id)),
                "{}: {} holds another check",
                c.id,
                f.display()
            );
        }
    }

    #[test]
    fn every_check_is_documented() {
        for c in ALL {
            for (what, text) in [
                ("title", c.title),
                ("looks_at", c.looks_at),
                ("what", c.doc.what),
                ("why", c.doc.why),
                ("verify", c.doc.verify),
                ("fix", c.doc.fix),
            ] {
                assert!(text.len() > 20, "{}: {what} is too short", c.id);
                if what != "verify" {
                    assert!(
                        !text.contains("  "),
                        "{}: {what} has a run of spaces (a broken line continuation?)",
                        c.id
                    );
                }
            }
        }
        let lo = find("net.loopback").expect("registered");
        assert!(lo.doc.verify.contains("\n    c, _ = s.accept()"));
    }

    /// docs/DESIGN.md's catalog is the registry's table; `GPUAUDIT_UPDATE_DESIGN=1` rewrites it.
    #[test]
    fn design_catalog_is_generated_from_the_registry() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/DESIGN.md");
        let design = std::fs::read_to_string(&path).expect("docs/DESIGN.md");
        let begin = design
            .find(DESIGN_BEGIN)
            .expect("DESIGN.md has the catalog's BEGIN marker");
        let start = begin + design[begin..].find('\n').expect("a line after the marker") + 1;
        let end = design[start..]
            .find(DESIGN_END)
            .map(|e| start + e)
            .expect("DESIGN.md has the catalog's END marker");
        let want = catalog_table();
        if design[start..end] == want {
            return;
        }
        if std::env::var_os("GPUAUDIT_UPDATE_DESIGN").is_some() {
            let updated = format!("{}{want}{}", &design[..start], &design[end..]);
            std::fs::write(&path, updated).expect("docs/DESIGN.md is writable");
            return;
        }
        panic!(
            "docs/DESIGN.md's check catalog differs from the registry; run \
             `GPUAUDIT_UPDATE_DESIGN=1 cargo test -p gpuaudit-core design_catalog` to \
             regenerate it. Expected:\n{want}"
        );
    }
}
