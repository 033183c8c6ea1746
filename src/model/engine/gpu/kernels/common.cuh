// The GPU engine's kernels (issue 57, item 1): the CPU engine's row kernels and packed attention
// (src/model/engine, src/model/kernels) as CUDA, one launch a fused op, on packed rows (item i's
// tokens are rows off[i] .. off[i] + len[i], no padding). The products are cuBLAS's; what is
// in this folder is everything between them: this file's types and device functions, then
// rows.cu and attention.cu, joined in that order into one source (mod.rs's ENGINE_SOURCE).
// Compiled by NVRTC at run time (no headers: NVRTC has none),
// and on the CPU by g++ with emulate.h for the tests against the CPU engine (emulated.rs), so
// every kernel keeps to what emulate.h provides: static __shared__ arrays, __syncthreads where
// the whole block arrives, full-warp shuffles where the whole warp arrives, no atomics (a seed
// gives the same bits on every run).
//
// Sums across rows (LayerNorm's and the biases' gradients) are written as partial sums, one row
// of partials per block or item, and `column_sums` adds them into the gradient in a fixed order.

typedef unsigned long long u64;
typedef unsigned int u32;

#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
// warps a row kernel's block holds; each warp owns a row at a time
#define ROW_WARPS 4
// hidden sizes up to 32 x 32 = 1,024 (BERT-large): a lane holds h / 32 values of its row
#define ROW_VALUES 32
// -infinity, spelt without math.h's macro (NVRTC has no headers)
#define NEG_INF (-__int_as_float(0x7f800000))
// the longest sequence the attention kernels take (BERT's position table)
#define MAX_LEN 512
// keys (forward, dQ) or queries (dK, dV) staged in shared memory at a time
#define CHUNK 32
// threads of an attention block: one row each, in turns of ATT_THREADS rows
#define ATT_THREADS 64

// A dropout site's mask as kernels/dropout_hash.rs's `Mask`: (seed, keep threshold, 1 / keep);
// `on` = 0 where the site drops nothing.
struct Mask {
    u64 seed;
    u32 below;
    float scale;
    u32 on;
    u32 pad;
};

// hash.rs's mix64 (splitmix64's finaliser)
__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// dropout_hash.rs's `head_row_id`
__device__ __forceinline__ u64 head_row_id(u64 row, u32 head) {
    return mix64(row ^ ((u64)head + 1ull) * 0x9e3779b97f4a7c15ull);
}

// dropout_hash.rs's `Mask::row_key`
__device__ __forceinline__ u64 row_key(const Mask& m, u64 row) {
    return mix64(m.seed ^ row);
}

// dropout_hash.rs's `Mask::factor`: 0 or 1 / keep for column `col` of the row keyed `key`
__device__ __forceinline__ float factor(const Mask& m, u64 key, u32 col) {
    u32 h = ((u32)key ^ (col * 0x9e3779b9u)) * 0x85ebca6bu;
    h ^= h >> 15;
    h = (h ^ (u32)(key >> 32)) * 0xc2b2ae35u;
    h ^= h >> 13;
    return h < m.below ? m.scale : 0.0f;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// gelu.rs's erf_f32: x P(x^2) / Q(x^2) on [-4, 4], the CPU engine's polynomial, so that the two
// engines differ by rounding only
__device__ __forceinline__ float erf_poly(float x) {
    x = fminf(fmaxf(x, -4.0f), 4.0f);
    float x2 = x * x;
    float p = fmaf(-2.7261423e-10f, x2, 2.7706814e-8f);
    p = fmaf(p, x2, -2.101024e-6f);
    p = fmaf(p, x2, -5.6925064e-5f);
    p = fmaf(p, x2, -7.3499063e-4f);
    p = fmaf(p, x2, -2.9546001e-3f);
    p = fmaf(p, x2, -1.6096033e-2f);
    p *= x;
    float q = fmaf(-1.4566072e-5f, x2, -2.1337406e-4f);
    q = fmaf(q, x2, -1.682827e-3f);
    q = fmaf(q, x2, -7.3733293e-3f);
    q = fmaf(q, x2, -1.426474e-2f);
    return p / q;
}

__device__ __forceinline__ float gelu(float x) {
    return 0.5f * x * (1.0f + erf_poly(x * 0.70710678118654752f));
}

__device__ __forceinline__ float gelu_grad(float x) {
    float cdf = 0.5f * (1.0f + erf_poly(x * 0.70710678118654752f));
    return cdf + x * expf(-0.5f * x * x) * 0.3989423f;
}

// LayerNorm of the row z held by a warp (lane l holds columns l, l + 32, ...), as
// layer_norm.rs's `residual_norm`: out = xhat gamma + beta, and xhat and 1/std where kept
__device__ __forceinline__ void norm_row(float* z, int lane, int h, const float* gamma,
        const float* beta, float eps, float* out, float* xhat, float* rstd) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        if (j < h) s += z[k];
    }
    float mean = warp_sum(s) / (float)h;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        if (j < h) {
            z[k] -= mean;
            v += z[k] * z[k];
        }
    }
    float inv = 1.0f / sqrtf(warp_sum(v) / (float)h + eps);
    if (rstd && lane == 0) *rstd = inv;
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        if (j < h) {
            float x = z[k] * inv;
            if (xhat) xhat[j] = x;
            out[j] = x * gamma[j] + beta[j];
        }
    }
}
