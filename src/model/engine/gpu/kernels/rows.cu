// The GPU engine's row kernels (after common.cuh): embeddings and their scatter, residual +
// bias + dropout + LayerNorm forward and backward, bias + GELU and its backward, the partial
// column sums' fixed-order total, and the pad/unpad to candle's padded batch.

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

// f32 values into bf16 bits, round to nearest even (a NaN stays a quiet NaN), as
// kernels/bf16/matrix.rs's `to_bf16`: the operands of a product under --precision bf16 (cuBLAS
// multiplies bf16 A and B into an f32 C, as the CPU's bf16 GEMM does), so that both round the
// same f32 values to the same bits. A grid-stride loop over n values; y[n..padded) are zeros
// (the rows a product's padded shape adds: products.rs's `padded_rows`).
extern "C" __global__ void to_bf16(const float* x, unsigned short* y, int n, int padded) {
    for (u64 k = (u64)blockIdx.x * blockDim.x + threadIdx.x; k < (u64)padded;
         k += (u64)gridDim.x * blockDim.x) {
        if (k >= (u64)n) {
            y[k] = 0;
            continue;
        }
        u32 b = __float_as_uint(x[k]);
        bool nan = (b & 0x7fffffffu) > 0x7f800000u;
        u32 bits = nan ? ((b >> 16) | 0x40u) : ((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
        y[k] = (unsigned short)bits;
    }
}
