//! Damaged snapshots never make the audit panic or fail as a tool: every fixture, with its files
//! truncated, emptied, overwritten with bytes or removed in a deterministic pseudo-random way,
//! still gives a report (exit 0 or 1) in valid JSON with every check in it.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for f in files(from) {
        let rel = f.strip_prefix(from).unwrap();
        let dst = to.join(rel);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        std::fs::copy(&f, &dst).unwrap();
    }
}

fn damage(path: &Path, rng: &mut Rng) {
    let bytes = std::fs::read(path).unwrap_or_default();
    let new: Vec<u8> = match rng.below(5) {
        0 => bytes[..rng.below(bytes.len() + 1)].to_vec(),
        1 => Vec::new(),
        2 => (0..rng.below(4096) + 1).map(|_| rng.next() as u8).collect(),
        3 => {
            let mut b = bytes;
            for _ in 0..8 {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.next() as u8;
                }
            }
            b
        }
        _ => {
            let _ = std::fs::remove_file(path);
            return;
        }
    };
    std::fs::write(path, new).unwrap();
}

#[test]
fn damaged_snapshots_still_give_a_report() {
    let ids = gpuaudit_core::checks::all().len();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for name in [
        "h200-x2-vm",
        "h200-x2-live",
        "host-bad-stack",
        "host-bad-access",
    ] {
        let src = fixture(name);
        if !src.exists() {
            continue;
        }
        for round in 0..6 {
            let d = tempfile::tempdir().unwrap();
            copy_dir(&src, d.path());
            let all = files(d.path());
            for _ in 0..(1 + rng.below(all.len())) {
                let f = &all[rng.below(all.len())];
                if f.exists() {
                    damage(f, &mut rng);
                }
            }
            let out = gpuaudit()
                .args(["--format", "json", "--root"])
                .arg(d.path())
                .output()
                .unwrap();
            let code = out.status.code();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(code, Some(0) | Some(1))
                    || (code == Some(2) && stderr.contains("meta.json")),
                "{name} round {round}: exit {code:?}: {stderr}"
            );
            if code == Some(2) {
                continue; // meta.json damaged into another format name: refused, with the reason
            }
            let r: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{name} round {round}: not JSON: {e}"));
            assert_eq!(
                check_ids(&r).len(),
                ids,
                "{name} round {round}: a check is missing"
            );
            assert!(
                !stderr.contains("panicked"),
                "{name} round {round}: {stderr}"
            );
        }
    }
}
