//! The rehearse group: the GPU stages of `gpuaudit rehearse`, each alone, then the whole
//! pipeline.
//!
//! The model is `depth` layers of `width` x `width` weights applied to `tokens` columns per
//! sample; a training step is, per layer, one forward GEMM (Y = W·X) and two backward ones
//! (dW = dY·Xᵀ, dX = Wᵀ·dY), bf16 through cuBLASLt where every GPU has bf16, fp32 through
//! cuBLAS elsewhere, alpha 1/√k so that the values keep their scale layer after layer (random
//! data, not zeros or overflowed infinities, which draw less power). With several GPUs each
//! step ends with an all-reduce of the gradients (float32, one per weight) through NCCL.
//!
//! Every CUDA, cuBLAS and NCCL call is checked (the helpers of cu.rs, gemm.rs and nccl.rs);
//! a failure costs the stage it happened in, or the group where the set-up failed.

use super::plan::RehearseParams;
use crate::measure::child::cu::{
    self, helper_grid, human_bytes, kargs, launch, DevBuf, Event, Gpu, Kernels,
};
use crate::measure::child::cu::{PinnedBuf, Stream, R};
use crate::measure::child::{gbps, guarded, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::gemm::run::{bck, lt_matmul_at, lt_plan_for, Handles, LtHandle, LtPlan, Shape};
use crate::measure::nccl::run::{all_reduce_f32, nvls_off, Comms};
use crate::measure::protocol::PIPELINE_PROGRESS;
use crate::measure::GpuGroup;
use crate::rehearse::loader::{with_loader, BatchBuf, Dataset};
use cudarc::cublas::sys as blas;
use cudarc::driver::sys::CUdeviceptr;
use gpuaudit_core::facts::{
    allreduce_busbw, ComputeCapability, GemmDtype, GpuValue, PipelineFigure, RehearsalGpu, Stage,
    StageFigure, StageResult,
};
use gpuaudit_core::Reading;
use std::time::{Duration, Instant};

const SEED_W: u64 = 201;
const SEED_X: u64 = 202;
const SEED_G: u64 = 203;
const SEED_HOST: u32 = 0x5EED_0301;
/// Steps run before any timing (cuBLASLt's first calls, clocks ramping up).
const WARMUP_STEPS: u32 = 3;
/// Timed repetitions of a stage alone: at least this many, however long each takes.
const MIN_REPEATS: u64 = 3;

/// The GEMM plans of one column count (batch x tokens).
struct StepPlans {
    cols: u64,
    /// Y = W·X: m = width, n = cols, k = width.
    fwd: Option<LtPlan>,
    /// dX = Wᵀ·dY.
    dgrad: Option<LtPlan>,
    /// dW = dY·Xᵀ: m = n = width, k = cols.
    wgrad: Option<LtPlan>,
}

/// One GPU's copy of the model, its buffers, streams and GEMM plans.
struct Model<'g> {
    gpu: &'g Gpu,
    elem: u64,
    width: u64,
    depth: u64,
    max_cols: u64,
    weights: DevBuf,
    wgrads: DevBuf,
    acts: DevBuf,
    grads: DevBuf,
    /// Two device input slots of one batch each (the copy of step k+1 overlaps step k).
    input: DevBuf,
    batch_bytes: u64,
    compute: Stream,
    copy: Stream,
    plans: Vec<StepPlans>,
    ws: DevBuf,
    handles: Handles,
}

fn dtype_for(ctx: &Ctx, p: &RehearseParams) -> R<GemmDtype> {
    let bf16 = ctx.gpus.iter().all(|g| {
        GemmDtype::Bf16.supported_on(ComputeCapability {
            major: g.cc.0,
            minor: g.cc.1,
        })
    });
    if bf16 && p.lt {
        Ok(GemmDtype::Bf16)
    } else if p.blas {
        Ok(GemmDtype::Fp32)
    } else {
        Err(Fail(
            "these GPUs have no bf16 and cuBLAS (for fp32) was not found".into(),
        ))
    }
}

impl<'g> Model<'g> {
    /// Device memory the model needs: weights and their gradients, the activations of every
    /// layer and two gradient buffers at `cols` columns, two input slots, the workspace.
    fn bytes_needed(
        elem: u64,
        width: u64,
        depth: u64,
        cols: u64,
        batch_bytes: u64,
        ws: u64,
    ) -> u64 {
        elem * (2 * depth * width * width + (depth + 3) * width * cols) + 2 * batch_bytes + ws
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        gpu: &'g Gpu,
        k: &Kernels,
        dtype: GemmDtype,
        p: &RehearseParams,
        col_counts: &[u64],
        budget_bytes: u64,
    ) -> R<Model<'g>> {
        let c = &p.request.config;
        let (width, depth) = (c.width as u64, c.depth as u64);
        let elem = if dtype == GemmDtype::Bf16 { 2 } else { 4 };
        let max_cols = col_counts.iter().copied().max().unwrap_or(1);
        let batch_bytes = c.batch as u64 * c.tensor_bytes;
        let need = Self::bytes_needed(elem, width, depth, max_cols, batch_bytes, p.workspace_bytes);
        if need > budget_bytes {
            return Err(Fail(format!(
                "GPU {}: the model needs {} of device memory, {} is available to it: use a \
                 smaller --width, --depth or --batch",
                gpu.index,
                human_bytes(need),
                human_bytes(budget_bytes)
            )));
        }
        let compute = Stream::new(gpu)?;
        let copy = Stream::new(gpu)?;
        let weights = DevBuf::new(gpu, elem * depth * width * width)?;
        let wgrads = DevBuf::new(gpu, elem * depth * width * width)?;
        let acts = DevBuf::new(gpu, elem * (depth + 1) * width * max_cols)?;
        let grads = DevBuf::new(gpu, elem * 2 * width * max_cols)?;
        let input = DevBuf::new(gpu, 2 * batch_bytes.max(16))?;
        let ws = DevBuf::new(gpu, p.workspace_bytes.max(256))?;
        let fill = if dtype == GemmDtype::Bf16 {
            k.fill_bf16
        } else {
            k.fill_f32
        };
        for (buf, elems, seed) in [
            (&weights, depth * width * width, SEED_W),
            (&acts, width * max_cols, SEED_X),
            (&grads, width * max_cols, SEED_G),
        ] {
            launch(
                fill,
                helper_grid(gpu),
                256,
                &compute,
                &mut kargs![buf.ptr, elems, seed],
            )?;
        }
        compute.sync()?;
        let mut handles = Handles::default();
        let mut plans = Vec::new();
        for &cols in col_counts {
            let shape = |m, n, k, ta, tb| Shape { m, n, k, ta, tb };
            plans.push(if dtype == GemmDtype::Bf16 {
                let h = handles.lt(gpu)?;
                let ws_bytes = p.workspace_bytes;
                StepPlans {
                    cols,
                    fwd: Some(lt_plan_for(
                        h,
                        gpu,
                        &compute,
                        dtype,
                        shape(width, cols, width, false, false),
                        ws_bytes,
                    )?),
                    dgrad: Some(lt_plan_for(
                        h,
                        gpu,
                        &compute,
                        dtype,
                        shape(width, cols, width, true, false),
                        ws_bytes,
                    )?),
                    wgrad: Some(lt_plan_for(
                        h,
                        gpu,
                        &compute,
                        dtype,
                        shape(width, width, cols, false, true),
                        ws_bytes,
                    )?),
                }
            } else {
                handles.blas(gpu)?;
                StepPlans {
                    cols,
                    fwd: None,
                    dgrad: None,
                    wgrad: None,
                }
            });
        }
        Ok(Model {
            gpu,
            elem,
            width,
            depth,
            max_cols,
            weights,
            wgrads,
            acts,
            grads,
            input,
            batch_bytes,
            compute,
            copy,
            plans,
            ws,
            handles,
        })
    }

    fn flops(&self, cols: u64) -> f64 {
        6.0 * self.depth as f64 * (self.width as f64).powi(2) * cols as f64
    }

    /// One GEMM D = alpha·op(A)·op(B) on the compute stream.
    fn gemm(&mut self, plan: Option<&LtPlan>, shape: Shape, ptrs: [CUdeviceptr; 3]) -> R<()> {
        let alpha = 1.0 / (shape.k as f32).sqrt();
        let [a, b, d] = ptrs;
        match plan {
            Some(plan) => {
                let h = self.handles.lt(self.gpu)?.raw();
                lt_matmul_at(h, plan, alpha, [a, b, d, d], &self.ws, &self.compute)
            }
            None => {
                let h = self.handles.blas(self.gpu)?.raw();
                let op = |t: bool| {
                    if t {
                        blas::cublasOperation_t::CUBLAS_OP_T
                    } else {
                        blas::cublasOperation_t::CUBLAS_OP_N
                    }
                };
                let lda = if shape.ta { shape.k } else { shape.m } as i32;
                let ldb = if shape.tb { shape.n } else { shape.k } as i32;
                let beta = 0.0f32;
                // SAFETY: a live handle and stream of this GPU.
                bck(
                    unsafe { blas::cublasSetStream_v2(h, self.compute.raw as blas::cudaStream_t) },
                    "cublasSetStream",
                )?;
                // SAFETY: the operands are fp32 matrices of the shape's sizes inside the
                // model's buffers; host scalars.
                bck(
                    unsafe {
                        blas::cublasSgemm_v2(
                            h,
                            op(shape.ta),
                            op(shape.tb),
                            shape.m as i32,
                            shape.n as i32,
                            shape.k as i32,
                            &alpha,
                            a as *const f32,
                            lda,
                            b as *const f32,
                            ldb,
                            &beta,
                            d as *mut f32,
                            shape.m as i32,
                        )
                    },
                    "cublasSgemm",
                )
            }
        }
    }

    /// Puts one training step at plan `pi` (a column count) on the compute stream.
    fn enqueue_step(&mut self, pi: usize) -> R<()> {
        self.gpu.bind()?;
        let (w, e, mc, depth) = (self.width, self.elem, self.max_cols, self.depth as usize);
        let cols = self.plans[pi].cols;
        let (a0, w0, dw0, g0) = (
            self.acts.ptr,
            self.weights.ptr,
            self.wgrads.ptr,
            self.grads.ptr,
        );
        let act = |l: usize| a0 + l as u64 * w * mc * e;
        let weight = |l: usize| w0 + l as u64 * w * w * e;
        let wgrad = |l: usize| dw0 + l as u64 * w * w * e;
        let grad = |i: usize| g0 + i as u64 * w * mc * e;
        // The plans are taken out for the calls (`gemm` borrows the model) and put back.
        let plans = std::mem::replace(
            &mut self.plans[pi],
            StepPlans {
                cols,
                fwd: None,
                dgrad: None,
                wgrad: None,
            },
        );
        let mut run = || -> R<()> {
            for l in 0..depth {
                let shape = Shape {
                    m: w,
                    n: cols,
                    k: w,
                    ta: false,
                    tb: false,
                };
                self.gemm(plans.fwd.as_ref(), shape, [weight(l), act(l), act(l + 1)])?;
            }
            let mut g = 0usize;
            for l in (0..depth).rev() {
                let shape = Shape {
                    m: w,
                    n: w,
                    k: cols,
                    ta: false,
                    tb: true,
                };
                self.gemm(plans.wgrad.as_ref(), shape, [grad(g), act(l), wgrad(l)])?;
                let shape = Shape {
                    m: w,
                    n: cols,
                    k: w,
                    ta: true,
                    tb: false,
                };
                self.gemm(
                    plans.dgrad.as_ref(),
                    shape,
                    [weight(l), grad(g), grad(1 - g)],
                )?;
                g = 1 - g;
            }
            Ok(())
        };
        let r = run();
        self.plans[pi] = plans;
        r
    }
}

/// Repeats to fill `ms` given one repeat's `one_ms`.
fn repeats_for(ms: u64, one_ms: f64, most: u64) -> u64 {
    if one_ms <= 0.0 {
        return most;
    }
    ((ms as f64 / one_ms) as u64).clamp(MIN_REPEATS, most.max(MIN_REPEATS))
}

/// The GPU step alone at plan `pi` on every GPU at once: per GPU ms a step.
fn time_steps(models: &mut [Model], pi: usize, stage_ms: u64) -> R<Vec<f64>> {
    for m in models.iter_mut() {
        for _ in 0..WARMUP_STEPS {
            m.enqueue_step(pi)?;
        }
    }
    let mut events = Vec::new();
    for m in models.iter() {
        m.gpu.bind()?;
        m.compute.sync()?;
        events.push((Event::new(m.gpu)?, Event::new(m.gpu)?));
    }
    // One step to size the run.
    for (m, (a, b)) in models.iter_mut().zip(&events) {
        m.gpu.bind()?;
        a.record(&m.compute)?;
        m.enqueue_step(pi)?;
        b.record(&m.compute)?;
    }
    let mut one = 0f64;
    for (m, (a, b)) in models.iter().zip(&events) {
        m.gpu.bind()?;
        b.sync()?;
        one = one.max(a.ms_to(b)?);
    }
    let reps = repeats_for(stage_ms, one, 500);
    for (m, (a, b)) in models.iter_mut().zip(&events) {
        m.gpu.bind()?;
        a.record(&m.compute)?;
        for _ in 0..reps {
            m.enqueue_step(pi)?;
        }
        b.record(&m.compute)?;
    }
    let mut out = Vec::new();
    for (m, (a, b)) in models.iter().zip(&events) {
        m.gpu.bind()?;
        b.sync()?;
        out.push(a.ms_to(b)? / reps as f64);
    }
    Ok(out)
}

fn step_figure(models: &[Model], pi: usize, ms: &[f64], batch: u32, what: String) -> StageFigure {
    let slowest = ms.iter().copied().fold(0.0f64, f64::max).max(1e-9);
    let n = models.len() as f64;
    let cols = models[0].plans[pi].cols;
    StageFigure {
        samples_per_s: n * batch as f64 / (slowest / 1e3),
        bytes_per_s: 0.0,
        samples: 0,
        seconds: 0.0,
        method: what,
        tflops: Some(models[0].flops(cols) / (slowest / 1e3) / 1e12),
        busbw_gbps: None,
    }
}

/// Host memory for the staged batches: pinned or pageable.
enum HostBatch {
    Pinned(PinnedBuf),
    Pageable(Vec<u8>),
}

impl HostBatch {
    fn new(bytes: u64, pinned: bool) -> R<HostBatch> {
        if pinned {
            return Ok(HostBatch::Pinned(PinnedBuf::new(bytes)?));
        }
        let mut v = Vec::new();
        v.try_reserve_exact(bytes as usize).map_err(|e| {
            Fail(format!(
                "allocating {} of host memory: {e}",
                human_bytes(bytes)
            ))
        })?;
        v.resize(bytes as usize, 0);
        Ok(HostBatch::Pageable(v))
    }

    fn buf(&mut self) -> BatchBuf {
        match self {
            HostBatch::Pinned(p) => {
                let s = p.as_mut_slice();
                BatchBuf {
                    ptr: s.as_mut_ptr(),
                    len: s.len(),
                }
            }
            HostBatch::Pageable(v) => BatchBuf {
                ptr: v.as_mut_ptr(),
                len: v.len(),
            },
        }
    }

    fn bytes(&mut self) -> &mut [u8] {
        match self {
            HostBatch::Pinned(p) => p.as_mut_slice(),
            HostBatch::Pageable(v) => v.as_mut_slice(),
        }
    }
}

/// Host-to-device copies of one batch alone, on every GPU at once, from its own host buffer;
/// the data checked on the device afterwards.
fn time_copies(ctx: &Ctx, models: &[Model], p: &RehearseParams) -> R<StageFigure> {
    let c = &p.request.config;
    let bytes = models[0].batch_bytes;
    let mut hosts = Vec::new();
    for m in models {
        m.gpu.bind()?;
        let mut h = HostBatch::new(bytes, c.pinned)?;
        fill::fill_pattern(h.bytes(), SEED_HOST);
        hosts.push(h);
    }
    let mut events = Vec::new();
    for m in models {
        events.push((Event::new(m.gpu)?, Event::new(m.gpu)?));
    }
    let copy_all = |hosts: &mut [HostBatch], reps: u64| -> R<Vec<f64>> {
        for ((m, h), (a, b)) in models.iter().zip(hosts.iter_mut()).zip(&events) {
            m.gpu.bind()?;
            let src = h.buf().ptr as *const std::ffi::c_void;
            a.record(&m.copy)?;
            for _ in 0..reps {
                cu::htod_async(m.input.ptr, src, bytes, &m.copy)?;
            }
            b.record(&m.copy)?;
        }
        let mut ms = Vec::new();
        for (m, (a, b)) in models.iter().zip(&events) {
            m.gpu.bind()?;
            b.sync()?;
            ms.push(a.ms_to(b)?);
        }
        Ok(ms)
    };
    copy_all(&mut hosts, 2)?;
    let one = copy_all(&mut hosts, 1)?.into_iter().fold(0.0f64, f64::max);
    let reps = repeats_for(p.request.stage_ms, one, 1000);
    let ms = copy_all(&mut hosts, reps)?;
    for (gi, m) in models.iter().enumerate() {
        let k = &ctx.kernels[ctx
            .gpus
            .iter()
            .position(|g| g.index == m.gpu.index)
            .unwrap_or(gi)];
        let bad = cu::check_pattern_dev(m.gpu, k, &m.copy, m.input.ptr, bytes, SEED_HOST)?;
        if bad > 0 {
            return Err(Fail(format!(
                "GPU {}: {bad} words of the copied batch differ from what was sent",
                m.gpu.index
            )));
        }
    }
    let total_gbps: f64 = ms
        .iter()
        .map(|t| gbps(bytes as f64 * reps as f64, *t))
        .sum();
    let secs = ms.iter().copied().fold(0.0f64, f64::max) / 1e3;
    Ok(StageFigure {
        samples_per_s: total_gbps * 1e9 / c.tensor_bytes as f64,
        bytes_per_s: total_gbps * 1e9,
        samples: reps * c.batch as u64 * models.len() as u64,
        seconds: secs,
        method: format!(
            "cuMemcpyHtoDAsync of one batch ({}) from {} host memory, {reps} times on each of {} \
             GPU{} at once, timed with CUDA events; the data checked on the device",
            human_bytes(bytes),
            if c.pinned { "pinned" } else { "pageable" },
            models.len(),
            if models.len() == 1 { "" } else { "s" }
        ),
        tflops: None,
        busbw_gbps: None,
    })
}

/// The gradients' all-reduce buffers of every GPU, and the communicators.
struct Gradients {
    comms: Comms,
    send: Vec<DevBuf>,
    recv: Vec<DevBuf>,
    count: u64,
}

impl Gradients {
    fn new(ctx: &Ctx, models: &[Model], params: u64) -> R<Gradients> {
        nvls_off()?;
        let ords: Vec<i32> = models.iter().map(|m| m.gpu.ordinal as i32).collect();
        let comms = guarded("loading libnccl", || Comms::init_all(&ords))?;
        let (mut send, mut recv) = (Vec::new(), Vec::new());
        for (r, m) in models.iter().enumerate() {
            let s = DevBuf::new(m.gpu, params * 4)?;
            let k = &ctx.kernels[ctx
                .gpus
                .iter()
                .position(|g| g.index == m.gpu.index)
                .unwrap_or(r)];
            let value = (r + 1) as f32;
            launch(
                k.fill_f32_const,
                helper_grid(m.gpu),
                256,
                &m.compute,
                &mut kargs![s.ptr, params, value],
            )?;
            m.compute.sync()?;
            send.push(s);
            recv.push(DevBuf::new(m.gpu, params * 4)?);
        }
        Ok(Gradients {
            comms,
            send,
            recv,
            count: params,
        })
    }

    fn enqueue(&self, models: &[Model]) -> R<()> {
        let ranks: Vec<_> = models
            .iter()
            .zip(self.send.iter().zip(&self.recv))
            .map(|(m, (s, r))| (s.ptr, r.ptr, &m.compute))
            .collect();
        all_reduce_f32(&self.comms, &ranks, self.count)
    }

    /// Every element of every output must be 1 + 2 + ... + n.
    fn verify(&self, ctx: &Ctx, models: &[Model]) -> R<()> {
        let n = models.len();
        let want = (n * (n + 1) / 2) as f32;
        for (r, (m, recv)) in models.iter().zip(&self.recv).enumerate() {
            m.gpu.bind()?;
            m.compute.sync()?;
            let counter = DevBuf::new(m.gpu, 8)?;
            cu::memset_d32_async(counter.ptr, 0, 2, &m.compute)?;
            let k = &ctx.kernels[ctx
                .gpus
                .iter()
                .position(|g| g.index == m.gpu.index)
                .unwrap_or(r)];
            launch(
                k.check_f32_const,
                helper_grid(m.gpu),
                256,
                &m.compute,
                &mut kargs![recv.ptr, self.count, want, counter.ptr],
            )?;
            m.compute.sync()?;
            let v = cu::dtoh(m.gpu, counter.ptr, 8)?;
            let bad = u64::from_le_bytes(v[..8].try_into().map_err(|_| Fail("short read".into()))?);
            if bad > 0 {
                return Err(Fail(format!(
                    "GPU {}: {bad} elements of the all-reduced gradients are not {want}",
                    m.gpu.index
                )));
            }
        }
        Ok(())
    }
}

fn time_allreduce(
    ctx: &Ctx,
    models: &[Model],
    grads: &Gradients,
    p: &RehearseParams,
) -> R<StageFigure> {
    let n = models.len();
    let mut events = Vec::new();
    for m in models {
        events.push((Event::new(m.gpu)?, Event::new(m.gpu)?));
    }
    let run = |reps: u64| -> R<f64> {
        for (m, (a, _)) in models.iter().zip(&events) {
            m.gpu.bind()?;
            a.record(&m.compute)?;
        }
        for _ in 0..reps {
            grads.enqueue(models)?;
        }
        let mut ms = 0f64;
        for (m, (a, b)) in models.iter().zip(&events) {
            m.gpu.bind()?;
            b.record(&m.compute)?;
            b.sync()?;
            ms = ms.max(a.ms_to(b)?);
        }
        Ok(ms / reps as f64)
    };
    run(2)?;
    let one = run(1)?;
    let reps = repeats_for(p.request.stage_ms, one, 200);
    let per = run(reps)?;
    grads.verify(ctx, models)?;
    let bytes = grads.count * 4;
    let algbw = gbps(bytes as f64, per);
    let batch = p.request.config.batch as f64;
    Ok(StageFigure {
        samples_per_s: n as f64 * batch / (per / 1e3),
        bytes_per_s: bytes as f64 / (per / 1e3),
        samples: reps * n as u64 * batch as u64,
        seconds: per * reps as f64 / 1e3,
        method: format!(
            "NCCL float32 sum all-reduce of the gradients ({}, one float per weight) over {n} \
             GPUs, {reps} times, timed with CUDA events on every GPU; the sums checked",
            human_bytes(bytes)
        ),
        tflops: None,
        busbw_gbps: Some(allreduce_busbw(algbw, n as u32)),
    })
}

/// The whole pipeline: the loader's threads fill staged batches, each GPU copies its batch
/// (copy stream) while computing the previous step (compute stream), the gradients are
/// all-reduced, and CUDA events around each step's GPU work give the busy fraction.
fn pipeline(
    models: &mut [Model],
    grads: Option<&Gradients>,
    p: &RehearseParams,
) -> R<PipelineFigure> {
    let req = &p.request;
    let c = &req.config;
    let n = models.len();
    let bytes = models[0].batch_bytes;
    // Two steps in flight per GPU, and two batches ahead for the loader.
    let mut want = 2 * n + 2;
    let avail = cu::host_available_bytes().unwrap_or(u64::MAX / 8) / 4;
    while want > n + 1 && want as u64 * bytes > avail {
        want -= 1;
    }
    if want as u64 * bytes > avail {
        return Err(Fail(format!(
            "not enough host memory for {want} staged batches of {}",
            human_bytes(bytes)
        )));
    }
    models[0].gpu.bind()?;
    let mut hosts = Vec::new();
    for _ in 0..want {
        hosts.push(HostBatch::new(bytes, c.pinned)?);
    }
    let bufs: Vec<BatchBuf> = hosts.iter_mut().map(HostBatch::buf).collect();
    struct Ev {
        copied: [Event; 2],
        begin: [Event; 2],
        end: [Event; 2],
    }
    let mut evs = Vec::new();
    for m in models.iter() {
        evs.push(Ev {
            copied: [Event::new(m.gpu)?, Event::new(m.gpu)?],
            begin: [Event::new(m.gpu)?, Event::new(m.gpu)?],
            end: [Event::new(m.gpu)?, Event::new(m.gpu)?],
        });
    }
    let ds = Dataset {
        files: req.files.clone(),
    };
    let wait = Duration::from_millis((req.pipeline_ms * 4).max(30_000));
    let budget = Duration::from_millis(req.pipeline_ms);
    let outcome = with_loader(&ds, &req.loader, &bufs, |h| -> R<(u32, f64, Vec<f64>)> {
        let mut busy_ms = vec![0f64; n];
        let mut measured = 0u32;
        let mut t0: Option<Instant> = None;
        let mut last_report = Instant::now();
        let mut k = 0u64;
        loop {
            let slot = (k % 2) as usize;
            let timing = k >= WARMUP_STEPS as u64;
            if timing && t0.is_none() {
                // The warm-up steps are done (synced below): the clock starts now.
                t0 = Some(Instant::now());
            }
            let mut held = Vec::with_capacity(n);
            for (gi, m) in models.iter_mut().enumerate() {
                let b = h.next(wait).map_err(Fail)?;
                held.push(b);
                m.gpu.bind()?;
                let dst = m.input.ptr + slot as u64 * bytes;
                cu::htod_async(dst, bufs[b].ptr as *const std::ffi::c_void, bytes, &m.copy)?;
                evs[gi].copied[slot].record(&m.copy)?;
                m.compute.wait(&evs[gi].copied[slot])?;
                evs[gi].begin[slot].record(&m.compute)?;
                m.enqueue_step(0)?;
            }
            if let Some(g) = grads {
                g.enqueue(models)?;
            }
            for (gi, m) in models.iter().enumerate() {
                m.gpu.bind()?;
                evs[gi].end[slot].record(&m.compute)?;
            }
            // A host batch goes back to the loader once its copy is done.
            for (gi, (m, b)) in models.iter().zip(&held).enumerate() {
                m.gpu.bind()?;
                evs[gi].copied[slot].sync()?;
                h.release(*b);
            }
            // The step before must be done before its slot is used again.
            if k >= 1 {
                let prev = 1 - slot;
                for (gi, m) in models.iter().enumerate() {
                    m.gpu.bind()?;
                    evs[gi].end[prev].sync()?;
                    if k > WARMUP_STEPS as u64 {
                        busy_ms[gi] += evs[gi].begin[prev].ms_to(&evs[gi].end[prev])?;
                    }
                }
                if k > WARMUP_STEPS as u64 {
                    measured += 1;
                }
            }
            if k + 1 == WARMUP_STEPS as u64 {
                for (gi, m) in models.iter().enumerate() {
                    m.gpu.bind()?;
                    evs[gi].end[slot].sync()?;
                }
            }
            k += 1;
            let done = match (c.steps, t0) {
                (Some(s), _) => measured + 1 >= s,
                (None, Some(t)) => t.elapsed() >= budget,
                (None, None) => false,
            };
            // Only the timed steps are the pipeline's (the parent counts NVML's samples from
            // the first of these messages on).
            if t0.is_some() && (measured == 0 || last_report.elapsed() > Duration::from_millis(250))
            {
                last_report = Instant::now();
                let f = match (c.steps, t0) {
                    (Some(s), _) => measured as f64 / s.max(1) as f64,
                    (None, Some(t)) => t.elapsed().as_secs_f64() / budget.as_secs_f64().max(1e-3),
                    _ => 0.0,
                };
                progress(
                    GpuGroup::Rehearse,
                    0.5 + 0.5 * f.min(1.0),
                    format!(
                        "{PIPELINE_PROGRESS}: step {k} on {n} GPU{}",
                        if n == 1 { "" } else { "s" }
                    ),
                );
            }
            if done && timing {
                break;
            }
        }
        // The last step.
        let last = ((k - 1) % 2) as usize;
        for (gi, m) in models.iter().enumerate() {
            m.gpu.bind()?;
            evs[gi].end[last].sync()?;
            busy_ms[gi] += evs[gi].begin[last].ms_to(&evs[gi].end[last])?;
        }
        measured += 1;
        let secs = t0.map_or(0.0, |t| t.elapsed().as_secs_f64());
        Ok((measured, secs, busy_ms))
    })
    .map_err(|e| Fail(format!("the loader failed: {e}")))?;
    let (steps, secs, busy_ms) = outcome?;
    let secs = secs.max(1e-9);
    let busy = busy_ms.iter().map(|b| b / (secs * 1e3)).sum::<f64>() / n as f64;
    Ok(PipelineFigure {
        samples_per_s: steps as f64 * n as f64 * c.batch as f64 / secs,
        steps,
        seconds: secs,
        gpu_busy: busy.min(1.0),
        nvml_utilization_pct: Reading::unavailable("not sampled"),
        method: format!(
            "{steps} steps after {WARMUP_STEPS} of warm-up: {} readers and {} workers fill {want} \
             staged {} batches of {}, each GPU copies its batch on a copy stream while it \
             computes the step before{}; wall time from the first timed step to the last",
            c.readers,
            c.workers,
            if c.pinned { "pinned" } else { "pageable" },
            c.batch,
            if grads.is_some() {
                ", then the gradients are all-reduced"
            } else {
                ""
            }
        ),
    })
}

fn stage(stage: Stage, r: R<StageFigure>) -> StageResult {
    StageResult {
        stage,
        result: match r {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(e.0),
        },
    }
}

pub fn run(ctx: &Ctx, p: &RehearseParams) -> R<RehearsalGpu> {
    let c = &p.request.config;
    let dtype = dtype_for(ctx, p)?;
    let tokens = c.tokens as u64;
    let batch_cols = c.batch as u64 * tokens;
    let mut col_counts = vec![batch_cols];
    if let Some(rb) = p.reference_batch {
        col_counts.push(rb as u64 * tokens);
    }
    let params = c.params();
    let allreduce_bytes = if p.allreduce_skip.is_none() {
        2 * params * 4
    } else {
        0
    };
    progress(GpuGroup::Rehearse, 0.02, "setting up the model on the GPUs");
    // Each GPU's share of its free memory: the model, and the gradients' buffers.
    let mut models = Vec::new();
    let mut reference_note = None;
    for (gi, g) in ctx.gpus.iter().enumerate() {
        let (free, _) = g.mem_info()?;
        let budget = (free / 4 * 3).saturating_sub(allreduce_bytes);
        let elem = if dtype == GemmDtype::Bf16 { 2 } else { 4 };
        let mut cols = col_counts.clone();
        let need = |cols: &[u64]| {
            Model::bytes_needed(
                elem,
                c.width as u64,
                c.depth as u64,
                cols.iter().copied().max().unwrap_or(1),
                c.batch as u64 * c.tensor_bytes,
                p.workspace_bytes,
            )
        };
        if cols.len() > 1 && need(&cols) > budget {
            cols.truncate(1);
            reference_note = Some(format!(
                "GPU {}: not enough free memory for the step at batch {} as well",
                g.index,
                p.reference_batch.unwrap_or(0)
            ));
        }
        models.push(Model::new(g, &ctx.kernels[gi], dtype, p, &cols, budget)?);
    }
    if let Some(n) = &reference_note {
        log(n.clone());
    }
    let library = if dtype == GemmDtype::Bf16 {
        // The plans were made: the library is loaded.
        format!("cublasLt {}", LtHandle::version())
    } else {
        "cublas (fp32)".into()
    };
    let n = models.len();
    let gpus_text = format!("{n} GPU{}", if n == 1 { "" } else { "s" });

    progress(GpuGroup::Rehearse, 0.1, "host-to-device copies alone");
    let h2d = time_copies(ctx, &models, p);

    progress(GpuGroup::Rehearse, 0.2, "the GPU step alone");
    let step_ms = time_steps(&mut models, 0, p.request.stage_ms);
    let step = step_ms.as_ref().map_err(|e| e.clone()).map(|ms| {
        step_figure(
            &models,
            0,
            ms,
            c.batch,
            format!(
                "{} GEMMs a step ({} layers of {}x{} {}, forward and backward) on {} columns \
                 ({} samples of {} tokens) on {gpus_text} at once, {} steps timed with CUDA \
                 events after {WARMUP_STEPS} of warm-up; the slowest GPU sets the pace",
                3 * c.depth,
                c.depth,
                c.width,
                c.width,
                dtype.as_str(),
                batch_cols,
                c.batch,
                c.tokens,
                repeats_for(
                    p.request.stage_ms,
                    ms.iter().copied().fold(0.0, f64::max),
                    500
                )
            ),
        )
    });
    let step_ms_values: Vec<GpuValue> = match &step_ms {
        Ok(ms) => models
            .iter()
            .zip(ms)
            .map(|(m, v)| GpuValue {
                gpu: m.gpu.index,
                value: *v,
            })
            .collect(),
        Err(_) => Vec::new(),
    };

    let reference = match p.reference_batch {
        None => Reading::unavailable("the rehearsed batch is the reference batch or larger"),
        Some(_) if models.iter().any(|m| m.plans.len() < 2) => {
            Reading::unavailable(reference_note.unwrap_or_else(|| "not enough free memory".into()))
        }
        Some(rb) => {
            progress(
                GpuGroup::Rehearse,
                0.3,
                format!("the GPU step alone at batch {rb}"),
            );
            match time_steps(&mut models, 1, p.request.stage_ms) {
                Ok(ms) => Reading::Value(step_figure(
                    &models,
                    1,
                    &ms,
                    rb,
                    format!("the same step at batch {rb} on {gpus_text}"),
                )),
                Err(e) => Reading::Unavailable(e.0),
            }
        }
    };

    let grads = match &p.allreduce_skip {
        Some(why) => Err(Fail(why.clone())),
        None => {
            progress(
                GpuGroup::Rehearse,
                0.4,
                format!("gradient all-reduce over {gpus_text}"),
            );
            Gradients::new(ctx, &models, params)
        }
    };
    let allreduce = match &grads {
        Ok(g) => time_allreduce(ctx, &models, g, p),
        Err(e) => Err(e.clone()),
    };

    progress(
        GpuGroup::Rehearse,
        0.5,
        format!("starting the pipeline on {gpus_text}"),
    );
    let pipe = pipeline(&mut models, grads.as_ref().ok(), p);

    let mut stages = vec![stage(Stage::H2d, h2d), stage(Stage::GpuStep, step)];
    if p.allreduce_skip.is_none() {
        stages.push(stage(Stage::AllReduce, allreduce));
    }
    let gpus = models.iter().map(|m| m.gpu.index).collect();
    // Communicators and buffers go before the models' streams and handles; each model goes
    // with its own GPU current (as cuBLAS handles want).
    drop(grads);
    for m in models {
        let _ = m.gpu.bind();
        let _ = m.compute.sync();
        drop(m);
    }
    Ok(RehearsalGpu {
        gpus,
        dtype: dtype.as_str().into(),
        library,
        stages,
        reference,
        reference_batch: p.reference_batch.unwrap_or(c.batch),
        step_ms: step_ms_values,
        pipeline: match pipe {
            Ok(v) => Reading::Value(v),
            Err(e) => Reading::Unavailable(e.0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_fill_the_time_within_bounds() {
        assert_eq!(repeats_for(1000, 10.0, 500), 100);
        assert_eq!(repeats_for(1000, 900.0, 500), MIN_REPEATS);
        assert_eq!(repeats_for(1000, 0.001, 500), 500);
        assert_eq!(repeats_for(1000, 0.0, 500), 500);
    }

    #[test]
    fn the_model_memory_counts_every_buffer() {
        // bf16, width 2048, depth 16, 32768 columns (batch 256 x 128 tokens), 150 MB batches.
        let b = Model::bytes_needed(2, 2048, 16, 32768, 150 << 20, 32 << 20);
        let want = 2 * (2 * 16 * 2048 * 2048 + 19 * 2048 * 32768) + 2 * (150 << 20) + (32 << 20);
        assert_eq!(b, want);
        assert!(b < 4 << 30, "{b}");
    }
}
