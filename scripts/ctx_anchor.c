/* Context-creation anchor for gpuaudit's cuda.context-latency: the same phases, timed the
 * same way, in a plain C process. libcuda is opened and its symbols resolved before the clock
 * starts, as a program linked with -lcuda has them at exec.
 *
 *   gcc -O2 -o ctx_anchor scripts/ctx_anchor.c -ldl && ./ctx_anchor
 *
 * Prints one JSON line: init_ms, context_ms, alloc_ms, total_ms (or an error). No CUDA
 * headers needed. */
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        printf("{\"error\":\"dlopen libcuda.so.1 failed\"}\n");
        return 1;
    }
    CUresult (*cuInit)(unsigned) = dlsym(lib, "cuInit");
    CUresult (*cuDeviceGet)(CUdevice *, int) = dlsym(lib, "cuDeviceGet");
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice) = dlsym(lib, "cuDevicePrimaryCtxRetain");
    CUresult (*cuCtxSetCurrent)(CUcontext) = dlsym(lib, "cuCtxSetCurrent");
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t) = dlsym(lib, "cuMemAlloc_v2");
    if (!cuInit || !cuDeviceGet || !cuDevicePrimaryCtxRetain || !cuCtxSetCurrent || !cuMemAlloc) {
        printf("{\"error\":\"missing symbol\"}\n");
        return 1;
    }
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    CUresult r;
    double t0 = now_ms();
    if ((r = cuInit(0))) { printf("{\"error\":\"cuInit %d\"}\n", r); return 1; }
    double t1 = now_ms();
    if ((r = cuDeviceGet(&dev, 0))) { printf("{\"error\":\"cuDeviceGet %d\"}\n", r); return 1; }
    if ((r = cuDevicePrimaryCtxRetain(&ctx, dev))) { printf("{\"error\":\"retain %d\"}\n", r); return 1; }
    if ((r = cuCtxSetCurrent(ctx))) { printf("{\"error\":\"set current %d\"}\n", r); return 1; }
    double t2 = now_ms();
    if ((r = cuMemAlloc(&p, 1 << 20))) { printf("{\"error\":\"cuMemAlloc %d\"}\n", r); return 1; }
    double t3 = now_ms();
    printf("{\"init_ms\":%.3f,\"context_ms\":%.3f,\"alloc_ms\":%.3f,\"total_ms\":%.3f}\n",
           t1 - t0, t2 - t1, t3 - t2, t3 - t0);
    return 0;
}
