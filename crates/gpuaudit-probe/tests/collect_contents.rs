//! What `collect` writes does not shrink: every fixture under fixtures/snapshots, collected
//! again, gives at least the files, directories and contents that the collect of before the
//! recording reader (issue 22) wrote, which `tests/data/collect-contents.tsv` holds (made by
//! that code: `GPUAUDIT_UPDATE_COLLECT=1 cargo test -p gpuaudit-probe --test
//! collect_contents` rewrites it from the code of now, which is only right where a change of
//! contents is meant).
//!
//! Paths are compared as a reader of the snapshot sees them (symbolic links followed, inside
//! the snapshot), so a file that moved behind a link, or a directory that became a link into
//! sys/devices, is the same file. Left out: meta.json's contents (its time is the clock's) and
//! the outputs of the commands that the collect of before ran on the machine of the test even
//! when it collected from a snapshot (nvidia-smi, NVML's answer, ldd, nvcc): they describe the
//! test's machine, not the fixture.

use gpuaudit_probe::collect::collect;
use gpuaudit_probe::gather::GatherOptions;
use gpuaudit_probe::root::RootFs;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The outputs of the base commands run on the test's machine by the collect of before.
const MACHINE_OUTPUTS: &[&str] = &[
    "cmd/nvidia-smi-q.xml",
    "cmd/driver-error.txt",
    "cmd/nvidia-smi-topo-m.txt",
    "cmd/nvidia-smi-nvlink-s.txt",
    "cmd/ldd-version.txt",
    "cmd/nvcc-version.txt",
];

const EXPECTED: &str = "tests/data/collect-contents.tsv";

/// FNV-1a, 64 bits: a hash that is the same on every Rust release.
fn fnv(b: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in b {
        h ^= u64::from(*x);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Every path of a snapshot as its reader sees it: "d" for a directory, the contents' hash
/// for a file.
fn manifest(dir: &Path, rel: &str, depth: usize, out: &mut BTreeMap<String, String>) {
    let Ok(entries) = fs::read_dir(dir.join(rel)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if MACHINE_OUTPUTS.contains(&r.as_str()) {
            continue;
        }
        let Ok(m) = fs::metadata(dir.join(&r)) else {
            // A link that does not resolve: what it names is its content.
            let t = fs::read_link(dir.join(&r)).unwrap_or_default();
            out.insert(r, format!("link {}", t.display()));
            continue;
        };
        if m.is_dir() {
            out.insert(r.clone(), "d".into());
            if depth < 40 {
                manifest(dir, &r, depth + 1, out);
            }
        } else if r == "meta.json" {
            out.insert(r, "-".into());
        } else {
            out.insert(r.clone(), fnv(&fs::read(dir.join(&r)).unwrap_or_default()));
        }
    }
}

fn fixtures() -> Vec<PathBuf> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/snapshots");
    let mut v: Vec<PathBuf> = fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

#[test]
fn a_collected_snapshot_holds_at_least_what_it_held_before() {
    let mut now = BTreeMap::new();
    for p in fixtures() {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("snap");
        let summary = collect(&RootFs::new(&p), &out, "test", &GatherOptions::default()).unwrap();
        assert_eq!(summary.failed, Vec::<String>::new(), "{name}");
        let mut m = BTreeMap::new();
        manifest(&out, "", 0, &mut m);
        for (k, v) in m {
            now.insert(format!("{name}\t{k}"), v);
        }
    }
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(EXPECTED);
    if std::env::var_os("GPUAUDIT_UPDATE_COLLECT").is_some() {
        let text: String = now.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        return;
    }
    let expected = fs::read_to_string(&path).unwrap();
    let mut wrong = Vec::new();
    for line in expected.lines() {
        let Some((k, v)) = line.rsplit_once('\t') else {
            continue;
        };
        match now.get(k) {
            None => wrong.push(format!("missing: {k}")),
            Some(x) if x != v => wrong.push(format!("changed: {k} ({v} before, {x} now)")),
            Some(_) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} paths are not as before:\n{}",
        wrong.len(),
        expected.lines().count(),
        wrong.join("\n")
    );
}
