//! Host <-> device copies: pinned and pageable, both directions, over a size sweep, per GPU;
//! then pinned copies on every GPU at once.

use super::plan::PcieParams;
use crate::measure::child::cu::{
    self, human_bytes, kargs, launch, DevBuf, Event, PinnedBuf, Stream, R,
};
use crate::measure::child::{gbps, log, progress, reading, Ctx, Fail};
use crate::measure::fill;
use crate::measure::GpuGroup;
use gpuaudit_core::facts::{
    median, BidirectionalCopy, ConcurrentCopy, CopyPoint, Direction, GpuValue, HostLatency,
    HostMemory, OnGpu, PcieBandwidth, PcieGpu, SmHostCopy, Verify,
};
use gpuaudit_core::Reading;
use std::ffi::c_void;

/// Host memory we allow ourselves: a quarter of what is available, per kind of buffer.
fn host_budget() -> u64 {
    cu::host_available_bytes().map_or(1 << 30, |b| b / 4)
}

/// Host buffer: pinned or a plain (pageable) allocation.
enum Host {
    Pinned(PinnedBuf),
    Pageable(Vec<u8>),
}

impl Host {
    fn ptr(&mut self) -> *mut c_void {
        match self {
            Host::Pinned(p) => p.ptr(),
            Host::Pageable(v) => v.as_mut_ptr() as *mut c_void,
        }
    }
    fn bytes(&mut self) -> &mut [u8] {
        match self {
            Host::Pinned(p) => p.as_mut_slice(),
            Host::Pageable(v) => v.as_mut_slice(),
        }
    }
}

const SEED_H: u32 = 0x5EED_0001;
const SEED_D: u32 = 0x5EED_0002;

pub fn run(ctx: &Ctx, p: &PcieParams) -> R<PcieBandwidth> {
    let max_size = p.sizes.iter().copied().max().unwrap_or(1 << 20);
    let host_size = max_size.min(host_budget() & !0xFFFF).max(1 << 20);
    let first = ctx.gpus.first().ok_or(Fail("no GPU".into()))?;
    first.bind()?;
    let mut pinned = Host::Pinned(PinnedBuf::new(host_size)?);
    let mut pageable = if p.pageable {
        // Allocation touches nothing; the fill below faults every page in before timing.
        let mut v = Vec::new();
        v.try_reserve_exact(host_size as usize).map_err(|e| {
            Fail(format!(
                "allocating {} of host memory: {e}",
                human_bytes(host_size)
            ))
        })?;
        v.resize(host_size as usize, 0u8);
        Some(Host::Pageable(v))
    } else {
        None
    };
    fill::fill_pattern(pinned.bytes(), SEED_H);
    if let Some(h) = pageable.as_mut() {
        fill::fill_pattern(h.bytes(), SEED_H);
    }

    let n = ctx.gpus.len();
    let mut per_gpu = Vec::new();
    for (gi, g) in ctx.gpus.iter().enumerate() {
        let r = (|| -> R<PcieGpu> {
            let (free, _) = g.mem_info()?;
            let dev_size = host_size.min((free / 2) & !0xFFFF);
            let dev = DevBuf::new(g, dev_size)?;
            let s = Stream::new(g)?;
            let mut points = Vec::new();
            let mut verify = Vec::new();
            let sizes: Vec<u64> = p.sizes.iter().copied().filter(|s| *s <= dev_size).collect();
            if sizes.len() < p.sizes.len() {
                log(format!(
                    "GPU {}: sizes above {} skipped (free memory)",
                    g.index,
                    human_bytes(dev_size)
                ));
            }
            let mems: Vec<(HostMemory, usize)> = if pageable.is_some() {
                vec![(HostMemory::Pinned, 0), (HostMemory::Pageable, 1)]
            } else {
                vec![(HostMemory::Pinned, 0)]
            };
            let steps = (sizes.len() * mems.len() * 2).max(1);
            let mut step = 0;
            for &(mem, hi) in &mems {
                let host: &mut Host = if hi == 0 {
                    &mut pinned
                } else {
                    pageable.as_mut().ok_or(Fail("no pageable buffer".into()))?
                };
                for dir in [Direction::H2d, Direction::D2h] {
                    for &size in &sizes {
                        step += 1;
                        progress(
                            GpuGroup::Pcie,
                            (gi as f64 + step as f64 / steps as f64) / n as f64,
                            format!(
                                "{} {} {} on GPU {}",
                                dir.label(),
                                mem.label(),
                                human_bytes(size),
                                g.index
                            ),
                        );
                        let copies = (p.batch_bytes / size).clamp(1, 1000) as u32;
                        let hp = host.ptr();
                        let once = |k: u32| -> R<()> {
                            for _ in 0..k {
                                match dir {
                                    Direction::H2d => cu::htod_async(dev.ptr, hp, size, &s)?,
                                    Direction::D2h => cu::dtoh_async(hp, dev.ptr, size, &s)?,
                                }
                            }
                            Ok(())
                        };
                        // Warm-up: first-touch costs, DMA engine and staging buffers.
                        once(copies.min(4))?;
                        s.sync()?;
                        let mut rates = Vec::new();
                        for _ in 0..p.batches.max(1) {
                            let ms = cu::time_on(g, &s, || once(copies))?;
                            rates.push(gbps(size as f64 * copies as f64, ms));
                        }
                        points.push(CopyPoint {
                            direction: dir,
                            host_memory: mem,
                            size_bytes: size,
                            gbps: median(&rates).unwrap_or(0.0),
                            repeats: p.batches * copies,
                        });
                    }
                    // Check the data once per direction and memory kind, at the largest size.
                    if let Some(&size) = sizes.last() {
                        let v = match dir {
                            Direction::H2d => {
                                // The last copies carried the host pattern to the device.
                                s.sync()?;
                                let bad = cu::check_pattern_dev(
                                    g,
                                    &ctx.kernels[gi],
                                    &s,
                                    dev.ptr,
                                    size,
                                    SEED_H,
                                )?;
                                (bad, "device")
                            }
                            Direction::D2h => {
                                // A fresh pattern on the device, so a copy that did nothing
                                // cannot pass.
                                cu::write_pattern_dev(
                                    g,
                                    &ctx.kernels[gi],
                                    &s,
                                    dev.ptr,
                                    size,
                                    SEED_D,
                                )?;
                                cu::dtoh_async(host.ptr(), dev.ptr, size, &s)?;
                                s.sync()?;
                                let bytes = &mut host.bytes()[..size as usize];
                                let bad = fill::check_pattern(bytes, SEED_D, 61);
                                // Back to the host pattern the next GPU's check expects.
                                fill::fill_pattern(bytes, SEED_H);
                                (bad, "host")
                            }
                        };
                        verify.push(Verify {
                            what: format!(
                                "{} {} {}: pattern compared on the {}",
                                dir.label(),
                                mem.label(),
                                human_bytes(size),
                                v.1
                            ),
                            ok: v.0 == 0,
                            detail: (v.0 > 0).then(|| format!("{} words differ", v.0)),
                        });
                    }
                }
            }
            drop(dev);
            let (bidirectional, sm_copy, latency) = if p.host_extras {
                let size = EXTRAS_SIZE.min(host_size);
                progress(
                    GpuGroup::Pcie,
                    (gi as f64 + 0.97) / n as f64,
                    format!("both directions, SM copies and latency on GPU {}", g.index),
                );
                match ExtraBufs::new(g, &ctx.kernels[gi], size) {
                    Ok(mut x) => (
                        reading(x.bidirectional(g, &ctx.kernels[gi], p.batches, &mut verify)),
                        reading(x.sm_copy(g, &ctx.kernels[gi], p.batches, &mut verify)),
                        reading(latency(g, &ctx.kernels[gi], &mut verify)),
                    ),
                    Err(e) => (
                        Reading::Unavailable(e.0.clone()),
                        Reading::Unavailable(e.0.clone()),
                        Reading::Unavailable(e.0),
                    ),
                }
            } else {
                let why = "quick audit: run with --full (or gpuaudit bench pcie)";
                (
                    Reading::unavailable(why),
                    Reading::unavailable(why),
                    Reading::unavailable(why),
                )
            };
            Ok(PcieGpu {
                points,
                link_under_load: Reading::unavailable("not sampled (NVML unavailable)"),
                verify,
                bidirectional,
                sm_copy,
                latency,
            })
        })();
        per_gpu.push(OnGpu::new(
            g.index,
            match r {
                Ok(v) => Reading::Value(v),
                Err(e) => Reading::Unavailable(e.0),
            },
        ));
    }
    for u in &ctx.unavailable {
        per_gpu.push(OnGpu::new(u.gpu, Reading::unavailable(u.reason.clone())));
    }
    drop(pinned);
    drop(pageable);

    let all_at_once = match p.all_at_once_size {
        Some(size) if ctx.gpus.len() >= 2 => match all_at_once(ctx, p, size) {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(e.0),
        },
        _ => Reading::unavailable("one GPU: nothing to run at once"),
    };
    Ok(PcieBandwidth {
        per_gpu,
        all_at_once,
    })
}

/// Bytes of each buffer of the host extras (nvbandwidth copies 512 MiB; 256 MiB takes ~5 ms
/// a direction at gen5 x16, long beside the microseconds of a start).
const EXTRAS_SIZE: u64 = 256 << 20;

/// The buffers of the bidirectional and SM copies: a host source and a host destination
/// (pinned, mapped so that kernels reach them), a device destination and a device source.
struct ExtraBufs {
    host_src: PinnedBuf,
    host_dst: PinnedBuf,
    dev_dst: DevBuf,
    dev_src: DevBuf,
    size: u64,
}

impl ExtraBufs {
    fn new(g: &cu::Gpu, k: &cu::Kernels, size: u64) -> R<ExtraBufs> {
        let (free, _) = g.mem_info()?;
        if free / 2 < 2 * size {
            return Err(Fail(format!(
                "not enough free device memory for two {} buffers",
                human_bytes(size)
            )));
        }
        let mut host_src = PinnedBuf::new_mapped(size)?;
        let host_dst = PinnedBuf::new_mapped(size)?;
        fill::fill_pattern(host_src.as_mut_slice(), SEED_H);
        let dev_dst = DevBuf::new(g, size)?;
        let dev_src = DevBuf::new(g, size)?;
        let s = Stream::new(g)?;
        cu::write_pattern_dev(g, k, &s, dev_src.ptr, size, SEED_D)?;
        s.sync()?;
        Ok(ExtraBufs {
            host_src,
            host_dst,
            dev_dst,
            dev_src,
            size,
        })
    }

    /// Clears both destinations (so that a copy that did nothing cannot pass).
    fn clear(&mut self, s: &Stream) -> R<()> {
        self.host_dst.as_mut_slice().fill(0);
        cu::memset_d32_async(self.dev_dst.ptr, 0, self.size / 4, s)?;
        s.sync()
    }

    /// Checks both destinations: the device one holds the host pattern, the host one the
    /// device pattern.
    fn check(
        &mut self,
        g: &cu::Gpu,
        k: &cu::Kernels,
        s: &Stream,
        what: &str,
        verify: &mut Vec<Verify>,
    ) -> R<bool> {
        let on_dev = cu::check_pattern_dev(g, k, s, self.dev_dst.ptr, self.size, SEED_H)?;
        let on_host = fill::check_pattern(self.host_dst.as_mut_slice(), SEED_D, 61);
        let ok = on_dev == 0 && on_host == 0;
        verify.push(Verify {
            what: format!(
                "{what} {}: h2d pattern compared on the device, d2h on the host",
                human_bytes(self.size)
            ),
            ok,
            detail: (!ok)
                .then(|| format!("{on_dev} words differ on the device, {on_host} on the host")),
        });
        Ok(ok)
    }

    /// Host to device and device to host at once, each on its own stream and timed with its
    /// own events (copy engines, as nvbandwidth's host_to_device_bidirectional_memcpy_ce).
    fn bidirectional(
        &mut self,
        g: &cu::Gpu,
        k: &cu::Kernels,
        batches: u32,
        verify: &mut Vec<Verify>,
    ) -> R<BidirectionalCopy> {
        let (up, down) = (Stream::new(g)?, Stream::new(g)?);
        let events = [
            Event::new(g)?,
            Event::new(g)?,
            Event::new(g)?,
            Event::new(g)?,
        ];
        self.clear(&up)?;
        let reps = batches.max(3);
        let (hs, hd) = (self.host_src.ptr(), self.host_dst.ptr());
        let enqueue = |k: u32| -> R<()> {
            for _ in 0..k {
                cu::htod_async(self.dev_dst.ptr, hs, self.size, &up)?;
                cu::dtoh_async(hd, self.dev_src.ptr, self.size, &down)?;
            }
            Ok(())
        };
        enqueue(1)?;
        up.sync()?;
        down.sync()?;
        events[0].record(&up)?;
        events[2].record(&down)?;
        enqueue(reps)?;
        events[1].record(&up)?;
        events[3].record(&down)?;
        up.sync()?;
        down.sync()?;
        let bytes = self.size as f64 * reps as f64;
        let h2d = gbps(bytes, events[0].ms_to(&events[1])?);
        let d2h = gbps(bytes, events[2].ms_to(&events[3])?);
        if !self.check(g, k, &up, "both directions at once", verify)? {
            return Err(Fail(
                "the copies made both ways at once did not verify".into(),
            ));
        }
        Ok(BidirectionalCopy {
            size_bytes: self.size,
            h2d_gbps: h2d,
            d2h_gbps: d2h,
            total_gbps: h2d + d2h,
        })
    }

    /// gpuaudit's copy kernel between device memory and mapped pinned host memory: the SMs
    /// move the data over the link (nvbandwidth's host_to_device_memcpy_sm and
    /// device_to_host_memcpy_sm), median of the launches.
    fn sm_copy(
        &mut self,
        g: &cu::Gpu,
        k: &cu::Kernels,
        batches: u32,
        verify: &mut Vec<Verify>,
    ) -> R<SmHostCopy> {
        let s = Stream::new(g)?;
        self.clear(&s)?;
        let (blocks, threads) = (g.sm_count * SM_COPY_BLOCKS_PER_SM, SM_COPY_THREADS);
        let n4 = self.size / 16;
        // The mapped addresses are those of the current context: this GPU's.
        g.bind()?;
        let host_src = self.host_src.device_ptr()?;
        let host_dst = self.host_dst.device_ptr()?;
        let rate = |src: u64, dst: u64| -> R<f64> {
            let once = || launch(k.copy_v4, blocks, threads, &s, &mut kargs![src, dst, n4]);
            once()?;
            s.sync()?;
            let mut v = Vec::new();
            for _ in 0..batches.max(3) {
                v.push(gbps(self.size as f64, cu::time_on(g, &s, once)?));
            }
            median(&v).ok_or(Fail("no timing".into()))
        };
        let h2d = rate(host_src, self.dev_dst.ptr)?;
        let d2h = rate(self.dev_src.ptr, host_dst)?;
        if !self.check(g, k, &s, "SM copies through mapped host memory", verify)? {
            return Err(Fail("the SM copies did not verify".into()));
        }
        Ok(SmHostCopy {
            size_bytes: self.size,
            h2d_gbps: h2d,
            d2h_gbps: d2h,
            kernel: format!("copy {blocks}x{threads}"),
        })
    }
}

/// The SM copy's launch shape: the quick audit's device copy shape (4 blocks of 512 a SM).
const SM_COPY_BLOCKS_PER_SM: u32 = 4;
const SM_COPY_THREADS: u32 = 512;

/// Dependent loads per timed launch of the chase, and the timed launches (after one warm-up).
const CHASE_STEPS: u64 = 2000;
const CHASE_LAUNCHES: u64 = 5;
/// Nodes of the chase are this many u64 apart (512 bytes: each load its own cache line).
const CHASE_NODE_WORDS: u64 = 64;
/// Each node links to the one this many nodes on (coprime with the node count: one cycle).
const CHASE_HOP: u64 = 7;
/// Small synchronous copies timed for the round trip (after 10 warm-ups).
const ROUND_TRIPS: u32 = 100;

/// The chase's nodes: enough for every launch to follow links no launch before it did (a
/// link that was followed before may come from a cache, not over the link).
fn chase_nodes() -> u64 {
    let n = CHASE_STEPS * (CHASE_LAUNCHES + 1) + 1;
    // The hop must be coprime with the count for the links to form one cycle.
    if n % CHASE_HOP == 0 {
        n + 1
    } else {
        n
    }
}

/// The chain: element `node * CHASE_NODE_WORDS` holds the element index of the node
/// `CHASE_HOP` nodes on.
pub fn chase_chain(nodes: u64) -> Vec<u64> {
    let mut v = vec![0u64; (nodes * CHASE_NODE_WORDS) as usize];
    for i in 0..nodes {
        v[(i * CHASE_NODE_WORDS) as usize] = ((i + CHASE_HOP) % nodes) * CHASE_NODE_WORDS;
    }
    v
}

/// The element a chase of `steps` links from `start_node` must end on.
pub fn chase_end(start_node: u64, steps: u64, nodes: u64) -> u64 {
    ((start_node + (steps % nodes) * CHASE_HOP) % nodes) * CHASE_NODE_WORDS
}

/// Host <-> device latency: a pointer chase from one GPU thread through mapped pinned host
/// memory, and a 4-byte synchronous copy there and back.
fn latency(g: &cu::Gpu, k: &cu::Kernels, verify: &mut Vec<Verify>) -> R<HostLatency> {
    let nodes = chase_nodes();
    let chain = chase_chain(nodes);
    g.bind()?;
    let mut host = PinnedBuf::new_mapped(chain.len() as u64 * 8)?;
    for (dst, w) in host.as_mut_slice().chunks_exact_mut(8).zip(&chain) {
        dst.copy_from_slice(&w.to_le_bytes());
    }
    g.bind()?;
    let p = host.device_ptr()?;
    let out = DevBuf::new(g, 8)?;
    let s = Stream::new(g)?;
    let mut per_load = Vec::new();
    let mut wrong = Vec::new();
    for launch_no in 0..=CHASE_LAUNCHES {
        let start_node = (launch_no * CHASE_STEPS * CHASE_HOP) % nodes;
        let start = start_node * CHASE_NODE_WORDS;
        let ms = cu::time_on(g, &s, || {
            launch(
                k.chase_u64,
                1,
                1,
                &s,
                &mut kargs![p, start, CHASE_STEPS, out.ptr],
            )
        })?;
        let got = cu::dtoh(g, out.ptr, 8)?;
        let got = u64::from_le_bytes(got[..8].try_into().map_err(|_| Fail("short read".into()))?);
        let want = chase_end(start_node, CHASE_STEPS, nodes);
        if got != want {
            wrong.push(format!(
                "launch {launch_no}: ended on {got}, expected {want}"
            ));
        }
        // The first launch is the warm-up (module load, page tables).
        if launch_no > 0 {
            per_load.push(ms * 1e3 / CHASE_STEPS as f64);
        }
    }
    verify.push(Verify {
        what: format!(
            "host latency chase: end of each of the {} chains of {CHASE_STEPS} links",
            CHASE_LAUNCHES + 1
        ),
        ok: wrong.is_empty(),
        detail: (!wrong.is_empty()).then(|| wrong.join("; ")),
    });
    if !wrong.is_empty() {
        return Err(Fail("the latency chase ended on the wrong element".into()));
    }

    // The round trip: 4 bytes up, 4 bytes back, each copy synchronous.
    let mut small = PinnedBuf::new(8)?;
    let dev = DevBuf::new(g, 4)?;
    let mut trips = Vec::new();
    let mut last_ok = false;
    for t in 0..(ROUND_TRIPS + 10) {
        let word = 0x5EED_0000u32 ^ t;
        small.as_mut_slice()[..4].copy_from_slice(&word.to_le_bytes());
        let base = small.ptr();
        // SAFETY: the buffer is 8 bytes long; the second word is its back half.
        let back = unsafe { (base as *mut u8).add(4) } as *mut c_void;
        let t0 = std::time::Instant::now();
        cu::htod_async(dev.ptr, base, 4, &s)?;
        s.sync()?;
        cu::dtoh_async(back, dev.ptr, 4, &s)?;
        s.sync()?;
        let us = t0.elapsed().as_secs_f64() * 1e6;
        let b = &small.as_mut_slice()[4..8];
        last_ok = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == word;
        if !last_ok {
            break;
        }
        if t >= 10 {
            trips.push(us);
        }
    }
    verify.push(Verify {
        what: "host round trip: each 4-byte word came back".into(),
        ok: last_ok,
        detail: (!last_ok).then(|| "a word came back changed".to_string()),
    });
    if !last_ok {
        return Err(Fail("the 4-byte round trip did not verify".into()));
    }
    Ok(HostLatency {
        sm_chase_us: median(&per_load).ok_or(Fail("no chase timing".into()))?,
        chase_steps: CHASE_STEPS,
        memcpy_round_trip_us: median(&trips).ok_or(Fail("no round trip timing".into()))?,
        round_trips: ROUND_TRIPS,
    })
}

/// Pinned copies on every GPU at the same time, each GPU with its own host buffer.
fn all_at_once(ctx: &Ctx, p: &PcieParams, size: u64) -> R<Vec<ConcurrentCopy>> {
    let n = ctx.gpus.len() as u64;
    let size = size.min((host_budget() / n) & !0xFFFF);
    if size < (16 << 20) {
        return Err(Fail(format!(
            "not enough host memory for {n} pinned buffers"
        )));
    }
    progress(GpuGroup::Pcie, 0.95, format!("{} GPUs at once", n));
    let mut bufs = Vec::new();
    for g in &ctx.gpus {
        let (free, _) = g.mem_info()?;
        if free / 2 < size {
            return Err(Fail(format!("GPU {}: not enough free memory", g.index)));
        }
        bufs.push((
            PinnedBuf::new(size)?,
            DevBuf::new(g, size)?,
            Stream::new(g)?,
            Event::new(g)?,
            Event::new(g)?,
        ));
    }
    let reps = p.batches.max(3);
    let mut out = Vec::new();
    for dir in [Direction::H2d, Direction::D2h] {
        let enqueue = |k: u32, timed: bool| -> R<()> {
            for (g, (h, d, s, a, b)) in ctx.gpus.iter().zip(&bufs) {
                g.bind()?;
                if timed {
                    a.record(s)?;
                }
                for _ in 0..k {
                    match dir {
                        Direction::H2d => cu::htod_async(d.ptr, h.ptr(), size, s)?,
                        Direction::D2h => cu::dtoh_async(h.ptr(), d.ptr, size, s)?,
                    }
                }
                if timed {
                    b.record(s)?;
                }
            }
            for (g, (_, _, s, _, _)) in ctx.gpus.iter().zip(&bufs) {
                g.bind()?;
                s.sync()?;
            }
            Ok(())
        };
        enqueue(1, false)?;
        enqueue(reps, true)?;
        let mut per_gpu = Vec::new();
        for (g, (_, _, _, a, b)) in ctx.gpus.iter().zip(&bufs) {
            g.bind()?;
            per_gpu.push(GpuValue {
                gpu: g.index,
                value: gbps(size as f64 * reps as f64, a.ms_to(b)?),
            });
        }
        let total_gbps = per_gpu.iter().map(|v| v.value).sum();
        out.push(ConcurrentCopy {
            direction: dir,
            size_bytes: size,
            per_gpu,
            total_gbps,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chase_is_one_cycle_and_each_launch_follows_new_links() {
        let nodes = chase_nodes();
        assert_ne!(nodes % CHASE_HOP, 0);
        let chain = chase_chain(nodes);
        // Follow the chain as the kernel does, from each launch's start.
        let mut seen = std::collections::HashSet::new();
        for launch_no in 0..=CHASE_LAUNCHES {
            let start_node = (launch_no * CHASE_STEPS * CHASE_HOP) % nodes;
            let mut i = start_node * CHASE_NODE_WORDS;
            for _ in 0..CHASE_STEPS {
                assert!(seen.insert(i), "element {i} loaded twice");
                i = chain[i as usize];
            }
            assert_eq!(i, chase_end(start_node, CHASE_STEPS, nodes));
        }
        // Every node is a multiple of the stride: each load its own 512-byte line.
        assert!(seen.iter().all(|e| e % CHASE_NODE_WORDS == 0));
    }

    #[test]
    fn chase_end_wraps_around() {
        assert_eq!(chase_end(0, 1, 10), CHASE_HOP * CHASE_NODE_WORDS);
        assert_eq!(
            chase_end(5, 1, 10),
            ((5 + CHASE_HOP) % 10) * CHASE_NODE_WORDS
        );
        assert_eq!(chase_end(3, 10, 10), 3 * CHASE_NODE_WORDS);
    }
}
