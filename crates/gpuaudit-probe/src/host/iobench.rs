//! storage.throughput: sequential write and read with O_DIRECT, and 4 KiB random reads at queue
//! depth 1, in a temporary file of each data directory, a few seconds each.

use super::storage::can_write;
use crate::cleanup::TempFile;
use gpuaudit_core::facts::{DataDir, DirThroughput, IoResult};
use gpuaudit_core::reading::Reading;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Limits of one directory's measurement.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub max_bytes: u64,
    pub write_time: Duration,
    pub read_time: Duration,
    pub random_time: Duration,
    pub max_random: u32,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_bytes: 1 << 30,
            write_time: Duration::from_secs(2),
            read_time: Duration::from_secs(2),
            random_time: Duration::from_secs(1),
            max_random: 20_000,
        }
    }
}

const BLOCK: usize = 1 << 20;
const ALIGN: usize = 4096;
/// Smallest file worth timing.
const MIN_BYTES: u64 = 16 << 20;

/// A buffer aligned for O_DIRECT, carved out of a larger vector (no unsafe allocation).
struct Aligned {
    buf: Vec<u8>,
    off: usize,
    len: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let buf = vec![0u8; len + ALIGN];
        let off = buf.as_ptr().align_offset(ALIGN).min(ALIGN);
        Aligned { buf, off, len }
    }
    fn slice(&mut self) -> &mut [u8] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

/// The bytes an unprivileged writer may still put on `dir`'s file system (statvfs: blocks
/// available to non-root users), or `None` where it cannot be asked.
pub(crate) fn free_bytes(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid C string; `st` is a plain struct the call fills.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
}

fn open(path: &Path, direct: bool, create: bool) -> std::io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true).write(true);
    if create {
        o.create_new(true);
    }
    if direct {
        o.custom_flags(libc::O_DIRECT);
    }
    o.open(path)
}

fn drop_cache(f: &File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a valid descriptor; advice only.
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

fn is_einval(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::EINVAL)
}

/// Measure one directory. `Unavailable` says why it was not measured.
pub fn measure_dir(dir: &Path, budget: Budget) -> Reading<IoResult> {
    if !dir.is_dir() {
        return Reading::unavailable("does not exist (or is not a directory)");
    }
    if !can_write(dir) {
        return Reading::unavailable("not writable by this user: not measured");
    }
    let free = free_bytes(dir);
    let size = match free {
        Some(f) => budget.max_bytes.min(f / 10) / BLOCK as u64 * BLOCK as u64,
        None => budget.max_bytes,
    };
    if size < MIN_BYTES {
        return Reading::unavailable(format!(
            "too little free space for a test file ({} MiB free)",
            free.unwrap_or(0) >> 20
        ));
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let name = format!(
        ".gpuaudit-io-{}-{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let guard = TempFile::register(&dir.join(name));
    match run(guard.path(), size, budget) {
        Ok(r) => Reading::Value(r),
        Err(e) => Reading::unavailable(e),
    }
    // `guard` removes the file here, whatever happened.
}

fn run(path: &Path, size: u64, budget: Budget) -> Result<IoResult, String> {
    let mut direct = true;
    let mut f = match open(path, true, true) {
        Ok(f) => f,
        Err(e) if is_einval(&e) => {
            direct = false;
            open(path, false, true).map_err(|e| format!("cannot create a test file: {e}"))?
        }
        Err(e) => return Err(format!("cannot create a test file: {e}")),
    };
    let mut buf = Aligned::new(BLOCK);
    // Data that does not compress or deduplicate.
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    for chunk in buf.slice().chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }

    // Sequential write.
    let t0 = Instant::now();
    let mut written = 0u64;
    while written < size && t0.elapsed() < budget.write_time {
        match f.write_all(buf.slice()) {
            Ok(()) => written += BLOCK as u64,
            Err(e) if direct && is_einval(&e) && written == 0 => {
                // Some file systems accept O_DIRECT at open and refuse it at write.
                direct = false;
                f = open(path, false, false)
                    .map_err(|e| format!("reopening the test file: {e}"))?;
            }
            Err(e) => return Err(format!("writing the test file: {e}")),
        }
    }
    f.sync_all()
        .map_err(|e| format!("fsync of the test file: {e}"))?;
    let write_s = t0.elapsed().as_secs_f64();
    if written == 0 {
        return Err("nothing could be written".into());
    }

    // Sequential read.
    if !direct {
        drop_cache(&f);
    }
    f.seek(SeekFrom::Start(0))
        .map_err(|e| format!("seek: {e}"))?;
    let t1 = Instant::now();
    let mut read = 0u64;
    while read < written && t1.elapsed() < budget.read_time {
        let n = f
            .read(buf.slice())
            .map_err(|e| format!("reading the test file: {e}"))?;
        if n == 0 {
            break;
        }
        read += n as u64;
    }
    let read_s = t1.elapsed().as_secs_f64();

    // Random 4 KiB reads, one at a time.
    if !direct {
        drop_cache(&f);
    }
    let pages = (written / ALIGN as u64).max(1);
    let mut small = Aligned::new(ALIGN);
    let t2 = Instant::now();
    let mut n = 0u32;
    while n < budget.max_random && t2.elapsed() < budget.random_time {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % pages) * ALIGN as u64;
        f.read_exact_at(small.slice(), off)
            .map_err(|e| format!("random read of the test file: {e}"))?;
        n += 1;
    }
    let rand_s = t2.elapsed().as_secs_f64();

    let mb = |bytes: u64, s: f64| if s > 0.0 { bytes as f64 / s / 1e6 } else { 0.0 };
    Ok(IoResult {
        seq_write_mb_s: mb(written, write_s),
        seq_read_mb_s: mb(read, read_s),
        rand_read_iops: if rand_s > 0.0 { f64::from(n) / rand_s } else { 0.0 },
        file_bytes: written,
        direct,
        method: format!(
            "{} I/O on a {} MiB temporary file: 1 MiB sequential writes then fsync ({:.2} s), 1 MiB sequential reads ({:.2} s), {} random 4 KiB reads at queue depth 1 ({:.2} s)",
            if direct { "O_DIRECT" } else { "buffered (O_DIRECT refused; page cache dropped before reads)" },
            written >> 20,
            write_s,
            read_s,
            n,
            rand_s
        ),
    })
}

pub fn measure_all(dirs: &[DataDir]) -> Vec<DirThroughput> {
    let mut done: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for d in dirs {
        let path = d.resolved.clone().unwrap_or_else(|| d.path.clone());
        // Two roles can name one directory (the cache inside the current directory).
        let result = if done.contains(&path) {
            Reading::unavailable(format!("same directory as {path}, measured once"))
        } else if let Some(why) = &d.unreadable {
            Reading::Unavailable(why.clone())
        } else if !d.exists {
            Reading::unavailable("does not exist")
        } else {
            done.push(path.clone());
            measure_dir(Path::new(&path), Budget::default())
        };
        out.push(DirThroughput {
            path: d.path.clone(),
            result,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_this_user_may_not_enter_is_not_measured_and_says_why() {
        let d = DataDir {
            path: "/root/data".into(),
            role: "--data-dir".into(),
            exists: false,
            unreadable: Some("/root/data: permission denied".into()),
            resolved: None,
            writable: Reading::unavailable("/root/data: permission denied"),
        };
        let out = measure_all(&[d]);
        assert_eq!(
            out[0].result.reason(),
            Some("/root/data: permission denied")
        );
    }

    #[test]
    fn measures_a_small_file_and_leaves_nothing_behind() {
        let d = tempfile::tempdir().unwrap();
        let b = Budget {
            max_bytes: 16 << 20,
            write_time: Duration::from_millis(300),
            read_time: Duration::from_millis(300),
            random_time: Duration::from_millis(100),
            max_random: 500,
        };
        let r = measure_dir(d.path(), b);
        match r {
            Reading::Value(v) => {
                assert!(v.seq_write_mb_s > 0.0);
                assert!(v.rand_read_iops > 0.0);
                assert!(v.file_bytes > 0);
            }
            // A tiny or full test disk.
            Reading::Unavailable(why) => assert!(why.contains("free space"), "{why}"),
        }
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn missing_dir_is_a_reason() {
        let r = measure_dir(Path::new("/nonexistent/dir"), Budget::default());
        assert!(r.reason().unwrap().contains("does not exist"));
    }
}
