//! Picking the CUDA libraries the child loads, and handing them to it.
//!
//! cudarc (dynamic loading) opens each library by a list of names derived from the CUDA version
//! it was built for ("libcublas.so", "libcublas.so.12", ".11", ... never ".13") and panics when
//! none opens. So the parent picks each library itself from the machine's one library
//! inventory ([`crate::host::live_library_inventory`]: LD_LIBRARY_PATH, the ld cache, the
//! loader's directories, toolkits, Python wheels, conda), and gives the child a private
//! directory of symbolic links named as cudarc's first candidate ("libcublas.so" -> the file
//! found), put first in the child's LD_LIBRARY_PATH. Nothing is loaded in the parent.
//! `GPUAUDIT_LIB_PATH` (directories, `:`-separated) is searched before everything else.

use crate::cleanup::TempDir;
use crate::host::LibraryInventory;
use gpuaudit_core::facts::{LibraryCopy, LibrarySource};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One library gpuaudit needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    Cuda,
    Cublas,
    CublasLt,
    Nccl,
}

impl Lib {
    pub const ALL: [Lib; 4] = [Lib::Cuda, Lib::Cublas, Lib::CublasLt, Lib::Nccl];

    /// "libcublas": the name in reports and in the library inventory.
    pub fn name(self) -> &'static str {
        match self {
            Lib::Cuda => "libcuda",
            Lib::Cublas => "libcublas",
            Lib::CublasLt => "libcublasLt",
            Lib::Nccl => "libnccl",
        }
    }

    /// The name cudarc tries first (`get_lib_name_candidates`' first entry).
    pub fn cudarc_name(self) -> &'static str {
        match self {
            Lib::Cuda => "libcuda.so",
            Lib::Cublas => "libcublas.so",
            Lib::CublasLt => "libcublasLt.so",
            Lib::Nccl => "libnccl.so",
        }
    }
}

/// The libraries found, or the reason each was not.
#[derive(Clone, Debug)]
pub struct Found {
    pub cuda: Result<PathBuf, String>,
    pub cublas: Result<PathBuf, String>,
    pub cublaslt: Result<PathBuf, String>,
    pub nccl: Result<PathBuf, String>,
}

impl Found {
    pub fn get(&self, lib: Lib) -> &Result<PathBuf, String> {
        match lib {
            Lib::Cuda => &self.cuda,
            Lib::Cublas => &self.cublas,
            Lib::CublasLt => &self.cublaslt,
            Lib::Nccl => &self.nccl,
        }
    }
}

/// A stub libcuda (toolkit `lib64/stubs`) links but fails every call: never use one.
fn is_stub(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "stubs")
}

/// "libcublas.so.12" (or a resolved "libcublas.so.12.4.5.8") -> 12.
fn so_major(copy: &LibraryCopy) -> Option<u32> {
    let from_name = |n: &str| -> Option<u32> {
        let (_, rest) = n.split_once(".so.")?;
        rest.split('.').next()?.parse().ok()
    };
    let name = copy.path.rsplit('/').next().unwrap_or(&copy.path);
    from_name(name)
        .or_else(|| from_name(&copy.file))
        .or_else(|| copy.version.as_deref()?.split('.').next()?.parse().ok())
}

/// The directories searched, for a "not found" message.
fn looked(searched: &[String]) -> String {
    let shown: Vec<&str> = searched.iter().take(8).map(String::as_str).collect();
    let more = searched.len().saturating_sub(8);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else if shown.is_empty() {
        "nowhere: no library directory found".into()
    } else {
        shown.join(", ")
    }
}

/// Picks each library from the inventory: the first copy in the loader's order. libcuda is
/// the driver's: only where the loader finds it (LD_LIBRARY_PATH, the ld cache, the loader's
/// directories and the driver directories), never a stub. `exists` is `Path::is_file` on the
/// live machine.
pub fn find(
    inv: &LibraryInventory,
    driver_cuda_major: Option<u32>,
    exists: &dyn Fn(&Path) -> bool,
) -> Found {
    let empty = Vec::new();
    let (copies, why_none) = match &inv.copies {
        gpuaudit_core::Reading::Value(c) => (c, None),
        gpuaudit_core::Reading::Unavailable(r) => (&empty, Some(r.as_str())),
    };
    let not_found = |what: &str, extra: &str| -> String {
        let mut s = format!(
            "{what} not found (looked in {}){extra}",
            looked(&inv.searched)
        );
        if let Some(r) = why_none {
            s.push_str(&format!("; {r}"));
        }
        s
    };
    let of = |lib: Lib| copies.iter().filter(move |c| c.library == lib.name());
    let usable = |c: &&LibraryCopy| !is_stub(Path::new(&c.path)) && exists(Path::new(&c.path));
    let cuda = of(Lib::Cuda)
        .filter(|c| {
            matches!(
                c.source,
                LibrarySource::LdLibraryPath | LibrarySource::LdCache | LibrarySource::Other
            )
        })
        .find(usable)
        .map(|c| PathBuf::from(&c.path))
        .ok_or_else(|| not_found(Lib::Cuda.name(), ""));
    let nccl = of(Lib::Nccl)
        .find(usable)
        .map(|c| PathBuf::from(&c.path))
        .ok_or_else(|| not_found(Lib::Nccl.name(), ""));
    // cuBLAS and cuBLASLt must be one release: libcublas loads its own libcublasLt by
    // soname, and two releases in one process do not mix. Take the first directory (in
    // search order) holding both of one major version, newest major first, never newer than
    // the driver.
    let majors: Vec<u32> = [13u32, 12, 11]
        .into_iter()
        .filter(|m| driver_cuda_major.is_none_or(|d| *m <= d))
        .collect();
    let pair = majors.iter().find_map(|m| {
        of(Lib::Cublas)
            .filter(|c| so_major(c) == Some(*m))
            .filter(usable)
            .find_map(|c| {
                let a = PathBuf::from(&c.path);
                let dir = a.parent()?;
                let lt_name = format!("libcublasLt.so.{m}");
                let b = of(Lib::CublasLt)
                    .filter(|l| so_major(l) == Some(*m))
                    .map(|l| PathBuf::from(&l.path))
                    .find(|l| l.parent() == Some(dir))
                    .or_else(|| Some(dir.join(&lt_name)).filter(|p| exists(p)))?;
                Some((a, b))
            })
    });
    let (cublas, cublaslt) = match pair {
        Some((a, b)) => (Ok(a), Ok(b)),
        None => {
            let driver = driver_cuda_major
                .map(|m| format!(" (the driver supports CUDA {m}, so no newer release counts)"))
                .unwrap_or_default();
            let e = not_found(
                &format!(
                    "libcublas/libcublasLt as a pair of one release ({})",
                    majors
                        .iter()
                        .map(|m| format!("libcublas.so.{m} with libcublasLt.so.{m}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                &driver,
            );
            (Err(e.clone()), Err(e))
        }
    };
    Found {
        cuda,
        cublas,
        cublaslt,
        nccl,
    }
}

/// The live machine's inventory, with `GPUAUDIT_LIB_PATH` searched first.
pub fn live_inventory() -> LibraryInventory {
    let first: Vec<String> = std::env::var_os("GPUAUDIT_LIB_PATH")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| p.is_absolute())
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    crate::host::live_library_inventory(&first)
}

/// The private directory of links the child loads its libraries through: registered with
/// [`crate::cleanup`], so it is removed on drop and on SIGINT, SIGTERM and SIGHUP.
#[derive(Debug)]
pub struct LinkDir {
    dir: TempDir,
    /// Directories of the real files (for their own dependencies), in order.
    lib_dirs: Vec<PathBuf>,
}

/// The prefix of the link directories under the temporary directory.
pub const LINK_DIR_PREFIX: &str = "gpuaudit-libs-";

impl LinkDir {
    /// Creates the directory with a link per library found: the name cudarc opens and the
    /// file's own name (so the library's dependencies by soname resolve to the same file).
    pub fn create(found: &Found) -> std::io::Result<LinkDir> {
        let mut link = LinkDir {
            dir: TempDir::create(LINK_DIR_PREFIX)?,
            lib_dirs: Vec::new(),
        };
        let dir = link.dir.path().to_path_buf();
        for lib in Lib::ALL {
            if let Ok(p) = found.get(lib) {
                std::os::unix::fs::symlink(p, dir.join(lib.cudarc_name()))?;
                if let Some(own) = p.file_name() {
                    let own_link = dir.join(own);
                    if !own_link.exists() {
                        std::os::unix::fs::symlink(p, own_link)?;
                    }
                }
                if let Some(d) = p.parent() {
                    if !link.lib_dirs.iter().any(|x| x == d) {
                        link.lib_dirs.push(d.to_path_buf());
                    }
                }
            }
        }
        Ok(link)
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// LD_LIBRARY_PATH for the child: the links, the libraries' directories, then what the
    /// user had.
    pub fn ld_library_path(&self) -> OsString {
        let mut parts: Vec<PathBuf> = vec![self.path().to_path_buf()];
        parts.extend(self.lib_dirs.iter().cloned());
        if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
            parts.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
        }
        std::env::join_paths(parts).unwrap_or_else(|_| self.path().as_os_str().to_os_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuaudit_core::Reading;

    fn copy(path: &str, source: LibrarySource) -> LibraryCopy {
        let file = path.rsplit('/').next().unwrap().to_string();
        let (lib, version) = gpuaudit_core::parse::host::libs::library_of(&file).unwrap();
        LibraryCopy {
            library: lib.to_string(),
            path: path.to_string(),
            file,
            version,
            source,
        }
    }

    fn inv(copies: &[(&str, LibrarySource)]) -> LibraryInventory {
        LibraryInventory {
            copies: Reading::Value(copies.iter().map(|(p, s)| copy(p, s.clone())).collect()),
            searched: vec!["/usr/lib".into(), "/opt/x".into()],
        }
    }

    fn all_exist(_: &Path) -> bool {
        true
    }

    #[test]
    fn finds_torch_wheel_libraries_next_to_the_driver() {
        let wheel = |p: &str| LibrarySource::Wheel {
            package: p.to_string(),
        };
        let i = inv(&[
            (
                "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                LibrarySource::LdCache,
            ),
            (
                "/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",
                wheel("nvidia-cublas"),
            ),
            (
                "/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublasLt.so.13",
                wheel("nvidia-cublas"),
            ),
            (
                "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
                wheel("nvidia-nccl-cu12"),
            ),
        ]);
        let f = find(&i, Some(13), &all_exist);
        assert_eq!(
            f.cuda.unwrap(),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1")
        );
        assert!(f.cublas.unwrap().ends_with("libcublas.so.13"));
        assert!(f.cublaslt.unwrap().ends_with("libcublasLt.so.13"));
        assert!(f.nccl.unwrap().ends_with("libnccl.so.2"));
    }

    #[test]
    fn cublas_newer_than_the_driver_is_not_used() {
        let o = LibrarySource::Other;
        let i = inv(&[
            ("/a/libcublas.so.13", o.clone()),
            ("/a/libcublasLt.so.13", o.clone()),
            ("/b/libcublas.so.12", o.clone()),
            ("/b/libcublasLt.so.12", o.clone()),
        ]);
        let f = find(&i, Some(12), &all_exist);
        assert_eq!(f.cublas.unwrap(), PathBuf::from("/b/libcublas.so.12"));
        assert_eq!(f.cublaslt.unwrap(), PathBuf::from("/b/libcublasLt.so.12"));
        // Without a driver version the newest pair wins.
        assert_eq!(
            find(&i, None, &all_exist).cublas.unwrap(),
            PathBuf::from("/a/libcublas.so.13")
        );
    }

    #[test]
    fn cublas_without_its_lt_is_not_a_pair() {
        let o = LibrarySource::Other;
        let i = inv(&[
            ("/a/libcublas.so.12", o.clone()),
            ("/b/libcublasLt.so.12", o),
        ]);
        let listed = |p: &Path| {
            p == Path::new("/a/libcublas.so.12") || p == Path::new("/b/libcublasLt.so.12")
        };
        let f = find(&i, None, &listed);
        let e = f.cublas.unwrap_err();
        assert!(e.contains("pair of one release"), "{e}");
        assert!(f.cublaslt.is_err());
    }

    #[test]
    fn missing_library_says_where_it_looked() {
        let i = inv(&[("/usr/lib/libcuda.so.1", LibrarySource::Other)]);
        let f = find(&i, None, &all_exist);
        let e = f.nccl.unwrap_err();
        assert!(e.starts_with("libnccl not found"), "{e}");
        assert!(e.contains("/usr/lib, /opt/x"), "{e}");
        // An inventory that could not be taken says why.
        let broken = LibraryInventory {
            copies: Reading::unavailable("/etc/ld.so.cache: no such file"),
            searched: vec![],
        };
        let e = find(&broken, None, &all_exist).cuda.unwrap_err();
        assert!(e.contains("nowhere") && e.contains("ld.so.cache"), "{e}");
    }

    #[test]
    fn stub_or_toolkit_libcuda_is_not_the_driver() {
        let i = inv(&[
            (
                "/usr/local/cuda/lib64/stubs/libcuda.so",
                LibrarySource::LdLibraryPath,
            ),
            (
                "/usr/local/cuda-12.4/compat/libcuda.so.1",
                LibrarySource::Toolkit,
            ),
            ("/usr/lib64/libcuda.so.1", LibrarySource::Other),
        ]);
        let f = find(&i, None, &all_exist);
        assert_eq!(f.cuda.unwrap(), PathBuf::from("/usr/lib64/libcuda.so.1"));
        // The forward-compatibility libcuda counts where LD_LIBRARY_PATH puts it first.
        let i = inv(&[
            (
                "/usr/local/cuda-12.4/compat/libcuda.so.1",
                LibrarySource::LdLibraryPath,
            ),
            ("/usr/lib64/libcuda.so.1", LibrarySource::LdCache),
        ]);
        assert_eq!(
            find(&i, None, &all_exist).cuda.unwrap(),
            PathBuf::from("/usr/local/cuda-12.4/compat/libcuda.so.1")
        );
    }

    #[test]
    fn the_first_copy_in_loader_order_wins_if_it_exists() {
        let i = inv(&[
            ("/opt/x/libnccl.so.2", LibrarySource::LdLibraryPath),
            (
                "/usr/lib/x86_64-linux-gnu/libnccl.so.2",
                LibrarySource::LdCache,
            ),
        ]);
        assert_eq!(
            find(&i, None, &all_exist).nccl.unwrap(),
            PathBuf::from("/opt/x/libnccl.so.2")
        );
        let only_cache = |p: &Path| p.starts_with("/usr");
        assert_eq!(
            find(&i, None, &only_cache).nccl.unwrap(),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libnccl.so.2")
        );
    }

    #[test]
    fn the_live_inventory_finds_a_library_through_ld_library_path() {
        // The fault-injection suite relies on this: a library first in LD_LIBRARY_PATH is the
        // one the measurement loads. Here through GPUAUDIT_LIB_PATH's equivalent, first_dirs.
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("libnccl.so.2"), b"").unwrap();
        let inv = crate::host::live_library_inventory(&[d.path().display().to_string()]);
        let f = find(&inv, None, &|p| p.is_file());
        assert_eq!(f.nccl.unwrap(), d.path().join("libnccl.so.2"));
    }

    #[test]
    fn link_dir_names_libraries_as_cudarc_opens_them() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("libnccl.so.2");
        std::fs::write(&real, b"").unwrap();
        let found = Found {
            cuda: Err("x".into()),
            cublas: Err("x".into()),
            cublaslt: Err("x".into()),
            nccl: Ok(real.clone()),
        };
        let dir_path;
        {
            let d = LinkDir::create(&found).unwrap();
            dir_path = d.path().to_path_buf();
            assert!(dir_path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(LINK_DIR_PREFIX));
            assert_eq!(
                std::fs::read_link(d.path().join("libnccl.so")).unwrap(),
                real
            );
            assert!(d.path().join("libnccl.so.2").exists());
            let lp = d.ld_library_path();
            let parts: Vec<PathBuf> = std::env::split_paths(&lp).collect();
            assert_eq!(parts[0], d.path());
            assert_eq!(parts[1], tmp.path());
        }
        assert!(!dir_path.exists(), "the link directory is removed on drop");
        assert!(real.exists(), "the library itself is never removed");
    }
}
