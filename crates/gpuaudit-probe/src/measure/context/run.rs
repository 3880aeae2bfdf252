//! `gpuaudit __ctx-probe`: one context-creation sample, in a fresh process.
//!
//! Same phases as the C driver-API anchor: cuInit, cuDevicePrimaryCtxRetain +
//! cuCtxSetCurrent, the first 1 MiB cuMemAlloc. The library is loaded and the symbols are
//! resolved before the clock starts (a C program linked with -lcuda has them at exec), so
//! only the driver's own work is timed.

use crate::measure::child::cu::{self, ck};
use crate::measure::child::guarded;
use crate::measure::protocol::{CtxProbeLine, CtxSample};
use cudarc::driver::sys;
use std::time::Instant;

fn print(line: &CtxProbeLine) {
    match serde_json::to_string(line) {
        Ok(s) => crate::process::write_line(&s),
        Err(e) => crate::process::write_line(&format!(
            r#"{{"type":"ctx_error","stage":"output","error":"{e}"}}"#
        )),
    }
}

fn fail(stage: &str, error: impl ToString) -> i32 {
    print(&CtxProbeLine::CtxError {
        stage: stage.into(),
        error: error.to_string(),
    });
    1
}

/// Returns the exit status; prints one JSON line.
pub fn ctx_probe_main() -> i32 {
    // Load libcuda and resolve every symbol used below without initialising the driver:
    // cuDriverGetVersion is valid before cuInit. The other symbols resolve on first call, in
    // microseconds, which the clock then includes; resolving them here would need calls.
    if let Err(e) = guarded("loading libcuda", cu::driver_version) {
        return fail("load", e);
    }
    let mut dev: sys::CUdevice = 0;
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    let mut ptr: sys::CUdeviceptr = 0;
    let timed = guarded("context probe", || {
        let t0 = Instant::now();
        // SAFETY: no pointer arguments.
        ck(unsafe { sys::cuInit(0) }, "cuInit")?;
        let t1 = Instant::now();
        // SAFETY: writes one handle into a local.
        ck(unsafe { sys::cuDeviceGet(&mut dev, 0) }, "cuDeviceGet")?;
        // SAFETY: writes one handle into a local.
        ck(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        // SAFETY: the context was just retained.
        ck(unsafe { sys::cuCtxSetCurrent(ctx) }, "cuCtxSetCurrent")?;
        let t2 = Instant::now();
        // SAFETY: writes one device pointer; a context is current.
        ck(
            unsafe { sys::cuMemAlloc_v2(&mut ptr, 1 << 20) },
            "cuMemAlloc",
        )?;
        let t3 = Instant::now();
        let ms = |a: Instant, b: Instant| b.duration_since(a).as_secs_f64() * 1e3;
        let devices = cu::device_count().unwrap_or(0);
        Ok(CtxSample {
            init_ms: ms(t0, t1),
            context_ms: ms(t1, t2),
            alloc_ms: ms(t2, t3),
            total_ms: ms(t0, t3),
            devices,
        })
    });
    match timed {
        Ok(s) => {
            // SAFETY: allocated above in the current context; the process exits next.
            unsafe {
                let _ = sys::cuMemFree_v2(ptr);
                let _ = sys::cuDevicePrimaryCtxRelease_v2(dev);
            }
            print(&CtxProbeLine::CtxSample(s));
            0
        }
        Err(e) => {
            let stage = e.0.split(':').next().unwrap_or("cuda").trim().to_string();
            fail(&stage, e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_probe_returns_normally_with_or_without_a_driver() {
        // 1 with a ctx_error line where libcuda is missing, 0 on a GPU machine.
        assert!(matches!(ctx_probe_main(), 0 | 1));
    }
}
