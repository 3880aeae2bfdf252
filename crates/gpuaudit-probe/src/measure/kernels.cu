// gpuaudit's measurement kernels.
//
// This file is the source of kernels.ptx (regenerate with build_ptx.sh). The PTX is embedded
// in the binary and JIT-compiled by the driver (cuModuleLoadData), so the machine needs no
// CUDA toolkit. Target: compute_70, so one PTX runs on Volta through Blackwell; nothing here
// may need a newer instruction (bf16 and fp8 values are built from integer bits, not with
// cvt.bf16 / cvt.e4m3 which need sm_80 / sm_89).
//
// Every random value is a pure function of (seed, index): the host re-creates any element
// to check a result (see fill.rs, which mirrors these functions bit for bit).
//
// Sizes are element counts (u64); vector kernels take counts of 16-byte vectors. The kernels
// are grid-stride loops, so any grid size is correct and the launcher picks it for speed;
// except the *_flat kernels (one vector per thread, no loop), which take the first vector of
// their launch (`base`) and must be launched with blocks covering [base, n4).

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;
typedef unsigned long long u64;

// ----------------------------------------------------------------- random values

// MurmurHash3's 64-bit finaliser: a bijection with good avalanche.
__device__ __forceinline__ u64 mix64(u64 x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

__device__ __forceinline__ u64 rnd(u64 seed, u64 i) {
    return mix64(seed * 0x9E3779B97F4A7C15ULL + i);
}

// Each format: random sign, magnitude in [0.5, 2) (exponent 2^-1 or 2^0), random mantissa
// bits. Real data toggles as many bits as this; zeros or constants would run faster.

extern "C" __global__ void fill_f64(u64* __restrict__ p, u64 n, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 r = rnd(seed, i);
        u64 s = r >> 63;
        u64 e = 1022 + ((r >> 62) & 1);
        u64 m = r & 0xFFFFFFFFFFFFFULL;
        p[i] = (s << 63) | (e << 52) | m;
    }
}

extern "C" __global__ void fill_f32(u32* __restrict__ p, u64 n, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 r = rnd(seed, i);
        u32 s = (u32)(r >> 63);
        u32 e = 126 + (u32)((r >> 62) & 1);
        u32 m = (u32)((r >> 9) & 0x7FFFFF);
        p[i] = (s << 31) | (e << 23) | m;
    }
}

extern "C" __global__ void fill_f16(u16* __restrict__ p, u64 n, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 r = rnd(seed, i);
        u32 s = (u32)(r >> 63);
        u32 e = 14 + (u32)((r >> 62) & 1);
        u32 m = (u32)((r >> 20) & 0x3FF);
        p[i] = (u16)((s << 15) | (e << 10) | m);
    }
}

extern "C" __global__ void fill_bf16(u16* __restrict__ p, u64 n, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 r = rnd(seed, i);
        u32 s = (u32)(r >> 63);
        u32 e = 126 + (u32)((r >> 62) & 1);
        u32 m = (u32)((r >> 20) & 0x7F);
        p[i] = (u16)((s << 15) | (e << 7) | m);
    }
}

// fp8 e4m3 (bias 7): exponent field 6 or 7, never the NaN pattern (field 15, mantissa 7).
extern "C" __global__ void fill_e4m3(u8* __restrict__ p, u64 n, u64 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        u64 r = rnd(seed, i);
        u32 s = (u32)(r >> 63);
        u32 e = 6 + (u32)((r >> 62) & 1);
        u32 m = (u32)((r >> 20) & 0x7);
        p[i] = (u8)((s << 7) | (e << 3) | m);
    }
}

// ----------------------------------------------------------------- bandwidth

// The word pattern of the bandwidth and copy checks: cheap (one multiply-add per word) so
// that the write kernel stays memory bound, and different for every word of a buffer.
__device__ __forceinline__ u32 pat(u64 word, u32 seed) {
    return ((u32)word * 2654435761u) ^ seed;
}

__device__ __forceinline__ uint4 pat4(u64 v, u32 seed) {
    u64 w = v * 4;
    return make_uint4(pat(w, seed), pat(w + 1, seed), pat(w + 2, seed), pat(w + 3, seed));
}

// Write bandwidth, and the fill of every pattern buffer. Four stores in flight per thread.
extern "C" __global__ void write_pattern(uint4* __restrict__ dst, u64 n4, u32 seed) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        dst[i] = pat4(i, seed);
        dst[i + stride] = pat4(i + stride, seed);
        dst[i + 2 * stride] = pat4(i + 2 * stride, seed);
        dst[i + 3 * stride] = pat4(i + 3 * stride, seed);
    }
    for (; i < n4; i += stride) dst[i] = pat4(i, seed);
}

// Counts the words that differ from the pattern (adds to *bad).
extern "C" __global__ void check_pattern(const uint4* __restrict__ src, u64 n4, u32 seed,
                                         u64* bad) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 wrong = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        uint4 v = src[i];
        uint4 e = pat4(i, seed);
        wrong += (v.x != e.x) + (v.y != e.y) + (v.z != e.z) + (v.w != e.w);
    }
    if (wrong) atomicAdd(bad, wrong);
}

// Copy: four independent 16-byte loads in flight per thread, then four stores.
extern "C" __global__ void copy_v4(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                   u64 n4) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        uint4 a = src[i];
        uint4 b = src[i + stride];
        uint4 c = src[i + 2 * stride];
        uint4 d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n4; i += stride) dst[i] = src[i];
}

// The same with streaming cache hints (evict-first): data touched once need not stay in L2.
extern "C" __global__ void copy_v4_cs(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                      u64 n4) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        uint4 a = __ldcs(src + i);
        uint4 b = __ldcs(src + i + stride);
        uint4 c = __ldcs(src + i + 2 * stride);
        uint4 d = __ldcs(src + i + 3 * stride);
        __stcs(dst + i, a);
        __stcs(dst + i + stride, b);
        __stcs(dst + i + 2 * stride, c);
        __stcs(dst + i + 3 * stride, d);
    }
    for (; i < n4; i += stride) __stcs(dst + i, __ldcs(src + i));
}

// Copy in block-contiguous tiles: each block moves blockDim * 8 consecutive 16-byte words per
// step (8 loads in flight per thread, then 8 stores), so reads and writes come in long runs of
// consecutive addresses.
extern "C" __global__ void copy_tile8(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                      u64 n4) {
    const u64 tile = (u64)blockDim.x * 8;
    const u64 tiles = n4 / tile;
    for (u64 t = blockIdx.x; t < tiles; t += gridDim.x) {
        const u64 base = t * tile + threadIdx.x;
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = src[base + (u64)k * blockDim.x];
#pragma unroll
        for (int k = 0; k < 8; k++) dst[base + (u64)k * blockDim.x] = v[k];
    }
    // The tail that does not fill a tile.
    for (u64 i = tiles * tile + (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (u64)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// Read: XOR of every word, one value per block written out so nothing is optimised away
// (and the host checks the XOR of the pattern). blockDim must be a multiple of 32, <= 1024.
extern "C" __global__ void read_xor(const uint4* __restrict__ src, u64 n4, u32* out) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    u32 x0 = 0, x1 = 0, x2 = 0, x3 = 0;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        uint4 a = src[i];
        uint4 b = src[i + stride];
        uint4 c = src[i + 2 * stride];
        uint4 d = src[i + 3 * stride];
        x0 ^= a.x ^ a.y ^ a.z ^ a.w;
        x1 ^= b.x ^ b.y ^ b.z ^ b.w;
        x2 ^= c.x ^ c.y ^ c.z ^ c.w;
        x3 ^= d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n4; i += stride) {
        uint4 a = src[i];
        x0 ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    u32 v = x0 ^ x1 ^ x2 ^ x3;
    for (int o = 16; o > 0; o >>= 1) v ^= __shfl_xor_sync(0xffffffffu, v, o);
    __shared__ u32 warp_x[32];
    if ((threadIdx.x & 31) == 0) warp_x[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 t = 0;
        for (u32 w = 0; w < (blockDim.x + 31) / 32; ++w) t ^= warp_x[w];
        out[blockIdx.x] = t;
    }
}

// STREAM triad over f32: a = b + s*c; two loads per output in flight twice per thread.
extern "C" __global__ void triad_f32(float4* __restrict__ a, const float4* __restrict__ b,
                                     const float4* __restrict__ c, float s, u64 n4) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        float4 b0 = b[i], c0 = c[i];
        float4 b1 = b[i + stride], c1 = c[i + stride];
        a[i] = make_float4(b0.x + s * c0.x, b0.y + s * c0.y, b0.z + s * c0.z, b0.w + s * c0.w);
        a[i + stride] =
            make_float4(b1.x + s * c1.x, b1.y + s * c1.y, b1.z + s * c1.z, b1.w + s * c1.w);
    }
    for (; i < n4; i += stride) {
        float4 b0 = b[i], c0 = c[i];
        a[i] = make_float4(b0.x + s * c0.x, b0.y + s * c0.y, b0.z + s * c0.z, b0.w + s * c0.w);
    }
}

// STREAM/BabelStream add over f32: a = b + c; 2 reads + 1 write per element, as triad.
extern "C" __global__ void add_f32(float4* __restrict__ a, const float4* __restrict__ b,
                                   const float4* __restrict__ c, u64 n4) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        float4 b0 = b[i], c0 = c[i];
        float4 b1 = b[i + stride], c1 = c[i + stride];
        a[i] = make_float4(b0.x + c0.x, b0.y + c0.y, b0.z + c0.z, b0.w + c0.w);
        a[i + stride] = make_float4(b1.x + c1.x, b1.y + c1.y, b1.z + c1.z, b1.w + c1.w);
    }
    for (; i < n4; i += stride) {
        float4 b0 = b[i], c0 = c[i];
        a[i] = make_float4(b0.x + c0.x, b0.y + c0.y, b0.z + c0.z, b0.w + c0.w);
    }
}

// Flat kernels, BabelStream's shape: one 16-byte vector per thread and no loop, so the grid is
// as large as the array (the fastest shape measured on an H200: a grid-stride loop with few
// blocks leaves HBM bandwidth unused). A launch covers vectors [base, base + grid * block);
// the host issues several launches where one grid cannot cover the array.
extern "C" __global__ void copy_flat(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                     u64 base, u64 n4) {
    u64 i = base + (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) dst[i] = src[i];
}

extern "C" __global__ void triad_flat(float4* __restrict__ a, const float4* __restrict__ b,
                                      const float4* __restrict__ c, float s, u64 base, u64 n4) {
    u64 i = base + (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 b0 = b[i], c0 = c[i];
        a[i] = make_float4(b0.x + s * c0.x, b0.y + s * c0.y, b0.z + s * c0.z, b0.w + s * c0.w);
    }
}

extern "C" __global__ void add_flat(float4* __restrict__ a, const float4* __restrict__ b,
                                    const float4* __restrict__ c, u64 base, u64 n4) {
    u64 i = base + (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 b0 = b[i], c0 = c[i];
        a[i] = make_float4(b0.x + c0.x, b0.y + c0.y, b0.z + c0.z, b0.w + c0.w);
    }
}

// ----------------------------------------------------------------- host <-> device latency

// One thread follows `steps` links of a chain of element indices from `start` (each load
// depends on the one before, so every step costs one full round trip to the memory `p` is
// in: mapped pinned host memory here, as nvbandwidth's host_device_latency_sm). The last
// index is written out: the host knows where the chain must end.
extern "C" __global__ void chase_u64(const u64* p, u64 start, u64 steps, u64* out) {
    u64 i = start;
    for (u64 k = 0; k < steps; k++) i = *(volatile const u64*)(p + i);
    *out = i;
}

// ----------------------------------------------------------------- checks

extern "C" __global__ void fill_f32_const(float* __restrict__ p, u64 n, float v) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) p[i] = v;
}

// Counts the elements that are not exactly v (all-reduce sums of small integers are exact).
extern "C" __global__ void check_f32_const(const float* __restrict__ p, u64 n, float v,
                                           u64* bad) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 wrong = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        wrong += (p[i] != v);
    if (wrong) atomicAdd(bad, wrong);
}

// An order-independent 64-bit fingerprint of a buffer: sum of word * (2*index + 1), mod 2^64.
// Equal outputs give equal sums on every GPU; one flipped bit changes it.
extern "C" __global__ void checksum_u32(const u32* __restrict__ p, u64 n, u64* out) {
    u64 stride = (u64)gridDim.x * blockDim.x;
    u64 acc = 0;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        acc += (u64)p[i] * (2 * i + 1);
    atomicAdd(out, acc);
}
