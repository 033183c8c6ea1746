// The GPU engine's attention kernels (after common.cuh): forward and backward of one (item,
// head) over packed rows, instantiated for the head widths ATTENTION_WIDTH names.

// Stage a chunk of cn rows into shared memory, the block's threads together, then wait for all:
// a[j] = the D values at pa + j sa, b[j] = those at pb + j sb (two column blocks of the packed
// rows: a head's keys and values, or its queries and their context gradients).
template <int D>
__device__ void stage(float (*a)[D], float (*b)[D], const float* pa, const float* pb, u64 sa,
        u64 sb, int cn) {
    for (int e = threadIdx.x; e < cn * D; e += blockDim.x) {
        int j = e / D, d = e % D;
        a[j][d] = pa[j * sa + d];
        b[j][d] = pb[j * sb + d];
    }
    __syncthreads();
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
            const float* kv = qkv + (u64)(r0 + j0) * H3 + hd * D;
            stage<D>(ks, vs, kv + H, kv + 2 * H, H3, H3, cn);
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

// A staged value (as[i][d]) read from shared memory again at its second use in a sweep where a
// thread holds three rows of its own (dQ's q, dc, dq; dK's k, v, dk). For head widths over 32
// the compiler otherwise keeps the staged row in registers between the two uses and spills. A
// shared read is a broadcast (every thread the same address) where a spill goes to local
// memory; which costs less is for a card to measure (docs/gpu.md). The volatile read also keeps
// it from merging loads (LDS.128), so it is used only there.
template <int D>
__device__ __forceinline__ float again(const float (*a)[D], int i, int d) {
    if constexpr (D > 32) return ((const volatile float(*)[D])a)[i][d];
    else return a[i][d];
}

// attention_backward's dK and/or dV (DK, DV) for one (item, head): a key row j a thread, the
// query rows and their context gradients staged a chunk at a time in as and bs; writes the
// head's K and/or V columns of dqkv. With DK alone, dV's terms are not formed; with DV alone,
// neither are dP's products.
template <int D, bool DK, bool DV>
__device__ void key_rows(const float* qkv, const float* dctx, int r0, int n, int H, int hd,
        float scale, Mask m, float (*as)[D], float (*bs)[D], const float* l2, const float* dsum,
        const u64* keys, float* dqkv) {
    int H3 = 3 * H;
    float scale2 = scale * LOG2E;
    int turns = (n + ATT_THREADS - 1) / ATT_THREADS;
    for (int turn = 0; turn < turns; turn++) {
        int j = turn * ATT_THREADS + threadIdx.x;
        bool mine = j < n;
        int jj = mine ? j : 0;
        float k[D], v[DK ? D : 1], dk[DK ? D : 1], dv[DV ? D : 1];
        const float* kj = qkv + (u64)(r0 + jj) * H3 + H + hd * D;
#pragma unroll
        for (int d = 0; d < D; d++) {
            k[d] = kj[d];
            if constexpr (DK) {
                v[d] = kj[H + d];
                dk[d] = 0.0f;
            }
            if constexpr (DV) dv[d] = 0.0f;
        }
        for (int i0 = 0; i0 < n; i0 += CHUNK) {
            int cn = min(CHUNK, n - i0);
            stage<D>(as, bs, qkv + (u64)(r0 + i0) * H3 + hd * D,
                     dctx + (u64)(r0 + i0) * H + hd * D, H3, H, cn);
            for (int i = 0; i < cn; i++) {
                float s = 0.0f, dp = 0.0f;
#pragma unroll
                for (int d = 0; d < D; d++) {
                    s = fmaf(as[i][d], k[d], s);
                    if constexpr (DK) dp = fmaf(bs[i][d], v[d], dp);
                }
                float p = exp2f(s * scale2 - l2[i0 + i]);
                float f = m.on ? factor(m, keys[i0 + i], jj) : 1.0f;
                float ds = scale * p * (dp * f - dsum[i0 + i]);
                float pd = p * f;
#pragma unroll
                for (int d = 0; d < D; d++) {
                    if constexpr (DV) dv[d] = fmaf(pd, bs[i][d], dv[d]);
                    if constexpr (DK) dk[d] = fmaf(ds, again<D>(as, i, d), dk[d]);
                }
            }
            __syncthreads();
        }
        if (mine) {
            float* out = dqkv + (u64)(r0 + j) * H3 + hd * D;
#pragma unroll
            for (int d = 0; d < D; d++) {
                if constexpr (DK) out[H + d] = dk[d];
                if constexpr (DV) out[2 * H + d] = dv[d];
            }
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
            const float* kv = qkv + (u64)(r0 + j0) * H3 + hd * D;
            stage<D>(as, bs, kv + H, kv + 2 * H, H3, H3, cn);
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
                for (int d = 0; d < D; d++) dq[d] = fmaf(ds, again<D>(as, j, d), dq[d]);
            }
            __syncthreads();
        }
        if (mine) {
            float* out = dqkv + (u64)(r0 + i) * H3 + hd * D;
#pragma unroll
            for (int d = 0; d < D; d++) out[d] = dq[d];
        }
    }
    // dK and dV: a key row a thread. Head widths over 32 take them in two sweeps: a thread's k,
    // v, dk and dv rows (4 x 64 values) in one sweep spilled 704 bytes to local memory (ptxas,
    // sm_90); the second sweep recomputes the scores instead
    if constexpr (D <= 32) {
        key_rows<D, true, true>(qkv, dctx, r0, n, H, hd, scale, m, as, bs, l2, dsum, keys, dqkv);
    } else {
        key_rows<D, false, true>(qkv, dctx, r0, n, H, hd, scale, m, as, bs, l2, dsum, keys, dqkv);
        key_rows<D, true, false>(qkv, dctx, r0, n, H, hd, scale, m, as, bs, l2, dsum, keys, dqkv);
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
