//! The recording side of [`RootFs`]: `gpuaudit collect` is the facts gather run on a reader
//! that copies into the snapshot what it reads, so that the paths read and the paths copied
//! are one list.
//!
//! What each reading leaves in the snapshot follows from the reading itself:
//!
//! - a file read: its bytes, under the same path (bounded as every read is: a file over
//!   [`MAX_FILE_BYTES`](super::MAX_FILE_BYTES) is not read, and the snapshot holds the
//!   unreadable marker with that reason, as for any file that could not be read);
//! - a file's head and tail: the excerpt read, which is what reading the snapshot gives back;
//! - a directory listed, or found to exist: the directory (empty until its files are read);
//! - a file found to exist and never read: an empty file (a program that is there);
//! - a link's name (sysfs `driver`): a plain file holding the name;
//! - a path resolved through links (`sys/bus/pci/devices/<bdf>`): a relative link to the
//!   resolved directory, under which the files read through it then land.
//!
//! Readings that are no copy (a command's output, the environment, a listing resolved from
//! many files, a file reduced so that no secret leaves the machine) are recorded by the
//! reader that makes them, with [`RootFs::record_reading`] and its siblings, reading their
//! sources through [`RootFs::unrecorded`] so that the sources themselves are not copied.

use super::{io_reason, normalize, UNREADABLE_MARK};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    #[error("{0} already exists: collect writes a new directory (choose another path)")]
    Exists(PathBuf),
    #[error("{0} is a file, not a directory: collect writes a new directory")]
    IsAFile(PathBuf),
    #[error("cannot create {path}: {reason}")]
    Create { path: PathBuf, reason: String },
}

/// What was written, what could not be collected and what could not be written (each a
/// sentence).
#[derive(Clone, Debug, Default)]
pub struct CollectSummary {
    /// Files and links written (each path once).
    pub files: usize,
    /// Readings the machine did not give (the snapshot says so in their place).
    pub notes: Vec<String>,
    /// Files of the snapshot that could not be written ("could not write DIR/x: why"): the
    /// snapshot is incomplete.
    pub failed: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    summary: CollectSummary,
    /// The paths written (normalised), so that an existence marker never replaces a copy.
    written: BTreeSet<String>,
}

/// The one writer of a snapshot: every file goes through it, and a failure is recorded and
/// the collect goes on, so that a full disk costs a list of the files missing, not a snapshot
/// cut off at the first one. Shared by the threads of one gather (the host sources read in
/// parallel with the GPU's).
#[derive(Debug)]
pub struct Recorder {
    out: PathBuf,
    state: Mutex<State>,
}

impl Recorder {
    /// Create `out` (its parents as needed) and nothing else: a path that exists is refused,
    /// so that two collects into one directory cannot mix their files (`mkdir` is atomic: of
    /// two at once, one gets the directory and the other `Exists`).
    pub fn create(out: &Path) -> Result<Recorder, CollectError> {
        match fs::symlink_metadata(out) {
            Ok(m) if m.is_file() => return Err(CollectError::IsAFile(out.to_path_buf())),
            Ok(_) => return Err(CollectError::Exists(out.to_path_buf())),
            Err(_) => {}
        }
        let create = |path: &Path, e: std::io::Error| CollectError::Create {
            path: path.to_path_buf(),
            reason: io_reason(&e),
        };
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|e| create(parent, e))?;
        }
        match fs::create_dir(out) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(CollectError::Exists(out.to_path_buf()))
            }
            Err(e) => return Err(create(out, e)),
        }
        Ok(Recorder {
            out: out.to_path_buf(),
            state: Mutex::new(State::default()),
        })
    }

    pub fn out(&self) -> &Path {
        &self.out
    }

    /// What was written so far.
    pub fn summary(&self) -> CollectSummary {
        self.with(|s| s.summary.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A thread that panicked while holding the lock left the state as it was: go on.
        let mut g = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    fn failed(&self, p: &Path, e: &std::io::Error) {
        let line = format!("could not write {}: {}", p.display(), io_reason(e));
        self.with(|s| s.summary.failed.push(line));
    }

    /// A reading the machine did not give, in words.
    pub fn note(&self, line: impl Into<String>) {
        let line = line.into();
        self.with(|s| {
            if !s.summary.notes.contains(&line) {
                s.summary.notes.push(line)
            }
        });
    }

    /// Write `content` at `rel` in the snapshot (`..` cannot leave it); a failure is recorded.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let rel = normalize(rel);
        let p = self.out.join(&rel);
        let r = p
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|_| fs::write(&p, content));
        match r {
            Ok(()) => self.with(|s| {
                if s.written.insert(rel) {
                    s.summary.files += 1;
                }
            }),
            Err(e) => self.failed(&p, &e),
        }
    }

    /// A directory that must be there even when empty.
    pub fn dir(&self, rel: &str) {
        let p = self.out.join(normalize(rel));
        if let Err(e) = fs::create_dir_all(&p) {
            self.failed(&p, &e);
        }
    }

    /// The unreadable marker with its reason, in place of a file that could not be read;
    /// noted too. Where the snapshot already has a directory at that path (a directory that
    /// some reader tried to read as a file), the note alone.
    pub fn mark(&self, rel: &str, reason: &str) {
        self.note(reason.to_string());
        if self.out.join(normalize(rel)).is_dir() {
            return;
        }
        self.write(rel, format!("{UNREADABLE_MARK}{reason}\n"));
    }

    /// An empty file that says "this is there" (a program, a device node), unless something
    /// was written there already.
    pub fn marker(&self, rel: &str) {
        let rel_n = normalize(rel);
        if self.with(|s| s.written.contains(&rel_n)) || fs::metadata(self.out.join(&rel_n)).is_ok()
        {
            return;
        }
        self.write(rel, b"");
    }

    /// `rel` is a link (in the source) that resolves to the machine path `real`: the snapshot
    /// gets a relative link there to `real`'s place in the snapshot, so that it resolves the
    /// same way (sysfs's `sys/bus/pci/devices/<bdf>` into `sys/devices/...`). What was already
    /// written under `rel` as a plain directory moves to `real`'s directory first.
    pub fn link(&self, rel: &str, real: &str, real_is_dir: bool) {
        let rel = normalize(rel);
        let real = normalize(real);
        if rel.is_empty() || real.is_empty() || rel == real {
            return;
        }
        let at = self.out.join(&rel);
        let target_dir = self.out.join(&real);
        if fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return;
        }
        if real_is_dir {
            if let Err(e) = fs::create_dir_all(&target_dir) {
                return self.failed(&target_dir, &e);
            }
        }
        if at.is_dir() {
            // Written before the link was known (the PCI functions' files are read before
            // their paths): into the linked directory, then the link in its place.
            if let Err(e) = merge_into(&at, &target_dir).and_then(|_| fs::remove_dir(&at)) {
                return self.failed(&at, &e);
            }
        } else if at.exists() {
            // A file already stands there (a link's name recorded as a plain file): keep it.
            return;
        }
        let depth = rel.split('/').count() - 1;
        let target = format!("{}{real}", "../".repeat(depth));
        let r = at
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|_| std::os::unix::fs::symlink(&target, &at));
        match r {
            Ok(()) => self.with(|s| {
                if s.written.insert(rel) {
                    s.summary.files += 1;
                }
            }),
            Err(e) => self.failed(&at, &e),
        }
    }
}

/// Move every entry of `from` into `to` (made where missing); an entry `to` has already is
/// merged in turn when both are directories, else `to`'s is kept.
fn merge_into(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        let src = e.path();
        match fs::symlink_metadata(&dest) {
            Err(_) => fs::rename(&src, &dest)?,
            Ok(m) if m.is_dir() && e.file_type()?.is_dir() => {
                merge_into(&src, &dest)?;
                fs::remove_dir(&src)?;
            }
            Ok(_) => {
                if e.file_type()?.is_dir() {
                    fs::remove_dir_all(&src)?;
                } else {
                    fs::remove_file(&src)?;
                }
            }
        }
    }
    Ok(())
}
