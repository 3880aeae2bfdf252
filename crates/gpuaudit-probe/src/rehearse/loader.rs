//! The CPU half of the rehearsed pipeline: reader threads read samples from the dataset's
//! files, worker threads transform them into tensors written straight into the slots of
//! staged batches. The parent measures the stages alone with it ([`measure_read`],
//! [`measure_transform`], [`measure_loader`]); the measurement child runs the same loader
//! into pinned (or pageable) batch buffers that it copies to the GPU ([`with_loader`]).
//!
//! Every thread is scoped: none outlives the call that started it. Nothing here touches CUDA.

use gpuaudit_core::facts::StageFigure;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a waiting thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(20);

/// The loader's sizes, as the plan carries them to the child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoaderConfig {
    /// Bytes read per sample (a file smaller than this is one sample of its size).
    pub sample_bytes: u64,
    /// Bytes per transformed sample (its slot in a batch).
    pub tensor_bytes: u64,
    /// Samples per batch.
    pub batch: u32,
    pub readers: u32,
    pub workers: u32,
    /// Rounds of the mixing function per input byte.
    pub transform_cost: u32,
    /// All readers together read at most this many bytes a second (simulated slow storage).
    pub read_throttle_bytes_per_s: Option<u64>,
    /// Drop each sample from the page cache after reading it (`posix_fadvise(DONTNEED)`), so
    /// that every pass reads the storage, as for a dataset larger than memory.
    pub drop_cache: bool,
}

/// The files samples are read from, in the order the readers take them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    pub files: Vec<PathBuf>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Holds all readers together to a byte rate: each read reserves its bytes and waits until
/// the rate allows them.
struct Throttle {
    bytes_per_s: Option<f64>,
    start: Instant,
    taken: AtomicU64,
}

impl Throttle {
    fn new(bytes_per_s: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_s: bytes_per_s.filter(|b| *b > 0).map(|b| b as f64),
            start: Instant::now(),
            taken: AtomicU64::new(0),
        }
    }

    /// Waits until `bytes` more may be read; false when told to stop meanwhile.
    fn take(&self, bytes: u64, stop: &AtomicBool) -> bool {
        let Some(rate) = self.bytes_per_s else {
            return true;
        };
        let total = self.taken.fetch_add(bytes, Ordering::Relaxed) + bytes;
        let due = self.start + Duration::from_secs_f64(total as f64 / rate);
        loop {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= due {
                return true;
            }
            std::thread::sleep((due - now).min(POLL));
        }
    }
}

/// The transform standing in for decoding and augmentation: `cost` rounds of a
/// multiply-rotate chain per input byte (a dependent chain, so the compiler cannot vectorise
/// the cost away), then the output tensor written from the chain's state (as a decoder writes
/// the pixels). Returns the final state, so the work cannot be optimised out.
pub fn transform(input: &[u8], out: &mut [u8], cost: u32) -> u64 {
    const P: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for &b in input {
        h = (h ^ b as u64).wrapping_mul(P);
        for _ in 1..cost {
            h = h.rotate_left(29).wrapping_mul(P);
        }
    }
    // Normalised float32 "pixels" (the usual output of a decode + normalise).
    let mut x = h | 1;
    for chunk in out.chunks_mut(4) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0;
        let bytes = v.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
    std::hint::black_box(h)
}

/// Reads one sample (up to `buf.len()` bytes) from the current file of a reader.
fn read_sample(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn drop_from_cache(f: &File, offset: u64, len: usize) {
    // SAFETY: an advisory call on a descriptor this reader owns; no pointers.
    unsafe {
        libc::posix_fadvise(
            f.as_raw_fd(),
            offset as libc::off_t,
            len as libc::off_t,
            libc::POSIX_FADV_DONTNEED,
        );
    }
}

/// Reader `index` of `readers`: files index, index+readers, ... (wrapping), each read in
/// samples of `sample_bytes` to its end, until `stop`. Each sample goes to `sink` (which
/// returns false to stop). Errors name the file.
fn reader_loop(
    ds: &Dataset,
    cfg: &LoaderConfig,
    index: usize,
    throttle: &Throttle,
    stop: &AtomicBool,
    mut buffer: impl FnMut() -> Vec<u8>,
    mut sink: impl FnMut(Vec<u8>) -> bool,
) -> Result<(), String> {
    let n = ds.files.len();
    if n == 0 {
        return Err("the dataset has no files".into());
    }
    let step = cfg.readers.max(1) as usize;
    let mut k = index % n;
    let mut empty_in_a_row = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let path = &ds.files[k];
        k = (k + step) % n;
        let mut f = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut offset = 0u64;
        let mut read_any = false;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let mut buf = buffer();
            buf.resize(cfg.sample_bytes as usize, 0);
            let got =
                read_sample(&mut f, &mut buf).map_err(|e| format!("{}: {e}", path.display()))?;
            if got == 0 {
                break;
            }
            // What was read counts against the rate (the end of a file reads nothing).
            if !throttle.take(got as u64, stop) {
                return Ok(());
            }
            if cfg.drop_cache {
                drop_from_cache(&f, offset, got);
            }
            offset += got as u64;
            read_any = true;
            buf.truncate(got);
            if !sink(buf) {
                return Ok(());
            }
            if got < cfg.sample_bytes as usize {
                break;
            }
        }
        empty_in_a_row = if read_any { 0 } else { empty_in_a_row + 1 };
        if empty_in_a_row >= n {
            return Err("every file of the dataset is empty".into());
        }
    }
    Ok(())
}

/// What the threads count, and the first error one of them met.
#[derive(Default)]
struct Counters {
    samples_read: AtomicU64,
    bytes_read: AtomicU64,
    samples_done: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Counters {
    fn fail(&self, e: String, stop: &AtomicBool) {
        lock(&self.error).get_or_insert(e);
        stop.store(true, Ordering::Relaxed);
    }
}

fn figure(samples: u64, bytes: u64, secs: f64, method: String) -> StageFigure {
    let secs = secs.max(1e-9);
    StageFigure {
        samples_per_s: samples as f64 / secs,
        bytes_per_s: bytes as f64 / secs,
        samples,
        seconds: secs,
        method,
        tflops: None,
        busbw_gbps: None,
    }
}

fn describe_reads(cfg: &LoaderConfig) -> String {
    let mut s = format!(
        "{} reader thread{} reading {} samples from the dataset's files in turn",
        cfg.readers,
        if cfg.readers == 1 { "" } else { "s" },
        gpuaudit_core::units::bytes(cfg.sample_bytes)
    );
    if cfg.drop_cache {
        s.push_str(", each dropped from the page cache after it is read");
    }
    if let Some(t) = cfg.read_throttle_bytes_per_s {
        s.push_str(&format!(
            ", all held to {} MB/s (--read-throttle-mbps)",
            t / 1_000_000
        ));
    }
    s
}

/// The readers alone for `duration`: samples and bytes read a second.
pub fn measure_read(
    ds: &Dataset,
    cfg: &LoaderConfig,
    duration: Duration,
) -> Result<StageFigure, String> {
    let stop = AtomicBool::new(false);
    let counters = Counters::default();
    let throttle = Throttle::new(cfg.read_throttle_bytes_per_s);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for r in 0..cfg.readers.max(1) as usize {
            let (stop, counters, throttle) = (&stop, &counters, &throttle);
            s.spawn(move || {
                // One buffer, reused: the data is thrown away.
                let spare: std::cell::RefCell<Option<Vec<u8>>> = Default::default();
                let res = reader_loop(
                    ds,
                    cfg,
                    r,
                    throttle,
                    stop,
                    || spare.borrow_mut().take().unwrap_or_default(),
                    |buf| {
                        counters.samples_read.fetch_add(1, Ordering::Relaxed);
                        counters
                            .bytes_read
                            .fetch_add(buf.len() as u64, Ordering::Relaxed);
                        *spare.borrow_mut() = Some(buf);
                        true
                    },
                );
                if let Err(e) = res {
                    counters.fail(e, stop);
                }
            });
        }
        sleep_unless_stopped(duration, &stop);
        stop.store(true, Ordering::Relaxed);
    });
    let secs = t0.elapsed().as_secs_f64();
    if let Some(e) = lock(&counters.error).take() {
        return Err(e);
    }
    Ok(figure(
        counters.samples_read.load(Ordering::Relaxed),
        counters.bytes_read.load(Ordering::Relaxed),
        secs,
        describe_reads(cfg),
    ))
}

fn sleep_unless_stopped(duration: Duration, stop: &AtomicBool) {
    let end = Instant::now() + duration;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= end {
            break;
        }
        std::thread::sleep((end - now).min(POLL));
    }
}

/// How many samples the transform alone works on, read once into memory.
pub fn preload_count(workers: u32) -> usize {
    (2 * workers.max(1) as usize).clamp(8, 64)
}

/// Samples the loader queues between its readers and its workers.
fn queue_capacity(workers: u32, readers: u32) -> usize {
    2 * workers.max(1) as usize + readers.max(1) as usize
}

/// The sample buffers the loader holds at most: the queue full, one being read by each
/// reader, one being transformed by each worker (a buffer comes back to the pool once
/// transformed, and a new one is made only when the pool is empty). `None`: past `u64`.
pub fn samples_in_flight(workers: u32, readers: u32) -> Option<u64> {
    let (w, r) = (workers.max(1) as u64, readers.max(1) as u64);
    w.checked_mul(3)?.checked_add(r.checked_mul(2)?)
}

/// Samples read once into memory, for the transform alone.
fn preload(ds: &Dataset, cfg: &LoaderConfig, count: usize) -> Result<Vec<Vec<u8>>, String> {
    let stop = AtomicBool::new(false);
    let throttle = Throttle::new(None);
    let mut out = Vec::new();
    let one = LoaderConfig {
        readers: 1,
        drop_cache: false,
        ..cfg.clone()
    };
    reader_loop(ds, &one, 0, &throttle, &stop, Vec::new, |buf| {
        out.push(buf);
        out.len() < count
    })?;
    Ok(out)
}

/// The workers alone for `duration`, on samples already in memory: samples transformed a
/// second (bytes: input bytes).
pub fn measure_transform(
    ds: &Dataset,
    cfg: &LoaderConfig,
    duration: Duration,
) -> Result<StageFigure, String> {
    let samples = preload(ds, cfg, preload_count(cfg.workers))?;
    if samples.is_empty() {
        return Err("no sample could be read from the dataset".into());
    }
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let bytes = AtomicU64::new(0);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for w in 0..cfg.workers.max(1) as usize {
            let (stop, done, bytes, samples) = (&stop, &done, &bytes, &samples);
            s.spawn(move || {
                let mut out = vec![0u8; cfg.tensor_bytes as usize];
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let x = &samples[i % samples.len()];
                    transform(x, &mut out, cfg.transform_cost);
                    done.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(x.len() as u64, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
        sleep_unless_stopped(duration, &stop);
        stop.store(true, Ordering::Relaxed);
    });
    Ok(figure(
        done.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed),
        t0.elapsed().as_secs_f64(),
        format!(
            "{} worker thread{} transforming samples already in memory ({} round{} of a \
             multiply-rotate chain per input byte, then a {} float32 tensor written)",
            cfg.workers,
            if cfg.workers == 1 { "" } else { "s" },
            cfg.transform_cost,
            if cfg.transform_cost == 1 { "" } else { "s" },
            gpuaudit_core::units::bytes(cfg.tensor_bytes)
        ),
    ))
}

/// A staged batch buffer the workers write into: `len` bytes at `ptr`, `batch` slots of
/// `tensor_bytes`. The owner keeps it alive (and does not touch it while the loader fills
/// it) for the whole [`with_loader`] call.
#[derive(Clone, Copy, Debug)]
pub struct BatchBuf {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the pointer is plain host memory; the loader's protocol gives each slot to one
// worker at a time and the whole buffer to the consumer only once every slot is written.
unsafe impl Send for BatchBuf {}
// SAFETY: as above.
unsafe impl Sync for BatchBuf {}

/// The consumer's side of a running loader.
pub struct LoaderHandle<'a> {
    ready: Receiver<usize>,
    tickets: mpsc::Sender<(usize, u32)>,
    filled: &'a [AtomicU32],
    batch: u32,
    stop: &'a AtomicBool,
    counters: &'a Counters,
}

impl LoaderHandle<'_> {
    /// The next full batch (its buffer's index), waiting at most `limit`.
    pub fn next(&self, limit: Duration) -> Result<usize, String> {
        let end = Instant::now() + limit;
        loop {
            if let Some(e) = lock(&self.counters.error).clone() {
                return Err(e);
            }
            match self.ready.recv_timeout(POLL) {
                Ok(b) => return Ok(b),
                Err(RecvTimeoutError::Timeout) if Instant::now() < end => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "the loader delivered no batch within {:.0} s",
                        limit.as_secs_f64()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => return Err("the loader stopped".into()),
            }
        }
    }

    /// The next full batch if one comes within `wait`, `None` otherwise.
    pub fn try_next(&self, wait: Duration) -> Result<Option<usize>, String> {
        if let Some(e) = lock(&self.counters.error).clone() {
            return Err(e);
        }
        match self.ready.recv_timeout(wait) {
            Ok(b) => Ok(Some(b)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err("the loader stopped".into()),
        }
    }

    /// Gives buffer `b` back to the workers.
    pub fn release(&self, b: usize) {
        if let Some(f) = self.filled.get(b) {
            f.store(0, Ordering::Release);
        }
        for slot in 0..self.batch {
            if self.tickets.send((b, slot)).is_err() {
                break;
            }
        }
    }

    /// Samples read and transformed so far.
    pub fn samples_done(&self) -> u64 {
        self.counters.samples_done.load(Ordering::Relaxed)
    }

    /// Whether a thread of the loader failed (the error comes with the next [`Self::next`]).
    pub fn failed(&self) -> bool {
        self.stop.load(Ordering::Relaxed) && lock(&self.counters.error).is_some()
    }
}

/// Runs the loader (readers and workers) into `bufs` while `consume` runs on this thread;
/// every buffer starts free. When `consume` returns, the threads stop and are joined. The
/// loader's own error, if one of its threads failed, comes before `consume`'s result.
pub fn with_loader<T>(
    ds: &Dataset,
    cfg: &LoaderConfig,
    bufs: &[BatchBuf],
    consume: impl FnOnce(&LoaderHandle) -> T,
) -> Result<T, String> {
    let tensor = cfg.tensor_bytes as usize;
    let batch = cfg.batch.max(1);
    if let Some(b) = bufs.iter().find(|b| b.len < tensor * batch as usize) {
        return Err(format!(
            "a batch buffer of {} bytes is too small for {batch} samples of {tensor} bytes",
            b.len
        ));
    }
    let stop = AtomicBool::new(false);
    let counters = Counters::default();
    let throttle = Throttle::new(cfg.read_throttle_bytes_per_s);
    let filled: Vec<AtomicU32> = bufs.iter().map(|_| AtomicU32::new(0)).collect();
    let workers = cfg.workers.max(1) as usize;
    let (sample_tx, sample_rx): (SyncSender<Vec<u8>>, Receiver<Vec<u8>>) =
        mpsc::sync_channel(queue_capacity(cfg.workers, cfg.readers));
    let sample_rx = Mutex::new(sample_rx);
    let (ticket_tx, ticket_rx) = mpsc::channel::<(usize, u32)>();
    let ticket_rx = Mutex::new(ticket_rx);
    let (ready_tx, ready_rx) = mpsc::channel::<usize>();
    let pool: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

    let result = std::thread::scope(|s| {
        for r in 0..cfg.readers.max(1) as usize {
            let (stop, counters, throttle, pool, tx) =
                (&stop, &counters, &throttle, &pool, sample_tx.clone());
            s.spawn(move || {
                let res = reader_loop(
                    ds,
                    cfg,
                    r,
                    throttle,
                    stop,
                    || lock(pool).pop().unwrap_or_default(),
                    |buf| {
                        counters.samples_read.fetch_add(1, Ordering::Relaxed);
                        counters
                            .bytes_read
                            .fetch_add(buf.len() as u64, Ordering::Relaxed);
                        let mut item = buf;
                        loop {
                            match tx.try_send(item) {
                                Ok(()) => return true,
                                Err(TrySendError::Full(back)) => {
                                    if stop.load(Ordering::Relaxed) {
                                        return false;
                                    }
                                    item = back;
                                    std::thread::sleep(Duration::from_micros(500));
                                }
                                Err(TrySendError::Disconnected(_)) => return false,
                            }
                        }
                    },
                );
                if let Err(e) = res {
                    counters.fail(e, stop);
                }
            });
        }
        drop(sample_tx);
        for _ in 0..workers {
            let (stop, counters, pool, filled) = (&stop, &counters, &pool, &filled);
            let (sample_rx, ticket_rx, ready_tx) = (&sample_rx, &ticket_rx, ready_tx.clone());
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let ticket = lock(ticket_rx).recv_timeout(POLL);
                    let (b, slot) = match ticket {
                        Ok(t) => t,
                        Err(RecvTimeoutError::Timeout) => continue,
                        Err(RecvTimeoutError::Disconnected) => return,
                    };
                    let sample = loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        match lock(sample_rx).recv_timeout(POLL) {
                            Ok(x) => break x,
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    };
                    let buf = bufs[b];
                    // SAFETY: slot `slot` of buffer `b` is this worker's alone (its ticket),
                    // inside the buffer (checked above), and the buffer outlives the scope.
                    let out = unsafe {
                        std::slice::from_raw_parts_mut(buf.ptr.add(slot as usize * tensor), tensor)
                    };
                    transform(&sample, out, cfg.transform_cost);
                    lock(pool).push(sample);
                    counters.samples_done.fetch_add(1, Ordering::Relaxed);
                    if filled[b].fetch_add(1, Ordering::AcqRel) + 1 == batch
                        && ready_tx.send(b).is_err()
                    {
                        return;
                    }
                }
            });
        }
        drop(ready_tx);
        let handle = LoaderHandle {
            ready: ready_rx,
            tickets: ticket_tx,
            filled: &filled,
            batch,
            stop: &stop,
            counters: &counters,
        };
        for b in 0..bufs.len() {
            handle.release(b);
        }
        let r = consume(&handle);
        stop.store(true, Ordering::Relaxed);
        drop(handle);
        r
    });
    if let Some(e) = lock(&counters.error).take() {
        return Err(e);
    }
    Ok(result)
}

/// Readers and workers together into `buffers` staged batches (plain memory), taken as fast
/// as they fill, for `duration`: samples delivered in full batches a second.
pub fn measure_loader(
    ds: &Dataset,
    cfg: &LoaderConfig,
    duration: Duration,
    buffers: usize,
) -> Result<StageFigure, String> {
    let size = cfg.tensor_bytes as usize * cfg.batch.max(1) as usize;
    let mut mem: Vec<Vec<u8>> = Vec::new();
    for _ in 0..buffers.max(1) {
        let mut v = Vec::new();
        v.try_reserve_exact(size)
            .map_err(|e| format!("allocating a batch of {size} bytes: {e}"))?;
        v.resize(size, 0);
        mem.push(v);
    }
    let bufs: Vec<BatchBuf> = mem
        .iter_mut()
        .map(|v| BatchBuf {
            ptr: v.as_mut_ptr(),
            len: v.len(),
        })
        .collect();
    let (samples, secs) = with_loader(ds, cfg, &bufs, |h| -> Result<(u64, f64), String> {
        // The clock starts with the first sample transformed (the threads' start is not the
        // loader's rate), and counts samples, not batches: a batch may take longer than the
        // time given.
        let start_limit = Instant::now() + Duration::from_secs(30).max(duration * 4);
        while h.samples_done() == 0 {
            if Instant::now() > start_limit {
                return Err(format!(
                    "the loader delivered no sample within {:.0} s",
                    Duration::from_secs(30).max(duration * 4).as_secs_f64()
                ));
            }
            if let Some(b) = h.try_next(POLL)? {
                h.release(b);
            }
        }
        let (t0, s0) = (Instant::now(), h.samples_done());
        while t0.elapsed() < duration {
            if let Some(b) = h.try_next(POLL)? {
                h.release(b);
            }
        }
        Ok((h.samples_done() - s0, t0.elapsed().as_secs_f64()))
    })??;
    Ok(figure(
        samples,
        samples * cfg.sample_bytes,
        secs,
        format!(
            "{}; {} worker{} transforming them into the slots of batches of {} in {} staged \
             buffers (plain memory), each taken as soon as it is full; samples transformed \
             a second",
            describe_reads(cfg),
            cfg.workers,
            if cfg.workers == 1 { "" } else { "s" },
            cfg.batch,
            buffers
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(n: usize, bytes: usize) -> (tempfile::TempDir, Dataset) {
        let d = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for i in 0..n {
            let p = d.path().join(format!("s{i:04}"));
            std::fs::write(&p, vec![i as u8; bytes]).unwrap();
            files.push(p);
        }
        (d, Dataset { files })
    }

    fn cfg() -> LoaderConfig {
        LoaderConfig {
            sample_bytes: 16 << 10,
            tensor_bytes: 32 << 10,
            batch: 8,
            readers: 2,
            workers: 2,
            transform_cost: 1,
            read_throttle_bytes_per_s: None,
            drop_cache: true,
        }
    }

    #[test]
    fn the_transform_costs_per_byte_and_fills_the_tensor() {
        let input = vec![7u8; 4096];
        let mut a = vec![0u8; 1024];
        let mut b = vec![0u8; 1024];
        let ha = transform(&input, &mut a, 1);
        let hb = transform(&input, &mut b, 3);
        assert_ne!(ha, hb, "the cost changes the work");
        assert!(a.chunks(4).all(|c| {
            let v = f32::from_le_bytes(c.try_into().unwrap());
            (-2.0..2.0).contains(&v)
        }));
        assert_ne!(a, vec![0u8; 1024]);
        // Four times the rounds take longer (timed over enough bytes to be well above noise).
        let big = vec![3u8; 1 << 20];
        let mut time = |cost| {
            let t = Instant::now();
            transform(&big, &mut a, cost);
            t.elapsed()
        };
        let (one, eight) = (time(1), time(8));
        assert!(eight > one * 2, "{one:?} vs {eight:?}");
    }

    #[test]
    fn reads_count_samples_and_bytes_and_split_files_in_samples() {
        let (_d, ds) = dataset(4, 40 << 10);
        let f = measure_read(&ds, &cfg(), Duration::from_millis(300)).unwrap();
        assert!(f.samples > 0);
        // A 40 KiB file is read as 16 + 16 + 8 KiB: 40/3 KiB a sample on average.
        let per = f.bytes_per_s / f.samples_per_s;
        assert!((per - (40 << 10) as f64 / 3.0).abs() < 2048.0, "{per}");
        assert!(f.method.contains("dropped from the page cache"));
    }

    #[test]
    fn a_throttled_reader_is_held_to_its_rate() {
        let (_d, ds) = dataset(8, 16 << 10);
        let mut c = cfg();
        c.read_throttle_bytes_per_s = Some(2_000_000);
        let f = measure_read(&ds, &c, Duration::from_millis(800)).unwrap();
        assert!(
            f.bytes_per_s < 2_400_000.0 && f.bytes_per_s > 1_200_000.0,
            "{}",
            f.bytes_per_s
        );
        assert!(f.method.contains("held to 2 MB/s"), "{}", f.method);
    }

    #[test]
    fn errors_name_the_file() {
        let ds = Dataset {
            files: vec!["/nonexistent/gpuaudit/sample".into()],
        };
        let e = measure_read(&ds, &cfg(), Duration::from_millis(200)).unwrap_err();
        assert!(e.starts_with("/nonexistent/gpuaudit/sample: "), "{e}");
        assert!(measure_read(&Dataset::default(), &cfg(), Duration::from_millis(50)).is_err());
        let (_d, empty) = dataset(2, 0);
        let e = measure_read(&empty, &cfg(), Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }

    #[test]
    fn the_loader_fills_every_slot_of_a_batch() {
        let (_d, ds) = dataset(6, 16 << 10);
        let c = cfg();
        let size = (c.tensor_bytes * c.batch as u64) as usize;
        let mut mem = vec![vec![0u8; size]; 2];
        let bufs: Vec<BatchBuf> = mem
            .iter_mut()
            .map(|v| BatchBuf {
                ptr: v.as_mut_ptr(),
                len: v.len(),
            })
            .collect();
        let got = with_loader(&ds, &c, &bufs, |h| {
            let b = h.next(Duration::from_secs(20)).unwrap();
            // SAFETY: the buffer is ours until released.
            let data = unsafe { std::slice::from_raw_parts(bufs[b].ptr, bufs[b].len) };
            let nonzero_slots = data
                .chunks(c.tensor_bytes as usize)
                .filter(|s| s.iter().any(|x| *x != 0))
                .count();
            h.release(b);
            let again = h.next(Duration::from_secs(20)).unwrap();
            h.release(again);
            nonzero_slots
        })
        .unwrap();
        assert_eq!(got, c.batch as usize);
        let small = [BatchBuf {
            ptr: mem[0].as_mut_ptr(),
            len: 10,
        }];
        assert!(with_loader(&ds, &c, &small, |_| ()).is_err());
    }

    #[test]
    fn a_loader_error_comes_back() {
        let ds = Dataset {
            files: vec!["/nonexistent/x".into()],
        };
        let e = measure_loader(&ds, &cfg(), Duration::from_millis(200), 2).unwrap_err();
        assert!(e.contains("/nonexistent/x"), "{e}");
    }

    #[test]
    fn the_loader_is_capped_by_its_slowest_stage() {
        // A throttled reader caps the loader at the throttle: 1 MB/s of 16 KiB samples is
        // 61 samples/s, far below what two workers transform.
        let (_d, ds) = dataset(16, 16 << 10);
        let mut c = cfg();
        c.read_throttle_bytes_per_s = Some(1_000_000);
        let loader = measure_loader(&ds, &c, Duration::from_millis(1500), 3).unwrap();
        let transform = measure_transform(&ds, &c, Duration::from_millis(300)).unwrap();
        let cap = 1_000_000.0 / (16 << 10) as f64;
        assert!(
            loader.samples_per_s < cap * 1.2 && loader.samples_per_s > cap * 0.5,
            "{} against {cap}",
            loader.samples_per_s
        );
        assert!(transform.samples_per_s > 3.0 * loader.samples_per_s);
    }
}
