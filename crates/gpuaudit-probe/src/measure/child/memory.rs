//! Device memory bandwidth: gpuaudit's own read, write, copy and triad kernels over buffers
//! several times the L2, each launch shape of the plan tried, plus the driver's memcpy.
//! Copies count bytes read + written (as PyTorch's and STREAM's figures do).

use super::cu::{self, helper_grid, human_bytes, kargs, launch, DevBuf, Gpu, Kernels, Stream, R};
use super::{gbps, guarded, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::plan::{Group, LaunchShape, MemoryParams};
use gpuaudit_core::facts::{
    best_verified, median, KernelPoint, MemoryBandwidth, OnGpu, Verify, COPY_KERNELS,
};
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
    let shape = |sh: &LaunchShape| format!("{}x{}", grid(sh), sh.threads);
    let total_steps = (p.shapes.len() * if p.all_kernels { 6 } else { 2 } + 1) as f64;
    let mut step = 0.0;
    let mut tick = |what: &str| {
        step += 1.0;
        progress(
            step / total_steps,
            format!("{what} on GPU {} ({} buffers)", g.index, human_bytes(buf)),
        );
    };
    // Every launch shape's output is checked before its figure may count: the destination is
    // cleared first, so a shape that leaves part of it unwritten cannot pass on an earlier
    // shape's result (defect 12: only the last kernel's output used to be checked).
    let point = |kernel: &str, sh: &LaunchShape, gbps: f64, verified: bool| KernelPoint {
        kernel: kernel.to_string(),
        blocks: grid(sh),
        threads: sh.threads,
        gbps,
        verified,
    };

    // Copy kernel(s).
    let mut variants = vec![(COPY_KERNELS[0], k.copy_v4)];
    if p.both_copy_variants {
        variants.push((COPY_KERNELS[1], k.copy_v4_cs));
        variants.push((COPY_KERNELS[2], k.copy_tile8));
    }
    for (name, f) in &variants {
        let mut failures = Vec::new();
        for sh in &p.shapes {
            tick(name);
            cu::memset_d32_async(b.ptr, 0, buf / 4, &s)?;
            let ms = time_median(g, &s, p.repeats, || {
                launch(*f, grid(sh), sh.threads, &s, &mut kargs![a.ptr, b.ptr, n4])
            })?;
            s.sync()?;
            let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_A)?;
            if bad > 0 {
                failures.push(format!("{}: {bad} words differ", shape(sh)));
            }
            sweep.push(point(name, sh, gbps(2.0 * buf as f64, ms), bad == 0));
        }
        verify.push(kernel_verify(
            &format!("{name} kernel: destination compared with the pattern"),
            p.shapes.len(),
            &failures,
        ));
    }

    // The driver's copy (what cudaMemcpy and PyTorch's tensor.copy_ use): the timed copies
    // themselves are checked.
    tick("memcpy");
    cu::memset_d32_async(b.ptr, 0, buf / 4, &s)?;
    let ms = time_median(g, &s, p.repeats, || cu::dtod_async(b.ptr, a.ptr, buf, &s))?;
    s.sync()?;
    let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_A)?;
    let memcpy_ok = bad == 0;
    verify.push(check(
        "cuMemcpyDtoD: destination compared with the pattern",
        bad,
    ));
    let memcpy_gbps = memcpy_ok.then(|| gbps(2.0 * buf as f64, ms));

    let (mut read_gbps, mut write_gbps, mut triad_gbps) = (None, None, None);
    if let Some(c) = &c {
        // Read: one XOR per block written out; the host checks their XOR.
        let max_grid = p.shapes.iter().map(grid).max().unwrap_or(1);
        let xors = DevBuf::new(g, max_grid as u64 * 4)?;
        let want = fill::pattern_xor(buf / 4, SEED_A);
        let mut failures = Vec::new();
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
            let words = cu::dtoh(g, xors.ptr, grid(sh) as u64 * 4)?;
            let got = words.chunks_exact(4).fold(0u32, |x, w| {
                x ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]])
            });
            if got != want {
                failures.push(format!("{}: got {got:08x}, expected {want:08x}", shape(sh)));
            }
            sweep.push(point("read", sh, gbps(buf as f64, ms), got == want));
        }
        verify.push(kernel_verify(
            "read kernel: XOR of every word",
            p.shapes.len(),
            &failures,
        ));
        read_gbps = best_verified(&sweep, &["read"]);

        // Write.
        let mut failures = Vec::new();
        for sh in &p.shapes {
            tick("write");
            cu::memset_d32_async(b.ptr, 0, buf / 4, &s)?;
            let ms = time_median(g, &s, p.repeats, || {
                launch(
                    k.write_pattern,
                    grid(sh),
                    sh.threads,
                    &s,
                    &mut kargs![b.ptr, n4, SEED_W],
                )
            })?;
            s.sync()?;
            let bad = cu::check_pattern_dev(g, k, &s, b.ptr, buf, SEED_W)?;
            if bad > 0 {
                failures.push(format!("{}: {bad} words differ", shape(sh)));
            }
            sweep.push(point("write", sh, gbps(buf as f64, ms), bad == 0));
        }
        verify.push(kernel_verify(
            "write kernel: buffer compared with the pattern",
            p.shapes.len(),
            &failures,
        ));
        write_gbps = best_verified(&sweep, &["write"]);

        // Triad over f32: b and c random, a = b + s*c.
        let nf = buf / 4;
        let hg = helper_grid(g);
        launch(k.fill_f32, hg, 256, &s, &mut kargs![b.ptr, nf, SEED_B])?;
        launch(k.fill_f32, hg, 256, &s, &mut kargs![c.ptr, nf, SEED_C])?;
        let mut failures = Vec::new();
        for sh in &p.shapes {
            tick("triad");
            cu::memset_d32_async(a.ptr, 0, nf, &s)?;
            let ms = time_median(g, &s, p.repeats, || {
                launch(
                    k.triad_f32,
                    grid(sh),
                    sh.threads,
                    &s,
                    &mut kargs![a.ptr, b.ptr, c.ptr, TRIAD_S, n4],
                )
            })?;
            s.sync()?;
            let wrong = check_triad(g, a.ptr, nf)?;
            let ok = wrong.is_none();
            if let Some(w) = wrong {
                failures.push(format!("{}: {w}", shape(sh)));
            }
            sweep.push(point("triad", sh, gbps(3.0 * buf as f64, ms), ok));
        }
        verify.push(kernel_verify(
            &format!("triad kernel: {TRIAD_SAMPLES} samples against the CPU"),
            p.shapes.len(),
            &failures,
        ));
        triad_gbps = best_verified(&sweep, &["triad"]);
    }
    Ok(MemoryBandwidth {
        buffer_bytes: buf,
        copy_gbps: best_verified(&sweep, &COPY_KERNELS),
        memcpy_gbps,
        read_gbps,
        write_gbps,
        triad_gbps,
        sweep,
        verify,
        note,
    })
}

/// One kernel's check over all its launch shapes: right only when every shape's output was;
/// the detail names each shape that was not.
fn kernel_verify(what: &str, shapes: usize, failures: &[String]) -> Verify {
    Verify {
        what: if shapes == 1 {
            format!("{what}, after the one launch shape tried")
        } else {
            format!("{what}, after each of the {shapes} launch shapes")
        },
        ok: failures.is_empty(),
        detail: (!failures.is_empty()).then(|| failures.join("; ")),
    }
}

fn check(what: &str, bad: u64) -> Verify {
    Verify {
        what: what.into(),
        ok: bad == 0,
        detail: (bad > 0).then(|| format!("{bad} words differ")),
    }
}

/// Sampled outputs of the triad.
const TRIAD_SAMPLES: u64 = 64;

/// Samples of a = b + s*c against the host's b and c (fused or not: both roundings pass):
/// `None` when all are right, else how many were wrong and the first.
fn check_triad(g: &Gpu, a: u64, n: u64) -> R<Option<String>> {
    let mut wrong = 0;
    let mut first_bad = None;
    for t in 0..TRIAD_SAMPLES {
        let i = if t == TRIAD_SAMPLES - 1 {
            n - 1
        } else {
            t * (n / TRIAD_SAMPLES)
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
    Ok(first_bad.map(|d| format!("{wrong} wrong; {d}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_verifies_only_when_every_shape_did() {
        let v = kernel_verify("copy kernel: destination compared with the pattern", 4, &[]);
        assert!(v.ok && v.detail.is_none());
        assert_eq!(
            v.what,
            "copy kernel: destination compared with the pattern, after each of the 4 launch shapes"
        );
        let v = kernel_verify(
            "write kernel: buffer compared with the pattern",
            1,
            &["264x256: 12 words differ".into()],
        );
        assert!(!v.ok);
        assert!(
            v.what.ends_with("after the one launch shape tried"),
            "{}",
            v.what
        );
        assert_eq!(v.detail.as_deref(), Some("264x256: 12 words differ"));
        let v = kernel_verify("read", 3, &["a: got 1".into(), "b: got 2".into()]);
        assert_eq!(v.detail.as_deref(), Some("a: got 1; b: got 2"));
    }
}
