/* A fake libnvidia-ml.so.1: one H200-like GPU ("good"), or it misbehaves in nvmlInit_v2
 * (GPUAUDIT_FAULT_NVML = hang | segv | abort | fork | flood), or it answers garbage
 * ("garbage": impossible values; "huge-count": 2^32-1 devices). Only the functions gpuaudit
 * needs to get that far exist; nvml-wrapper reports the others as missing. */
#include "misbehave.h"
#include <stdint.h>

#define VAR "GPUAUDIT_FAULT_NVML"
#define OK 0

typedef struct { int dummy; } device_t;
static device_t the_gpu;

typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_info_t;

typedef struct {
    unsigned version;
    unsigned long long total, reserved, free, used;
} memory_v2_t;

static int garbage(void) { return fault_is(VAR, "garbage"); }

int nvmlInit_v2(void) {
    fault_common(VAR, "nvmlInit");
    return OK;
}
int nvmlInitWithFlags(unsigned flags) { (void)flags; return nvmlInit_v2(); }
int nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(int r) { (void)r; return "fake NVML error"; }

int nvmlSystemGetDriverVersion(char *v, unsigned n) {
    snprintf(v, n, "580.159.04");
    return OK;
}
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = garbage() ? -1 : 13000; return OK; }
int nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }

int nvmlDeviceGetCount_v2(unsigned *n) {
    *n = fault_is(VAR, "huge-count") ? 4294967295u : 1;
    return OK;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, device_t **d) {
    if (i != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = &the_gpu;
    return OK;
}
int nvmlDeviceGetName(device_t *d, char *s, unsigned n) {
    (void)d;
    snprintf(s, n, "NVIDIA H200");
    return OK;
}
int nvmlDeviceGetPciInfo_v3(device_t *d, pci_info_t *p) {
    (void)d;
    memset(p, 0, sizeof *p);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:00:06.0");
    snprintf(p->busId, sizeof p->busId, "00000000:00:06.0");
    p->bus = 0;
    p->device = 6;
    p->pciDeviceId = 0x233510de;
    p->pciSubSystemId = 0x18f610de;
    return OK;
}
int nvmlDeviceGetCudaComputeCapability(device_t *d, int *major, int *minor) {
    (void)d;
    *major = garbage() ? -5 : 9;        /* 4294967291 as unsigned */
    *minor = garbage() ? 2147483647 : 0;
    return OK;
}
static int answer(unsigned *v, unsigned good, unsigned bad) { *v = garbage() ? bad : good; return OK; }
int nvmlDeviceGetCurrPcieLinkGeneration(device_t *d, unsigned *v) { (void)d; return answer(v, 5, 99); }
int nvmlDeviceGetMaxPcieLinkGeneration(device_t *d, unsigned *v) { (void)d; return answer(v, 5, 99); }
int nvmlDeviceGetGpuMaxPcieLinkGeneration(device_t *d, unsigned *v) { (void)d; return answer(v, 5, 0); }
int nvmlDeviceGetCurrPcieLinkWidth(device_t *d, unsigned *v) { (void)d; return answer(v, 16, 4294967295u); }
int nvmlDeviceGetMaxPcieLinkWidth(device_t *d, unsigned *v) { (void)d; return answer(v, 16, 4294967295u); }
int nvmlDeviceGetPowerUsage(device_t *d, unsigned *mw) { (void)d; return answer(mw, 120000, 4294967295u); }
int nvmlDeviceGetEnforcedPowerLimit(device_t *d, unsigned *mw) { (void)d; return answer(mw, 700000, 4294967295u); }
int nvmlDeviceGetPowerManagementLimit(device_t *d, unsigned *mw) { (void)d; return answer(mw, 700000, 4294967295u); }
int nvmlDeviceGetTemperature(device_t *d, int sensor, unsigned *t) { (void)d; (void)sensor; return answer(t, 40, 4294967295u); }
int nvmlDeviceGetClockInfo(device_t *d, int type, unsigned *mhz) { (void)d; (void)type; return answer(mhz, 1980, 4294967295u); }
int nvmlDeviceGetMaxClockInfo(device_t *d, int type, unsigned *mhz) { (void)d; (void)type; return answer(mhz, 1980, 4294967295u); }
int nvmlDeviceGetMemoryInfo_v2(device_t *d, memory_v2_t *m) {
    (void)d;
    unsigned long long mib = 1024ull * 1024ull;
    m->total = garbage() ? UINT64_MAX : 143771ull * mib;
    m->reserved = 0;
    m->used = garbage() ? UINT64_MAX : 0;
    m->free = m->total;
    return OK;
}
int nvmlDeviceGetTotalEccErrors(device_t *d, int type, int counter, unsigned long long *n) {
    (void)d; (void)type; (void)counter;
    *n = garbage() ? UINT64_MAX : 0;
    return OK;
}
int nvmlDeviceGetPcieReplayCounter(device_t *d, unsigned *n) { (void)d; return answer(n, 0, 4294967295u); }
