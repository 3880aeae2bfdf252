//! Files under a root: `/` on the live machine, a snapshot directory otherwise.
//!
//! Every path gpuaudit reads goes through [`RootFs`], so live and snapshot audits share every
//! parser, and a test can point any source at a fixture.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Files larger than this are read only up to it: a garbage or hostile file must not make the
/// audit allocate without bound.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

#[derive(Clone, Debug)]
pub struct RootFs {
    root: PathBuf,
}

impl RootFs {
    /// The live machine.
    pub fn live() -> Self {
        RootFs {
            root: PathBuf::from("/"),
        }
    }

    pub fn new(root: impl Into<PathBuf>) -> Self {
        RootFs { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The real path of `rel` ("proc/modules" or "/proc/modules") under the root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    /// The file as text (invalid UTF-8 replaced), at most [`MAX_FILE_BYTES`]. The error is a
    /// sentence naming the file: "/proc/modules: No such file or directory".
    pub fn read(&self, rel: &str) -> Result<String, String> {
        let p = self.path(rel);
        let f =
            fs::File::open(&p).map_err(|e| format!("{}: {}", self.display(rel), io_reason(&e)))?;
        let mut buf = Vec::new();
        f.take(MAX_FILE_BYTES)
            .read_to_end(&mut buf)
            .map_err(|e| format!("{}: {}", self.display(rel), io_reason(&e)))?;
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Like [`read`](Self::read), trimmed, and an empty file is an error.
    pub fn read_trimmed(&self, rel: &str) -> Result<String, String> {
        let s = self.read(rel)?;
        let t = s.trim();
        if t.is_empty() {
            return Err(format!("{}: empty file", self.display(rel)));
        }
        Ok(t.to_string())
    }

    /// Entry names of a directory, sorted.
    pub fn list(&self, rel: &str) -> Result<Vec<String>, String> {
        let p = self.path(rel);
        let rd =
            fs::read_dir(&p).map_err(|e| format!("{}: {}", self.display(rel), io_reason(&e)))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// The last component of a symbolic link's target (sysfs `driver` links), or, where the
    /// snapshot holds a plain file instead of a link, the file's trimmed content.
    /// `Ok(None)`: the entry does not exist.
    pub fn link_name(&self, rel: &str) -> Result<Option<String>, String> {
        let p = self.path(rel);
        match fs::symlink_metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {}", self.display(rel), io_reason(&e))),
            Ok(m) if m.file_type().is_symlink() => {
                let target = fs::read_link(&p)
                    .map_err(|e| format!("{}: {}", self.display(rel), io_reason(&e)))?;
                Ok(target.file_name().map(|n| n.to_string_lossy().into_owned()))
            }
            Ok(_) => {
                let s = self.read(rel)?;
                let t = s.trim();
                Ok((!t.is_empty()).then(|| t.to_string()))
            }
        }
    }

    /// The path as the machine names it ("/proc/modules"), also in a snapshot, so that an
    /// audit of a snapshot says the same as the live audit it came from.
    pub fn display(&self, rel: &str) -> String {
        format!("/{}", rel.trim_start_matches('/'))
    }
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_under_root_and_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("proc")).unwrap();
        fs::write(d.path().join("proc/x"), "  7\n").unwrap();
        let r = RootFs::new(d.path());
        assert_eq!(r.read_trimmed("/proc/x").unwrap(), "7");
        let e = r.read("proc/missing").unwrap_err();
        assert!(e.ends_with("proc/missing: no such file"), "{e}");
        assert_eq!(r.link_name("proc/missing").unwrap(), None);
        assert_eq!(r.link_name("proc/x").unwrap().as_deref(), Some("7"));
    }

    #[cfg(unix)]
    #[test]
    fn driver_link_gives_its_last_component() {
        let d = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("../../../bus/pci/drivers/nvidia", d.path().join("driver"))
            .unwrap();
        let r = RootFs::new(d.path());
        assert_eq!(r.link_name("driver").unwrap().as_deref(), Some("nvidia"));
    }
}
