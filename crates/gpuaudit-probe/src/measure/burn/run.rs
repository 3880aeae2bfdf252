//! Sustained load: the same seeded GEMM on every GPU at once for N seconds, TFLOPS per
//! window of about a second, and at the end the output's fingerprint (compared across GPUs
//! by the check) and a CPU check of sampled elements. The parent samples clocks, power,
//! temperature and throttle reasons through NVML meanwhile.

use super::plan::BurnParams;
use crate::measure::child::cu::{Event, Gpu, Kernels, Stream, R};
use crate::measure::child::{guarded, progress, Ctx, Fail};
use crate::measure::gemm::run::{tolerance, Gemm, Handles};
use crate::measure::GpuGroup;
use gpuaudit_core::facts::{
    coefficient_of_variation, Burn, BurnGpu, ComputeCapability, GemmDtype, OnGpu, Stats,
};
use gpuaudit_core::Reading;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The dtype a GPU burns with: the plan's where it has it, else fp16, else fp32.
fn dtype_for(g: &Gpu, preferred: GemmDtype) -> GemmDtype {
    let cc = ComputeCapability {
        major: g.cc.0,
        minor: g.cc.1,
    };
    [preferred, GemmDtype::Fp16, GemmDtype::Fp32]
        .into_iter()
        .find(|d| d.supported_on(cc))
        .unwrap_or(GemmDtype::Fp32)
}

pub fn run(ctx: &Ctx, p: &BurnParams) -> R<Burn> {
    let n = ctx.gpus.len();
    let barrier = Barrier::new(n);
    let dtype = ctx.gpus.first().map_or(p.dtype, |g| dtype_for(g, p.dtype));
    let results: Vec<Result<BurnGpu, Fail>> = std::thread::scope(|s| {
        let handles: Vec<_> = ctx
            .gpus
            .iter()
            .zip(&ctx.kernels)
            .enumerate()
            .map(|(i, (g, k))| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut waited = false;
                    let r = guarded(&format!("burn on GPU {}", g.index), || {
                        one(g, k, p, dtype, i == 0, || {
                            waited = true;
                            barrier.wait();
                        })
                    });
                    // A GPU that failed before the start must still release the others.
                    if !waited {
                        barrier.wait();
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Fail("burn thread panicked".into())))
            })
            .collect()
    });
    let mut per_gpu: Vec<OnGpu<BurnGpu>> = ctx
        .gpus
        .iter()
        .zip(results)
        .map(|(g, r)| {
            OnGpu::new(
                g.index,
                match r {
                    Ok(v) => Reading::Value(v),
                    Err(e) => Reading::Unavailable(e.0),
                },
            )
        })
        .collect();
    for u in &ctx.unavailable {
        per_gpu.push(OnGpu::new(u.gpu, Reading::unavailable(u.reason.clone())));
    }
    Ok(Burn {
        seconds: p.seconds as f64,
        dtype,
        size: p.size,
        per_gpu,
    })
}

fn one(
    g: &Gpu,
    k: &Kernels,
    p: &BurnParams,
    dtype: GemmDtype,
    reports: bool,
    start: impl FnOnce(),
) -> R<BurnGpu> {
    g.bind()?;
    let s = Stream::new(g)?;
    let mut handles = Handles::default();
    let layout = p.layout;
    let setup = (|| -> R<(Gemm, u32)> {
        let gemm = Gemm::new(
            g,
            k,
            &mut handles,
            dtype,
            p.size,
            layout,
            p.workspace_bytes,
            &s,
        )?;
        gemm.enqueue(&s, 3)?;
        s.sync()?;
        // Batches of about 200 ms: long enough for steady timing, short enough for windows.
        let (a, b) = (Event::new(g)?, Event::new(g)?);
        a.record(&s)?;
        gemm.enqueue(&s, 2)?;
        b.record(&s)?;
        b.sync()?;
        let per = (a.ms_to(&b)? / 2.0).max(0.01);
        let batch = (200.0 / per).clamp(1.0, 2000.0) as u32;
        Ok((gemm, batch))
    })();
    // Everyone starts together, even a GPU whose setup failed (it just reports the error).
    start();
    let (gemm, batch) = setup?;
    let first = gemm.checksum(k, &s)?;
    let (a, b) = (Event::new(g)?, Event::new(g)?);
    let t0 = Instant::now();
    let deadline = Duration::from_secs(p.seconds as u64);
    let mut windows = Vec::new();
    let (mut w_flops, mut w_ms) = (0f64, 0f64);
    while t0.elapsed() < deadline {
        a.record(&s)?;
        gemm.enqueue(&s, batch)?;
        b.record(&s)?;
        b.sync()?;
        w_ms += a.ms_to(&b)?;
        w_flops += gemm.flops() * batch as f64;
        if w_ms >= 1000.0 {
            windows.push(w_flops / (w_ms / 1e3) / 1e12);
            w_flops = 0.0;
            w_ms = 0.0;
            if reports {
                let f = t0.elapsed().as_secs_f64() / p.seconds.max(1) as f64;
                let last = windows.last().copied().unwrap_or(0.0);
                progress(
                    GpuGroup::Burn,
                    f,
                    format!(
                        "{} GEMMs on every GPU: GPU {} at {last:.0} TFLOPS",
                        dtype.as_str(),
                        g.index
                    ),
                );
            }
        }
    }
    if w_ms >= 250.0 {
        windows.push(w_flops / (w_ms / 1e3) / 1e12);
    }
    let last = gemm.checksum(k, &s)?;
    let (max_error, verified) = gemm.verify(p.verify_samples)?;
    Ok(BurnGpu {
        tflops_stats: Stats::of(&windows),
        tflops_cv: coefficient_of_variation(&windows),
        tflops: windows,
        checksum: format!("{last:016x}"),
        self_consistent: first == last,
        max_error,
        tolerance: tolerance(dtype),
        verified,
        telemetry: Reading::unavailable("not sampled (NVML unavailable)"),
    })
}
