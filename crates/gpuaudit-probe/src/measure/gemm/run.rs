//! Matrix multiply throughput per data type: cuBLASLt for the tensor-core types (bf16, fp16,
//! tf32, fp8), cuBLAS for fp32 and fp64. Random inputs (zeros run faster than real data),
//! output checked against a CPU reference on sampled elements.

use super::plan::{GemmLayout, GemmParams};
use crate::measure::child::cu::{
    self, helper_grid, human_bytes, kargs, launch, DevBuf, Event, Gpu, Kernels, Stream, R,
};
use crate::measure::child::{guarded, log, progress, Ctx, Fail};
use crate::measure::fill;
use crate::measure::gate::GpuOrder;
use crate::measure::GpuGroup;
use cudarc::cublas::sys as blas;
use cudarc::cublaslt::sys as lt;
use gpuaudit_core::facts::{GemmDtype, GemmPoint, GemmResult, OnGpu};
use gpuaudit_core::Reading;
use std::ffi::c_void;
use std::ptr;
use std::time::{Duration, Instant};

const SEED_A: u64 = 101;
const SEED_B: u64 = 102;

fn status_name(code: u32) -> &'static str {
    match code {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "unknown cuBLAS status",
    }
}

fn status(code: u32, call: &str) -> R<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(Fail(format!("{call}: {} ({code})", status_name(code))))
    }
}

pub(in crate::measure) fn lck(r: lt::cublasStatus_t, call: &str) -> R<()> {
    status(r as u32, call)
}

pub(in crate::measure) fn bck(r: blas::cublasStatus_t, call: &str) -> R<()> {
    status(r as u32, call)
}

/// A cuBLASLt handle.
pub struct LtHandle(lt::cublasLtHandle_t);

impl LtHandle {
    pub(in crate::measure) fn raw(&self) -> lt::cublasLtHandle_t {
        self.0
    }

    pub fn new(gpu: &Gpu) -> R<LtHandle> {
        gpu.bind()?;
        let mut h: lt::cublasLtHandle_t = ptr::null_mut();
        guarded("loading libcublasLt", || {
            // SAFETY: writes one handle.
            lck(unsafe { lt::cublasLtCreate(&mut h) }, "cublasLtCreate")
        })?;
        Ok(LtHandle(h))
    }

    pub fn version() -> usize {
        // SAFETY: no arguments; the library is loaded (a handle exists).
        unsafe { lt::cublasLtGetVersion() }
    }
}

impl Drop for LtHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasLtCreate, destroyed once.
        unsafe {
            let _ = lt::cublasLtDestroy(self.0);
        }
    }
}

/// A cuBLAS handle with default math (tensor cores only for the reduced types, so fp32 GEMMs
/// stay fp32: TF32 needs CUBLAS_TF32_TENSOR_OP_MATH or the compute type, neither set here).
pub struct BlasHandle(blas::cublasHandle_t);

impl BlasHandle {
    pub(in crate::measure) fn raw(&self) -> blas::cublasHandle_t {
        self.0
    }

    pub fn new(gpu: &Gpu) -> R<BlasHandle> {
        gpu.bind()?;
        let mut h: blas::cublasHandle_t = ptr::null_mut();
        guarded("loading libcublas", || {
            // SAFETY: writes one handle; the GPU's primary context is current.
            bck(unsafe { blas::cublasCreate_v2(&mut h) }, "cublasCreate")
        })?;
        let handle = BlasHandle(h);
        // SAFETY: a live handle.
        bck(
            unsafe { blas::cublasSetMathMode(h, blas::cublasMath_t::CUBLAS_DEFAULT_MATH) },
            "cublasSetMathMode",
        )?;
        Ok(handle)
    }

    pub fn version(&self) -> Option<i32> {
        let mut v = 0;
        // SAFETY: writes one int.
        let r = unsafe { blas::cublasGetVersion_v2(self.0, &mut v) };
        (r as u32 == 0).then_some(v)
    }
}

impl Drop for BlasHandle {
    fn drop(&mut self) {
        // SAFETY: created by cublasCreate, destroyed once.
        unsafe {
            let _ = blas::cublasDestroy_v2(self.0);
        }
    }
}

/// Handles of one GPU, created on first use.
#[derive(Default)]
pub struct Handles {
    lt: Option<Result<LtHandle, Fail>>,
    blas: Option<Result<BlasHandle, Fail>>,
}

impl Handles {
    pub(in crate::measure) fn lt(&mut self, gpu: &Gpu) -> R<&LtHandle> {
        self.lt
            .get_or_insert_with(|| LtHandle::new(gpu))
            .as_ref()
            .map_err(|e| e.clone())
    }
    pub(in crate::measure) fn blas(&mut self, gpu: &Gpu) -> R<&BlasHandle> {
        self.blas
            .get_or_insert_with(|| BlasHandle::new(gpu))
            .as_ref()
            .map_err(|e| e.clone())
    }
}

pub fn in_bytes(d: GemmDtype) -> u64 {
    match d {
        GemmDtype::Fp64 => 8,
        GemmDtype::Fp32 | GemmDtype::Tf32 => 4,
        GemmDtype::Fp16 | GemmDtype::Bf16 => 2,
        GemmDtype::Fp8 => 1,
    }
}

pub fn out_bytes(d: GemmDtype) -> u64 {
    match d {
        GemmDtype::Fp8 => 2, // bf16 output
        other => in_bytes(other),
    }
}

/// Error bound of a sampled output, relative to the L2 norm of the products summed: input
/// rounding (tf32), accumulation order and the output's own rounding, with margin. fp32 is
/// strict enough that a TF32 path (about 5e-4) fails it.
pub fn tolerance(d: GemmDtype) -> f64 {
    match d {
        GemmDtype::Fp64 => 1e-10,
        GemmDtype::Fp32 => 1e-4,
        GemmDtype::Tf32 => 1e-2,
        GemmDtype::Fp16 => 1e-2,
        GemmDtype::Bf16 => 3e-2,
        GemmDtype::Fp8 => 5e-2,
    }
}

fn decode_in(d: GemmDtype, b: &[u8]) -> f64 {
    match d {
        GemmDtype::Fp64 => f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])),
        GemmDtype::Fp32 | GemmDtype::Tf32 => {
            f32::from_le_bytes(b[..4].try_into().unwrap_or([0; 4])) as f64
        }
        GemmDtype::Fp16 => fill::decode_f16(u16::from_le_bytes([b[0], b[1]])),
        GemmDtype::Bf16 => fill::decode_bf16(u16::from_le_bytes([b[0], b[1]])),
        GemmDtype::Fp8 => fill::decode_e4m3(b[0]),
    }
}

fn decode_out(d: GemmDtype, b: &[u8]) -> f64 {
    match d {
        GemmDtype::Fp8 => fill::decode_bf16(u16::from_le_bytes([b[0], b[1]])),
        other => decode_in(other, b),
    }
}

/// The cuBLASLt descriptors of one GEMM shape, destroyed on drop.
pub(in crate::measure) struct LtPlan {
    desc: lt::cublasLtMatmulDesc_t,
    layouts: [lt::cublasLtMatrixLayout_t; 3],
    algo: lt::cublasLtMatmulAlgo_t,
    /// fp8: the per-tensor scales of A and B (1.0 each), on the device.
    _scales: Option<DevBuf>,
}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created once and is destroyed once.
        unsafe {
            for l in self.layouts {
                if !l.is_null() {
                    let _ = lt::cublasLtMatrixLayoutDestroy(l);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::cublasLtMatmulDescDestroy(self.desc);
            }
        }
    }
}

fn set_desc<T>(
    desc: lt::cublasLtMatmulDesc_t,
    attr: lt::cublasLtMatmulDescAttributes_t,
    v: &T,
) -> R<()> {
    // SAFETY: `v` is a value of the attribute's documented type and size.
    lck(
        unsafe {
            lt::cublasLtMatmulDescSetAttribute(
                desc,
                attr,
                v as *const T as *const c_void,
                std::mem::size_of::<T>(),
            )
        },
        &format!("cublasLtMatmulDescSetAttribute({attr:?})"),
    )
}

fn lt_types(d: GemmDtype) -> (lt::cudaDataType, lt::cudaDataType, lt::cublasComputeType_t) {
    use lt::cublasComputeType_t as C;
    use lt::cudaDataType as T;
    match d {
        GemmDtype::Bf16 => (T::CUDA_R_16BF, T::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F),
        GemmDtype::Fp16 => (T::CUDA_R_16F, T::CUDA_R_16F, C::CUBLAS_COMPUTE_32F),
        GemmDtype::Tf32 => (
            T::CUDA_R_32F,
            T::CUDA_R_32F,
            C::CUBLAS_COMPUTE_32F_FAST_TF32,
        ),
        GemmDtype::Fp8 => (T::CUDA_R_8F_E4M3, T::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F),
        GemmDtype::Fp32 => (T::CUDA_R_32F, T::CUDA_R_32F, C::CUBLAS_COMPUTE_32F),
        GemmDtype::Fp64 => (T::CUDA_R_64F, T::CUDA_R_64F, C::CUBLAS_COMPUTE_64F),
    }
}

/// How an fp8 GEMM is set up: cuBLASLt versions differ in which of these they accept, so the
/// plan is tried from the fastest setup down (`Fp8Setup::TRIES`).
#[derive(Clone, Copy, Debug)]
struct Fp8Setup {
    /// Hopper's fast fp8 accumulation (what inference and Transformer Engine forward passes
    /// use; without it the figure is about half).
    fast_accum: bool,
    /// Per-tensor scales of 1.0 passed explicitly, as NVIDIA's fp8 sample does.
    scales: bool,
}

impl Fp8Setup {
    const TRIES: [Fp8Setup; 3] = [
        Fp8Setup {
            fast_accum: true,
            scales: true,
        },
        Fp8Setup {
            fast_accum: true,
            scales: false,
        },
        Fp8Setup {
            fast_accum: false,
            scales: false,
        },
    ];

    fn describe(self) -> &'static str {
        match (self.fast_accum, self.scales) {
            (true, true) => "fast accumulation, unit scales",
            (true, false) => "fast accumulation",
            (false, _) => "fp32 accumulation",
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn lt_plan(
    h: &LtHandle,
    gpu: &Gpu,
    s: &Stream,
    d: GemmDtype,
    n: u64,
    ta: bool,
    ws: u64,
    fp8: Fp8Setup,
) -> R<LtPlan> {
    lt_plan_shape(
        h,
        gpu,
        s,
        d,
        Shape {
            m: n,
            n,
            k: n,
            ta,
            tb: false,
        },
        ws,
        fp8,
    )
}

/// A GEMM's shape, column-major as cuBLAS sees it: D (m x n) = op(A) · op(B), op(A) m x k,
/// op(B) k x n, with A or B stored transposed where `ta` / `tb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::measure) struct Shape {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub ta: bool,
    pub tb: bool,
}

impl Shape {
    /// (rows, cols) of A and B as stored (their leading dimension is the row count).
    fn stored(self) -> [(u64, u64); 2] {
        [
            if self.ta {
                (self.k, self.m)
            } else {
                (self.m, self.k)
            },
            if self.tb {
                (self.n, self.k)
            } else {
                (self.k, self.n)
            },
        ]
    }
}

/// The cuBLASLt plan (descriptors and the heuristic's algorithm) of a GEMM of any shape, for
/// the tensor-core types (not fp8).
pub(in crate::measure) fn lt_plan_for(
    h: &LtHandle,
    gpu: &Gpu,
    s: &Stream,
    d: GemmDtype,
    shape: Shape,
    ws: u64,
) -> R<LtPlan> {
    lt_plan_shape(h, gpu, s, d, shape, ws, Fp8Setup::TRIES[0])
}

#[allow(clippy::too_many_arguments)]
fn lt_plan_shape(
    h: &LtHandle,
    gpu: &Gpu,
    s: &Stream,
    d: GemmDtype,
    shape: Shape,
    ws: u64,
    fp8: Fp8Setup,
) -> R<LtPlan> {
    let Shape { m, n, k, ta, tb } = shape;
    let (tin, tout, compute) = lt_types(d);
    let mut plan = LtPlan {
        desc: ptr::null_mut(),
        layouts: [ptr::null_mut(); 3],
        algo: lt::cublasLtMatmulAlgo_t { data: [0; 8] },
        _scales: None,
    };
    // SAFETY: writes one descriptor handle.
    lck(
        unsafe {
            lt::cublasLtMatmulDescCreate(&mut plan.desc, compute, lt::cudaDataType::CUDA_R_32F)
        },
        "cublasLtMatmulDescCreate",
    )?;
    use lt::cublasLtMatmulDescAttributes_t as A;
    let op_t: i32 = 1; // CUBLAS_OP_T
    let op_n: i32 = 0;
    set_desc(
        plan.desc,
        A::CUBLASLT_MATMUL_DESC_TRANSA,
        if ta { &op_t } else { &op_n },
    )?;
    set_desc(
        plan.desc,
        A::CUBLASLT_MATMUL_DESC_TRANSB,
        if tb { &op_t } else { &op_n },
    )?;
    if d == GemmDtype::Fp8 {
        if fp8.fast_accum {
            let fast: i8 = 1;
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast)?;
        }
        if fp8.scales {
            // Two f32 scales of 1.0 (the attributes hold device pointers), each on its own
            // 256-byte boundary as cuBLASLt wants its operands.
            let scales = DevBuf::new(gpu, 512)?;
            cu::memset_d32_async(scales.ptr, 1.0f32.to_bits(), 128, s)?;
            s.sync()?;
            let (pa, pb) = (scales.ptr, scales.ptr + 256);
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &pa)?;
            set_desc(plan.desc, A::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &pb)?;
            plan._scales = Some(scales);
        }
    }
    let [(ar, ac), (br, bc)] = shape.stored();
    let dims = [
        (tin, ar, ac, ar as i64),
        (tin, br, bc, br as i64),
        (tout, m, n, m as i64),
    ];
    for (slot, (t, rows, cols, ld)) in dims.into_iter().enumerate() {
        // SAFETY: writes one layout handle.
        lck(
            unsafe { lt::cublasLtMatrixLayoutCreate(&mut plan.layouts[slot], t, rows, cols, ld) },
            "cublasLtMatrixLayoutCreate",
        )?;
    }
    let mut pref: lt::cublasLtMatmulPreference_t = ptr::null_mut();
    // SAFETY: writes one handle.
    lck(
        unsafe { lt::cublasLtMatmulPreferenceCreate(&mut pref) },
        "cublasLtMatmulPreferenceCreate",
    )?;
    let ws_bytes: u64 = ws;
    // SAFETY: MAX_WORKSPACE_BYTES is a uint64_t.
    let r = unsafe {
        lt::cublasLtMatmulPreferenceSetAttribute(
            pref,
            lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            &ws_bytes as *const u64 as *const c_void,
            8,
        )
    };
    let result = lck(r, "cublasLtMatmulPreferenceSetAttribute").and_then(|_| {
        // SAFETY: an all-zero heuristic result is a valid initial value (plain data).
        let mut res: [lt::cublasLtMatmulHeuristicResult_t; 4] = unsafe { std::mem::zeroed() };
        let mut found = 0i32;
        // SAFETY: the array holds 4 results; all descriptors are live.
        lck(
            unsafe {
                lt::cublasLtMatmulAlgoGetHeuristic(
                    h.0,
                    plan.desc,
                    plan.layouts[0],
                    plan.layouts[1],
                    plan.layouts[2],
                    plan.layouts[2],
                    pref,
                    res.len() as i32,
                    res.as_mut_ptr(),
                    &mut found,
                )
            },
            "cublasLtMatmulAlgoGetHeuristic",
        )?;
        let best = res
            .iter()
            .take(found.max(0) as usize)
            .find(|r| r.state as u32 == 0)
            .ok_or_else(|| {
                Fail(format!(
                    "cuBLASLt has no algorithm for a {} {m}x{n}x{k} GEMM on this GPU",
                    d.as_str()
                ))
            })?;
        Ok(best.algo)
    });
    // SAFETY: created above, destroyed once.
    unsafe {
        let _ = lt::cublasLtMatmulPreferenceDestroy(pref);
    }
    plan.algo = result?;
    Ok(plan)
}

/// One D = op(A)·B through cuBLASLt (alpha 1, beta 0; C is read, D written).
#[allow(clippy::too_many_arguments)]
fn lt_matmul(
    handle: lt::cublasLtHandle_t,
    plan: &LtPlan,
    a: &DevBuf,
    b: &DevBuf,
    c_src: cudarc::driver::sys::CUdeviceptr,
    d: &DevBuf,
    ws: &DevBuf,
    s: &Stream,
) -> R<()> {
    lt_matmul_at(handle, plan, 1.0, [a.ptr, b.ptr, c_src, d.ptr], ws, s)
}

/// D = alpha·op(A)·op(B) through cuBLASLt (beta 0), operands given as device addresses
/// `[A, B, C, D]` (C is read, D written; they may be the same).
pub(in crate::measure) fn lt_matmul_at(
    handle: lt::cublasLtHandle_t,
    plan: &LtPlan,
    alpha: f32,
    ptrs: [cudarc::driver::sys::CUdeviceptr; 4],
    ws: &DevBuf,
    s: &Stream,
) -> R<()> {
    let beta = 0.0f32;
    let [a, b, c_src, d] = ptrs;
    // SAFETY: operands, workspace and descriptors are live and sized for the plan's shape
    // (the callers' buffers hold the plan's matrices); alpha/beta match the f32 scale type;
    // beta is 0.
    lck(
        unsafe {
            lt::cublasLtMatmul(
                handle,
                plan.desc,
                &alpha as *const f32 as *const c_void,
                a as *const c_void,
                plan.layouts[0],
                b as *const c_void,
                plan.layouts[1],
                &beta as *const f32 as *const c_void,
                c_src as *const c_void,
                plan.layouts[2],
                d as *mut c_void,
                plan.layouts[2],
                &plan.algo,
                ws.ptr as *mut c_void,
                ws.bytes as usize,
                s.raw as lt::cudaStream_t,
            )
        },
        "cublasLtMatmul",
    )
}

enum Exec {
    Lt {
        handle: lt::cublasLtHandle_t,
        plan: LtPlan,
        ws: DevBuf,
        /// fp8: the C operand, apart from D.
        c_in: Option<DevBuf>,
    },
    Blas {
        handle: blas::cublasHandle_t,
    },
}

/// One square GEMM, C = op(A)·B, ready to run repeatedly.
pub struct Gemm<'g> {
    gpu: &'g Gpu,
    pub dtype: GemmDtype,
    pub n: u64,
    ta: bool,
    a: DevBuf,
    b: DevBuf,
    pub c: DevBuf,
    exec: Exec,
    pub library: String,
}

impl<'g> Gemm<'g> {
    /// Allocates and fills the operands (sized down from `want` until they fit in 3/4 of the
    /// free memory) and picks the algorithm.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &'g Gpu,
        k: &Kernels,
        handles: &mut Handles,
        dtype: GemmDtype,
        want: u64,
        layout: GemmLayout,
        ws_bytes: u64,
        s: &Stream,
    ) -> R<Gemm<'g>> {
        let (major, minor) = gpu.cc;
        if !dtype.supported_on(gpuaudit_core::facts::ComputeCapability { major, minor }) {
            return Err(Fail(format!(
                "{} needs tensor cores this GPU (compute capability {major}.{minor}) lacks",
                dtype.as_str()
            )));
        }
        let (free, _) = gpu.mem_info()?;
        let mut n = want.max(256) / 256 * 256;
        let need = |n: u64| n * n * (2 * in_bytes(dtype) + out_bytes(dtype)) + ws_bytes;
        while n > 1024 && need(n) > free / 4 * 3 {
            n /= 2;
        }
        if need(n) > free / 4 * 3 {
            return Err(Fail(format!(
                "not enough free memory for a {n}x{n} {} GEMM ({} free)",
                dtype.as_str(),
                human_bytes(free)
            )));
        }
        let ta = layout.a_transposed(dtype);
        let a = DevBuf::new(gpu, n * n * in_bytes(dtype))?;
        let b = DevBuf::new(gpu, n * n * in_bytes(dtype))?;
        let c = DevBuf::new(gpu, n * n * out_bytes(dtype))?;
        let f = match dtype {
            GemmDtype::Fp64 => k.fill_f64,
            GemmDtype::Fp32 | GemmDtype::Tf32 => k.fill_f32,
            GemmDtype::Fp16 => k.fill_f16,
            GemmDtype::Bf16 => k.fill_bf16,
            GemmDtype::Fp8 => k.fill_e4m3,
        };
        let elems = n * n;
        launch(
            f,
            helper_grid(gpu),
            256,
            s,
            &mut kargs![a.ptr, elems, SEED_A],
        )?;
        launch(
            f,
            helper_grid(gpu),
            256,
            s,
            &mut kargs![b.ptr, elems, SEED_B],
        )?;
        cu::memset_d32_async(c.ptr, 0, c.bytes / 4, s)?;
        s.sync()?;
        let (exec, library) = match dtype {
            GemmDtype::Fp32 | GemmDtype::Fp64 => {
                let h = handles.blas(gpu)?;
                let v = h.version().map(|v| format!(" {v}")).unwrap_or_default();
                (Exec::Blas { handle: h.0 }, format!("cublas{v}"))
            }
            _ => {
                let h = handles.lt(gpu)?;
                let ws = DevBuf::new(gpu, ws_bytes.max(256))?;
                // fp8 GEMMs refuse to run in place (C aliasing D), so they read a C of
                // their own (zeros, beta 0).
                let c_in = if dtype == GemmDtype::Fp8 {
                    let x = DevBuf::new(gpu, n * n * out_bytes(dtype))?;
                    cu::memset_d32_async(x.ptr, 0, x.bytes / 4, s)?;
                    s.sync()?;
                    Some(x)
                } else {
                    None
                };
                let (plan, setup) = match &c_in {
                    Some(c_src) => {
                        // The first setup this cuBLASLt accepts, proven by one GEMM.
                        let mut last = Fail("no fp8 setup to try".into());
                        let mut chosen = None;
                        for setup in Fp8Setup::TRIES {
                            let trial = lt_plan(h, gpu, s, dtype, n, ta, ws_bytes, setup).and_then(
                                |plan| {
                                    lt_matmul(h.0, &plan, &a, &b, c_src.ptr, &c, &ws, s)?;
                                    s.sync()?;
                                    Ok(plan)
                                },
                            );
                            match trial {
                                Ok(plan) => {
                                    chosen = Some((plan, Some(setup)));
                                    break;
                                }
                                Err(e) => last = e,
                            }
                        }
                        chosen.ok_or(last)?
                    }
                    None => (
                        lt_plan(h, gpu, s, dtype, n, ta, ws_bytes, Fp8Setup::TRIES[0])?,
                        None,
                    ),
                };
                (
                    Exec::Lt {
                        handle: h.0,
                        plan,
                        ws,
                        c_in,
                    },
                    match setup {
                        Some(f) => format!("cublasLt {} ({})", LtHandle::version(), f.describe()),
                        None => format!("cublasLt {}", LtHandle::version()),
                    },
                )
            }
        };
        Ok(Gemm {
            gpu,
            dtype,
            n,
            ta,
            a,
            b,
            c,
            exec,
            library,
        })
    }

    pub fn layout(&self) -> &'static str {
        if self.ta {
            "TN"
        } else {
            "NN"
        }
    }

    pub fn flops(&self) -> f64 {
        2.0 * (self.n as f64).powi(3)
    }

    /// Puts `count` GEMMs on the stream.
    pub fn enqueue(&self, s: &Stream, count: u32) -> R<()> {
        self.gpu.bind()?;
        let n = self.n as i32;
        let lda = n; // n either way: the matrices are square
        match &self.exec {
            Exec::Lt {
                handle,
                plan,
                ws,
                c_in,
            } => {
                let c_src = c_in.as_ref().map_or(self.c.ptr, |x| x.ptr);
                for _ in 0..count {
                    lt_matmul(*handle, plan, &self.a, &self.b, c_src, &self.c, ws, s)?;
                }
            }
            Exec::Blas { handle } => {
                // SAFETY: a live handle and stream of this GPU.
                bck(
                    unsafe { blas::cublasSetStream_v2(*handle, s.raw as blas::cudaStream_t) },
                    "cublasSetStream",
                )?;
                let ta = if self.ta {
                    blas::cublasOperation_t::CUBLAS_OP_T
                } else {
                    blas::cublasOperation_t::CUBLAS_OP_N
                };
                let tb = blas::cublasOperation_t::CUBLAS_OP_N;
                for _ in 0..count {
                    // SAFETY: n x n operands of the right element type, live; host scalars.
                    let r = unsafe {
                        if self.dtype == GemmDtype::Fp64 {
                            let (al, be) = (1.0f64, 0.0f64);
                            blas::cublasDgemm_v2(
                                *handle,
                                ta,
                                tb,
                                n,
                                n,
                                n,
                                &al,
                                self.a.ptr as *const f64,
                                lda,
                                self.b.ptr as *const f64,
                                n,
                                &be,
                                self.c.ptr as *mut f64,
                                n,
                            )
                        } else {
                            let (al, be) = (1.0f32, 0.0f32);
                            blas::cublasSgemm_v2(
                                *handle,
                                ta,
                                tb,
                                n,
                                n,
                                n,
                                &al,
                                self.a.ptr as *const f32,
                                lda,
                                self.b.ptr as *const f32,
                                n,
                                &be,
                                self.c.ptr as *mut f32,
                                n,
                            )
                        }
                    };
                    bck(
                        r,
                        if self.dtype == GemmDtype::Fp64 {
                            "cublasDgemm"
                        } else {
                            "cublasSgemm"
                        },
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Checks `samples` output elements against an f64 dot product of the operands read
    /// back from the device. Returns (largest relative error, ok).
    pub fn verify(&self, samples: u32) -> R<(f64, bool)> {
        let n = self.n;
        let ie = in_bytes(self.dtype);
        let oe = out_bytes(self.dtype);
        let tol = tolerance(self.dtype);
        let mut worst = 0f64;
        self.check_fill_mirror()?;
        for t in 0..samples.max(1) as u64 {
            let i = fill::rnd(997, 2 * t) % n;
            let j = fill::rnd(997, 2 * t + 1) % n;
            // Row i of op(A): contiguous when A is stored transposed, else strided by n.
            let arow = if self.ta {
                cu::dtoh(self.gpu, self.a.at(i * n * ie), n * ie)?
            } else {
                cu::dtoh_strided(self.gpu, self.a.at(i * ie), n, ie, n * ie)?
            };
            let bcol = cu::dtoh(self.gpu, self.b.at(j * n * ie), n * ie)?;
            let cv = cu::dtoh(self.gpu, self.c.at((i + j * n) * oe), oe)?;
            let (mut dot, mut l2) = (0f64, 0f64);
            for kk in 0..n as usize {
                let a = decode_in(self.dtype, &arow[kk * ie as usize..]);
                let b = decode_in(self.dtype, &bcol[kk * ie as usize..]);
                if !((0.5..2.0).contains(&a.abs()) && (0.5..2.0).contains(&b.abs())) {
                    return Err(Fail(format!(
                        "{} GEMM inputs are not what the fill kernel should write (A={a}, B={b})",
                        self.dtype.as_str()
                    )));
                }
                dot += a * b;
                l2 += (a * b) * (a * b);
            }
            let got = decode_out(self.dtype, &cv);
            let err = if got.is_finite() {
                (got - dot).abs() / l2.sqrt().max(f64::MIN_POSITIVE)
            } else {
                f64::INFINITY
            };
            worst = worst.max(err);
        }
        Ok((worst, worst <= tol))
    }

    /// The first elements of A must be what the host's copy of the fill function gives; a
    /// difference means the PTX and fill.rs disagree (a gpuaudit bug), which is logged: the
    /// GEMM check itself compares against the operands actually on the device.
    fn check_fill_mirror(&self) -> R<()> {
        let ie = in_bytes(self.dtype);
        let got = cu::dtoh(self.gpu, self.a.ptr, 4 * ie)?;
        for i in 0..4u64 {
            let b = &got[(i * ie) as usize..((i + 1) * ie) as usize];
            let want: Vec<u8> = match self.dtype {
                GemmDtype::Fp64 => fill::bits_f64(SEED_A, i).to_le_bytes().to_vec(),
                GemmDtype::Fp32 | GemmDtype::Tf32 => {
                    fill::bits_f32(SEED_A, i).to_le_bytes().to_vec()
                }
                GemmDtype::Fp16 => fill::bits_f16(SEED_A, i).to_le_bytes().to_vec(),
                GemmDtype::Bf16 => fill::bits_bf16(SEED_A, i).to_le_bytes().to_vec(),
                GemmDtype::Fp8 => vec![fill::bits_e4m3(SEED_A, i)],
            };
            if b != want.as_slice() {
                log(format!(
                    "GPU {}: fill kernel and fill.rs disagree on {} element {i}: {b:02x?} vs {want:02x?}",
                    self.gpu.index,
                    self.dtype.as_str()
                ));
                break;
            }
        }
        Ok(())
    }

    /// An order-independent 64-bit fingerprint of the whole output.
    pub fn checksum(&self, k: &Kernels, s: &Stream) -> R<u64> {
        self.gpu.bind()?;
        let out = DevBuf::new(self.gpu, 8)?;
        cu::memset_d32_async(out.ptr, 0, 2, s)?;
        let words = self.c.bytes / 4;
        launch(
            k.checksum_u32,
            helper_grid(self.gpu),
            256,
            s,
            &mut kargs![self.c.ptr, words, out.ptr],
        )?;
        s.sync()?;
        let v = cu::dtoh(self.gpu, out.ptr, 8)?;
        Ok(u64::from_le_bytes(
            v[..8].try_into().map_err(|_| Fail("short read".into()))?,
        ))
    }
}

/// Times `batches` batches of `repeats` GEMMs after a warm-up; TFLOPS of each batch.
pub fn time_batches(g: &Gpu, gemm: &Gemm, s: &Stream, repeats: u32, batches: u32) -> R<Vec<f64>> {
    gemm.enqueue(s, 2)?;
    s.sync()?;
    let (a, b) = (Event::new(g)?, Event::new(g)?);
    let mut out = Vec::new();
    for _ in 0..batches.max(1) {
        a.record(s)?;
        gemm.enqueue(s, repeats)?;
        b.record(s)?;
        b.sync()?;
        let ms = a.ms_to(&b)?;
        out.push(gemm.flops() * repeats as f64 / (ms / 1e3) / 1e12);
    }
    Ok(out)
}

pub fn run(ctx: &Ctx, p: &GemmParams) -> R<Vec<OnGpu<Vec<GemmResult>>>> {
    let n_gpus = ctx.gpus.len();
    let per_gpu: Vec<Reading<Vec<GemmResult>>> = match p.order {
        GpuOrder::AllAtOnce if n_gpus > 1 => {
            log(format!("GEMMs measured on {n_gpus} GPUs at once"));
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..n_gpus)
                    .map(|gi| {
                        s.spawn(move || {
                            // The GPUs run side by side: the first one's progress stands for all.
                            let report = |f: f64, msg: String| {
                                if gi == 0 {
                                    progress(GpuGroup::Gemm, f, format!("{msg} (and the others)"));
                                }
                            };
                            let g = &ctx.gpus[gi];
                            guarded(&format!("GEMM on GPU {}", g.index), || {
                                Ok(all_dtypes(ctx, gi, p, report))
                            })
                            .unwrap_or_else(|e| Reading::Unavailable(e.0))
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| {
                        h.join()
                            .unwrap_or_else(|_| Reading::unavailable("GEMM thread panicked"))
                    })
                    .collect()
            })
        }
        GpuOrder::Interleaved if n_gpus > 1 => interleaved(ctx, p),
        _ => (0..n_gpus)
            .map(|gi| {
                all_dtypes(ctx, gi, p, |f, msg| {
                    progress(GpuGroup::Gemm, (gi as f64 + f) / n_gpus as f64, msg)
                })
            })
            .collect(),
    };
    Ok(ctx.per_gpu(per_gpu))
}

/// Every data type of the plan on one GPU, in order, with the cool-down between them.
fn all_dtypes(
    ctx: &Ctx,
    gi: usize,
    p: &GemmParams,
    report: impl Fn(f64, String),
) -> Reading<Vec<GemmResult>> {
    let g = &ctx.gpus[gi];
    let k = &ctx.kernels[gi];
    let r = (|| -> R<Vec<GemmResult>> {
        let s = Stream::new(g)?;
        let mut handles = Handles::default();
        let mut results = Vec::new();
        for (di, &d) in p.dtypes.iter().enumerate() {
            report(
                di as f64 / p.dtypes.len() as f64,
                format!("{} GEMM on GPU {}", d.as_str(), g.index),
            );
            if di > 0 && p.cooldown_ms > 0 {
                std::thread::sleep(Duration::from_millis(p.cooldown_ms));
            }
            results.push(GemmResult {
                dtype: d,
                result: one_dtype(g, k, &mut handles, &s, d, p),
            });
        }
        Ok(results)
    })();
    match r {
        Ok(v) => Reading::Value(v),
        Err(e) => Reading::Unavailable(e.0),
    }
}

/// Data type by data type, each on every GPU in turn: a GPU's cool-down before its next data
/// type is mostly the time the others take, and only what that leaves short is slept.
fn interleaved(ctx: &Ctx, p: &GemmParams) -> Vec<Reading<Vec<GemmResult>>> {
    let n = ctx.gpus.len();
    let mut state: Vec<R<(Stream, Handles)>> = ctx
        .gpus
        .iter()
        .map(|g| Stream::new(g).map(|s| (s, Handles::default())))
        .collect();
    let mut results: Vec<Vec<GemmResult>> = (0..n).map(|_| Vec::new()).collect();
    let mut last_end: Vec<Option<Instant>> = vec![None; n];
    let rest = Duration::from_millis(p.cooldown_ms);
    let steps = (p.dtypes.len() * n).max(1) as f64;
    for (di, &d) in p.dtypes.iter().enumerate() {
        for gi in 0..n {
            let g = &ctx.gpus[gi];
            progress(
                GpuGroup::Gemm,
                (di * n + gi) as f64 / steps,
                format!("{} GEMM on GPU {}", d.as_str(), g.index),
            );
            let Ok((s, handles)) = &mut state[gi] else {
                continue;
            };
            if let Some(end) = last_end[gi] {
                let rested = end.elapsed();
                if rested < rest {
                    std::thread::sleep(rest - rested);
                }
            }
            let r = one_dtype(g, &ctx.kernels[gi], handles, s, d, p);
            last_end[gi] = Some(Instant::now());
            results[gi].push(GemmResult {
                dtype: d,
                result: r,
            });
        }
    }
    state
        .into_iter()
        .zip(results)
        .zip(&ctx.gpus)
        .map(|((st, res), g)| match st {
            Ok(handles) => {
                // The cuBLAS handles are destroyed with their own GPU current, as they would
                // be GPU by GPU.
                let _ = g.bind();
                drop(handles);
                Reading::Value(res)
            }
            Err(e) => Reading::Unavailable(e.0),
        })
        .collect()
}

/// One data type on one GPU: set-up, timed batches, the CPU check of sampled elements.
fn one_dtype(
    g: &Gpu,
    k: &Kernels,
    handles: &mut Handles,
    s: &Stream,
    d: GemmDtype,
    p: &GemmParams,
) -> Reading<GemmPoint> {
    let one = guarded(&format!("{} GEMM", d.as_str()), || {
        let gemm = Gemm::new(g, k, handles, d, p.size, p.layout, p.workspace_bytes, s)?;
        let repeats = p.repeats(d);
        let tf = time_batches(g, &gemm, s, repeats, p.batches)?;
        let (max_error, verified) = gemm.verify(p.verify_samples)?;
        // The best batch: under sustained load the GPU warms up and its clocks sink batch
        // after batch (stability.burn measures that); a user's one-off timing of a GEMM sees
        // the first, cool batches.
        let tflops = tf.iter().copied().fold(0.0f64, f64::max);
        Ok(GemmPoint {
            m: gemm.n,
            n: gemm.n,
            k: gemm.n,
            tflops,
            ms_per_gemm: gemm.flops() / (tflops * 1e12).max(1.0) * 1e3,
            repeats,
            batches: tf,
            library: gemm.library.clone(),
            layout: gemm.layout().into(),
            max_error,
            tolerance: tolerance(d),
            samples: p.verify_samples,
            verified,
        })
    });
    // A failure in one dtype may leave the context unusable (a sticky error); the next dtype
    // then reports its own error.
    match one {
        Ok(v) => Reading::Value(v),
        Err(e) => Reading::Unavailable(e.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_operands_follow_the_transposes() {
        // The rehearsal's three GEMMs: Y = W·X (NN), dW = dY·Xᵀ (NT), dX = Wᵀ·dY (TN), with
        // width 2048 and 512 columns.
        let fwd = Shape {
            m: 2048,
            n: 512,
            k: 2048,
            ta: false,
            tb: false,
        };
        assert_eq!(fwd.stored(), [(2048, 2048), (2048, 512)]);
        let wgrad = Shape {
            m: 2048,
            n: 2048,
            k: 512,
            ta: false,
            tb: true,
        };
        assert_eq!(wgrad.stored(), [(2048, 512), (2048, 512)]);
        let dgrad = Shape {
            m: 2048,
            n: 512,
            k: 2048,
            ta: true,
            tb: false,
        };
        assert_eq!(dgrad.stored(), [(2048, 2048), (2048, 512)]);
        // A square TN GEMM as the GEMM measurement plans it.
        let sq = Shape {
            m: 64,
            n: 64,
            k: 64,
            ta: true,
            tb: false,
        };
        assert_eq!(sq.stored(), [(64, 64), (64, 64)]);
        let rect = Shape {
            m: 8,
            n: 16,
            k: 32,
            ta: true,
            tb: true,
        };
        assert_eq!(rect.stored(), [(32, 8), (16, 32)]);
    }
}
