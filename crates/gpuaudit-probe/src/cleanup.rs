//! What must not outlive the audit, even when it is interrupted: temporary files and
//! directories, and the process groups of the children it started.
//!
//! A [`TempFile`] or [`TempDir`] registers its path before it is created and removes it when
//! dropped. [`crate::process`] registers every child's process group here while it runs.
//! [`install_signal_cleanup`] starts a thread that waits for SIGINT, SIGTERM and SIGHUP
//! (through signal-hook, which chains with handlers other code installed): it kills every
//! registered process group (SIGKILL), removes every registered path, then ends the process as
//! the signal would have, so the shell sees 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP).
//! ([`set_terminate_on_signal`]`(false)` leaves the ending to a program that handles those
//! signals itself and calls [`clean_up`] from its own handler.)
//!
//! The command line installs the thread before it does anything else; the first temporary
//! path installs it too, for library users.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

#[derive(Clone, Debug, PartialEq, Eq)]
enum Temp {
    File(PathBuf),
    Dir(PathBuf),
}

static PATHS: Mutex<Vec<Temp>> = Mutex::new(Vec::new());
/// Process-group ids of the children that run now.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
static HANDLER: OnceLock<bool> = OnceLock::new();
static TERMINATE: AtomicBool = AtomicBool::new(true);
/// Set once a terminating signal arrived: no new child is started after it.
static TERMINATING: AtomicBool = AtomicBool::new(false);

/// A lock that survives a panic of another holder (the list stays usable).
fn lock<T>(m: &'static Mutex<T>) -> MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn remove(t: &Temp) {
    match t {
        Temp::File(p) => {
            let _ = std::fs::remove_file(p);
        }
        // remove_dir_all does not follow symbolic links: the library links stay links.
        Temp::Dir(p) => {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Remove every temporary file and directory gpuaudit still has (safe from any thread).
pub fn remove_temp_files() {
    remove_where(|_| true);
}

fn remove_where(pick: impl Fn(&Path) -> bool) {
    let picked: Vec<Temp> = {
        let mut paths = lock(&PATHS);
        let (picked, kept) = paths.drain(..).partition(|t| match t {
            Temp::File(p) | Temp::Dir(p) => pick(p),
        });
        *paths = kept;
        picked
    };
    for p in &picked {
        remove(p);
    }
}

/// Kill every registered child process group, then remove every temporary path.
pub fn clean_up() {
    {
        let groups = lock(&GROUPS);
        for &g in groups.iter() {
            kill_group(g);
        }
    }
    remove_temp_files();
}

/// SIGKILL to a whole process group (the child and whatever it started).
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: killpg takes plain integers; a group that is gone gives ESRCH, ignored.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

/// Whether a terminating signal arrived (the audit is ending).
pub fn terminating() -> bool {
    TERMINATING.load(Ordering::SeqCst)
}

/// Runs `spawn` with the child registry locked and registers the process group it returns,
/// so that a signal arriving meanwhile kills the new child too. Refused once a terminating
/// signal arrived.
pub(crate) fn spawn_registered<T>(
    spawn: impl FnOnce() -> std::io::Result<(T, i32)>,
) -> std::io::Result<T> {
    let mut groups = lock(&GROUPS);
    if terminating() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::Interrupted,
            "gpuaudit is being interrupted",
        ));
    }
    let (t, pgid) = spawn()?;
    groups.push(pgid);
    Ok(t)
}

/// The child's group is gone (reaped): it is no longer killed on a signal.
pub(crate) fn forget_group(pgid: i32) {
    lock(&GROUPS).retain(|g| *g != pgid);
}

/// The process groups registered now (for tests).
#[cfg(test)]
pub(crate) fn registered_groups() -> Vec<i32> {
    lock(&GROUPS).clone()
}

/// Called by the main thread before it returns its exit status. Once a terminating signal
/// arrived, the signal thread is ending the process as the signal would (after killing the
/// children and removing the files): the main thread, which may have finished its work in the
/// meantime (a child it waited for was just killed), waits for that instead of exiting with a
/// status of its own. Bounded, should the signal thread never get there.
pub fn wait_if_terminating() {
    if !(terminating() && TERMINATE.load(Ordering::SeqCst)) {
        return;
    }
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether the signal thread ends the process after cleaning up (default: yes).
pub fn set_terminate_on_signal(terminate: bool) {
    TERMINATE.store(terminate, Ordering::SeqCst);
}

/// Start the signal thread once; false where signals cannot be watched (then only the drop
/// guards remove files, and children end with their parent through PR_SET_PDEATHSIG).
pub fn install_signal_cleanup() -> bool {
    *HANDLER.get_or_init(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return false;
        };
        std::thread::Builder::new()
            .name("gpuaudit-cleanup".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let terminate = TERMINATE.load(Ordering::SeqCst);
                    if terminate {
                        TERMINATING.store(true, Ordering::SeqCst);
                    }
                    clean_up();
                    if terminate {
                        // Die of the signal, as a program without a handler would: the shell
                        // then sees 128 + the signal's number and stops a loop on Ctrl-C.
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                        std::process::exit(128 + sig);
                    }
                }
            })
            .is_ok()
    })
}

fn register(t: Temp) {
    install_signal_cleanup();
    lock(&PATHS).push(t);
}

fn unregister(t: &Temp) {
    lock(&PATHS).retain(|p| p != t);
}

/// A file path registered for removal; the file (if created) is removed on drop.
pub struct TempFile {
    path: PathBuf,
}

impl TempFile {
    /// Register `path` (not yet created).
    pub fn register(path: &Path) -> TempFile {
        register(Temp::File(path.to_path_buf()));
        TempFile {
            path: path.to_path_buf(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let t = Temp::File(self.path.clone());
        remove(&t);
        unregister(&t);
    }
}

/// A private directory under the temporary directory (`$TMPDIR`, else /tmp), mode 0700,
/// registered before it is created and removed with its contents on drop or on a signal.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `$TMPDIR/<prefix><pid>-<unique>`.
    pub fn create(prefix: &str) -> std::io::Result<TempDir> {
        TempDir::create_in(&std::env::temp_dir(), prefix)
    }

    /// Creates `<base>/<prefix><pid>-<unique>` (a dataset written into a data directory).
    pub fn create_in(base: &Path, prefix: &str) -> std::io::Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        for _ in 0..16 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("{prefix}{}-{nanos:x}-{n}", std::process::id()));
            let t = Temp::Dir(path.clone());
            register(t.clone());
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(TempDir { path }),
                Err(e) => {
                    // Not ours: never removed.
                    unregister(&t);
                    if e.kind() != std::io::ErrorKind::AlreadyExists {
                        return Err(e);
                    }
                }
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "could not create a private directory under {}",
                base.display()
            ),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let t = Temp::Dir(self.path.clone());
        remove(&t);
        unregister(&t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_and_registry_remove_files() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.tmp");
        {
            let t = TempFile::register(&p);
            std::fs::write(t.path(), "x").unwrap();
            assert!(p.exists());
        }
        assert!(!p.exists());
        let q = d.path().join("b.tmp");
        let t = TempFile::register(&q);
        std::fs::write(&q, "x").unwrap();
        // Only this test's paths: other tests of this binary hold theirs meanwhile.
        remove_where(|p| p.starts_with(d.path()));
        assert!(!q.exists());
        drop(t);
    }

    #[test]
    fn temp_dirs_are_private_and_removed_with_their_contents() {
        use std::os::unix::fs::PermissionsExt;
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        std::fs::write(&target, "keep").unwrap();
        let path;
        {
            let d = TempDir::create("gpuaudit-test-").unwrap();
            path = d.path().to_path_buf();
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
            std::os::unix::fs::symlink(&target, path.join("link")).unwrap();
            std::fs::write(path.join("f"), "x").unwrap();
        }
        assert!(!path.exists());
        assert!(target.exists(), "a link's target is never removed");
        // The registry removes a directory that is still held, as the signal thread does.
        let d = TempDir::create("gpuaudit-test-").unwrap();
        std::fs::write(d.path().join("f"), "x").unwrap();
        let held = d.path().to_path_buf();
        remove_where(|p| p == held);
        assert!(!held.exists());
        drop(d);
    }
}
