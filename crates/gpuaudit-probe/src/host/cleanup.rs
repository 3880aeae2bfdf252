//! Temporary files that must not outlive the audit, even when it is interrupted.
//!
//! A [`TempFile`] registers its path before the file is created and removes it when dropped.
//! The first one also starts a thread that waits for SIGINT, SIGTERM and SIGHUP (through
//! signal-hook, which chains with handlers other code installed): it removes every registered
//! file, then ends the process as the signal would have (unless
//! [`set_terminate_on_signal`]`(false)`, for a program that handles those signals itself and
//! calls [`remove_temp_files`] from its own handler).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

static REGISTRY: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static HANDLER: OnceLock<bool> = OnceLock::new();
static TERMINATE: AtomicBool = AtomicBool::new(true);

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while the lock was held leaves a usable list behind.
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove every temporary file gpuaudit still has (safe to call from any thread).
pub fn remove_temp_files() {
    let paths: Vec<PathBuf> = lock().drain(..).collect();
    for p in paths {
        let _ = std::fs::remove_file(&p);
    }
}

/// Whether the signal thread ends the process after cleaning up (default: yes).
pub fn set_terminate_on_signal(terminate: bool) {
    TERMINATE.store(terminate, Ordering::SeqCst);
}

/// Start the signal thread once; false where signals cannot be watched (then only the drop
/// guard removes files).
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
                    remove_temp_files();
                    if TERMINATE.load(Ordering::SeqCst) {
                        let _ = signal_hook::low_level::emulate_default_handler(sig);
                    }
                }
            })
            .is_ok()
    })
}

/// A path registered for removal; the file (if created) is removed on drop.
pub struct TempFile {
    path: PathBuf,
}

impl TempFile {
    /// Register `path` (not yet created).
    pub fn register(path: &Path) -> TempFile {
        install_signal_cleanup();
        lock().push(path.to_path_buf());
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
        let _ = std::fs::remove_file(&self.path);
        lock().retain(|p| p != &self.path);
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
        remove_temp_files();
        assert!(!q.exists());
        drop(t);
    }
}
