//! Device memory bandwidth: gpuaudit's own read, write, copy and triad kernels over buffers
//! several times the L2, each launch shape of the plan tried, plus the driver's memcpy.
//! Copies count bytes read + written (as PyTorch's and STREAM's figures do).

use super::plan::{self, LaunchShape, MemoryParams};
use crate::measure::child::cu::{
    self, helper_grid, human_bytes, kargs, launch, DevBuf, Gpu, Kernels, Stream, R,
};
use crate::measure::child::{gbps, guarded, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::GpuGroup;
use gpuaudit_core::facts::{
    best_verified, median, KernelPoint, MemoryBandwidth, OnGpu, Verify, ADD_KERNELS, COPY_KERNELS,
    READ_KERNELS, TRIAD_KERNELS, WRITE_KERNELS,
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
                                    progress(GpuGroup::Memory, f, format!("{msg} (and the others)"))
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
                    progress(GpuGroup::Memory, (gi as f64 + f) / n as f64, msg)
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

/// One timed launch configuration: a grid-stride kernel over a fixed grid, or a flat kernel
/// (one 16-byte vector per thread) over as many blocks as cover the array.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Launch {
    Stride { blocks: u32, threads: u32 },
    Flat { threads: u32 },
}

impl Launch {
    /// The kernel's name in the sweep: `base`, or `base_flat`.
    fn kernel(&self, base: &str) -> String {
        match self {
            Launch::Stride { .. } => base.to_string(),
            Launch::Flat { .. } => format!("{base}_flat"),
        }
    }

    /// (blocks, threads) over all the launches that cover `n4` vectors.
    fn dims(&self, n4: u64, max_grid: u32) -> (u32, u32) {
        match *self {
            Launch::Stride { blocks, threads } => (blocks, threads),
            Launch::Flat { threads } => {
                let blocks: u64 = flat_chunks(n4, threads, max_grid)
                    .iter()
                    .map(|c| c.1 as u64)
                    .sum();
                (blocks.min(u32::MAX as u64) as u32, threads)
            }
        }
    }

    /// Issues the launch(es): `issue(grid, threads, base)`, `base` being `None` for a
    /// grid-stride kernel and the first vector of each launch for a flat one.
    fn issue(
        &self,
        n4: u64,
        max_grid: u32,
        mut issue: impl FnMut(u32, u32, Option<u64>) -> R<()>,
    ) -> R<()> {
        match *self {
            Launch::Stride { blocks, threads } => issue(blocks, threads, None),
            Launch::Flat { threads } => {
                for (base, blocks) in flat_chunks(n4, threads, max_grid) {
                    issue(blocks, threads, Some(base))?;
                }
                Ok(())
            }
        }
    }
}

/// The launches of a flat kernel over `n4` vectors at `threads` per block, each at most
/// `max_grid` blocks (the GPU's grid x limit): (first vector, blocks) per launch. One launch
/// for any array an H200 holds (2^31 - 1 blocks of 256 threads cover 32 TiB); the split
/// keeps a smaller limit, or a larger array, correct.
pub fn flat_chunks(n4: u64, threads: u32, max_grid: u32) -> Vec<(u64, u32)> {
    let threads = threads.max(1) as u64;
    let max_grid = max_grid.max(1) as u64;
    let blocks = n4.div_ceil(threads);
    let mut out = Vec::new();
    let mut done = 0u64;
    while done < blocks {
        let now = (blocks - done).min(max_grid);
        out.push((done * threads, now as u32));
        done += now;
    }
    out
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
    let stream = Stream::new(g)?;
    // A reference, so that the closures below share it.
    let s = &stream;
    let n4 = buf / 16;
    let max_grid = cu::max_grid_x(g);
    cu::write_pattern_dev(g, k, s, a.ptr, buf, SEED_A)?;
    s.sync()?;

    let grid = |sh: &LaunchShape| g.sm_count.saturating_mul(sh.blocks_per_sm).max(1);
    let stride = |sh: &LaunchShape| Launch::Stride {
        blocks: grid(sh),
        threads: sh.threads,
    };
    let stride_launches: Vec<Launch> = p.shapes.iter().map(stride).collect();
    let read_shapes = if p.read_shapes.is_empty() {
        plan::read_shapes(&p.shapes)
    } else {
        p.read_shapes.clone()
    };
    let flat_launches: Vec<Launch> = p
        .flat_threads
        .iter()
        .map(|&threads| Launch::Flat { threads })
        .collect();
    let both: Vec<Launch> = stride_launches
        .iter()
        .chain(&flat_launches)
        .copied()
        .collect();
    let copy_variants = if p.both_copy_variants { 3 } else { 1 };
    let total_steps = (copy_variants * p.shapes.len()
        + flat_launches.len()
        + 1
        + if p.all_kernels {
            read_shapes.len() + p.shapes.len() + 2 * both.len()
        } else {
            0
        }) as f64;
    let step = std::cell::Cell::new(0.0);
    let tick = |what: &str| {
        step.set(step.get() + 1.0);
        progress(
            step.get() / total_steps,
            format!("{what} on GPU {} ({} buffers)", g.index, human_bytes(buf)),
        );
    };
    let mut sweep = Vec::new();
    let mut verify = Vec::new();
    // Every launch's output is checked before its figure may count: the destination is
    // cleared first, so a launch that leaves part of it unwritten cannot pass on an earlier
    // launch's result (defect 12: only the last kernel's output used to be checked).
    let mut timed = |kernel: String,
                     l: &Launch,
                     bytes_moved: f64,
                     clear: &mut dyn FnMut() -> R<()>,
                     run: &mut dyn FnMut() -> R<()>,
                     check: &mut dyn FnMut() -> R<Option<String>>,
                     failures: &mut Vec<String>|
     -> R<()> {
        tick(&kernel);
        clear()?;
        let ms = time_median(g, s, p.repeats, &mut *run)?;
        s.sync()?;
        let wrong = check()?;
        let (blocks, threads) = l.dims(n4, max_grid);
        if let Some(w) = &wrong {
            failures.push(format!("{kernel} {blocks}x{threads}: {w}"));
        }
        sweep.push(KernelPoint {
            kernel,
            blocks,
            threads,
            gbps: gbps(bytes_moved, ms),
            verified: wrong.is_none(),
        });
        Ok(())
    };
    let pattern_check = |seed: u32, dst: u64| {
        move || -> R<Option<String>> {
            let bad = cu::check_pattern_dev(g, k, s, dst, buf, seed)?;
            Ok((bad > 0).then(|| format!("{bad} words differ")))
        }
    };
    let clear = |dst: u64| move || cu::memset_d32_async(dst, 0, buf / 4, s);

    // Copy kernels: grid-stride (plain, streaming hints, tiles) over the shapes, flat over
    // the thread counts.
    let mut variants = vec![(COPY_KERNELS[0], k.copy_v4)];
    if p.both_copy_variants {
        variants.push((COPY_KERNELS[1], k.copy_v4_cs));
        variants.push((COPY_KERNELS[2], k.copy_tile8));
    }
    for (name, f) in &variants {
        let mut failures = Vec::new();
        for l in &stride_launches {
            let mut run = || {
                l.issue(n4, max_grid, |grid, t, _| {
                    launch(*f, grid, t, s, &mut kargs![a.ptr, b.ptr, n4])
                })
            };
            timed(
                name.to_string(),
                l,
                2.0 * buf as f64,
                &mut clear(b.ptr),
                &mut run,
                &mut pattern_check(SEED_A, b.ptr),
                &mut failures,
            )?;
        }
        verify.push(kernel_verify(
            &format!("{name} kernel: destination compared with the pattern"),
            stride_launches.len(),
            &failures,
        ));
    }
    if !flat_launches.is_empty() {
        let mut failures = Vec::new();
        for l in &flat_launches {
            let mut run = || {
                l.issue(n4, max_grid, |grid, t, base| {
                    let base = base.unwrap_or(0);
                    launch(k.copy_flat, grid, t, s, &mut kargs![a.ptr, b.ptr, base, n4])
                })
            };
            timed(
                l.kernel("copy"),
                l,
                2.0 * buf as f64,
                &mut clear(b.ptr),
                &mut run,
                &mut pattern_check(SEED_A, b.ptr),
                &mut failures,
            )?;
        }
        verify.push(kernel_verify(
            "copy_flat kernel: destination compared with the pattern",
            flat_launches.len(),
            &failures,
        ));
    }

    // The driver's copy (what cudaMemcpy and PyTorch's tensor.copy_ use): the timed copies
    // themselves are checked.
    tick("memcpy");
    cu::memset_d32_async(b.ptr, 0, buf / 4, s)?;
    let ms = time_median(g, s, p.repeats, || cu::dtod_async(b.ptr, a.ptr, buf, s))?;
    s.sync()?;
    let bad = cu::check_pattern_dev(g, k, s, b.ptr, buf, SEED_A)?;
    let memcpy_ok = bad == 0;
    verify.push(check(
        "cuMemcpyDtoD: destination compared with the pattern",
        bad,
    ));
    let memcpy_gbps = memcpy_ok.then(|| gbps(2.0 * buf as f64, ms));

    if let Some(c) = &c {
        // Read: one XOR per block written out; the host checks their XOR.
        let read_launches: Vec<Launch> = read_shapes.iter().map(stride).collect();
        let max_blocks = read_shapes.iter().map(grid).max().unwrap_or(1);
        let xors = DevBuf::new(g, max_blocks as u64 * 4)?;
        let want = fill::pattern_xor(buf / 4, SEED_A);
        let mut failures = Vec::new();
        for l in &read_launches {
            let (blocks, _) = l.dims(n4, max_grid);
            let mut run = || {
                l.issue(n4, max_grid, |grid, t, _| {
                    launch(k.read_xor, grid, t, s, &mut kargs![a.ptr, n4, xors.ptr])
                })
            };
            let mut check_xor = || -> R<Option<String>> {
                let words = cu::dtoh(g, xors.ptr, blocks as u64 * 4)?;
                let got = words.chunks_exact(4).fold(0u32, |x, w| {
                    x ^ u32::from_le_bytes([w[0], w[1], w[2], w[3]])
                });
                Ok((got != want).then(|| format!("got {got:08x}, expected {want:08x}")))
            };
            timed(
                l.kernel("read"),
                l,
                buf as f64,
                &mut || cu::memset_d32_async(xors.ptr, 0, max_blocks as u64, s),
                &mut run,
                &mut check_xor,
                &mut failures,
            )?;
        }
        verify.push(kernel_verify(
            "read kernel: XOR of every word",
            read_launches.len(),
            &failures,
        ));

        // Write.
        let mut failures = Vec::new();
        for l in &stride_launches {
            let mut run = || {
                l.issue(n4, max_grid, |grid, t, _| {
                    launch(k.write_pattern, grid, t, s, &mut kargs![b.ptr, n4, SEED_W])
                })
            };
            timed(
                l.kernel("write"),
                l,
                buf as f64,
                &mut clear(b.ptr),
                &mut run,
                &mut pattern_check(SEED_W, b.ptr),
                &mut failures,
            )?;
        }
        verify.push(kernel_verify(
            "write kernel: buffer compared with the pattern",
            stride_launches.len(),
            &failures,
        ));

        // Triad (a = b + s*c) and add (a = b + c) over f32, b and c random: grid-stride over
        // the shapes, flat over the thread counts.
        let nf = buf / 4;
        let hg = helper_grid(g);
        launch(k.fill_f32, hg, 256, s, &mut kargs![b.ptr, nf, SEED_B])?;
        launch(k.fill_f32, hg, 256, s, &mut kargs![c.ptr, nf, SEED_C])?;
        for kind in [F32Kind::Triad, F32Kind::Add] {
            let mut failures = Vec::new();
            for l in &both {
                let mut run = || {
                    l.issue(n4, max_grid, |grid, t, base| match (kind, base) {
                        (F32Kind::Triad, None) => launch(
                            k.triad_f32,
                            grid,
                            t,
                            s,
                            &mut kargs![a.ptr, b.ptr, c.ptr, TRIAD_S, n4],
                        ),
                        (F32Kind::Triad, Some(b0)) => launch(
                            k.triad_flat,
                            grid,
                            t,
                            s,
                            &mut kargs![a.ptr, b.ptr, c.ptr, TRIAD_S, b0, n4],
                        ),
                        (F32Kind::Add, None) => {
                            launch(k.add_f32, grid, t, s, &mut kargs![a.ptr, b.ptr, c.ptr, n4])
                        }
                        (F32Kind::Add, Some(b0)) => launch(
                            k.add_flat,
                            grid,
                            t,
                            s,
                            &mut kargs![a.ptr, b.ptr, c.ptr, b0, n4],
                        ),
                    })
                };
                timed(
                    l.kernel(kind.name()),
                    l,
                    3.0 * buf as f64,
                    &mut || cu::memset_d32_async(a.ptr, 0, nf, s),
                    &mut run,
                    &mut || check_f32(g, a.ptr, nf, kind),
                    &mut failures,
                )?;
            }
            verify.push(kernel_verify(
                &format!(
                    "{} kernels: {F32_SAMPLES} samples against the CPU",
                    kind.name()
                ),
                both.len(),
                &failures,
            ));
        }
    }
    Ok(MemoryBandwidth {
        buffer_bytes: buf,
        copy_gbps: best_verified(&sweep, &COPY_KERNELS),
        memcpy_gbps,
        read_gbps: best_verified(&sweep, &READ_KERNELS),
        write_gbps: best_verified(&sweep, &WRITE_KERNELS),
        triad_gbps: best_verified(&sweep, &TRIAD_KERNELS),
        add_gbps: best_verified(&sweep, &ADD_KERNELS),
        sweep,
        verify,
        note,
    })
}

/// The two f32 kernels of BabelStream's kind measured here.
#[derive(Clone, Copy, Debug, PartialEq)]
enum F32Kind {
    /// a = b + s*c
    Triad,
    /// a = b + c
    Add,
}

impl F32Kind {
    fn name(self) -> &'static str {
        match self {
            F32Kind::Triad => "triad",
            F32Kind::Add => "add",
        }
    }

    /// The values a right kernel may write for inputs b and c (a fused multiply-add or a
    /// multiply then an add: both roundings pass).
    fn expected(self, b: f32, c: f32) -> [f32; 2] {
        match self {
            F32Kind::Triad => [TRIAD_S.mul_add(c, b), b + TRIAD_S * c],
            F32Kind::Add => [b + c, b + c],
        }
    }
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

/// Sampled outputs of the triad and add kernels.
const F32_SAMPLES: u64 = 64;

/// Samples of the f32 kernel's output against the host's b and c: `None` when all are
/// right, else how many were wrong and the first.
fn check_f32(g: &Gpu, a: u64, n: u64, kind: F32Kind) -> R<Option<String>> {
    let mut wrong = 0;
    let mut first_bad = None;
    for t in 0..F32_SAMPLES {
        let i = if t == F32_SAMPLES - 1 {
            n - 1
        } else {
            t * (n / F32_SAMPLES)
        };
        let bytes = cu::dtoh(g, a + i * 4, 4)?;
        let got = f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let b = f32::from_bits(fill::bits_f32(SEED_B, i));
        let c = f32::from_bits(fill::bits_f32(SEED_C, i));
        let want = kind.expected(b, c);
        if !want.contains(&got) {
            wrong += 1;
            first_bad.get_or_insert(format!("a[{i}] = {got}, expected {}", want[0]));
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

    #[test]
    fn flat_launches_cover_the_array_within_the_grid_limit() {
        // 4 GiB of 16-byte vectors at 256 threads: one launch of 2^20 blocks.
        assert_eq!(
            flat_chunks(1 << 28, 256, i32::MAX as u32),
            vec![(0, 1 << 20)]
        );
        // A partial last block still gets its block.
        assert_eq!(flat_chunks(1000, 256, 1 << 20), vec![(0, 4)]);
        // A grid limit splits the launch: 10 blocks of 100 threads, at most 4 a launch.
        assert_eq!(flat_chunks(1000, 100, 4), vec![(0, 4), (400, 4), (800, 2)]);
        // Exactly at the limit: one launch.
        assert_eq!(flat_chunks(400, 100, 4), vec![(0, 4)]);
        // Just over it: a second launch of one block.
        assert_eq!(flat_chunks(401, 100, 4), vec![(0, 4), (400, 1)]);
        assert!(flat_chunks(0, 256, 4).is_empty());
        // Every vector is covered exactly once.
        let chunks = flat_chunks(12_345, 96, 7);
        let covered: u64 = chunks.iter().map(|c| c.1 as u64 * 96).sum();
        assert!((12_345..12_345 + 96).contains(&covered));
        for w in chunks.windows(2) {
            assert_eq!(w[1].0, w[0].0 + w[0].1 as u64 * 96);
        }
    }

    #[test]
    fn launches_name_their_kernel_and_count_every_block() {
        let flat = Launch::Flat { threads: 256 };
        assert_eq!(flat.kernel("triad"), "triad_flat");
        assert_eq!(flat.dims(1 << 28, 1 << 19), (1 << 20, 256));
        let mut seen = Vec::new();
        flat.issue(1000, 2, |g, t, b| {
            seen.push((g, t, b));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(2, 256, Some(0)), (2, 256, Some(512))]);
        let st = Launch::Stride {
            blocks: 528,
            threads: 512,
        };
        assert_eq!(st.kernel("triad"), "triad");
        assert_eq!(st.dims(1 << 28, 4), (528, 512));
        let mut seen = Vec::new();
        st.issue(1 << 28, 4, |g, t, b| {
            seen.push((g, t, b));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(528, 512, None)]);
    }

    #[test]
    fn add_and_triad_accept_their_roundings_only() {
        let (b, c) = (0.7f32, 1.3f32);
        assert!(F32Kind::Add.expected(b, c).contains(&(b + c)));
        assert!(!F32Kind::Add.expected(b, c).contains(&(b + TRIAD_S * c)));
        assert!(F32Kind::Triad.expected(b, c).contains(&(b + TRIAD_S * c)));
        assert!(F32Kind::Triad
            .expected(b, c)
            .contains(&TRIAD_S.mul_add(c, b)));
        assert_eq!(
            (F32Kind::Add.name(), F32Kind::Triad.name()),
            ("add", "triad")
        );
    }
}
