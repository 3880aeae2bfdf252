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

/// The recording reader copies what is read, so every reading of a file that may hold a
/// secret must record its reduced form instead: a machine whose files hold "SECRET" in every
/// place that is not judged gives a snapshot without it, and with each reduced file there.
#[test]
fn what_may_hold_secrets_is_recorded_reduced() {
    let m = tempfile::tempdir().unwrap();
    let put = |rel: &str, text: &str| {
        let p = m.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    };
    // A snapshot's host part and versions part, as a machine's collect leaves them.
    put("cmd/env.json", r#"{"HOME": "/root"}"#);
    put("cmd/program-versions.json", "[]");
    put(
        "etc/ssh/sshd_config",
        "# SECRET comment\nPasswordAuthentication yes\nBanner /etc/SECRET-banner\n",
    );
    put(
        "root/.ssh/authorized_keys",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFSECRETSECRETSECRETSECRETSECRETSECRETSEC user@SECRET\n",
    );
    put(
        "root/.jupyter/jupyter_server_config.py",
        "c.ServerApp.token = 'SECRET-token'\nc.ServerApp.ip = '0.0.0.0'\nc.Other.x = 'SECRET'\n",
    );
    put(
        "etc/containerd/config.toml",
        "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r\".auth]\n\
         password = \"SECRET\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
         default_runtime_name = \"nvidia\"\n",
    );
    put(
        "proc/cmdline",
        "BOOT_IMAGE=/vmlinuz root=UUID=x iommu=pt SECRET=1\n",
    );
    put(
        "var/lib/dpkg/status",
        "Package: runc\nStatus: install ok installed\nVersion: 1.1.12\n\n\
         Package: tool-SECRET\nStatus: install ok installed\nVersion: 1.0\n\n",
    );
    let site = "usr/lib/python3/dist-packages";
    put(
        &format!("{site}/nvidia_nccl_cu12-2.21.5.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: nvidia-nccl-cu12\nVersion: 2.21.5\n\nSECRET description\n",
    );
    put(
        "usr/local/cuda/include/cuda.h",
        "/* SECRET */\n#define CUDA_VERSION 12040\nint SECRET;\n",
    );
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("snap");
    let summary = collect(
        &RootFs::new(m.path()),
        &out,
        "test",
        &GatherOptions::default(),
    )
    .unwrap();
    assert_eq!(summary.failed, Vec::<String>::new());
    let mut files = BTreeMap::new();
    manifest(&out, "", 0, &mut files);
    for (rel, kind) in &files {
        if kind == "d" {
            continue;
        }
        let text = fs::read_to_string(out.join(rel)).unwrap_or_default();
        assert!(!text.contains("SECRET"), "{rel} holds a secret:\n{text}");
    }
    for rel in [
        "etc/ssh/sshd_config",
        "cmd/authorized-keys.txt",
        "root/.jupyter/jupyter_server_config.py",
        "etc/containerd/config.toml",
        "proc/cmdline",
        "var/lib/dpkg/status",
        "usr/lib/python3/dist-packages/nvidia_nccl_cu12-2.21.5.dist-info/METADATA",
        "usr/local/cuda/include/cuda.h",
    ] {
        assert!(
            files.contains_key(rel),
            "{rel} not in the snapshot: {files:#?}"
        );
    }
    let cmdline = fs::read_to_string(out.join("proc/cmdline")).unwrap();
    assert_eq!(cmdline, "iommu=pt\n");
}
