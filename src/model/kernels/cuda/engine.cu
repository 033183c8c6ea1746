// The GPU engine's kernels (issue 57, item 1): the CPU engine's row kernels and packed attention
// (src/model/engine, src/model/kernels) as CUDA, one launch a fused op, on packed rows (item i's
// tokens are rows off[i] .. off[i] + len[i], no padding). The products are cuBLAS's; what is
// here is everything between them. Compiled by NVRTC at run time (no headers: NVRTC has none),
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

// Embeddings: out = drop(LN(word[id] + pos[position] + typ[type])), a warp a row (embeddings.rs).
// xhat and rstd are written where not null (a pass that keeps a tape).
extern "C" __global__ void embed_forward(const u32* ids, const u32* positions, const u32* types,
        const float* word, const float* pos, const float* typ, const float* gamma,
        const float* beta, float eps, Mask m, const u64* row_ids, int t, int h, float* out,
        float* xhat, float* rstd) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    if (r >= t) return;
    const float* w = word + (u64)ids[r] * h;
    const float* p = pos + (u64)positions[r] * h;
    const float* y = typ + (u64)types[r] * h;
    float z[ROW_VALUES];
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        z[k] = j < h ? w[j] + y[j] + p[j] : 0.0f;
    }
    float* o = out + (u64)r * h;
    norm_row(z, lane, h, gamma, beta, eps, o, xhat ? xhat + (u64)r * h : 0,
             rstd ? rstd + r : 0);
    if (m.on) {
        // a lane scales the columns it wrote itself
        u64 key = row_key(m, row_ids[r]);
        for (int j = lane; j < h; j += 32) o[j] *= factor(m, key, j);
    }
}

// out = LN(drop(y + bias) + res), a warp a row (layer.rs's two LayerNorms, the Linear's bias
// folded in). res may be null (z = drop(y + bias)) and may be `out` itself: a warp reads its row
// whole before it writes.
extern "C" __global__ void residual_norm(const float* y, const float* bias, const float* res,
        Mask m, const u64* row_ids, const float* gamma, const float* beta, float eps, int t,
        int h, float* out, float* xhat, float* rstd) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ROW_WARPS + (threadIdx.x >> 5);
    if (r >= t) return;
    const float* yr = y + (u64)r * h;
    u64 key = m.on ? row_key(m, row_ids[r]) : 0;
    float z[ROW_VALUES];
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        if (j < h) {
            float a = yr[j] + (bias ? bias[j] : 0.0f);
            if (m.on) a *= factor(m, key, j);
            z[k] = a + (res ? res[(u64)r * h + j] : 0.0f);
        } else {
            z[k] = 0.0f;
        }
    }
    norm_row(z, lane, h, gamma, beta, eps, out + (u64)r * h, xhat ? xhat + (u64)r * h : 0,
             rstd ? rstd + r : 0);
}

// Backward of `residual_norm` (and of the embeddings' LayerNorm): from dy, dz = rstd (g -
// mean(g) - xhat mean(g xhat)) with g = dy' gamma, where dy' = dy times `in_mask` (the
// embeddings' dropout after their LayerNorm) or dy; da = dz times `out_mask` (the dropped
// Linear output's gradient) where da is not null. Block b's warps take rows b W + w, then
// G W further on (G blocks); each block writes its partial column sums to partial[b]:
// dgamma (h), dbeta (h), and, where da is not null, the bias's gradient sum(da) (h).
extern "C" __global__ void residual_norm_backward(const float* dy, const float* xhat,
        const float* rstd, const float* gamma, Mask in_mask, Mask out_mask, const u64* row_ids,
        int t, int h, float* dz, float* da, float* partial) {
    __shared__ float sums[ROW_WARPS][3 * ROW_VALUES * 32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float dg[ROW_VALUES], db[ROW_VALUES], dbias[ROW_VALUES];
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) dg[k] = db[k] = dbias[k] = 0.0f;
    int stride = gridDim.x * ROW_WARPS;
    // every warp runs the same number of turns, so that no warp leaves while others shuffle
    int turns = (t + stride - 1) / stride;
    for (int turn = 0; turn < turns; turn++) {
        int r = turn * stride + blockIdx.x * ROW_WARPS + warp;
        if (r < t) {
            const float* dyr = dy + (u64)r * h;
            const float* xr = xhat + (u64)r * h;
            u64 ik = in_mask.on ? row_key(in_mask, row_ids[r]) : 0;
            float g[ROW_VALUES], x[ROW_VALUES];
            float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
            for (int k = 0; k < ROW_VALUES; k++) {
                int j = lane + 32 * k;
                g[k] = x[k] = 0.0f;
                if (j < h) {
                    float d = dyr[j];
                    if (in_mask.on) d *= factor(in_mask, ik, j);
                    x[k] = xr[j];
                    dg[k] += d * x[k];
                    db[k] += d;
                    g[k] = d * gamma[j];
                    s1 += g[k];
                    s2 += g[k] * x[k];
                }
            }
            float m1 = warp_sum(s1) / (float)h, m2 = warp_sum(s2) / (float)h;
            float rs = rstd[r];
            u64 ok = out_mask.on ? row_key(out_mask, row_ids[r]) : 0;
#pragma unroll
            for (int k = 0; k < ROW_VALUES; k++) {
                int j = lane + 32 * k;
                if (j < h) {
                    float d = rs * (g[k] - m1 - x[k] * m2);
                    dz[(u64)r * h + j] = d;
                    if (da) {
                        float a = out_mask.on ? d * factor(out_mask, ok, j) : d;
                        da[(u64)r * h + j] = a;
                        dbias[k] += a;
                    }
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < ROW_VALUES; k++) {
        int j = lane + 32 * k;
        if (j < h) {
            sums[warp][j] = dg[k];
            sums[warp][h + j] = db[k];
            sums[warp][2 * h + j] = dbias[k];
        }
    }
    __syncthreads();
    int width = da ? 3 * h : 2 * h;
    for (int c = threadIdx.x; c < width; c += blockDim.x) {
        float s = 0.0f;
        for (int w = 0; w < ROW_WARPS; w++) s += sums[w][c];
        partial[(u64)blockIdx.x * width + c] = s;
    }
}

// out[c] += sum over p of partial[p * stride + c] for c < width, p in order (a thread a
// column): a gradient from its partial sums, which may be a column range of wider partial rows
// (residual_norm_backward's dgamma | dbeta | dbias).
extern "C" __global__ void column_sums(const float* partial, int parts, int stride, int width,
        float* out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= width) return;
    float s = 0.0f;
    for (int p = 0; p < parts; p++) s += partial[(u64)p * stride + c];
    out[c] += s;
}

// u += bias (in place: u is what backward reads), and g = gelu(u) where g is not null, else
// u = gelu(u + bias) in place (a pass without a tape). t x i elements.
extern "C" __global__ void bias_gelu(float* u, const float* bias, float* g, int t, int i) {
    u64 n = (u64)t * i;
    for (u64 e = blockIdx.x * (u64)blockDim.x + threadIdx.x; e < n;
         e += (u64)gridDim.x * blockDim.x) {
        float x = u[e] + (bias ? bias[e % i] : 0.0f);
        if (g) {
            u[e] = x;
            g[e] = gelu(x);
        } else {
            u[e] = gelu(x);
        }
    }
}

// d *= gelu'(u) over t x i, and partial[b][c] = the sum of the new d over the rows block b
// takes (rows b, b + G, ...; a thread a column in turns of blockDim.x): the bias's gradient,
// summed by `column_sums`.
extern "C" __global__ void gelu_backward(const float* u, float* d, int t, int i,
        float* partial) {
    for (int c = threadIdx.x; c < i; c += blockDim.x) {
        float s = 0.0f;
        for (int r = blockIdx.x; r < t; r += gridDim.x) {
            u64 e = (u64)r * i + c;
            float v = d[e] * gelu_grad(u[e]);
            d[e] = v;
            s += v;
        }
        partial[(u64)blockIdx.x * i + c] = s;
    }
}

// Rows of a table's gradient from the rows' gradients de (t x h): for each entry e, table row
// index[e] += the sum of de's rows rows[start[e] .. start[e + 1]] in order. The caller groups
// the rows by table row (token id, position or type), so that no two blocks write one row and
// the sum's order is fixed. A block an entry, threads over columns.
extern "C" __global__ void embed_scatter(const u32* index, const u32* start, const u32* rows,
        int entries, const float* de, int h, float* table) {
    int e = blockIdx.x;
    if (e >= entries) return;
    float* out = table + (u64)index[e] * h;
    for (int c = threadIdx.x; c < h; c += blockDim.x) {
        float s = 0.0f;
        for (u32 k = start[e]; k < start[e + 1]; k++) s += de[(u64)rows[k] * h + c];
        out[c] += s;
    }
}

// Packed rows (t x h) into a padded (items x L x h) batch, zeros past each item's length: the
// last layer's states as candle's heads take them (leaf.rs). A block an item.
extern "C" __global__ void pad_rows(const float* x, const int* off, const int* len, int L, int h,
        float* out) {
    int item = blockIdx.x, n = len[item], r0 = off[item];
    for (u64 e = threadIdx.x; e < (u64)L * h; e += blockDim.x) {
        int pos = (int)(e / h), c = (int)(e % h);
        out[(u64)item * L * h + e] = pos < n ? x[(u64)(r0 + pos) * h + c] : 0.0f;
    }
}

// The padded batch's gradient (items x L x h) back into packed rows (t x h): `pad_rows`'s
// backward (the padding's gradient is dropped).
extern "C" __global__ void unpad_rows(const float* g, const int* off, const int* len, int L,
        int h, float* dx) {
    int item = blockIdx.x, n = len[item], r0 = off[item];
    for (u64 e = threadIdx.x; e < (u64)n * h; e += blockDim.x) {
        int pos = (int)(e / h), c = (int)(e % h);
        dx[(u64)(r0 + pos) * h + c] = g[(u64)item * L * h + e];
    }
}

// Self-attention of one (item, head) over packed rows, as packed_attention.rs's forward: qkv is
// t x 3H (q, k, v of head hd at columns hd D, H + hd D, 2H + hd D), bias (3H) is added to the
// block's columns in place first where not null (the Linear's bias, folded in: backward reads qkv
// with it); ctx (t x H) gets the head's D columns, lse (t x heads) its log-sum-exp (natural
// log, of the scaled scores), and the probabilities are dropped after the log-sum-exp as the
// CPU engine drops them. Grid (items, heads), ATT_THREADS threads, a query row a thread.
template <int D>
__device__ void attention_forward(float* qkv, const float* bias, const int* off, const int* len,
        int heads, float scale, Mask m, const u64* row_ids, float* ctx, float* lse) {
    __shared__ float ks[CHUNK][D];
    __shared__ float vs[CHUNK][D];
    int item = blockIdx.x, hd = blockIdx.y, n = len[item], r0 = off[item];
    int H = heads * D, H3 = 3 * H;
    if (n == 0) return;
    if (bias) {
        for (int e = threadIdx.x; e < n * 3 * D; e += blockDim.x) {
            int r = e / (3 * D), c = e % (3 * D);
            int col = (c / D) * H + hd * D + c % D;
            qkv[(u64)(r0 + r) * H3 + col] += bias[col];
        }
        __syncthreads();
    }
    float scale2 = scale * LOG2E;
    int turns = (n + ATT_THREADS - 1) / ATT_THREADS;
    for (int turn = 0; turn < turns; turn++) {
        int i = turn * ATT_THREADS + threadIdx.x;
        bool mine = i < n;
        float q[D], acc[D];
        const float* qi = qkv + (u64)(r0 + (mine ? i : 0)) * H3 + hd * D;
#pragma unroll
        for (int d = 0; d < D; d++) {
            q[d] = qi[d] * scale2;
            acc[d] = 0.0f;
        }
        u64 key = (m.on && mine) ? row_key(m, head_row_id(row_ids[r0 + i], hd)) : 0;
        float mx = NEG_INF, total = 0.0f;
        for (int j0 = 0; j0 < n; j0 += CHUNK) {
            int cn = min(CHUNK, n - j0);
            for (int e = threadIdx.x; e < cn * D; e += blockDim.x) {
                int j = e / D, d = e % D;
                const float* row = qkv + (u64)(r0 + j0 + j) * H3 + hd * D + d;
                ks[j][d] = row[H];
                vs[j][d] = row[2 * H];
            }
            __syncthreads();
            float s[CHUNK];
            float cm = mx;
            for (int j = 0; j < cn; j++) {
                float x = 0.0f;
#pragma unroll
                for (int d = 0; d < D; d++) x = fmaf(q[d], ks[j][d], x);
                s[j] = x;
                cm = fmaxf(cm, x);
            }
            // rescale what is summed so far to the new maximum (exp2(-inf) = 0 at the start)
            float shrink = exp2f(mx - cm);
            total *= shrink;
#pragma unroll
            for (int d = 0; d < D; d++) acc[d] *= shrink;
            mx = cm;
            for (int j = 0; j < cn; j++) {
                float p = exp2f(s[j] - mx);
                total += p;
                float pd = m.on ? p * factor(m, key, j0 + j) : p;
#pragma unroll
                for (int d = 0; d < D; d++) acc[d] = fmaf(pd, vs[j][d], acc[d]);
            }
            __syncthreads();
        }
        if (mine) {
            float inv = 1.0f / total;
            float* out = ctx + (u64)(r0 + i) * H + hd * D;
#pragma unroll
            for (int d = 0; d < D; d++) out[d] = acc[d] * inv;
            lse[(u64)(r0 + i) * heads + hd] = mx * LN2 + logf(total);
        }
    }
}

// Backward of `attention_forward` for one (item, head), as packed_attention.rs's: P rebuilt
// from the scores and lse, D_i = dC_i . C_i, dPd = dC V^T, dP = dPd * mask,
// dS = scale P (dP - D), dQ = dS K, dK = dS^T Q, dV = (P * mask)^T dC. Writes the head's
// columns of dqkv (t x 3H) and partial[item] (3H, the block's columns): the column sums of its
// rows of dqkv, for the bias's gradient (`column_sums` over the items).
template <int D>
__device__ void attention_backward(const float* qkv, const float* ctx, const float* lse,
        const float* dctx, const int* off, const int* len, int heads, float scale, Mask m,
        const u64* row_ids, float* dqkv, float* partial) {
    __shared__ float as[CHUNK][D];
    __shared__ float bs[CHUNK][D];
    __shared__ float l2[MAX_LEN];
    __shared__ float dsum[MAX_LEN];
    __shared__ u64 keys[MAX_LEN];
    int item = blockIdx.x, hd = blockIdx.y, n = len[item], r0 = off[item];
    int H = heads * D, H3 = 3 * H;
    if (n == 0) {
        // an empty item's partial sums are zeros (column_sums reads every item's)
        for (int c = threadIdx.x; c < 3 * D; c += blockDim.x)
            partial[(u64)item * H3 + (c / D) * H + hd * D + c % D] = 0.0f;
        return;
    }
    float scale2 = scale * LOG2E;
    // per query row: its log-sum-exp in base 2, D_i, and its mask key
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float* dc = dctx + (u64)(r0 + i) * H + hd * D;
        const float* c = ctx + (u64)(r0 + i) * H + hd * D;
        float s = 0.0f;
        for (int d = 0; d < D; d++) s = fmaf(dc[d], c[d], s);
        dsum[i] = s;
        l2[i] = lse[(u64)(r0 + i) * heads + hd] * LOG2E;
        keys[i] = m.on ? row_key(m, head_row_id(row_ids[r0 + i], hd)) : 0;
    }
    __syncthreads();
    int turns = (n + ATT_THREADS - 1) / ATT_THREADS;
    // dQ: a query row a thread, keys and values staged
    for (int turn = 0; turn < turns; turn++) {
        int i = turn * ATT_THREADS + threadIdx.x;
        bool mine = i < n;
        int ii = mine ? i : 0;
        float q[D], dc[D], dq[D];
        const float* qi = qkv + (u64)(r0 + ii) * H3 + hd * D;
        const float* dci = dctx + (u64)(r0 + ii) * H + hd * D;
#pragma unroll
        for (int d = 0; d < D; d++) {
            q[d] = qi[d] * scale2;
            dc[d] = dci[d];
            dq[d] = 0.0f;
        }
        for (int j0 = 0; j0 < n; j0 += CHUNK) {
            int cn = min(CHUNK, n - j0);
            for (int e = threadIdx.x; e < cn * D; e += blockDim.x) {
                int j = e / D, d = e % D;
                const float* row = qkv + (u64)(r0 + j0 + j) * H3 + hd * D + d;
                as[j][d] = row[H];
                bs[j][d] = row[2 * H];
            }
            __syncthreads();
            for (int j = 0; j < cn; j++) {
                float s = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < D; d++) {
                    s = fmaf(q[d], as[j][d], s);
                    dp = fmaf(dc[d], bs[j][d], dp);
                }
                float p = exp2f(s - l2[ii]);
                if (m.on) dp *= factor(m, keys[ii], j0 + j);
                float ds = scale * p * (dp - dsum[ii]);
#pragma unroll
                for (int d = 0; d < D; d++) dq[d] = fmaf(ds, as[j][d], dq[d]);
            }
            __syncthreads();
        }
        if (mine) {
            float* out = dqkv + (u64)(r0 + i) * H3 + hd * D;
#pragma unroll
            for (int d = 0; d < D; d++) out[d] = dq[d];
        }
    }
    // dK and dV: a key row a thread, queries and their context gradients staged
    for (int turn = 0; turn < turns; turn++) {
        int j = turn * ATT_THREADS + threadIdx.x;
        bool mine = j < n;
        int jj = mine ? j : 0;
        float k[D], v[D], dk[D], dv[D];
        const float* kj = qkv + (u64)(r0 + jj) * H3 + H + hd * D;
#pragma unroll
        for (int d = 0; d < D; d++) {
            k[d] = kj[d];
            v[d] = kj[H + d];
            dk[d] = dv[d] = 0.0f;
        }
        for (int i0 = 0; i0 < n; i0 += CHUNK) {
            int cn = min(CHUNK, n - i0);
            for (int e = threadIdx.x; e < cn * D; e += blockDim.x) {
                int i = e / D, d = e % D;
                as[i][d] = qkv[(u64)(r0 + i0 + i) * H3 + hd * D + d];
                bs[i][d] = dctx[(u64)(r0 + i0 + i) * H + hd * D + d];
            }
            __syncthreads();
            for (int i = 0; i < cn; i++) {
                float s = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < D; d++) {
                    s = fmaf(as[i][d], k[d], s);
                    dp = fmaf(bs[i][d], v[d], dp);
                }
                float p = exp2f(s * scale2 - l2[i0 + i]);
                float f = m.on ? factor(m, keys[i0 + i], jj) : 1.0f;
                float ds = scale * p * (dp * f - dsum[i0 + i]);
                float pd = p * f;
#pragma unroll
                for (int d = 0; d < D; d++) {
                    dv[d] = fmaf(pd, bs[i][d], dv[d]);
                    dk[d] = fmaf(ds, as[i][d], dk[d]);
                }
            }
            __syncthreads();
        }
        if (mine) {
            float* out = dqkv + (u64)(r0 + j) * H3 + hd * D;
#pragma unroll
            for (int d = 0; d < D; d++) {
                out[H + d] = dk[d];
                out[2 * H + d] = dv[d];
            }
        }
    }
    __syncthreads();
    // the bias's gradient: this block's rows of its 3D columns, summed in row order
    for (int c = threadIdx.x; c < 3 * D; c += blockDim.x) {
        int col = (c / D) * H + hd * D + c % D;
        float s = 0.0f;
        for (int i = 0; i < n; i++) s += dqkv[(u64)(r0 + i) * H3 + col];
        partial[(u64)item * H3 + col] = s;
    }
}

// the head widths the attention kernels are built for (MiniLM's 32, BERT-base's 64)
#define ATTENTION_WIDTH(D)                                                                     \
    extern "C" __global__ void attention_forward_##D(float* qkv, const float* bias,            \
            const int* off, const int* len, int heads, float scale, Mask m,                    \
            const u64* row_ids, float* ctx, float* lse) {                                      \
        attention_forward<D>(qkv, bias, off, len, heads, scale, m, row_ids, ctx, lse);         \
    }                                                                                          \
    extern "C" __global__ void attention_backward_##D(const float* qkv, const float* ctx,      \
            const float* lse, const float* dctx, const int* off, const int* len, int heads,    \
            float scale, Mask m, const u64* row_ids, float* dqkv, float* partial) {            \
        attention_backward<D>(qkv, ctx, lse, dctx, off, len, heads, scale, m, row_ids, dqkv,   \
                              partial);                                                        \
    }
ATTENTION_WIDTH(32)
ATTENTION_WIDTH(64)
