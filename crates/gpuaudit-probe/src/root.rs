//! The one reader of the machine: files under a root, `/` on the live machine, a snapshot
//! directory otherwise.
//!
//! Every file, directory listing, existence test, symbolic-link name and file status gpuaudit
//! reads goes through [`RootFs`], so live and snapshot audits share every parser, a test can
//! point any source at a fixture, and a snapshot someone sent cannot reach past itself:
//!
//! - **In the root only.** In a snapshot, paths resolve inside the snapshot directory:
//!   `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`, so `..` stops at the snapshot's top and
//!   an absolute link target (`sys -> /sys`) is taken relative to the snapshot, as for a process
//!   chrooted there. Where the kernel has no openat2 (before 5.6, or a seccomp filter that
//!   refuses it) a walk component by component does the same, one `openat(O_NOFOLLOW)` at a time.
//! - **Regular files only.** A path is first opened with `O_PATH` (which opens nothing) and
//!   checked with `fstat`: a FIFO, a device, a socket or a directory is an error naming what it
//!   is, never opened for reading (opening a FIFO blocks, a tty waits for the keyboard, a
//!   watchdog device starts counting). Only then is it opened for reading, non-blocking.
//! - **Capped.** A file larger than [`MAX_FILE_BYTES`] is not read, and says so ("larger than
//!   16 MiB, not read"): no parser ever sees a silently truncated file.
//! - **The unreadable marker.** In a snapshot, a file starting with [`UNREADABLE_MARK`] stands
//!   for a file the collecting run could not read; every read returns its reason as the error.
//!
//! Paths are root-relative ("proc/modules"; a leading `/` is ignored); errors and facts name
//! them as the machine does ("/proc/modules"), so a snapshot's audit says what the live one
//! said.

mod record;

pub use record::{CollectError, CollectSummary, Recorder};

use gpuaudit_core::parse::fact_line;
use gpuaudit_core::parse::host::mounts::normalize_path;
use gpuaudit_core::Reading;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The most bytes of one file gpuaudit reads; a larger file is an error, not a truncated read.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// What a file over [`MAX_FILE_BYTES`] is reported as, after its path.
pub const TOO_LARGE: &str = "larger than 16 MiB, not read";

/// The most names one directory listing returns (a real sysfs or site-packages directory has a
/// few thousand); a larger directory is an error.
pub const MAX_DIR_ENTRIES: usize = 65_536;

/// A snapshot file that starts with this line stands for a file the live audit could not use;
/// the rest of the line is the reason, which the audit reports as is. `collect` writes it
/// where copying the file would leak secrets or where the file could not be read.
pub const UNREADABLE_MARK: &str = "# gpuaudit-unreadable: ";

/// Symbolic links followed in one path at most (the kernel's own limit).
const MAX_LINKS: usize = 40;
/// Directories deep at most in one walk (each holds a file descriptor while it runs).
const MAX_DEPTH: usize = 256;

/// Set once the kernel said it has no openat2: every later resolution walks.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// What a path is, from `fstat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Fifo,
    CharDevice,
    BlockDevice,
    Socket,
    Other,
}

impl FileKind {
    fn of(mode: u32) -> FileKind {
        match mode & libc::S_IFMT {
            libc::S_IFREG => FileKind::File,
            libc::S_IFDIR => FileKind::Dir,
            libc::S_IFLNK => FileKind::Symlink,
            libc::S_IFIFO => FileKind::Fifo,
            libc::S_IFCHR => FileKind::CharDevice,
            libc::S_IFBLK => FileKind::BlockDevice,
            libc::S_IFSOCK => FileKind::Socket,
            _ => FileKind::Other,
        }
    }

    /// "a FIFO", "a character device", ...: what a path that is not a regular file is.
    pub fn article_name(self) -> &'static str {
        match self {
            FileKind::File => "a regular file",
            FileKind::Dir => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Fifo => "a FIFO",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Socket => "a socket",
            FileKind::Other => "not a regular file",
        }
    }
}

/// A path's status (links followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    pub kind: FileKind,
    /// Permission bits (`mode & 0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// (device, inode): the same file under two names has the same identity.
    pub identity: (u64, u64),
}

impl FileStat {
    fn of(st: &libc::stat) -> FileStat {
        FileStat {
            kind: FileKind::of(st.st_mode),
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            size: u64::try_from(st.st_size).unwrap_or(0),
            identity: (st.st_dev, st.st_ino),
        }
    }
}

#[derive(Clone, Debug)]
pub struct RootFs {
    root: PathBuf,
    /// Resolve by walking even where openat2 exists (tests of the fallback).
    walk_only: bool,
    /// Where what is read is copied to (`gpuaudit collect`); see [`record`].
    rec: Option<Arc<Recorder>>,
}

impl RootFs {
    /// The live machine.
    pub fn live() -> Self {
        RootFs {
            root: PathBuf::from("/"),
            walk_only: false,
            rec: None,
        }
    }

    /// A snapshot directory (or `/`, which is the live machine).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RootFs {
            root: root.into(),
            walk_only: std::env::var_os("GPUAUDIT_NO_OPENAT2").is_some_and(|v| v == "1"),
            rec: None,
        }
    }

    /// Like [`new`](Self::new), resolving every path with the component walk that stands in
    /// for openat2 on old kernels (so that tests cover it on new ones).
    pub fn new_walking(root: impl Into<PathBuf>) -> Self {
        RootFs {
            root: root.into(),
            walk_only: true,
            rec: None,
        }
    }

    /// The same root, copying into `rec` everything read through it (`gpuaudit collect`).
    pub fn recording(&self, rec: Arc<Recorder>) -> RootFs {
        RootFs {
            rec: Some(rec),
            ..self.clone()
        }
    }

    /// The same root, copying nothing: for the sources of a reading that is recorded in
    /// another form (a reduced file, a listing made from many files, an answer under `cmd/`).
    pub fn unrecorded(&self) -> RootFs {
        RootFs {
            rec: None,
            ..self.clone()
        }
    }

    /// Whether what is read is being copied into a snapshot: a reader whose live reading
    /// stops at the first source that answers reads every source then, so that the snapshot
    /// holds what its own reading may need.
    pub fn is_recording(&self) -> bool {
        self.rec.is_some()
    }

    pub fn recorder(&self) -> Option<&Recorder> {
        self.rec.as_deref()
    }

    // ----- recording what is not a copy ---------------------------------------------------

    /// Read `rel` only so that a recording copies it: a file the reading of the snapshot may
    /// need though this reading did without it (the old kernel log extract, copied as it
    /// is).
    pub fn keep(&self, rel: &str) {
        if self.rec.is_some() {
            let _ = self.read_bytes(rel);
        }
    }

    /// Record `content` under `rel` (a reduced file, a listing); nothing when not recording.
    pub fn record(&self, rel: &str, content: impl AsRef<[u8]>) {
        if let Some(rec) = &self.rec {
            rec.write(rel, content);
        }
    }

    /// Record the unreadable marker with `why` under `rel`.
    pub fn record_mark(&self, rel: &str, why: &str) {
        if let Some(rec) = &self.rec {
            rec.mark(rel, why);
        }
    }

    /// Record an empty file under `rel`: "this is there" (a device node, a program).
    pub fn record_marker(&self, rel: &str) {
        if let Some(rec) = &self.rec {
            rec.marker(rel);
        }
    }

    /// Record a directory that must be there even when empty (an IOMMU unit).
    pub fn record_dir(&self, rel: &str) {
        if let Some(rec) = &self.rec {
            rec.dir(rel);
        }
    }

    /// Note a reading the machine did not give.
    pub fn record_note(&self, line: impl Into<String>) {
        if let Some(rec) = &self.rec {
            rec.note(line);
        }
    }

    /// Record a reading under `rel`, formatted, or the unreadable marker with the reason it
    /// could not be taken (which the snapshot's reading then gives back).
    pub fn record_reading<T>(&self, rel: &str, r: &Reading<T>, format: impl FnOnce(&T) -> String) {
        if let Some(rec) = &self.rec {
            match r {
                Reading::Value(v) => rec.write(rel, format(v)),
                Reading::Unavailable(why) => rec.mark(rel, why),
            }
        }
    }

    /// Run a command of the live machine (bounded by `timeout` and the command runner's
    /// output cap). When recording, its output goes under `cmd/NAME`, and so does its failure
    /// message, so that the snapshot's reading sees what the live one saw; a program that is
    /// not there leaves no file (the reading of the snapshot says the file is missing).
    pub fn command(
        &self,
        name: &str,
        program: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<String, String> {
        let r = crate::command::run(program, args, timeout);
        self.record_command(name, program, &r);
        r
    }

    /// Record a command's answer as [`command`](Self::command) does, for a command run
    /// otherwise (with the runner's own options).
    pub fn record_command(&self, name: &str, program: &str, r: &Result<String, String>) {
        let Some(rec) = &self.rec else { return };
        let rel = format!("cmd/{name}");
        match r {
            Ok(out) => rec.write(&rel, out),
            Err(e) if e.ends_with("not found") => {
                rec.note(format!("{program} not found: {rel} not written"))
            }
            Err(e) => {
                rec.note(e.clone());
                rec.write(&rel, e);
            }
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The path as the machine names it ("/proc/modules"), also in a snapshot; see [`abs`].
    pub fn display(&self, rel: &str) -> String {
        abs(rel)
    }

    // ----- resolution -----------------------------------------------------------------------

    /// Open `rel` with `flags` (`O_CLOEXEC` is added), resolved inside the root.
    fn open(&self, rel: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
        let flags = flags | libc::O_CLOEXEC;
        let rel = rel.trim_start_matches('/');
        if self.is_live() {
            return open_path(&Path::new("/").join(rel), flags);
        }
        let root = open_path(
            &self.root,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )?;
        if !self.walk_only && !NO_OPENAT2.load(Ordering::Relaxed) {
            match openat2_in_root(&root, rel, flags) {
                // ENOSYS: a kernel before 5.6; EPERM: a seccomp filter (older container
                // runtimes) that refuses the call it does not know.
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
                    NO_OPENAT2.store(true, Ordering::Relaxed);
                }
                r => return r,
            }
        }
        walk(&root, rel, flags).map(|(fd, _)| fd)
    }

    /// The root directory's own status (links followed: `--root` may name a link).
    pub fn root_stat(&self) -> io::Result<FileStat> {
        let fd = open_path(&self.root, libc::O_PATH | libc::O_CLOEXEC)?;
        fstat(&fd).map(|st| FileStat::of(&st))
    }

    /// `fstat` of what `rel` resolves to (links followed, inside the root).
    pub(crate) fn stat_io(&self, rel: &str) -> io::Result<FileStat> {
        let fd = self.open(rel, libc::O_PATH)?;
        fstat(&fd).map(|st| FileStat::of(&st))
    }

    /// The file, open for reading, after checking that it is a regular file no larger than the
    /// cap. `Ok(None)`: it does not exist.
    fn open_regular(&self, rel: &str) -> Result<Option<File>, String> {
        self.open_file(rel, true)
    }

    /// [`open_regular`](Self::open_regular), with the size cap or without it (a log read by
    /// its head and tail only).
    fn open_file(&self, rel: &str, capped: bool) -> Result<Option<File>, String> {
        let err = |e: io::Error| format!("{}: {}", abs(rel), io_reason(&e));
        let first = match self.stat_io(rel) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err(e)),
        };
        check_regular(rel, &first, capped)?;
        // Opened again for reading only now that it is known to be a regular file; the second
        // look makes sure it is still the same one.
        let fd = self
            .open(rel, libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY)
            .map_err(err)?;
        let now = fstat(&fd).map(|st| FileStat::of(&st)).map_err(err)?;
        check_regular(rel, &now, capped)?;
        if now.identity != first.identity {
            return Err(format!("{}: changed while being read", abs(rel)));
        }
        Ok(Some(File::from(fd)))
    }

    // ----- files ----------------------------------------------------------------------------

    /// The file's bytes. `Ok(None)`: it does not exist. `Err`: "/path: why", also for a
    /// snapshot's unreadable marker (whose reason is passed on as written).
    pub fn read_bytes(&self, rel: &str) -> Result<Option<Vec<u8>>, String> {
        let r = self.read_bytes_unrecorded(rel);
        if let Some(rec) = &self.rec {
            match &r {
                Ok(Some(b)) => rec.write(rel, b),
                Ok(None) => {}
                Err(e) => rec.mark(rel, e),
            }
        }
        r
    }

    fn read_bytes_unrecorded(&self, rel: &str) -> Result<Option<Vec<u8>>, String> {
        let Some(f) = self.open_regular(rel)? else {
            return Ok(None);
        };
        let mut buf = Vec::new();
        f.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(|e| format!("{}: {}", abs(rel), io_reason(&e)))?;
        // procfs and sysfs files say 0 or 4096 bytes whatever they hold: the size is only
        // known once read.
        if buf.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("{}: {TOO_LARGE}", abs(rel)));
        }
        if !self.is_live() {
            if let Some(reason) = buf.strip_prefix(UNREADABLE_MARK.as_bytes()) {
                return Err(fact_line(&String::from_utf8_lossy(reason)));
            }
        }
        Ok(Some(buf))
    }

    /// The first `head` and the last `tail` bytes of a file of any size, each cut to whole
    /// lines and joined, as text (invalid UTF-8 replaced); the whole file where it is no
    /// larger than `head + tail`, so that the excerpt read again is the same excerpt.
    /// `Ok(None)`: it does not exist.
    pub fn read_head_tail(
        &self,
        rel: &str,
        head: u64,
        tail: u64,
    ) -> Result<Option<String>, String> {
        let r = self.read_head_tail_unrecorded(rel, head, tail);
        if let Some(rec) = &self.rec {
            match &r {
                Ok(Some(t)) => rec.write(rel, t),
                Ok(None) => {}
                Err(e) => rec.mark(rel, e),
            }
        }
        r
    }

    fn read_head_tail_unrecorded(
        &self,
        rel: &str,
        head: u64,
        tail: u64,
    ) -> Result<Option<String>, String> {
        let Some(mut f) = self.open_file(rel, false)? else {
            return Ok(None);
        };
        let err = |e: io::Error| format!("{}: {}", abs(rel), io_reason(&e));
        let size = f.metadata().map_err(err)?.len();
        let mut buf = Vec::new();
        if size <= head.saturating_add(tail) {
            (&mut f)
                .take(head.saturating_add(tail))
                .read_to_end(&mut buf)
                .map_err(err)?;
        } else {
            (&mut f).take(head).read_to_end(&mut buf).map_err(err)?;
            if let Some(i) = buf.iter().rposition(|b| *b == b'\n') {
                buf.truncate(i + 1);
            }
            f.seek(SeekFrom::Start(size - tail)).map_err(err)?;
            let mut t = Vec::new();
            f.take(tail).read_to_end(&mut t).map_err(err)?;
            // The tail starts after its first line break (a line cut in two is dropped).
            let start = t
                .iter()
                .position(|b| *b == b'\n')
                .map_or(t.len(), |i| i + 1);
            buf.extend_from_slice(&t[start..]);
        }
        if !self.is_live() {
            if let Some(reason) = buf.strip_prefix(UNREADABLE_MARK.as_bytes()) {
                return Err(fact_line(&String::from_utf8_lossy(reason)));
            }
        }
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// The file as text (invalid UTF-8 replaced); `Ok(None)` where it does not exist.
    pub fn read_text(&self, rel: &str) -> Result<Option<String>, String> {
        Ok(self
            .read_bytes(rel)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// The file as text; a missing file is an error too ("/proc/modules: no such file").
    pub fn read(&self, rel: &str) -> Result<String, String> {
        self.read_text(rel)?
            .ok_or_else(|| format!("{}: no such file", abs(rel)))
    }

    /// Like [`read`](Self::read), trimmed, and an empty file is an error.
    pub fn read_trimmed(&self, rel: &str) -> Result<String, String> {
        let s = self.read(rel)?;
        let t = s.trim();
        if t.is_empty() {
            return Err(format!("{}: empty file", abs(rel)));
        }
        Ok(t.to_string())
    }

    /// A one-line fact (a hostname, the kernel's version line): the first line, trimmed and
    /// capped (see [`fact_line`]); an empty one is an error.
    pub fn read_line(&self, rel: &str) -> Result<String, String> {
        let line = fact_line(&self.read(rel)?);
        if line.is_empty() {
            return Err(format!("{}: empty file", abs(rel)));
        }
        Ok(line)
    }

    // ----- directories and status -----------------------------------------------------------

    /// Entry names of a directory, sorted (at most [`MAX_DIR_ENTRIES`]).
    pub fn list(&self, rel: &str) -> Result<Vec<String>, String> {
        let r = self.list_io(rel);
        if let (Some(rec), Ok(_)) = (&self.rec, &r) {
            rec.dir(rel);
        }
        r.map_err(|e| match e.raw_os_error() {
            Some(libc::E2BIG) => format!(
                "{}: more than {MAX_DIR_ENTRIES} entries, not listed",
                abs(rel)
            ),
            _ => format!("{}: {}", abs(rel), io_reason(&e)),
        })
    }

    pub(crate) fn list_io(&self, rel: &str) -> io::Result<Vec<String>> {
        let fd = self.open(rel, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NONBLOCK)?;
        let mut names = read_dir_fd(fd)?;
        names.sort();
        Ok(names)
    }

    /// Names in a directory, sorted; an empty list where it does not exist or cannot be read.
    pub fn children(&self, rel: &str) -> Vec<String> {
        self.list(rel).unwrap_or_default()
    }

    /// Whether a path exists (links followed, inside the root) and can be looked at: what an
    /// unprivileged run cannot see (another user's home) counts as absent, as it does for every
    /// program that run starts.
    pub fn exists(&self, rel: &str) -> bool {
        let r = self.stat_io(rel);
        if let Ok(st) = &r {
            self.record_found(rel, st);
        }
        r.is_ok()
    }

    /// A path found to exist: a directory is made, anything else gets an empty file unless
    /// its contents are read (and written) too.
    fn record_found(&self, rel: &str, st: &FileStat) {
        if let Some(rec) = &self.rec {
            match st.kind {
                FileKind::Dir => rec.dir(rel),
                _ => rec.marker(rel),
            }
        }
    }

    /// The path's status, links followed; `Ok(None)`: it does not exist.
    pub fn stat(&self, rel: &str) -> Result<Option<FileStat>, String> {
        match self.stat_io(rel) {
            Ok(s) => {
                self.record_found(rel, &s);
                Ok(Some(s))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {}", abs(rel), io_reason(&e))),
        }
    }

    /// The last component of a symbolic link's target (sysfs `driver` links), or, where the
    /// snapshot holds a plain file instead of a link, the file's trimmed content.
    /// `Ok(None)`: the entry does not exist. The link is read, never followed.
    pub fn link_name(&self, rel: &str) -> Result<Option<String>, String> {
        // The snapshot holds the name as a plain file (DESIGN's format), which reads back the
        // same.
        let r = self.unrecorded().link_name_of(rel);
        if let Some(rec) = &self.rec {
            match &r {
                Ok(Some(name)) => rec.write(rel, format!("{name}\n")),
                Ok(None) => {}
                Err(e) => rec.mark(rel, e),
            }
        }
        r
    }

    fn link_name_of(&self, rel: &str) -> Result<Option<String>, String> {
        let err = |e: io::Error| format!("{}: {}", abs(rel), io_reason(&e));
        let rel_t = rel.trim_start_matches('/').trim_end_matches('/');
        let (parent, name) = rel_t.rsplit_once('/').unwrap_or(("", rel_t));
        if name.is_empty() || name == "." || name == ".." {
            return Ok(None);
        }
        let dir = match self.open(parent, libc::O_PATH | libc::O_DIRECTORY) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err(e)),
        };
        let cname = cstring(name.as_bytes()).map_err(err)?;
        match lstat_at(&dir, &cname) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(err(e)),
            Ok(st) if FileKind::of(st.st_mode) == FileKind::Symlink => {
                let target = readlink_at(&dir, &cname).map_err(err)?;
                Ok(Path::new(OsStr::from_bytes(&target))
                    .file_name()
                    .map(|n| fact_line(&n.to_string_lossy())))
            }
            Ok(_) => {
                let t = fact_line(&self.read(rel)?);
                Ok((!t.is_empty()).then_some(t))
            }
        }
    }

    /// The machine path `rel` resolves to, links followed inside the root
    /// ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04" for ".../libcuda.so.1"); `None`
    /// where it does not resolve.
    pub fn real_path(&self, rel: &str) -> Option<String> {
        let real = self.real_path_unrecorded(rel)?;
        if let Some(rec) = &self.rec {
            if real != abs(rel) {
                let is_dir = self
                    .unrecorded()
                    .stat_io(rel)
                    .is_ok_and(|s| s.kind == FileKind::Dir);
                rec.link(rel, &real, is_dir);
            }
        }
        Some(real)
    }

    fn real_path_unrecorded(&self, rel: &str) -> Option<String> {
        let rel = rel.trim_start_matches('/');
        if self.is_live() {
            return std::fs::canonicalize(Path::new("/").join(rel))
                .ok()
                .map(|p| p.to_string_lossy().into_owned());
        }
        let root = open_path(
            &self.root,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
        .ok()?;
        let (_, comps) = walk(&root, rel, libc::O_PATH | libc::O_CLOEXEC).ok()?;
        let names: Vec<String> = comps
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        Some(format!("/{}", names.join("/")))
    }

    /// Expand a path pattern whose components may hold wildcards
    /// ("etc/ssh/sshd_config.d/*.conf", "home/*/.jupyter"), sorted; at most `limit` results.
    /// The pattern is normalised first (see [`normalize`]).
    pub fn glob(&self, pattern: &str, limit: usize) -> Vec<String> {
        let mut current = vec![String::new()];
        let pattern = normalize(pattern);
        for comp in pattern.split('/').filter(|c| !c.is_empty()) {
            let mut next = Vec::new();
            for base in &current {
                if comp.contains(['*', '?']) {
                    for name in self.children(base) {
                        // Like a shell, '*' does not match hidden names.
                        let visible = !name.starts_with('.') || comp.starts_with('.');
                        if visible && wildcard(comp, &name) {
                            next.push(join(base, &name));
                        }
                    }
                } else {
                    let p = join(base, comp);
                    if self.exists(&p) {
                        next.push(p);
                    }
                }
                if next.len() >= limit {
                    break;
                }
            }
            next.truncate(limit);
            current = next;
            if current.is_empty() {
                break;
            }
        }
        current.sort();
        current
    }

    // ----- the kernel log -------------------------------------------------------------------

    /// The kernel log records whose message `keep` keeps, as (microseconds since boot,
    /// message's first line), oldest first, read from /dev/kmsg without blocking (needs root
    /// or CAP_SYSLOG where kernel.dmesg_restrict=1). At most `max` records are kept: the
    /// newest. The one character device gpuaudit reads; live machine only.
    pub fn kernel_log_records(
        &self,
        keep: fn(&str) -> bool,
        max: usize,
    ) -> Result<Vec<(u64, String)>, String> {
        if !self.is_live() {
            return Err("the kernel log is read on the live machine only".into());
        }
        let fd = match open_path(
            Path::new("/dev/kmsg"),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        ) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                let restrict = std::fs::read_to_string("/proc/sys/kernel/dmesg_restrict")
                    .map(|t| {
                        format!(
                            " (kernel.dmesg_restrict={}: needs root or CAP_SYSLOG)",
                            t.trim()
                        )
                    })
                    .unwrap_or_default();
                return Err(format!("/dev/kmsg: permission denied{restrict}"));
            }
            Err(e) => return Err(format!("/dev/kmsg: {}", io_reason(&e))),
        };
        let mut f = File::from(fd);
        let mut out: std::collections::VecDeque<(u64, String)> = Default::default();
        let mut buf = vec![0u8; 8192];
        // One record per read; EAGAIN marks the end of the ring buffer. Bounded either way.
        for _ in 0..1_000_000 {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let rec = String::from_utf8_lossy(&buf[..n]);
                    if let Some((usec, msg)) = kmsg_record(&rec) {
                        if keep(msg) {
                            if out.len() == max {
                                out.pop_front();
                            }
                            out.push_back((usec, msg.to_string()));
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // EPIPE: records were overwritten while reading; go on with the next.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) => return Err(format!("/dev/kmsg: {}", io_reason(&e))),
            }
        }
        Ok(out.into())
    }
}

/// "6,1234,5678901,-;NVRM: Xid ...\n SUBSYSTEM=pci" -> (5678901, "NVRM: Xid ..."): a
/// /dev/kmsg record's time stamp (microseconds since boot) and its message's first line.
pub fn kmsg_record(rec: &str) -> Option<(u64, &str)> {
    let (head, msg) = rec.split_once(';')?;
    let usec = head.split(',').nth(2)?.trim().parse().ok()?;
    Some((usec, msg.lines().next().unwrap_or("")))
}

fn check_regular(rel: &str, st: &FileStat, capped: bool) -> Result<(), String> {
    if st.kind != FileKind::File {
        return Err(format!(
            "{}: {}, not a regular file: not read",
            abs(rel),
            st.kind.article_name()
        ));
    }
    if capped && st.size > MAX_FILE_BYTES {
        return Err(format!("{}: {TOO_LARGE}", abs(rel)));
    }
    Ok(())
}

/// An error in words for a message: "no such file", "permission denied", ...
pub fn io_reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "no such file".into(),
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied".into(),
        Some(libc::ELOOP) => "too many levels of symbolic links".into(),
        Some(libc::ENOTDIR) => "a path component is not a directory".into(),
        Some(libc::EXDEV) => "resolves outside the snapshot".into(),
        Some(libc::ENAMETOOLONG) => "path too long".into(),
        _ => match e.kind() {
            io::ErrorKind::NotFound => "no such file".into(),
            io::ErrorKind::PermissionDenied => "permission denied".into(),
            _ => e.to_string(),
        },
    }
}

// ----- path names ----------------------------------------------------------------------------

/// "/etc/ssh/sshd_config" for "etc/ssh/sshd_config": the machine's path. The snapshot's own
/// `cmd/` files have no machine path and stay as they are named in the snapshot.
pub fn abs(rel: &str) -> String {
    let r = rel.trim_start_matches('/');
    if r.starts_with("cmd/") {
        r.to_string()
    } else {
        format!("/{r}")
    }
}

/// "etc/ssh/sshd_config" for "/etc/ssh/sshd_config".
pub fn rel(abs: &str) -> String {
    abs.trim_start_matches('/').to_string()
}

/// `rel` joined with a name.
pub fn join(rel: &str, name: &str) -> String {
    let r = rel.trim_end_matches('/');
    if r.is_empty() {
        name.to_string()
    } else {
        format!("{r}/{name}")
    }
}

/// A root-relative path without `.`, `..` or empty components, `..` stopping at the root
/// ("etc/ssh/../../../etc/shadow" is "etc/shadow"), as the kernel resolves it in a root.
pub fn normalize(path: &str) -> String {
    normalize_path(path).trim_start_matches('/').to_string()
}

/// Match a file name against a pattern with `*` and `?` (as sshd's Include and shells do).
pub fn wildcard(pattern: &str, name: &str) -> bool {
    fn m(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => m(&p[1..], n) || (!n.is_empty() && m(p, &n[1..])),
            (Some('?'), Some(_)) => m(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => m(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Long names against many stars could be slow; names here are short file names.
    n.len() <= 255 && p.len() <= 255 && m(&p, &n)
}

// ----- system calls --------------------------------------------------------------------------

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

fn open_path(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = cstring(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    owned(unsafe { libc::open(c.as_ptr(), flags) })
}

fn openat(dir: RawFd, name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated; `dir` is an open descriptor the caller holds.
    owned(unsafe { libc::openat(dir, name.as_ptr(), flags) })
}

fn openat2_in_root(root: &OwnedFd, rel: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let path = cstring(if rel.is_empty() { b"." } else { rel.as_bytes() })?;
    // SAFETY: open_how is plain data; zero is a valid value for each field.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = libc::RESOLVE_IN_ROOT | libc::RESOLVE_NO_MAGICLINKS;
    // EAGAIN: a rename elsewhere raced the resolution, which the kernel then refuses to vouch
    // for; try again a few times.
    for _ in 0..8 {
        // SAFETY: every pointer is valid for the call; the size is the struct's.
        let r = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                root.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        match owned(r as libc::c_int) {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EINTR)) => {}
            other => return other,
        }
    }
    Err(io::Error::from_raw_os_error(libc::EAGAIN))
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: `st` is written by the kernel before it is read.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open; `st` is valid for writes.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn lstat_at(dir: &OwnedFd, name: &CString) -> io::Result<libc::stat> {
    // SAFETY: as in `fstat`; `name` is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is open, `name` NUL-terminated, `st` valid for writes.
    let r = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn readlink_at(dir: &OwnedFd, name: &CString) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: `buf` is valid for `buf.len()` bytes of writes.
    let n = unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The names in an open directory (without "." and ".."); E2BIG past [`MAX_DIR_ENTRIES`].
fn read_dir_fd(fd: OwnedFd) -> io::Result<Vec<String>> {
    use std::os::fd::IntoRawFd;
    let raw = fd.into_raw_fd();
    // SAFETY: `raw` is an open directory descriptor; fdopendir takes it over.
    let dir = unsafe { libc::fdopendir(raw) };
    if dir.is_null() {
        let e = io::Error::last_os_error();
        // SAFETY: fdopendir failed, so the descriptor is still ours to close.
        unsafe { libc::close(raw) };
        return Err(e);
    }
    let mut names = Vec::new();
    let result = loop {
        // readdir signals the end and an error both with NULL; errno tells them apart.
        // SAFETY: errno is thread-local.
        unsafe { *libc::__errno_location() = 0 };
        // SAFETY: `dir` is a valid DIR stream until closedir below.
        let ent = unsafe { libc::readdir64(dir) };
        if ent.is_null() {
            let errno = io::Error::last_os_error();
            break match errno.raw_os_error() {
                Some(0) | None => Ok(()),
                _ => Err(errno),
            };
        }
        // SAFETY: d_name is NUL-terminated within the entry the stream returned.
        let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) };
        let b = name.to_bytes();
        if b == b"." || b == b".." {
            continue;
        }
        if names.len() >= MAX_DIR_ENTRIES {
            break Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        names.push(String::from_utf8_lossy(b).into_owned());
    };
    // SAFETY: `dir` came from fdopendir and is closed once.
    unsafe { libc::closedir(dir) };
    result.map(|_| names)
}

/// The component walk that stands in for `openat2(RESOLVE_IN_ROOT)`: each component opened
/// with `O_PATH | O_NOFOLLOW` relative to the directory before it; a symbolic link's target
/// is spliced into the rest of the path (an absolute target starts again at the root); `..`
/// at the root stays there. The last component is opened with `flags` (and `O_NOFOLLOW`, so
/// that a link swapped in meanwhile fails instead of being followed). Returns the descriptor
/// and the real path's components.
fn walk(root: &OwnedFd, rel: &str, flags: libc::c_int) -> io::Result<(OwnedFd, Vec<Vec<u8>>)> {
    use std::collections::VecDeque;
    let split = |p: &[u8]| -> Vec<Vec<u8>> {
        p.split(|&b| b == b'/')
            .filter(|c| !c.is_empty() && *c != b".")
            .map(<[u8]>::to_vec)
            .collect()
    };
    // The directories below the root, with their names.
    let mut stack: Vec<(OwnedFd, Vec<u8>)> = Vec::new();
    let mut todo: VecDeque<Vec<u8>> = split(rel.as_bytes()).into();
    let mut links = 0;
    let want_path = flags & libc::O_PATH != 0;
    loop {
        let cur = stack
            .last()
            .map_or(root.as_raw_fd(), |(fd, _)| fd.as_raw_fd());
        let Some(comp) = todo.pop_front() else {
            // The path names a directory (the root itself, or one reached through "..").
            let fd = openat(cur, &cstring(b".")?, flags)?;
            let names = stack.into_iter().map(|(_, n)| n).collect();
            return Ok((fd, names));
        };
        if comp == b".." {
            stack.pop();
            continue;
        }
        let name = cstring(&comp)?;
        let fd = openat(
            cur,
            &name,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )?;
        let st = fstat(&fd)?;
        let kind = FileKind::of(st.st_mode);
        if kind == FileKind::Symlink {
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let dir = stack.last().map(|(d, _)| d).unwrap_or(root);
            let target = readlink_at(dir, &name)?;
            if target.first() == Some(&b'/') {
                stack.clear();
            }
            for c in split(&target).into_iter().rev() {
                todo.push_front(c);
            }
            continue;
        }
        if todo.is_empty() {
            let fd = if want_path {
                fd
            } else {
                openat(cur, &name, flags | libc::O_NOFOLLOW)?
            };
            let mut names: Vec<Vec<u8>> = stack.into_iter().map(|(_, n)| n).collect();
            names.push(comp);
            return Ok((fd, names));
        }
        if kind != FileKind::Dir {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        if stack.len() >= MAX_DEPTH {
            return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
        }
        stack.push((fd, comp));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// Both resolvers: openat2 (this kernel's) and the walk.
    fn roots(p: &Path) -> [RootFs; 2] {
        [RootFs::new(p), RootFs::new_walking(p)]
    }

    #[test]
    fn reads_under_root_and_names_the_file() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("proc")).unwrap();
        fs::write(d.path().join("proc/x"), "  7\n").unwrap();
        for r in roots(d.path()) {
            assert_eq!(r.read_trimmed("/proc/x").unwrap(), "7");
            assert_eq!(
                r.read("proc/missing").unwrap_err(),
                "/proc/missing: no such file"
            );
            assert_eq!(r.read_text("proc/missing").unwrap(), None);
            assert_eq!(r.link_name("proc/missing").unwrap(), None);
            assert_eq!(r.link_name("proc/x").unwrap().as_deref(), Some("7"));
            assert_eq!(r.list("proc").unwrap(), vec!["x"]);
            assert!(r.exists("proc/x") && r.exists("") && !r.exists("proc/y"));
        }
    }

    #[test]
    fn driver_link_gives_its_last_component() {
        let d = tempfile::tempdir().unwrap();
        symlink("../../../bus/pci/drivers/nvidia", d.path().join("driver")).unwrap();
        for r in roots(d.path()) {
            assert_eq!(r.link_name("driver").unwrap().as_deref(), Some("nvidia"));
        }
    }

    #[test]
    fn links_resolve_inside_the_root() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "MARKER-OUTSIDE").unwrap();
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        fs::create_dir_all(r.join("etc")).unwrap();
        fs::write(r.join("etc/inside"), "in").unwrap();
        fs::create_dir_all(r.join("proc/sys/kernel")).unwrap();
        // Absolute targets are the snapshot's; ".." stops at its top.
        symlink("/etc/inside", r.join("proc/sys/kernel/abs")).unwrap();
        symlink(
            "../../../../../../../etc/inside",
            r.join("proc/sys/kernel/up"),
        )
        .unwrap();
        symlink(
            outside.path().join("secret"),
            r.join("proc/sys/kernel/hostname"),
        )
        .unwrap();
        symlink("/sys", r.join("sys")).unwrap();
        symlink("loop", r.join("loop")).unwrap();
        for root in roots(r) {
            assert_eq!(root.read("proc/sys/kernel/abs").unwrap(), "in");
            assert_eq!(root.read("proc/sys/kernel/up").unwrap(), "in");
            assert_eq!(root.read("etc/../../../etc/inside").unwrap(), "in");
            let e = root.read("proc/sys/kernel/hostname").unwrap_err();
            assert!(e.ends_with("no such file"), "{e}");
            // sys -> /sys is the snapshot's own sys: itself, a loop, never the host's.
            assert!(root.list("sys/bus/pci/devices").is_err());
            assert!(!root.exists("sys/class"));
            let e = root.read("loop").unwrap_err();
            assert!(e.contains("symbolic links"), "{e}");
            assert_eq!(
                root.real_path("proc/sys/kernel/up").as_deref(),
                Some("/etc/inside")
            );
        }
    }

    #[test]
    fn only_regular_files_are_read() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        let fifo = CString::new(r.join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        fs::create_dir(r.join("dir")).unwrap();
        symlink("/dev/null", r.join("null")).unwrap();
        let t0 = std::time::Instant::now();
        for root in roots(r) {
            let e = root.read("fifo").unwrap_err();
            assert_eq!(e, "/fifo: a FIFO, not a regular file: not read");
            let e = root.read("dir").unwrap_err();
            assert!(e.contains("a directory"), "{e}");
            assert!(root.link_name("fifo").unwrap_err().contains("a FIFO"));
            assert_eq!(root.stat("fifo").unwrap().unwrap().kind, FileKind::Fifo);
        }
        // On the live machine a device is refused too, before it is opened.
        let live = RootFs::live();
        let e = live.read("dev/null").unwrap_err();
        assert_eq!(
            e,
            "/dev/null: a character device, not a regular file: not read"
        );
        assert!(live.read("dev/tty").is_err());
        assert!(t0.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn large_files_are_refused_not_truncated() {
        let d = tempfile::tempdir().unwrap();
        let f = fs::File::create(d.path().join("sparse")).unwrap();
        f.set_len(10 << 30).unwrap();
        fs::write(d.path().join("edge"), vec![b'x'; MAX_FILE_BYTES as usize]).unwrap();
        for r in roots(d.path()) {
            assert_eq!(
                r.read_bytes("sparse").unwrap_err(),
                "/sparse: larger than 16 MiB, not read"
            );
            assert_eq!(
                r.read_bytes("edge").unwrap().unwrap().len(),
                MAX_FILE_BYTES as usize
            );
        }
    }

    #[test]
    fn the_marker_stands_for_an_unreadable_file() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join("x"),
            format!("{UNREADABLE_MARK}/etc/x: permission denied\nmore\n"),
        )
        .unwrap();
        for r in roots(d.path()) {
            assert_eq!(r.read_text("x").unwrap_err(), "/etc/x: permission denied");
            assert_eq!(r.read_bytes("x").unwrap_err(), "/etc/x: permission denied");
            assert_eq!(r.link_name("x").unwrap_err(), "/etc/x: permission denied");
        }
    }

    #[test]
    fn wildcards_glob_and_names() {
        assert!(wildcard("*.conf", "50-cloud-init.conf"));
        assert!(!wildcard("*.conf", "x.conf.bak"));
        assert!(wildcard("python3*", "python3.12"));
        assert!(wildcard("a?c", "abc"));
        assert_eq!(normalize("/etc/ssh/../../../etc/shadow"), "etc/shadow");
        assert_eq!(normalize("./a//b/./c/.."), "a/b");
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("etc/ssh/sshd_config.d")).unwrap();
        fs::write(d.path().join("etc/ssh/sshd_config.d/b.conf"), "x").unwrap();
        fs::write(d.path().join("etc/ssh/sshd_config.d/a.conf"), "x").unwrap();
        fs::write(d.path().join("etc/ssh/sshd_config.d/.hidden.conf"), "x").unwrap();
        for r in roots(d.path()) {
            assert_eq!(
                r.glob("/etc/ssh/sshd_config.d/*.conf", 10),
                vec![
                    "etc/ssh/sshd_config.d/a.conf",
                    "etc/ssh/sshd_config.d/b.conf"
                ]
            );
            assert_eq!(
                r.glob("etc/ssh/../../etc/ssh/sshd_config.d/a.conf", 10),
                vec!["etc/ssh/sshd_config.d/a.conf"]
            );
            assert_eq!(r.glob("etc/nothing/*", 10), Vec::<String>::new());
            assert_eq!(r.glob("etc/ssh/sshd_config.d/*.conf", 1).len(), 1);
        }
        assert_eq!(abs("cmd/env.json"), "cmd/env.json");
        assert_eq!(abs("etc/x"), "/etc/x");
    }

    #[test]
    fn openat2_resolves_where_the_kernel_has_it() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("x"), "x").unwrap();
        let root = open_path(d.path(), libc::O_PATH | libc::O_DIRECTORY).unwrap();
        match openat2_in_root(&root, "x", libc::O_RDONLY) {
            Ok(_) => assert!(!NO_OPENAT2.load(Ordering::Relaxed)),
            Err(e) => {
                let errno = e.raw_os_error();
                assert!(
                    matches!(errno, Some(libc::ENOSYS) | Some(libc::EPERM)),
                    "{e}"
                );
                eprintln!("no openat2 on this kernel: the walk resolves every path");
            }
        }
    }

    #[test]
    fn live_mode_reads_proc_and_sys_links() {
        let live = RootFs::live();
        assert!(live.read("proc/self/status").unwrap().contains("Name:"));
        // procfs reports size 0: read all the same.
        assert!(!live.read("proc/cpuinfo").unwrap().is_empty());
        assert!(live.list("proc").unwrap().iter().any(|n| n == "self"));
        if let Some(dev) = live.children("sys/class/net").first() {
            // sysfs links (class -> devices) are followed on the live machine.
            assert!(live
                .stat(&format!("sys/class/net/{dev}"))
                .unwrap()
                .is_some());
            assert!(live.read(&format!("sys/class/net/{dev}/operstate")).is_ok());
        }
        // The driver links of PCI functions give the driver's name, as the real link says.
        for dev in live.children("sys/bus/pci/devices") {
            let rel = format!("sys/bus/pci/devices/{dev}/driver");
            if let Ok(target) = fs::read_link(Path::new("/").join(&rel)) {
                let name = target.file_name().unwrap().to_string_lossy().into_owned();
                assert_eq!(live.link_name(&rel).unwrap(), Some(name));
                assert!(live
                    .read(&format!("sys/bus/pci/devices/{dev}/vendor"))
                    .is_ok());
                break;
            }
        }
    }
}
