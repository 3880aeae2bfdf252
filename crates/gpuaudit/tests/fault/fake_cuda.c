/* A fake libcuda.so.1 whose cuInit misbehaves (GPUAUDIT_FAULT_CUDA = hang | segv | abort |
 * fork | flood) or fails ("error": CUDA_ERROR_NO_DEVICE). cuDriverGetVersion answers, so
 * the measurement child gets as far as cuInit. */
#include "misbehave.h"

#define VAR "GPUAUDIT_FAULT_CUDA"

int cuDriverGetVersion(int *v) { *v = 12000; return 0; }

int cuInit(unsigned flags) {
    (void)flags;
    fault_common(VAR, "cuInit");
    return 100; /* CUDA_ERROR_NO_DEVICE */
}

int cuGetErrorName(int e, const char **s) { (void)e; *s = "CUDA_ERROR_NO_DEVICE"; return 0; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = "fake libcuda: no CUDA-capable device"; return 0; }
int cuDeviceGetCount(int *n) { *n = 0; return 0; }
