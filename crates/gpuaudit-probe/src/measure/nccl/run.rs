//! All-reduce across the GPUs with NCCL, one process driving every GPU (ncclCommInitAll and
//! group calls), float32 sums out of place, timed with events on every GPU; nccl-tests'
//! definitions: algbw = size / time, busbw = algbw × 2(n−1)/n.

use super::plan::NcclParams;
use crate::measure::child::cu::{
    self, helper_grid, human_bytes, kargs, launch, DevBuf, Event, Stream, R,
};
use crate::measure::child::{gbps, guarded, progress, Ctx, Fail};
use crate::measure::GpuGroup;
use cudarc::nccl::sys as nc;
use gpuaudit_core::facts::{allreduce_busbw, AllReduce, AllReducePoint, Verify};
use std::ffi::{c_void, CStr};

pub(in crate::measure) fn nck(r: nc::ncclResult_t, call: &str) -> R<()> {
    let code = r as u32;
    if code == 0 {
        return Ok(());
    }
    // SAFETY: returns a pointer to a static string (or null).
    let p = unsafe { nc::ncclGetErrorString(r) };
    let text = if p.is_null() {
        format!("NCCL error {code}")
    } else {
        // SAFETY: a NUL-terminated static string from NCCL.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    Err(Fail(format!("{call}: {text} ({code})")))
}

/// The communicators, destroyed on drop.
pub(in crate::measure) struct Comms(Vec<nc::ncclComm_t>);

impl Comms {
    /// One communicator per CUDA ordinal, all in this process (ncclCommInitAll).
    pub(in crate::measure) fn init_all(ordinals: &[i32]) -> R<Comms> {
        let mut comms = Comms(vec![std::ptr::null_mut(); ordinals.len()]);
        // SAFETY: `comms` has room for one communicator per ordinal.
        nck(
            unsafe {
                nc::ncclCommInitAll(
                    comms.0.as_mut_ptr(),
                    ordinals.len() as i32,
                    ordinals.as_ptr(),
                )
            },
            "ncclCommInitAll",
        )?;
        Ok(comms)
    }
}

/// Refuses to run NCCL unless NVLink multicast (NVLS) is off: it must never be used (the
/// parent always sets NCCL_NVLS_ENABLE=0).
pub(in crate::measure) fn nvls_off() -> R<()> {
    if std::env::var("NCCL_NVLS_ENABLE").as_deref() != Ok("0") {
        return Err(Fail(
            "NCCL_NVLS_ENABLE is not 0 in the measuring process: refusing to run NCCL".into(),
        ));
    }
    Ok(())
}

/// One float32 sum all-reduce of `count` elements over every rank, out of place
/// (`(send, recv, stream)` per rank, in communicator order), as one NCCL group.
pub(in crate::measure) fn all_reduce_f32(
    comms: &Comms,
    ranks: &[(
        cudarc::driver::sys::CUdeviceptr,
        cudarc::driver::sys::CUdeviceptr,
        &Stream,
    )],
    count: u64,
) -> R<()> {
    // SAFETY: group calls on every rank's communicator, buffers and stream.
    nck(unsafe { nc::ncclGroupStart() }, "ncclGroupStart")?;
    let mut res = Ok(());
    for (r, (send, recv, stream)) in ranks.iter().enumerate() {
        let Some(comm) = comms.0.get(r) else {
            res = Err(Fail("more ranks than communicators".into()));
            break;
        };
        // SAFETY: send/recv hold at least `count` floats on rank r's GPU.
        let e = unsafe {
            nc::ncclAllReduce(
                *send as *const c_void,
                *recv as *mut c_void,
                count as usize,
                nc::ncclDataType_t::ncclFloat32,
                nc::ncclRedOp_t::ncclSum,
                *comm,
                stream.raw as nc::cudaStream_t,
            )
        };
        if res.is_ok() {
            res = nck(e, "ncclAllReduce");
        }
    }
    // The group must be closed even when a call failed.
    // SAFETY: closes the group opened above.
    let end = nck(unsafe { nc::ncclGroupEnd() }, "ncclGroupEnd");
    res.and(end)
}

impl Drop for Comms {
    fn drop(&mut self) {
        for c in &self.0 {
            if !c.is_null() {
                // SAFETY: each communicator was created by ncclCommInitAll, destroyed once.
                unsafe {
                    let _ = nc::ncclCommDestroy(*c);
                }
            }
        }
    }
}

pub(in crate::measure) fn version() -> Option<String> {
    let mut v = 0i32;
    // SAFETY: writes one int.
    let r = unsafe { nc::ncclGetVersion(&mut v) };
    if r as u32 != 0 || v <= 0 {
        return None;
    }
    // NCCL >= 2.9 encodes major*10000 + minor*100 + patch; older, major*1000 + minor*100 + patch.
    Some(if v >= 10000 {
        format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
    } else {
        format!("{}.{}.{}", v / 1000, (v / 100) % 10, v % 100)
    })
}

pub fn run(ctx: &Ctx, p: &NcclParams) -> R<AllReduce> {
    nvls_off()?;
    let gpus = &ctx.gpus;
    let n = gpus.len();
    if n < 2 {
        return Err(Fail("fewer than two GPUs could be opened".into()));
    }
    let nccl_version = guarded("loading libnccl", || Ok(version()))?;
    let mut max = p.sizes.iter().copied().max().unwrap_or(1 << 20);
    for g in gpus {
        let (free, _) = g.mem_info()?;
        max = max.min((free / 4) & !0xFFFF);
    }
    let sizes: Vec<u64> = p.sizes.iter().copied().filter(|s| *s <= max).collect();
    if sizes.is_empty() {
        return Err(Fail("not enough free device memory".into()));
    }
    progress(
        GpuGroup::Nccl,
        0.02,
        format!("ncclCommInitAll over {n} GPUs"),
    );
    let devs: Vec<i32> = gpus.iter().map(|g| g.ordinal as i32).collect();
    let comms = Comms::init_all(&devs)?;

    struct Rank {
        send: DevBuf,
        recv: DevBuf,
        stream: Stream,
        start: Event,
        end: Event,
    }
    let mut ranks = Vec::new();
    for (r, g) in gpus.iter().enumerate() {
        let rank = Rank {
            send: DevBuf::new(g, max)?,
            recv: DevBuf::new(g, max)?,
            stream: Stream::new(g)?,
            start: Event::new(g)?,
            end: Event::new(g)?,
        };
        let count = max / 4;
        let value = (r + 1) as f32;
        launch(
            ctx.kernels[r].fill_f32_const,
            helper_grid(g),
            256,
            &rank.stream,
            &mut kargs![rank.send.ptr, count, value],
        )?;
        rank.stream.sync()?;
        ranks.push(rank);
    }

    let all_reduce = |count: u64| -> R<()> {
        let rs: Vec<_> = ranks
            .iter()
            .map(|r| (r.send.ptr, r.recv.ptr, &r.stream))
            .collect();
        all_reduce_f32(&comms, &rs, count)
    };
    let sync_all = || -> R<()> {
        for (g, rank) in gpus.iter().zip(&ranks) {
            g.bind()?;
            rank.stream.sync()?;
        }
        Ok(())
    };

    let mut points = Vec::new();
    for (si, &size) in sizes.iter().enumerate() {
        progress(
            GpuGroup::Nccl,
            0.1 + 0.9 * si as f64 / sizes.len() as f64,
            format!("all-reduce {} over {n} GPUs", human_bytes(size)),
        );
        let count = (size / 4).max(1);
        for _ in 0..p.warmup {
            all_reduce(count)?;
        }
        sync_all()?;
        let iters = p.iterations(size);
        for (g, rank) in gpus.iter().zip(&ranks) {
            g.bind()?;
            rank.start.record(&rank.stream)?;
        }
        for _ in 0..iters {
            all_reduce(count)?;
        }
        for (g, rank) in gpus.iter().zip(&ranks) {
            g.bind()?;
            rank.end.record(&rank.stream)?;
        }
        sync_all()?;
        let mut ms = 0f64;
        for (g, rank) in gpus.iter().zip(&ranks) {
            g.bind()?;
            ms = ms.max(rank.start.ms_to(&rank.end)?);
        }
        let per = ms / iters as f64;
        let algbw = gbps((count * 4) as f64, per);
        points.push(AllReducePoint {
            size_bytes: count * 4,
            time_us: per * 1e3,
            algbw_gbps: algbw,
            busbw_gbps: allreduce_busbw(algbw, n as u32),
            iterations: iters,
        });
    }

    // Every element of every output must be 1 + 2 + ... + n, exactly.
    let last = sizes.last().copied().unwrap_or(8);
    let want = (n * (n + 1) / 2) as f32;
    let mut verify = Vec::new();
    for (r, (g, rank)) in gpus.iter().zip(&ranks).enumerate() {
        g.bind()?;
        let counter = DevBuf::new(g, 8)?;
        cu::memset_d32_async(counter.ptr, 0, 2, &rank.stream)?;
        let count = (last / 4).max(1);
        launch(
            ctx.kernels[r].check_f32_const,
            helper_grid(g),
            256,
            &rank.stream,
            &mut kargs![rank.recv.ptr, count, want, counter.ptr],
        )?;
        rank.stream.sync()?;
        let v = cu::dtoh(g, counter.ptr, 8)?;
        let bad = u64::from_le_bytes(v[..8].try_into().map_err(|_| Fail("short read".into()))?);
        verify.push(Verify {
            what: format!(
                "GPU {}: every element of the {} sum equals {want}",
                g.index,
                human_bytes(last)
            ),
            ok: bad == 0,
            detail: (bad > 0).then(|| format!("{bad} elements differ")),
        });
    }
    drop(ranks);
    drop(comms);
    Ok(AllReduce {
        gpus: gpus.iter().map(|g| g.index).collect(),
        nccl_version,
        points,
        verify,
    })
}
