//! A thin, checked layer over the CUDA driver API (cudarc's `sys` bindings).
//!
//! Every call's return code is checked and turned into a sentence naming the call and CUDA's
//! own error name. Resources free themselves on drop. Only the measurement child uses this.

use super::Fail;
use cudarc::driver::sys;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

pub type R<T> = Result<T, Fail>;

const MIB: f64 = (1u64 << 20) as f64;

/// "1.0 GiB", "256 MiB", "4 KiB".
pub fn human_bytes(b: u64) -> String {
    if b >= 1 << 30 && b % (1 << 30) == 0 {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.0} MiB", b as f64 / MIB)
    } else if b >= 1 << 10 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// CUDA's name and description of an error code ("CUDA_ERROR_OUT_OF_MEMORY: out of memory").
pub fn error_text(r: sys::CUresult) -> String {
    let code = r as u32;
    let mut name: *const c_char = ptr::null();
    let mut text: *const c_char = ptr::null();
    // SAFETY: both functions only write a pointer to a static string (or fail and leave it
    // null); the code passed is the one the driver returned.
    let (n_ok, t_ok) = unsafe {
        (
            sys::cuGetErrorName(r, &mut name) as u32 == 0,
            sys::cuGetErrorString(r, &mut text) as u32 == 0,
        )
    };
    // SAFETY: non-null pointers from the driver point at NUL-terminated static strings.
    let s = |ok: bool, p: *const c_char| {
        (ok && !p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    match (s(n_ok, name), s(t_ok, text)) {
        (Some(n), Some(t)) => format!("{n}: {t}"),
        (Some(n), None) => n,
        _ => format!("CUDA error {code}"),
    }
}

/// Checks a driver return code.
pub fn ck(r: sys::CUresult, call: &str) -> R<()> {
    if r as u32 == 0 {
        Ok(())
    } else {
        Err(Fail(format!("{call}: {}", error_text(r))))
    }
}

pub fn init() -> R<()> {
    // SAFETY: cuInit has no pointer arguments.
    ck(unsafe { sys::cuInit(0) }, "cuInit")
}

pub fn driver_version() -> R<u32> {
    let mut v = 0i32;
    // SAFETY: writes one int.
    ck(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok(v.max(0) as u32)
}

pub fn device_count() -> R<u32> {
    let mut n = 0i32;
    // SAFETY: writes one int.
    ck(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(n.max(0) as u32)
}

pub fn device_by_ordinal(ordinal: u32) -> R<sys::CUdevice> {
    let mut d: sys::CUdevice = 0;
    // SAFETY: writes one device handle.
    ck(
        unsafe { sys::cuDeviceGet(&mut d, ordinal as i32) },
        "cuDeviceGet",
    )?;
    Ok(d)
}

pub fn attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> R<i32> {
    let mut v = 0i32;
    // SAFETY: writes one int.
    ck(
        unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) },
        &format!("cuDeviceGetAttribute({attr:?})"),
    )?;
    Ok(v)
}

fn c_string_buf(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn device_name(dev: sys::CUdevice) -> R<String> {
    let mut buf = [0 as c_char; 256];
    // SAFETY: the driver writes at most len bytes, NUL-terminated.
    ck(
        unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev) },
        "cuDeviceGetName",
    )?;
    Ok(c_string_buf(&buf))
}

pub fn device_bus_id(dev: sys::CUdevice) -> R<String> {
    let mut buf = [0 as c_char; 64];
    // SAFETY: the driver writes at most len bytes, NUL-terminated.
    ck(
        unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, dev) },
        "cuDeviceGetPCIBusId",
    )?;
    Ok(gpuaudit_core::facts::normalize_bus_id(&c_string_buf(&buf)))
}

pub fn device_total_mem(dev: sys::CUdevice) -> R<u64> {
    let mut b = 0usize;
    // SAFETY: writes one size.
    ck(
        unsafe { sys::cuDeviceTotalMem_v2(&mut b, dev) },
        "cuDeviceTotalMem",
    )?;
    Ok(b as u64)
}

pub fn can_access_peer(dev: sys::CUdevice, peer: sys::CUdevice) -> R<bool> {
    let mut v = 0i32;
    // SAFETY: writes one int.
    ck(
        unsafe { sys::cuDeviceCanAccessPeer(&mut v, dev, peer) },
        "cuDeviceCanAccessPeer",
    )?;
    Ok(v != 0)
}

/// A GPU's primary context (the one the CUDA runtime, cuBLAS and NCCL use too).
///
/// The context is retained for the rest of the child's life and not released: the child
/// exits after measuring, and releasing it while a library still holds resources in it
/// would be the riskier order.
#[derive(Debug)]
pub struct Gpu {
    /// NVML index.
    pub index: u32,
    pub ordinal: u32,
    pub dev: sys::CUdevice,
    pub ctx: sys::CUcontext,
    pub sm_count: u32,
    pub cc: (u32, u32),
}

// SAFETY: a CUDA context may be made current on any thread; every use binds it first.
unsafe impl Send for Gpu {}
// SAFETY: as above; the handle itself is never mutated after creation.
unsafe impl Sync for Gpu {}

impl Gpu {
    pub fn open(index: u32, ordinal: u32, dev: sys::CUdevice) -> R<Gpu> {
        let mut ctx: sys::CUcontext = ptr::null_mut();
        // SAFETY: writes one context handle.
        ck(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        let a = |x| attribute(dev, x);
        use sys::CUdevice_attribute as A;
        let sm_count = a(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
        let major = a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?.max(0) as u32;
        let minor = a(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?.max(0) as u32;
        let g = Gpu {
            index,
            ordinal,
            dev,
            ctx,
            sm_count,
            cc: (major, minor),
        };
        g.bind()?;
        Ok(g)
    }

    /// Makes this GPU's context current on the calling thread.
    pub fn bind(&self) -> R<()> {
        // SAFETY: the context was retained in `open` and never released.
        ck(unsafe { sys::cuCtxSetCurrent(self.ctx) }, "cuCtxSetCurrent")
    }

    /// (free, total) bytes of device memory.
    pub fn mem_info(&self) -> R<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two sizes; a context is current.
        ck(
            unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
            "cuMemGetInfo",
        )?;
        Ok((free as u64, total as u64))
    }
}

fn current_ctx() -> sys::CUcontext {
    let mut c: sys::CUcontext = ptr::null_mut();
    // SAFETY: writes one handle; on failure it stays null, which we treat as "none".
    unsafe {
        let _ = sys::cuCtxGetCurrent(&mut c);
    }
    c
}

/// Device memory, freed on drop.
#[derive(Debug)]
pub struct DevBuf {
    pub ptr: sys::CUdeviceptr,
    pub bytes: u64,
    ctx: sys::CUcontext,
}

// SAFETY: the pointer is a device address, valid from any thread with the context bound.
unsafe impl Send for DevBuf {}
// SAFETY: as above; shared use only reads the address.
unsafe impl Sync for DevBuf {}

impl DevBuf {
    pub fn new(gpu: &Gpu, bytes: u64) -> R<DevBuf> {
        gpu.bind()?;
        let mut p: sys::CUdeviceptr = 0;
        // SAFETY: writes one device pointer; a context is current.
        ck(
            unsafe { sys::cuMemAlloc_v2(&mut p, bytes as usize) },
            &format!("cuMemAlloc({}) on GPU {}", human_bytes(bytes), gpu.index),
        )?;
        Ok(DevBuf {
            ptr: p,
            bytes,
            ctx: gpu.ctx,
        })
    }

    pub fn at(&self, offset: u64) -> sys::CUdeviceptr {
        self.ptr + offset
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // Free in the owning context and give the caller back the context it had current.
        let prev = current_ctx();
        // SAFETY: the pointer came from cuMemAlloc in `ctx` and is freed once.
        unsafe {
            let _ = sys::cuCtxSetCurrent(self.ctx);
            let _ = sys::cuMemFree_v2(self.ptr);
            if !prev.is_null() {
                let _ = sys::cuCtxSetCurrent(prev);
            }
        }
    }
}

/// Page-locked host memory usable by every context (CU_MEMHOSTALLOC_PORTABLE).
#[derive(Debug)]
pub struct PinnedBuf {
    ptr: *mut c_void,
    pub bytes: u64,
}

// SAFETY: ordinary host memory; the struct owns it.
unsafe impl Send for PinnedBuf {}
// SAFETY: shared references expose only the address; writes need &mut self.
unsafe impl Sync for PinnedBuf {}

impl PinnedBuf {
    /// Needs some context current (any: the memory is portable).
    pub fn new(bytes: u64) -> R<PinnedBuf> {
        let mut p: *mut c_void = ptr::null_mut();
        const PORTABLE: u32 = 0x01;
        // SAFETY: writes one host pointer.
        ck(
            unsafe { sys::cuMemHostAlloc(&mut p, bytes as usize, PORTABLE) },
            &format!("cuMemHostAlloc({})", human_bytes(bytes)),
        )?;
        if p.is_null() {
            return Err(Fail("cuMemHostAlloc returned no memory".into()));
        }
        Ok(PinnedBuf { ptr: p, bytes })
    }

    /// Pinned and mapped into every context's address space (CU_MEMHOSTALLOC_DEVICEMAP), so
    /// that kernels can read and write it over the link: see [`PinnedBuf::device_ptr`].
    pub fn new_mapped(bytes: u64) -> R<PinnedBuf> {
        let mut p: *mut c_void = ptr::null_mut();
        const PORTABLE_DEVICEMAP: u32 = 0x01 | 0x02;
        // SAFETY: writes one host pointer.
        ck(
            unsafe { sys::cuMemHostAlloc(&mut p, bytes as usize, PORTABLE_DEVICEMAP) },
            &format!("cuMemHostAlloc({}, mapped)", human_bytes(bytes)),
        )?;
        if p.is_null() {
            return Err(Fail("cuMemHostAlloc returned no memory".into()));
        }
        Ok(PinnedBuf { ptr: p, bytes })
    }

    /// The device address of mapped memory in the current context.
    pub fn device_ptr(&self) -> R<sys::CUdeviceptr> {
        let mut d: sys::CUdeviceptr = 0;
        // SAFETY: writes one device address; the memory was allocated with DEVICEMAP.
        ck(
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut d, self.ptr, 0) },
            "cuMemHostGetDevicePointer",
        )?;
        Ok(d)
    }

    pub fn ptr(&self) -> *mut c_void {
        self.ptr
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u8, self.bytes as usize) }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc, freed once.
        unsafe {
            let _ = sys::cuMemFreeHost(self.ptr);
        }
    }
}

/// A non-blocking stream (does not synchronise with the legacy default stream).
#[derive(Debug)]
pub struct Stream {
    pub raw: sys::CUstream,
}

// SAFETY: streams may be used from any thread with their context bound.
unsafe impl Send for Stream {}
// SAFETY: as above.
unsafe impl Sync for Stream {}

impl Stream {
    pub fn new(gpu: &Gpu) -> R<Stream> {
        gpu.bind()?;
        let mut s: sys::CUstream = ptr::null_mut();
        const NON_BLOCKING: u32 = 0x1;
        // SAFETY: writes one handle; a context is current.
        ck(
            unsafe { sys::cuStreamCreate(&mut s, NON_BLOCKING) },
            "cuStreamCreate",
        )?;
        Ok(Stream { raw: s })
    }

    pub fn sync(&self) -> R<()> {
        // SAFETY: a live stream.
        ck(
            unsafe { sys::cuStreamSynchronize(self.raw) },
            "cuStreamSynchronize",
        )
    }

    pub fn wait(&self, e: &Event) -> R<()> {
        // SAFETY: live stream and event.
        ck(
            unsafe { sys::cuStreamWaitEvent(self.raw, e.raw, 0) },
            "cuStreamWaitEvent",
        )
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: created by cuStreamCreate, destroyed once.
        unsafe {
            let _ = sys::cuStreamDestroy_v2(self.raw);
        }
    }
}

#[derive(Debug)]
pub struct Event {
    pub raw: sys::CUevent,
}

// SAFETY: events may be used from any thread.
unsafe impl Send for Event {}
// SAFETY: as above.
unsafe impl Sync for Event {}

impl Event {
    pub fn new(gpu: &Gpu) -> R<Event> {
        gpu.bind()?;
        let mut e: sys::CUevent = ptr::null_mut();
        // SAFETY: writes one handle; flags 0 = timing enabled.
        ck(unsafe { sys::cuEventCreate(&mut e, 0) }, "cuEventCreate")?;
        Ok(Event { raw: e })
    }

    pub fn record(&self, s: &Stream) -> R<()> {
        // SAFETY: live event and stream of the same context.
        ck(
            unsafe { sys::cuEventRecord(self.raw, s.raw) },
            "cuEventRecord",
        )
    }

    pub fn sync(&self) -> R<()> {
        // SAFETY: a live event.
        ck(
            unsafe { sys::cuEventSynchronize(self.raw) },
            "cuEventSynchronize",
        )
    }

    /// Milliseconds from `self` to `end` (both recorded and complete).
    pub fn ms_to(&self, end: &Event) -> R<f64> {
        let mut ms = 0f32;
        // SAFETY: writes one float.
        ck(
            unsafe { sys::cuEventElapsedTime(&mut ms, self.raw, end.raw) },
            "cuEventElapsedTime",
        )?;
        if !(ms.is_finite() && ms >= 0.0) {
            return Err(Fail(format!("cuEventElapsedTime gave {ms} ms")));
        }
        Ok(ms as f64)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed once.
        unsafe {
            let _ = sys::cuEventDestroy_v2(self.raw);
        }
    }
}

/// Times the work `enqueue` puts on `s` with a pair of events; milliseconds.
pub fn time_on(gpu: &Gpu, s: &Stream, enqueue: impl FnOnce() -> R<()>) -> R<f64> {
    gpu.bind()?;
    let (a, b) = (Event::new(gpu)?, Event::new(gpu)?);
    a.record(s)?;
    enqueue()?;
    b.record(s)?;
    b.sync()?;
    a.ms_to(&b)
}

// ------------------------------------------------------------------ copies

pub fn htod_async(dst: sys::CUdeviceptr, src: *const c_void, bytes: u64, s: &Stream) -> R<()> {
    // SAFETY: the caller passes a host range of `bytes` bytes valid until the stream syncs.
    ck(
        unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src, bytes as usize, s.raw) },
        "cuMemcpyHtoDAsync",
    )
}

pub fn dtoh_async(dst: *mut c_void, src: sys::CUdeviceptr, bytes: u64, s: &Stream) -> R<()> {
    // SAFETY: the caller passes a host range of `bytes` writable bytes valid until sync.
    ck(
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst, src, bytes as usize, s.raw) },
        "cuMemcpyDtoHAsync",
    )
}

pub fn dtod_async(dst: sys::CUdeviceptr, src: sys::CUdeviceptr, bytes: u64, s: &Stream) -> R<()> {
    // SAFETY: device ranges owned by live buffers.
    ck(
        unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes as usize, s.raw) },
        "cuMemcpyDtoDAsync",
    )
}

pub fn peer_async(
    dst: sys::CUdeviceptr,
    dst_ctx: sys::CUcontext,
    src: sys::CUdeviceptr,
    src_ctx: sys::CUcontext,
    bytes: u64,
    s: &Stream,
) -> R<()> {
    // SAFETY: device ranges owned by live buffers in the named contexts.
    ck(
        unsafe { sys::cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes as usize, s.raw) },
        "cuMemcpyPeerAsync",
    )
}

/// Copies `count` elements of `elem` bytes, `stride` bytes apart on the device, into a
/// packed host vector (a strided matrix row).
pub fn dtoh_strided(
    gpu: &Gpu,
    src: sys::CUdeviceptr,
    count: u64,
    elem: u64,
    stride: u64,
) -> R<Vec<u8>> {
    gpu.bind()?;
    let mut out = vec![0u8; (count * elem) as usize];
    if stride == elem {
        // SAFETY: `out` has count*elem bytes.
        ck(
            unsafe {
                sys::cuMemcpyDtoH_v2(
                    out.as_mut_ptr() as *mut c_void,
                    src,
                    (count * elem) as usize,
                )
            },
            "cuMemcpyDtoH",
        )?;
        return Ok(out);
    }
    let c = strided_dtoh_desc(src, stride, out.as_mut_ptr() as *mut c_void, elem, count);
    // SAFETY: the descriptor names `count` rows of `elem` bytes; `out` holds them all.
    ck(unsafe { sys::cuMemcpy2D_v2(&c) }, "cuMemcpy2D")?;
    Ok(out)
}

/// The 2-D copy of `count` rows of `elem` bytes, `stride` apart on the device, packed into
/// `dst` on the host. Every field spelt out: `mem::zeroed` is not a valid CUDA_MEMCPY2D in
/// Rust, since its memory-type enums have no zero variant (zeroing one aborted the child on
/// the H200s).
fn strided_dtoh_desc(
    src: sys::CUdeviceptr,
    stride: u64,
    dst: *mut c_void,
    elem: u64,
    count: u64,
) -> sys::CUDA_MEMCPY2D {
    sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: std::ptr::null(),
        srcDevice: src,
        srcArray: std::ptr::null_mut(),
        srcPitch: stride as usize,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        dstHost: dst,
        dstDevice: 0,
        dstArray: std::ptr::null_mut(),
        dstPitch: elem as usize,
        WidthInBytes: elem as usize,
        Height: count as usize,
    }
}

pub fn dtoh(gpu: &Gpu, src: sys::CUdeviceptr, bytes: u64) -> R<Vec<u8>> {
    dtoh_strided(gpu, src, bytes, 1, 1)
}

pub fn memset_d32_async(dst: sys::CUdeviceptr, value: u32, words: u64, s: &Stream) -> R<()> {
    // SAFETY: a device range of `words` 32-bit words owned by a live buffer.
    ck(
        unsafe { sys::cuMemsetD32Async(dst, value, words as usize, s.raw) },
        "cuMemsetD32Async",
    )
}

// ------------------------------------------------------------------ kernels

/// The embedded PTX, NUL-terminated for cuModuleLoadData.
const PTX: &str = concat!(include_str!("../kernels.ptx"), "\0");

#[derive(Debug)]
pub struct Kernels {
    module: sys::CUmodule,
    pub fill_f64: sys::CUfunction,
    pub fill_f32: sys::CUfunction,
    pub fill_f16: sys::CUfunction,
    pub fill_bf16: sys::CUfunction,
    pub fill_e4m3: sys::CUfunction,
    pub write_pattern: sys::CUfunction,
    pub check_pattern: sys::CUfunction,
    pub copy_v4: sys::CUfunction,
    pub copy_v4_cs: sys::CUfunction,
    pub copy_tile8: sys::CUfunction,
    pub read_xor: sys::CUfunction,
    pub triad_f32: sys::CUfunction,
    pub add_f32: sys::CUfunction,
    pub copy_flat: sys::CUfunction,
    pub triad_flat: sys::CUfunction,
    pub add_flat: sys::CUfunction,
    pub chase_u64: sys::CUfunction,
    pub fill_f32_const: sys::CUfunction,
    pub check_f32_const: sys::CUfunction,
    pub checksum_u32: sys::CUfunction,
}

// SAFETY: module and function handles are usable from any thread with the context bound.
unsafe impl Send for Kernels {}
// SAFETY: as above; launching does not mutate the handles.
unsafe impl Sync for Kernels {}

impl Kernels {
    /// JIT-compiles the PTX for this GPU (the driver caches the result on disk).
    pub fn load(gpu: &Gpu) -> R<Kernels> {
        gpu.bind()?;
        let mut module: sys::CUmodule = ptr::null_mut();
        let mut log = vec![0u8; 8192];
        let mut opts = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        // SAFETY: the image is NUL-terminated PTX; the options are the documented log buffer
        // pair (the size is passed by value in the pointer slot, as the API specifies).
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                PTX.as_ptr() as *const c_void,
                opts.len() as u32,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        if r as u32 != 0 {
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|b| *b == 0).unwrap_or(0)])
                    .trim()
                    .to_string();
            let mut e = format!("cuModuleLoadDataEx (PTX JIT): {}", error_text(r));
            if !text.is_empty() {
                e.push_str(&format!(" ({text})"));
            }
            return Err(Fail(e));
        }
        let f = |name: &str| -> R<sys::CUfunction> {
            let c = CString::new(name).map_err(|_| Fail("bad kernel name".into()))?;
            let mut func: sys::CUfunction = ptr::null_mut();
            // SAFETY: a loaded module and a NUL-terminated name.
            ck(
                unsafe { sys::cuModuleGetFunction(&mut func, module, c.as_ptr()) },
                &format!("cuModuleGetFunction({name})"),
            )?;
            Ok(func)
        };
        Ok(Kernels {
            fill_f64: f("fill_f64")?,
            fill_f32: f("fill_f32")?,
            fill_f16: f("fill_f16")?,
            fill_bf16: f("fill_bf16")?,
            fill_e4m3: f("fill_e4m3")?,
            write_pattern: f("write_pattern")?,
            check_pattern: f("check_pattern")?,
            copy_v4: f("copy_v4")?,
            copy_v4_cs: f("copy_v4_cs")?,
            copy_tile8: f("copy_tile8")?,
            read_xor: f("read_xor")?,
            triad_f32: f("triad_f32")?,
            add_f32: f("add_f32")?,
            copy_flat: f("copy_flat")?,
            triad_flat: f("triad_flat")?,
            add_flat: f("add_flat")?,
            chase_u64: f("chase_u64")?,
            fill_f32_const: f("fill_f32_const")?,
            check_f32_const: f("check_f32_const")?,
            checksum_u32: f("checksum_u32")?,
            module,
        })
    }
}

impl Drop for Kernels {
    fn drop(&mut self) {
        // SAFETY: loaded once, unloaded once.
        unsafe {
            let _ = sys::cuModuleUnload(self.module);
        }
    }
}

/// Pointers to kernel arguments, for [`launch`]. Use inside the launch call's statement, so
/// that the arguments (and any temporaries) outlive the call.
macro_rules! kargs {
    ($($a:expr),* $(,)?) => {
        [$(&$a as *const _ as *mut ::std::ffi::c_void),*]
    };
}
pub(crate) use kargs;

/// Launches `f` on a 1-D grid.
pub fn launch(
    f: sys::CUfunction,
    grid: u32,
    block: u32,
    s: &Stream,
    args: &mut [*mut c_void],
) -> R<()> {
    // SAFETY: `args` points at values of the kernel's parameter types (the callers pass
    // u64 for pointers and sizes, u32 seeds, f32 scalars, in the order of kernels.cu) that
    // live until the call returns (the driver copies them at launch).
    ck(
        unsafe {
            sys::cuLaunchKernel(
                f,
                grid.max(1),
                1,
                1,
                block,
                1,
                1,
                0,
                s.raw,
                args.as_mut_ptr(),
                ptr::null_mut(),
            )
        },
        "cuLaunchKernel",
    )
}

/// The largest grid x dimension this GPU launches (2^31 - 1 from compute capability 3.0).
pub fn max_grid_x(gpu: &Gpu) -> u32 {
    attribute(
        gpu.dev,
        sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
    )
    .ok()
    .filter(|v| *v > 0)
    .map_or(65_535, |v| v as u32)
}

/// Grid for the helper kernels (fills, checks): enough blocks to fill the GPU.
pub fn helper_grid(gpu: &Gpu) -> u32 {
    gpu.sm_count * 8
}

/// Counts mismatches of the word pattern in a device buffer.
pub fn check_pattern_dev(
    gpu: &Gpu,
    k: &Kernels,
    s: &Stream,
    buf: sys::CUdeviceptr,
    bytes: u64,
    seed: u32,
) -> R<u64> {
    let counter = DevBuf::new(gpu, 8)?;
    memset_d32_async(counter.ptr, 0, 2, s)?;
    let n4 = bytes / 16;
    launch(
        k.check_pattern,
        helper_grid(gpu),
        256,
        s,
        &mut kargs![buf, n4, seed, counter.ptr],
    )?;
    s.sync()?;
    let v = dtoh(gpu, counter.ptr, 8)?;
    Ok(u64::from_le_bytes(
        v[..8].try_into().map_err(|_| Fail("short read".into()))?,
    ))
}

pub fn write_pattern_dev(
    gpu: &Gpu,
    k: &Kernels,
    s: &Stream,
    buf: sys::CUdeviceptr,
    bytes: u64,
    seed: u32,
) -> R<()> {
    let n4 = bytes / 16;
    launch(
        k.write_pattern,
        helper_grid(gpu),
        256,
        s,
        &mut kargs![buf, n4, seed],
    )
}

/// MemAvailable from /proc/meminfo, bytes (read through the one door, `RootFs`).
pub fn host_available_bytes() -> Option<u64> {
    let text = crate::root::RootFs::live().read("proc/meminfo").ok()?;
    parse_mem_available(&text)
}

pub fn parse_mem_available(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix("MemAvailable:")?;
        let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
        Some(kb * 1024)
    })
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn strided_copy_descriptor_builds_without_zeroing() {
        let mut out = vec![0u8; 64];
        let d = strided_dtoh_desc(0x1000, 256, out.as_mut_ptr() as *mut c_void, 4, 16);
        assert_eq!(d.srcMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_DEVICE);
        assert_eq!(d.dstMemoryType, sys::CUmemorytype::CU_MEMORYTYPE_HOST);
        assert_eq!(
            (d.srcPitch, d.dstPitch, d.WidthInBytes, d.Height),
            (256, 4, 4, 16)
        );
        assert_eq!(d.srcDevice, 0x1000);
    }

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(8), "8 B");
    }

    #[test]
    fn meminfo_parses() {
        let t = "MemTotal:       263842372 kB\nMemAvailable:   250000000 kB\n";
        assert_eq!(parse_mem_available(t), Some(250_000_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB"), None);
    }
}
