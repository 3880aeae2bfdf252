//! The samples a rehearsal reads: the files of `--data-dir`, or a dataset gpuaudit writes
//! (into a private temporary directory registered with [`crate::cleanup`], so that it is
//! removed on any exit, a signal included).

use super::loader::Dataset;
use crate::cleanup::TempDir;
use gpuaudit_core::facts::DataSource;
use std::io::Write;
use std::path::{Path, PathBuf};

/// At most this many files of a data directory are read (the listing stops there): enough
/// for a rehearsal of a minute, and a bounded plan for the measurement child.
pub const MAX_FILES: usize = 20_000;
/// How deep a data directory is walked.
const MAX_DEPTH: usize = 8;
/// Prefix of the generated dataset's directory.
pub const DIR_PREFIX: &str = "gpuaudit-rehearse-";

/// A dataset ready to read; a generated one lives as long as this.
pub struct Prepared {
    pub dataset: Dataset,
    pub source: DataSource,
    /// Each sample is dropped from the page cache after it is read.
    pub drop_cache: bool,
    _dir: Option<TempDir>,
}

/// The regular files under `dir` (not following links), sorted per directory, at most
/// [`MAX_FILES`], empty ones left out.
pub fn list_files(dir: &Path) -> Result<Vec<(PathBuf, u64)>, String> {
    fn walk(d: &Path, depth: usize, out: &mut Vec<(PathBuf, u64)>) -> Result<(), String> {
        let rd = std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))?;
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if out.len() >= MAX_FILES {
                return Ok(());
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_file() {
                let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                if len > 0 {
                    out.push((e.path(), len));
                }
            } else if t.is_dir() && depth < MAX_DEPTH {
                // A subdirectory that cannot be read is skipped, not the rehearsal.
                let _ = walk(&e.path(), depth + 1, out);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out)?;
    Ok(out)
}

/// Writes `count` files of `sample_bytes` pseudo-random bytes (so that a compressing file
/// system does not flatter the reads) into `dir`; with `sync`, each is flushed to the
/// storage and dropped from the page cache, so the first pass reads the storage too.
fn generate(
    dir: &Path,
    count: usize,
    sample_bytes: u64,
    sync: bool,
) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::with_capacity(count);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut buf = vec![0u8; sample_bytes as usize];
    for i in 0..count {
        for chunk in buf.chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        let p = dir.join(format!("sample-{i:05}.bin"));
        let mut f = std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        f.write_all(&buf)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        if sync {
            f.sync_data().map_err(|e| format!("{}: {e}", p.display()))?;
            use std::os::fd::AsRawFd;
            // SAFETY: an advisory call on a descriptor this function owns.
            unsafe {
                libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            }
        }
        files.push(p);
    }
    Ok(files)
}

/// Where a rehearsal's samples come from, decided before anything is written.
#[derive(Debug)]
pub enum Plan {
    /// The files of a data directory, with their sizes.
    Existing(PathBuf, Vec<(PathBuf, u64)>),
    /// A dataset to write: `count` files of `sample_bytes` into a temporary directory inside
    /// `base` (`sync`: flushed and dropped from the page cache, for a data directory).
    Generate {
        base: PathBuf,
        count: usize,
        sample_bytes: u64,
        sync: bool,
    },
}

impl Plan {
    /// The directory the dataset would be written into; `None`: nothing is written.
    pub fn writes_to(&self) -> Option<&Path> {
        match self {
            Plan::Existing(..) => None,
            Plan::Generate { base, .. } => Some(base),
        }
    }
}

/// The dataset of a rehearsal, planned: `data_dir`'s files are read (and each sample dropped
/// from the page cache after it is read); where it holds none, a dataset is written into a
/// temporary directory inside it. No `data_dir`: a dataset is written into `$TMPDIR` and
/// read from the page cache (what the CPU and GPU stages need; the storage is only tested
/// with `--data-dir`). `dataset_bytes` is the size of a generated dataset. Reads only.
pub fn plan(
    data_dir: Option<&Path>,
    sample_bytes: u64,
    dataset_bytes: u64,
) -> Result<Plan, String> {
    let count = usize::try_from(dataset_bytes.div_ceil(sample_bytes.max(1)))
        .unwrap_or(MAX_FILES)
        .clamp(1, MAX_FILES);
    let generate = |base: PathBuf, sync| Plan::Generate {
        base,
        count,
        sample_bytes,
        sync,
    };
    let Some(d) = data_dir else {
        return Ok(generate(std::env::temp_dir(), false));
    };
    let meta = std::fs::metadata(d).map_err(|e| format!("--data-dir {}: {e}", d.display()))?;
    if !meta.is_dir() {
        return Err(format!("--data-dir {}: not a directory", d.display()));
    }
    let found = list_files(d).map_err(|e| format!("--data-dir {e}"))?;
    Ok(if found.is_empty() {
        generate(d.to_path_buf(), true)
    } else {
        Plan::Existing(d.to_path_buf(), found)
    })
}

/// The dataset of [`plan`], written where it is generated.
pub fn prepare(
    data_dir: Option<&Path>,
    sample_bytes: u64,
    dataset_bytes: u64,
) -> Result<Prepared, String> {
    create(plan(data_dir, sample_bytes, dataset_bytes)?)
}

/// Makes the dataset `plan` describes: a generated one in a [`TempDir`] registered with the
/// cleanup module (removed when the result is dropped, on unwinding, or on a signal).
pub fn create(plan: Plan) -> Result<Prepared, String> {
    match plan {
        Plan::Existing(d, found) => {
            let bytes = found.iter().map(|f| f.1).sum();
            Ok(Prepared {
                source: DataSource {
                    path: d.display().to_string(),
                    generated: false,
                    page_cache: false,
                    files: found.len() as u64,
                    bytes,
                },
                dataset: Dataset {
                    files: found.into_iter().map(|f| f.0).collect(),
                },
                drop_cache: true,
                _dir: None,
            })
        }
        Plan::Generate {
            base,
            count,
            sample_bytes,
            sync,
        } => {
            let dir = TempDir::create_in(&base, DIR_PREFIX).map_err(|e| {
                if sync {
                    format!(
                        "--data-dir {} holds no file to read, and a dataset could not be \
                         written there: {e}",
                        base.display()
                    )
                } else {
                    format!(
                        "could not create a temporary directory for the dataset under {}: {e}",
                        base.display()
                    )
                }
            })?;
            let files = generate(dir.path(), count, sample_bytes, sync)?;
            Ok(Prepared {
                source: DataSource {
                    path: dir.path().display().to_string(),
                    generated: true,
                    page_cache: !sync,
                    files: files.len() as u64,
                    bytes: (files.len() as u64).saturating_mul(sample_bytes),
                },
                dataset: Dataset { files },
                drop_cache: sync,
                _dir: Some(dir),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_dataset_is_removed_with_its_guard() {
        let p = prepare(None, 4096, 40_000).unwrap();
        assert_eq!(p.dataset.files.len(), 10);
        assert!(p.source.generated && p.source.page_cache && !p.drop_cache);
        let dir = PathBuf::from(&p.source.path);
        assert!(dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(DIR_PREFIX));
        let a = std::fs::read(&p.dataset.files[0]).unwrap();
        assert_eq!(a.len(), 4096);
        assert_ne!(
            a,
            std::fs::read(&p.dataset.files[1]).unwrap(),
            "random, not repeated"
        );
        drop(p);
        assert!(!dir.exists());
    }

    #[test]
    fn a_data_directory_is_read_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("train")).unwrap();
        std::fs::write(d.path().join("train/b.jpg"), [1u8; 10]).unwrap();
        std::fs::write(d.path().join("a.jpg"), [1u8; 5]).unwrap();
        std::fs::write(d.path().join("empty"), []).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("link")).unwrap();
        let p = prepare(Some(d.path()), 4096, 1 << 20).unwrap();
        assert!(!p.source.generated && p.drop_cache);
        let names: Vec<String> = p
            .dataset
            .files
            .iter()
            .map(|f| f.strip_prefix(d.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(names, vec!["a.jpg", "train/b.jpg"]);
        assert_eq!((p.source.files, p.source.bytes), (2, 15));
    }

    #[test]
    fn an_empty_data_directory_gets_a_dataset_that_goes_away() {
        let d = tempfile::tempdir().unwrap();
        let p = prepare(Some(d.path()), 4096, 8192).unwrap();
        assert!(p.source.generated && !p.source.page_cache && p.drop_cache);
        assert_eq!(p.dataset.files.len(), 2);
        assert!(p.dataset.files[0].starts_with(d.path()));
        drop(p);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_bad_data_directory_is_an_error() {
        let e = prepare(Some(Path::new("/nonexistent/gpuaudit")), 4096, 8192)
            .err()
            .unwrap();
        assert!(e.starts_with("--data-dir /nonexistent/gpuaudit: "), "{e}");
        let f = tempfile::NamedTempFile::new().unwrap();
        let e = prepare(Some(f.path()), 4096, 8192).err().unwrap();
        assert!(e.ends_with("not a directory"), "{e}");
    }
}
