//! Device memory bandwidth: gpuaudit's own read, write, copy and triad kernels over buffers
//! several times the L2, each launch shape of the plan tried, plus the driver's memcpy.
//! Copies count bytes read + written (as PyTorch's and STREAM's figures do).

use super::cu::{self, helper_grid, human_bytes, kargs, launch, DevBuf, Gpu, Kernels, Stream, R};
use super::{gbps, guarded, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::plan::{Group, LaunchShape, MemoryParams};
use gpuaudit_core::facts::{median, KernelPoint, MemoryBandwidth, OnGpu, Verify};
use gpuaudit_core::Reading;

const SEED_A: u32 = 0xA11C_E5ED;
const SEED_W: u32 = 0x0B0E_5EED;
const SEED_B: u64 = 11;
const SEED_C: u64 = 12;
const TRIAD_S: f32 = 1.5;

pub fn run(ctx: &Ctx, p: &MemoryParams) -> R<Vec<OnGpu<MemoryBandwidth>>> {
    let n = ctx.gpus.len();
    let reading = |r: R<MemoryBandwidth>| match r {
        Ok(v) => Reading::Value(v),
        Err(e) => Reading::Unavailable(e.0),
    };
    let per_gpu: Vec<Reading<MemoryBandwidth>> = if p.gpus_at_once && n > 1 {
        log(format!("device memory measured on {n} GPUs at once"));
        std::thread::scope(|s| {
            let handles: Vec<_> = ctx
                .gpus
                .iter()
                .zip(&ctx.kernels)
                .enumerate()
                .map(|(gi, (g, k))| {
                    s.spawn(move || {
                        // The GPUs run side by side: the first one's progress stands for all.
                        let r = guarded(&format!("memory on GPU {}", g.index), || {
                            one(ctx, g, k, p, |f, msg| {
                                if gi == 0 {
                                    progress(Group::Memory, f, format!("{msg} (and the others)"))
                                }
                            })
                        });
                        reading(r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Reading::unavailable("memory thread panicked"))
                })
                .collect()
        })
    } else {
        ctx.gpus
            .iter()
            .enumerate()
            .map(|(gi, g)| {
                reading(one(ctx, g, &ctx.kernels[gi], p, |f, msg| {
                    progress(Group::Memory, (gi as f64 + f) / n as f64, msg)
                }))
            })
            .collect()
    };
    Ok(ctx.per_gpu(per_gpu))
}

/// Median milliseconds of `repeats` single launches, after two warm-up launches.
fn time_median(g: &Gpu, s: &Stream, repeats: u32, mut f: impl FnMut() -> R<()>) -> R<f64> {
    f()?;
    f()?;
    s.sync()?;
    let mut v = Vec::new();
    for _ in 0..repeats.max(1) {
        v.push(cu::time_on(g, s, &mut f)?);
    }
    median(&v).ok_or(Fail("no timing".into()))
}

fn one(
    ctx: &Ctx,
    g: &Gpu,
    k: &Kernels,
    p: &MemoryParams,
    progress: impl Fn(f64, String),
) -> R<MemoryBandwidth> {
    let (free, _) = g.mem_info()?;
    let nbuf: u64 = if p.all_kernels { 3 } else { 2 };
    // Leave a margin: a quarter of free memory stays untouched.
    let buf = p.max_buffer_bytes.min(free * 3 / 4 / nbuf) & !((16 << 20) - 1);
    if buf < (64 << 20) {
        return Err(Fail(format!(
            "only {} of device memory free",
            human_bytes(free)
        )));
    }
    let l2 = ctx.device(g.index).map_or(0, |d| d.l2_bytes);
    let note = (l2 > 0 && buf < 8 * l2).then(|| {
        format!(
            "buffers only {:.1}x the L2 cache ({}): figures may be inflated by cache hits",
            buf as f64 / l2 as f64,
            human_bytes(l2)
        )
    });
    let a = DevBuf::new(g, buf)?;
    let b = DevBuf::new(g, buf)?;
    let c = if p.all_kernels {
        Some(DevBuf::new(g, buf)?)
    } else {
        None
    };
    let s = Stream::new(g)?;
    let n4 = buf / 16;
    cu::write_pattern_dev(g, k, &s, a.ptr, buf, SEED_A)?;
    s.sync()?;

    let mut sweep = Vec::new();
    let mut verify = Vec::new();
    let grid = |sh: &LaunchShape| g.sm_count.saturating_mul(sh.blocks_per_sm).max(1);
    let total_steps = (p.shapes.len() * if p.all_kernels { 6 } else { 2 } + 1) as f64;
    let mut step = 0.0;
    let mut tick = |what: &str| {
        step += 1.0;
        progress(
            step / total_steps,
            format!("{what} on GPU {} ({} buffers)", g.index, human_bytes(buf)),
        );
    };

    // Copy kernel(s).
    let mut variants = vec![("copy", k.copy_v4)];
    if p.both_copy_variants {
        variants.push(("copy_cs", k.copy_v4_cs));
        variants.push(("copy_tile8", k.copy_tile8));
    }
    let mut copy_best = 0f64;
    for (name, f) in &variants {
        for sh in &p.shapes {
            tick(name);
            let ms = time_median(g, &s, p.repeats, || {
                launch(*f, grid(sh), sh.threads, &s, &mut kargs![a.ptr, b.ptr, n4])
            })?;
            let v = gbps(2.0 * buf as f64, ms);
            copy_best = copy_best.max(v);
            sweep.push(KernelPoint {
                kernel: name.to_string(),
                blocks: grid(sh),
                threads: sh.threads,
                gbps: v,
            });
        }
    }
    s.sync()?;
    let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_A)?;
    verify.push(check(
        "copy kernel: destination compared with the pattern",
        bad,
    ));

    // The driver's copy (what cudaMemcpy and PyTorch's tensor.copy_ use).
    tick("memcpy");
    let ms = time_median(g, &s, p.repeats, || cu::dtod_async(b.ptr, a.ptr, buf, &s))?;
    let memcpy_gbps = gbps(2.0 * buf as f64, ms);
    cu::memset_d32_async(b.ptr, 0, buf / 4, &s)?;
    cu::dtod_async(b.ptr, a.ptr, buf, &s)?;
    s.sync()?;
    let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_A)?;
    verify.push(check(
        "cuMemcpyDtoD: destination compared with the pattern",
        bad,
    ));

    let (mut read_gbps, mut write_gbps, mut triad_gbps) = (None, None, None);
    if let Some(c) = &c {
        // Read: one XOR per block written out; the host checks their XOR.
        let max_grid = p.shapes.iter().map(grid).max().unwrap_or(1);
        let xors = DevBuf::new(g, max_grid as u64 * 4)?;
        let mut best = 0f64;
        for sh in &p.shapes {
            tick("read");
            cu::memset_d32_async(xors.ptr, 0, max_grid as u64, &s)?;
            let ms = time_median(g, &s, p.repeats, || {
                launch(
                    k.read_xor,
                    grid(sh),
                    sh.threads,
                    &s,
                    &mut kargs![a.ptr, n4, xors.ptr],
                )
            })?;
            s.sync()?;
            let v = gbps(buf as f64, ms);
            best = best.max(v);
            sweep.push(KernelPoint {
                kernel: "read".into(),
                blocks: grid(sh),
                threads: sh.threads,
                gbps: v,
            });
            let words = cu::dtoh(g, xors.ptr, grid(sh) as u64 * 4)?;
            let got = words.chunks_exact(4).fold(0u32, |x, w| {
                x ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]])
            });
            let want = fill::pattern_xor(buf / 4, SEED_A);
            if got != want {
                verify.push(Verify {
                    what: "read kernel: XOR of every word".into(),
                    ok: false,
                    detail: Some(format!("got {got:08x}, expected {want:08x}")),
                });
            }
        }
        if !verify.iter().any(|v| v.what.starts_with("read")) {
            verify.push(check("read kernel: XOR of every word", 0));
        }
        read_gbps = Some(best);

        // Write.
        let mut best = 0f64;
        for sh in &p.shapes {
            tick("write");
            let ms = time_median(g, &s, p.repeats, || {
                launch(
                    k.write_pattern,
                    grid(sh),
                    sh.threads,
                    &s,
                    &mut kargs![b.ptr, n4, SEED_W],
                )
            })?;
            let v = gbps(buf as f64, ms);
            best = best.max(v);
            sweep.push(KernelPoint {
                kernel: "write".into(),
                blocks: grid(sh),
                threads: sh.threads,
                gbps: v,
            });
        }
        s.sync()?;
        let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_W)?;
        verify.push(check("write kernel: buffer compared with the pattern", bad));
        write_gbps = Some(best);

        // Triad over f32: b and c random, a = b + s*c.
        let nf = buf / 4;
        let hg = helper_grid(g);
        launch(k.fill_f32, hg, 256, &s, &mut kargs![b.ptr, nf, SEED_B])?;
        launch(k.fill_f32, hg, 256, &s, &mut kargs![c.ptr, nf, SEED_C])?;
        let mut best = 0f64;
        for sh in &p.shapes {
            tick("triad");
            let ms = time_median(g, &s, p.repeats, || {
                launch(
                    k.triad_f32,
                    grid(sh),
                    sh.threads,
                    &s,
                    &mut kargs![a.ptr, b.ptr, c.ptr, TRIAD_S, n4],
                )
            })?;
            let v = gbps(3.0 * buf as f64, ms);
            best = best.max(v);
            sweep.push(KernelPoint {
                kernel: "triad".into(),
                blocks: grid(sh),
                threads: sh.threads,
                gbps: v,
            });
        }
        s.sync()?;
        verify.push(check_triad(g, a.ptr, nf)?);
        triad_gbps = Some(best);
    }
    Ok(MemoryBandwidth {
        buffer_bytes: buf,
        copy_gbps: copy_best,
        memcpy_gbps: Some(memcpy_gbps),
        read_gbps,
        write_gbps,
        triad_gbps,
        sweep,
        verify,
        note,
    })
}

fn check(what: &str, bad: u64) -> Verify {
    Verify {
        what: what.into(),
        ok: bad == 0,
        detail: (bad > 0).then(|| format!("{bad} words differ")),
    }
}

/// Samples of a = b + s*c against the host's b and c (fused or not: both roundings pass).
fn check_triad(g: &Gpu, a: u64, n: u64) -> R<Verify> {
    let mut wrong = 0;
    let mut first_bad = None;
    let samples = 64u64;
    for t in 0..samples {
        let i = if t == samples - 1 {
            n - 1
        } else {
            t * (n / samples)
        };
        let bytes = cu::dtoh(g, a + i * 4, 4)?;
        let got = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let b = f32::from_bits(fill::bits_f32(SEED_B, i));
        let c = f32::from_bits(fill::bits_f32(SEED_C, i));
        let fused = TRIAD_S.mul_add(c, b);
        let plain = b + TRIAD_S * c;
        if got != fused && got != plain {
            wrong += 1;
            first_bad.get_or_insert(format!("a[{i}] = {got}, expected {fused}"));
        }
    }
    Ok(Verify {
        what: format!("triad kernel: {samples} samples against the CPU"),
        ok: wrong == 0,
        detail: first_bad.map(|d| format!("{wrong} wrong; {d}")),
    })
}
