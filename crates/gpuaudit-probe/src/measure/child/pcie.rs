//! Host <-> device copies: pinned and pageable, both directions, over a size sweep, per GPU;
//! then pinned copies on every GPU at once.

use super::cu::{self, human_bytes, DevBuf, Event, PinnedBuf, Stream, R};
use super::{gbps, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::plan::{Group, PcieParams};
use gpuaudit_core::facts::{
    median, ConcurrentCopy, CopyPoint, Direction, GpuValue, HostMemory, OnGpu, PcieBandwidth,
    PcieGpu, Verify,
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
                            Group::Pcie,
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
            Ok(PcieGpu {
                points,
                link_under_load: Reading::unavailable("not sampled (NVML unavailable)"),
                verify,
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

/// Pinned copies on every GPU at the same time, each GPU with its own host buffer.
fn all_at_once(ctx: &Ctx, p: &PcieParams, size: u64) -> R<Vec<ConcurrentCopy>> {
    let n = ctx.gpus.len() as u64;
    let size = size.min((host_budget() / n) & !0xFFFF);
    if size < (16 << 20) {
        return Err(Fail(format!(
            "not enough host memory for {n} pinned buffers"
        )));
    }
    progress(Group::Pcie, 0.95, format!("{} GPUs at once", n));
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
