//! Finding the CUDA libraries without loading them, and handing them to the child.
//!
//! cudarc (dynamic loading) opens each library by a list of names derived from the CUDA version
//! it was built for ("libcublas.so", "libcublas.so.12", ".11", ... never ".13") and panics when
//! none opens. So the parent finds each library itself (ld cache, LD_LIBRARY_PATH, the
//! standard directories, Python wheels, conda), and gives the child a private directory of
//! symbolic links named as cudarc's first candidate ("libcublas.so" -> the file found), put
//! first in the child's LD_LIBRARY_PATH. Nothing is loaded in the parent.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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

    /// "libcublas": the name in reports.
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

    /// File names to look for, best first. For cuBLAS the CUDA major version is chosen by
    /// [`find`] (it must not be newer than the driver).
    fn file_names(self, majors: &[u32]) -> Vec<String> {
        match self {
            Lib::Cuda => vec!["libcuda.so.1".into(), "libcuda.so".into()],
            Lib::Nccl => vec!["libnccl.so.2".into(), "libnccl.so".into()],
            Lib::Cublas | Lib::CublasLt => {
                let base = if self == Lib::Cublas {
                    "libcublas.so"
                } else {
                    "libcublasLt.so"
                };
                let mut v: Vec<String> = majors.iter().map(|m| format!("{base}.{m}")).collect();
                v.push(base.to_string());
                v
            }
        }
    }
}

/// Where to look, gathered from the live machine (or built by a test).
#[derive(Clone, Debug, Default)]
pub struct SearchPath {
    /// `GPUAUDIT_LIB_PATH`, then `LD_LIBRARY_PATH`, in order.
    pub env_dirs: Vec<PathBuf>,
    /// `ldconfig -p`: (file name, path).
    pub ld_cache: Vec<(String, PathBuf)>,
    /// Standard, CUDA toolkit, Python wheel and conda directories that exist.
    pub dirs: Vec<PathBuf>,
    /// The newest CUDA major version the driver supports, where known (NVML).
    pub driver_cuda_major: Option<u32>,
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

/// Parses `ldconfig -p`: lines like
/// `    libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1`.
pub fn parse_ldconfig(text: &str) -> Vec<(String, PathBuf)> {
    text.lines()
        .filter_map(|l| {
            let (left, path) = l.split_once("=>")?;
            let name = left.split_whitespace().next()?;
            let arch = left.split_once('(').map(|(_, a)| a).unwrap_or("");
            // Only this machine's 64-bit libraries; 32-bit copies share the names.
            if cfg!(target_pointer_width = "64")
                && !(arch.contains("64") || arch.contains("x86-64"))
            {
                return None;
            }
            Some((name.to_string(), PathBuf::from(path.trim())))
        })
        .collect()
}

/// The directories a library may be in, in search order, each once.
fn candidate_dirs(sp: &SearchPath, name: &str) -> Vec<PathBuf> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut add = |d: PathBuf| {
        if seen.insert(d.clone()) {
            out.push(d);
        }
    };
    for d in &sp.env_dirs {
        add(d.clone());
    }
    for (n, p) in &sp.ld_cache {
        if n == name {
            if let Some(d) = p.parent() {
                add(d.to_path_buf());
            }
        }
    }
    for d in &sp.dirs {
        add(d.clone());
    }
    out
}

/// Finds every library. `exists` is `Path::is_file` on the live machine.
pub fn find(sp: &SearchPath, exists: &dyn Fn(&Path) -> bool) -> Found {
    let majors: Vec<u32> = [13u32, 12, 11]
        .into_iter()
        .filter(|m| sp.driver_cuda_major.is_none_or(|d| *m <= d))
        .collect();
    let looked = |names: &[String]| -> String {
        let mut dirs: Vec<String> = Vec::new();
        for n in names {
            for d in candidate_dirs(sp, n) {
                let s = d.display().to_string();
                if !dirs.contains(&s) {
                    dirs.push(s);
                }
            }
        }
        let shown: Vec<&str> = dirs.iter().take(8).map(String::as_str).collect();
        let more = dirs.len().saturating_sub(8);
        if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else if shown.is_empty() {
            "nowhere: no library directory found".into()
        } else {
            shown.join(", ")
        }
    };
    let first = |lib: Lib| -> Result<PathBuf, String> {
        let names = lib.file_names(&majors);
        for n in &names {
            for d in candidate_dirs(sp, n) {
                let p = d.join(n);
                if !is_stub(&p) && exists(&p) {
                    return Ok(p);
                }
            }
        }
        Err(format!(
            "{} not found (looked for {} in {})",
            lib.name(),
            names.join(", "),
            looked(&names)
        ))
    };
    // cuBLAS and cuBLASLt must be one release: libcublas loads its own libcublasLt by
    // soname, and two releases in one process do not mix. Take the first directory (in
    // search order) holding both of one major version, newest major first.
    let pair = || -> Result<(PathBuf, PathBuf), String> {
        let mut names: Vec<String> = Lib::Cublas.file_names(&majors);
        names.extend(Lib::CublasLt.file_names(&majors));
        for n in Lib::Cublas.file_names(&majors) {
            let lt = n.replacen("libcublas", "libcublasLt", 1);
            for d in candidate_dirs(sp, &n) {
                let (a, b) = (d.join(&n), d.join(&lt));
                if !is_stub(&a) && exists(&a) && exists(&b) {
                    return Ok((a, b));
                }
            }
        }
        let driver = sp
            .driver_cuda_major
            .map(|m| format!(" (the driver supports CUDA {m}, so no newer release counts)"))
            .unwrap_or_default();
        Err(format!(
            "libcublas/libcublasLt not found as a pair of one release (looked for {} in {}){driver}",
            names.join(", "),
            looked(&names)
        ))
    };
    let (cublas, cublaslt) = match pair() {
        Ok((a, b)) => (Ok(a), Ok(b)),
        Err(e) => (Err(e.clone()), Err(e)),
    };
    Found {
        cuda: first(Lib::Cuda),
        cublas,
        cublaslt,
        nccl: first(Lib::Nccl),
    }
}

/// Subdirectories of `dir` matching `prefix*`, sorted (newest versions last).
fn glob_dirs(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Python site-packages directories on this machine (system, /usr/local, user, venv, conda).
fn site_packages() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = vec![
        "/usr/lib".into(),
        "/usr/lib64".into(),
        "/usr/local/lib".into(),
        "/usr/local/lib64".into(),
        "/opt/conda/lib".into(),
    ];
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            roots.insert(0, PathBuf::from(v).join("lib"));
        }
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".local/lib"));
    }
    let mut out = Vec::new();
    for r in roots {
        for py in glob_dirs(&r, "python3").into_iter().rev() {
            for sp in ["site-packages", "dist-packages"] {
                let d = py.join(sp);
                if d.is_dir() {
                    out.push(d);
                }
            }
        }
    }
    out.push("/usr/lib/python3/dist-packages".into());
    // The python3 on PATH knows its own (a venv, conda, pyenv): ask it, briefly.
    if let Some(text) = run_quietly(
        "python3",
        &[
            "-c",
            "import site,sys\ntry:\n p=site.getsitepackages()+[site.getusersitepackages()]\nexcept Exception:\n p=[x for x in sys.path if x.endswith('-packages')]\nprint('\\n'.join(p))",
        ],
        Duration::from_secs(3),
    ) {
        for l in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let d = PathBuf::from(l);
            if !out.contains(&d) {
                out.push(d);
            }
        }
    }
    out.retain(|d| d.is_dir());
    out
}

/// Reads the search path from the live machine.
pub fn live_search_path(driver_cuda_major: Option<u32>) -> SearchPath {
    let mut env_dirs = Vec::new();
    for var in ["GPUAUDIT_LIB_PATH", "LD_LIBRARY_PATH"] {
        if let Some(v) = std::env::var_os(var) {
            env_dirs.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
        }
    }
    let ld_cache = ["/sbin/ldconfig", "/usr/sbin/ldconfig", "ldconfig"]
        .iter()
        .find_map(|cmd| run_quietly(cmd, &["-p"], Duration::from_secs(3)))
        .map(|t| parse_ldconfig(&t))
        .unwrap_or_default();
    let mut dirs: Vec<PathBuf> = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/lib/x86_64-linux-gnu",
        "/usr/local/nvidia/lib64",
        "/usr/local/nvidia/lib",
        "/run/opengl-driver/lib",
        "/usr/lib/wsl/lib",
        "/usr/local/cuda/lib64",
        "/usr/local/cuda/targets/x86_64-linux/lib",
        "/usr/local/cuda/targets/sbsa-linux/lib",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    for cuda in glob_dirs(Path::new("/usr/local"), "cuda-")
        .into_iter()
        .rev()
    {
        dirs.push(cuda.join("lib64"));
        dirs.push(cuda.join("targets/x86_64-linux/lib"));
    }
    for sp in site_packages() {
        // PyTorch's wheels: nvidia/cublas/lib, nvidia/nccl/lib (CUDA 12), nvidia/cu13/lib.
        for pkg in glob_dirs(&sp.join("nvidia"), "") {
            dirs.push(pkg.join("lib"));
        }
    }
    for var in ["CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var) {
            dirs.push(PathBuf::from(v).join("lib"));
        }
    }
    dirs.push("/opt/conda/lib".into());
    dirs.retain(|d| d.is_dir());
    SearchPath {
        env_dirs,
        ld_cache,
        dirs,
        driver_cuda_major,
    }
}

/// Runs a command with a time limit; its stdout when it succeeded.
fn run_quietly(cmd: &str, args: &[&str], limit: Duration) -> Option<String> {
    use std::process::Stdio;
    use wait_timeout::ChildExt;
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let status = match child.wait_timeout(limit) {
        Ok(Some(st)) => st,
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
    };
    let out = reader.join().ok()?;
    status.success().then_some(out)
}

/// The private directory of links the child loads its libraries through. Removed on drop.
#[derive(Debug)]
pub struct LinkDir {
    dir: PathBuf,
    /// Directories of the real files (for their own dependencies), in order.
    lib_dirs: Vec<PathBuf>,
}

impl LinkDir {
    /// Creates the directory with a link per library found: the name cudarc opens and the
    /// file's own name (so the library's dependencies by soname resolve to the same file).
    pub fn create(found: &Found) -> std::io::Result<LinkDir> {
        let base = std::env::temp_dir();
        let mut dir = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let d = base.join(format!(
                "gpuaudit-libs-{}-{nanos:x}-{attempt}",
                std::process::id()
            ));
            match std::fs::create_dir(&d) {
                Ok(()) => {
                    dir = Some(d);
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        let dir = dir.ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "could not create a private directory for the library links",
            )
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let link = LinkDir {
            dir,
            lib_dirs: Vec::new(),
        };
        let mut link = link;
        for lib in Lib::ALL {
            if let Ok(p) = found.get(lib) {
                std::os::unix::fs::symlink(p, link.dir.join(lib.cudarc_name()))?;
                if let Some(own) = p.file_name() {
                    let own_link = link.dir.join(own);
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
        &self.dir
    }

    /// LD_LIBRARY_PATH for the child: the links, the libraries' directories, then what the
    /// user had.
    pub fn ld_library_path(&self) -> OsString {
        let mut parts: Vec<PathBuf> = vec![self.dir.clone()];
        parts.extend(self.lib_dirs.iter().cloned());
        if let Some(v) = std::env::var_os("LD_LIBRARY_PATH") {
            parts.extend(std::env::split_paths(&v).filter(|p| !p.as_os_str().is_empty()));
        }
        std::env::join_paths(parts).unwrap_or_else(|_| self.dir.clone().into_os_string())
    }
}

impl Drop for LinkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(files: &[&str]) -> (SearchPath, Vec<PathBuf>) {
        let files: Vec<PathBuf> = files.iter().map(PathBuf::from).collect();
        let mut dirs: Vec<PathBuf> = files
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf))
            .collect();
        dirs.dedup();
        (
            SearchPath {
                dirs,
                ..SearchPath::default()
            },
            files,
        )
    }

    #[test]
    fn finds_torch_wheel_libraries_next_to_the_driver() {
        let (mut s, files) = sp(&[
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublas.so.13",
            "/usr/local/lib/python3.12/dist-packages/nvidia/cu13/lib/libcublasLt.so.13",
            "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2",
        ]);
        s.driver_cuda_major = Some(13);
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let f = find(&s, &exists);
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
        let (mut s, files) = sp(&[
            "/a/libcublas.so.13",
            "/a/libcublasLt.so.13",
            "/b/libcublas.so.12",
            "/b/libcublasLt.so.12",
        ]);
        s.driver_cuda_major = Some(12);
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let f = find(&s, &exists);
        assert_eq!(f.cublas.unwrap(), PathBuf::from("/b/libcublas.so.12"));
        assert_eq!(f.cublaslt.unwrap(), PathBuf::from("/b/libcublasLt.so.12"));
    }

    #[test]
    fn cublas_without_its_lt_is_not_a_pair() {
        let (s, files) = sp(&["/a/libcublas.so.12", "/b/libcublasLt.so.12"]);
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let f = find(&s, &exists);
        let e = f.cublas.unwrap_err();
        assert!(e.contains("pair of one release"), "{e}");
        assert!(f.cublaslt.is_err());
    }

    #[test]
    fn missing_library_says_where_it_looked() {
        let (s, files) = sp(&["/usr/lib/libcuda.so.1"]);
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let f = find(&s, &exists);
        let e = f.nccl.unwrap_err();
        assert!(e.starts_with("libnccl not found"), "{e}");
        assert!(e.contains("/usr/lib"), "{e}");
    }

    #[test]
    fn stub_libcuda_is_ignored() {
        let (s, files) = sp(&[
            "/usr/local/cuda/lib64/stubs/libcuda.so",
            "/usr/lib64/libcuda.so.1",
        ]);
        let exists = |p: &Path| files.iter().any(|f| f == p);
        let f = find(&s, &exists);
        assert_eq!(f.cuda.unwrap(), PathBuf::from("/usr/lib64/libcuda.so.1"));
    }

    #[test]
    fn ld_library_path_comes_first_then_ld_cache() {
        let s = SearchPath {
            env_dirs: vec!["/opt/x".into()],
            ld_cache: parse_ldconfig(
                "3 libs found in cache `/etc/ld.so.cache'\n\
                 \tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n\
                 \tlibnccl.so.2 (libc6) => /usr/lib/i386-linux-gnu/libnccl.so.2\n",
            ),
            dirs: vec![],
            driver_cuda_major: None,
        };
        assert_eq!(s.ld_cache.len(), 1);
        let files = [
            PathBuf::from("/opt/x/libnccl.so.2"),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libnccl.so.2"),
        ];
        let exists = |p: &Path| files.iter().any(|f| f == p);
        assert_eq!(
            find(&s, &exists).nccl.unwrap(),
            PathBuf::from("/opt/x/libnccl.so.2")
        );
        let only_cache = |p: &Path| p == files[1];
        assert_eq!(find(&s, &only_cache).nccl.unwrap(), files[1]);
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
    }
}

#[cfg(test)]
mod live_tests {
    #[test]
    fn python_is_asked_for_its_site_packages() {
        // Whatever this machine has, the search must not fail; where python3 runs, its
        // site-packages directories are among the candidates.
        let sp = super::site_packages();
        if let Ok(o) = std::process::Command::new("python3")
            .args(["-c", "import site; print(site.getsitepackages()[0])"])
            .output()
        {
            let d = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if !d.is_empty() && std::path::Path::new(&d).is_dir() {
                assert!(
                    sp.iter().any(|p| p.to_string_lossy() == d),
                    "{sp:?} lacks {d}"
                );
            }
        }
        let _ = super::live_search_path(Some(13));
    }
}
