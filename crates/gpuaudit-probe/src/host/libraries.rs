//! Where the CUDA libraries are: LD_LIBRARY_PATH, the loader's cache, the loader's default
//! directories, toolkit directories, conda environments, Python wheels and framework
//! directories. Live, symbolic links are resolved to the real files (whose names carry the
//! versions); a snapshot carries the result as `cmd/cuda-libraries.txt`.
//!
//! This is the one inventory of CUDA libraries: cuda.libraries reports it, and the
//! measurements pick the libraries they load from it ([`crate::measure::libs`]).

use super::python::{nvidia_wheels, Site};
use crate::root::RootFs;
use crate::root::{abs, join, rel, FileKind};
use gpuaudit_core::facts::{EnvFacts, LibraryCopy, LibrarySource};
use gpuaudit_core::parse::host::ldcache::{
    native_entries, parse_ld_so_cache, parse_ldconfig_p, CacheEntry,
};
use gpuaudit_core::parse::host::libs::library_of;
use gpuaudit_core::parse::host::listing::parse_libraries;
use gpuaudit_core::parse::host::python::parse_record_libs;
use gpuaudit_core::reading::Reading;
use std::collections::HashSet;
use std::time::Duration;

pub const LISTING: &str = "cmd/cuda-libraries.txt";
/// Accepted in hand-made snapshots that have no listing: the output of `ldconfig -p`.
pub const LDCONFIG_P: &str = "cmd/ldconfig-p.txt";

pub fn read(root: &RootFs, env: &EnvFacts, sites: &[Site]) -> Reading<Vec<LibraryCopy>> {
    if root.is_live() {
        return scan_live(root, env, sites);
    }
    match root.read_text(LISTING) {
        Ok(Some(t)) => {
            return parse_libraries(&t)
                .map_err(|e| format!("{}: {e}", abs(LISTING)))
                .into()
        }
        Err(e) => return Reading::unavailable(e),
        Ok(None) => {}
    }
    match root.read_text(LDCONFIG_P) {
        Ok(Some(t)) => match parse_ldconfig_p(&t) {
            Ok(entries) => Reading::Value(
                native_entries(entries)
                    .into_iter()
                    .filter_map(|e| {
                        let file = e.path.rsplit('/').next().unwrap_or(&e.path).to_string();
                        let (lib, version) = library_of(&file).or_else(|| library_of(&e.soname))?;
                        Some(LibraryCopy {
                            library: lib.to_string(),
                            path: e.path.clone(),
                            file,
                            version,
                            source: LibrarySource::LdCache,
                        })
                    })
                    .collect(),
            ),
            Err(e) => Reading::unavailable(format!("{}: {e}", abs(LDCONFIG_P))),
        },
        Ok(None) => Reading::unavailable(format!(
            "the snapshot has neither {LISTING} nor {LDCONFIG_P}"
        )),
        Err(e) => Reading::unavailable(e),
    }
}

/// Every copy found, in the loader's order of preference, and the directories looked in.
#[derive(Clone, Debug)]
pub struct Inventory {
    pub copies: Reading<Vec<LibraryCopy>>,
    /// Machine paths of the directories searched, in order (for "not found" messages).
    pub searched: Vec<String>,
}

struct Scan<'a> {
    root: &'a RootFs,
    seen: HashSet<String>,
    out: Vec<LibraryCopy>,
    searched: Vec<String>,
}

impl Scan<'_> {
    /// Record `path` (a machine path) unless its real file was already found through an
    /// earlier (higher-priority) source.
    fn add(&mut self, path: &str, source: LibrarySource, fallback_version: Option<&str>) {
        let Some(real) = self.root.real_path(&rel(path)) else {
            return;
        };
        let is_file =
            matches!(self.root.stat(&rel(&real)), Ok(Some(s)) if s.kind == FileKind::File);
        if !is_file || !self.seen.insert(real.clone()) {
            return;
        }
        let file = real.rsplit('/').next().unwrap_or_default().to_string();
        let name = path.rsplit('/').next().unwrap_or(path);
        let Some((lib, version)) = library_of(&file).or_else(|| library_of(name)) else {
            return;
        };
        self.out.push(LibraryCopy {
            library: lib.to_string(),
            path: path.to_string(),
            file,
            version: version.or_else(|| fallback_version.map(str::to_string)),
            source,
        });
    }

    /// Every library of ours in a directory; soname-style names ("libnccl.so.2") first, so the
    /// recorded path is the one programs ask for.
    fn add_dir(&mut self, dir_rel: &str, source: LibrarySource) {
        let Ok(entries) = self.root.list(dir_rel) else {
            return;
        };
        let shown = abs(dir_rel);
        if !self.searched.contains(&shown) {
            self.searched.push(shown);
        }
        let mut names: Vec<String> = entries
            .into_iter()
            .filter(|n| library_of(n).is_some())
            .collect();
        names.sort_by_key(|n| {
            let dots = n
                .split(".so")
                .nth(1)
                .map(|v| v.matches('.').count())
                .unwrap_or(0);
            (if dots == 1 { 0 } else { 1 + dots }, n.clone())
        });
        for n in names {
            self.add(&abs(&join(dir_rel, &n)), source.clone(), None);
        }
    }
}

fn ld_cache_entries(root: &RootFs) -> Result<Vec<CacheEntry>, String> {
    let rel_cache = "etc/ld.so.cache";
    let from_file = match root.read_bytes(rel_cache) {
        Ok(Some(b)) => parse_ld_so_cache(&b).map_err(|e| format!("{}: {e}", abs(rel_cache))),
        Ok(None) => Err(format!("{}: no such file", abs(rel_cache))),
        Err(e) => Err(e),
    };
    match from_file {
        Ok(e) => Ok(native_entries(e)),
        Err(file_err) => match ldconfig_p() {
            Ok(t) => parse_ldconfig_p(&t)
                .map(native_entries)
                .map_err(|e| format!("{file_err}; ldconfig -p: {e}")),
            Err(e) => Err(format!("{file_err}; {e}")),
        },
    }
}

/// `ldconfig -p`, where the cache file could not be parsed (another libc's format).
pub fn ldconfig_p() -> Result<String, String> {
    let prog = ["/sbin/ldconfig", "/usr/sbin/ldconfig", "/usr/bin/ldconfig"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or("no ldconfig program")?;
    crate::command::run(prog, &["-p"], Duration::from_secs(5))
        .map_err(|e| e.replacen(prog, "ldconfig -p", 1))
}

/// Where the loader looks after its cache (glibc's default directories, multiarch first).
const LOADER_DIRS: &[&str] = &[
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib64",
    "lib64",
    "usr/lib",
    "lib",
];

/// Directories the NVIDIA container toolkit, NixOS and WSL put the driver's libraries in.
const DRIVER_DIRS: &[&str] = &[
    "usr/local/nvidia/lib64",
    "usr/local/nvidia/lib",
    "run/opengl-driver/lib",
    "usr/lib/wsl/lib",
];

fn scan_live(root: &RootFs, env: &EnvFacts, sites: &[Site]) -> Reading<Vec<LibraryCopy>> {
    inventory(root, env, sites, &[]).copies
}

/// The live inventory; `first_dirs` (machine paths) are searched before everything else.
pub fn inventory(
    root: &RootFs,
    env: &EnvFacts,
    sites: &[Site],
    first_dirs: &[String],
) -> Inventory {
    let mut s = Scan {
        root,
        seen: HashSet::new(),
        out: Vec::new(),
        searched: Vec::new(),
    };
    for dir in first_dirs.iter().filter(|d| d.starts_with('/')) {
        s.add_dir(&rel(dir), LibrarySource::Other);
    }
    if let Some(ldp) = env.get("LD_LIBRARY_PATH") {
        for dir in ldp.split(':').filter(|d| d.starts_with('/')) {
            s.add_dir(&rel(dir), LibrarySource::LdLibraryPath);
        }
    }
    let cache = ld_cache_entries(root);
    if let Ok(entries) = &cache {
        s.searched.push("the ld cache".into());
        for e in entries {
            if library_of(&e.soname).is_some()
                || library_of(e.path.rsplit('/').next().unwrap_or("")).is_some()
            {
                s.add(&e.path, LibrarySource::LdCache, None);
            }
        }
    }
    // Where the loader looks when the cache does not list a library (or there is no cache).
    for d in LOADER_DIRS {
        s.add_dir(d, LibrarySource::Other);
    }
    for pattern in [
        "usr/local/cuda*/lib64",
        "usr/local/cuda*/targets/*/lib",
        "usr/local/cuda*/compat",
    ] {
        for d in root.glob(pattern, 32) {
            s.add_dir(&d, LibrarySource::Toolkit);
        }
    }
    for d in DRIVER_DIRS {
        s.add_dir(d, LibrarySource::Other);
    }
    for site in sites {
        for (name, version, dist) in nvidia_wheels(root, site) {
            let Ok(Some(record)) = root.read_text(&join(&dist, "RECORD")) else {
                continue;
            };
            for p in parse_record_libs(&record) {
                s.add(
                    &abs(&join(&site.rel, &p)),
                    LibrarySource::Wheel {
                        package: name.clone(),
                    },
                    Some(&version),
                );
            }
        }
        // Wheels without a RECORD still put their libraries under nvidia/*/lib.
        for d in root.glob(&join(&site.rel, "nvidia/*/lib"), 64) {
            s.add_dir(&d, LibrarySource::Other);
        }
        s.add_dir(
            &join(&site.rel, "torch/lib"),
            LibrarySource::Framework {
                name: "torch".into(),
            },
        );
        if site.kind == "conda" {
            if let Some((prefix, _)) = site.rel.split_once("/lib/python") {
                s.add_dir(&join(prefix, "lib"), LibrarySource::Conda);
            }
        }
    }
    if let Some(prefix) = env.get("CONDA_PREFIX").filter(|p| p.starts_with('/')) {
        s.add_dir(
            &join(&rel(prefix.trim_end_matches('/')), "lib"),
            LibrarySource::Conda,
        );
    }
    let copies = match cache {
        Err(e) if s.out.is_empty() => Reading::unavailable(e),
        _ => Reading::Value(s.out),
    };
    Inventory {
        copies,
        searched: s.searched,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn live_scan_resolves_links_and_orders_sources() {
        // A root that is not "/" is a snapshot, so call the scan directly on a built tree.
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let lib = r.join("usr/lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib).unwrap();
        fs::write(lib.join("libcuda.so.580.159.04"), "elf").unwrap();
        symlink("libcuda.so.580.159.04", lib.join("libcuda.so.1")).unwrap();
        fs::write(lib.join("libnccl.so.2.21.5"), "elf").unwrap();
        symlink("libnccl.so.2.21.5", lib.join("libnccl.so.2")).unwrap();
        symlink("libnccl.so.2", lib.join("libnccl.so")).unwrap();
        let opt = r.join("opt/nccl/lib");
        fs::create_dir_all(&opt).unwrap();
        fs::write(opt.join("libnccl.so.2.18.1"), "elf").unwrap();
        symlink("libnccl.so.2.18.1", opt.join("libnccl.so.2")).unwrap();
        let site = r.join("usr/lib/python3/dist-packages");
        fs::create_dir_all(site.join("nvidia/nccl/lib")).unwrap();
        fs::write(site.join("nvidia/nccl/lib/libnccl.so.2"), "elf").unwrap();
        let di = site.join("nvidia_nccl_cu12-2.21.5.dist-info");
        fs::create_dir_all(&di).unwrap();
        fs::write(
            di.join("METADATA"),
            "Name: nvidia-nccl-cu12\nVersion: 2.21.5\n",
        )
        .unwrap();
        fs::write(
            di.join("RECORD"),
            "nvidia/nccl/lib/libnccl.so.2,sha256=x,3\n",
        )
        .unwrap();
        let cache = gpuaudit_core::parse::host::ldcache::encode_ld_so_cache(&[
            (
                "libcuda.so.1",
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                0x0303,
            ),
            (
                "libnccl.so.2",
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                0x0303,
            ),
            ("libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1", 0x0303),
        ]);
        fs::create_dir_all(r.join("etc")).unwrap();
        fs::write(r.join("etc/ld.so.cache"), cache).unwrap();
        let root = RootFs::new(r);
        let env = EnvFacts {
            vars: vec![("LD_LIBRARY_PATH".into(), "/opt/nccl/lib:".into())],
        };
        let sites = vec![Site {
            rel: "usr/lib/python3/dist-packages".into(),
            kind: "system",
            interpreter: None,
        }];
        let got = scan_live(&root, &env, &sites).into_value().unwrap();
        let rows: Vec<(String, String, Option<String>, String)> = got
            .iter()
            .map(|c| {
                (
                    c.library.clone(),
                    c.path.clone(),
                    c.version.clone(),
                    c.source.label(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (
                    "libnccl".into(),
                    "/opt/nccl/lib/libnccl.so.2".into(),
                    Some("2.18.1".into()),
                    "LD_LIBRARY_PATH".into()
                ),
                (
                    "libcuda".into(),
                    "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into(),
                    Some("580.159.04".into()),
                    "ld.so.cache".into()
                ),
                (
                    "libnccl".into(),
                    "/usr/lib/x86_64-linux-gnu/libnccl.so.2".into(),
                    Some("2.21.5".into()),
                    "ld.so.cache".into()
                ),
                (
                    "libnccl".into(),
                    "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2".into(),
                    Some("2.21.5".into()),
                    "wheel:nvidia-nccl-cu12".into()
                ),
            ]
        );
    }

    #[test]
    fn snapshot_listing_and_ldconfig_fallback() {
        let d = tempfile::tempdir().unwrap();
        let root = RootFs::new(d.path());
        let r = read(&root, &EnvFacts::default(), &[]);
        assert!(r.reason().unwrap().contains("neither"));
        fs::create_dir_all(d.path().join("cmd")).unwrap();
        fs::write(
            d.path().join(LDCONFIG_P),
            "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n",
        )
        .unwrap();
        let r = read(&root, &EnvFacts::default(), &[]).into_value().unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].version, None);
        fs::write(d.path().join(LISTING), "garbage line\n").unwrap();
        assert!(read(&root, &EnvFacts::default(), &[]).reason().is_some());
    }
}
