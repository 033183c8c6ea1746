
// What follows the last layer in a bi-encoder step (issue 57: "the losses' reductions"): the
// pooling of packed rows into one embedding an item, L2 normalisation, and in-batch ranking's
// cross-entropy, each with its backward. The products between them (anchors by candidates, the
// gradient back to each side) are cuBLAS's.

// Pooling flags, sentence-transformers' modes the kernels take, concatenated in its order (cls,
// mean, mean_sqrt_len; max, which needs its winners for the backward, stays in candle)
#define POOL_CLS 1
#define POOL_MEAN 2
#define POOL_MEAN_SQRT 4

// Each item's embedding (items x width, width = h x the modes on) from its packed rows (t x h),
// as pooling.rs's `Pooling::pool_rows`: the first row, the rows' sum over the count, the sum
// over the count's square root. The rows are summed in order. A block an item, threads over
// columns.
extern "C" __global__ void pool_rows(const float* x, const int* off, const int* len, int flags,
        int h, float* out) {
    int item = blockIdx.x, n = len[item], r0 = off[item];
    int width = h * (((flags & POOL_CLS) != 0) + ((flags & POOL_MEAN) != 0) +
                     ((flags & POOL_MEAN_SQRT) != 0));
    float count = fmaxf((float)n, 1e-9f);
    float* o = out + (u64)item * width;
    for (int c = threadIdx.x; c < h; c += blockDim.x) {
        int at = 0;
        if (flags & POOL_CLS) {
            o[c] = x[(u64)r0 * h + c];
            at += h;
        }
        if (flags & (POOL_MEAN | POOL_MEAN_SQRT)) {
            float s = 0.0f;
            for (int r = 0; r < n; r++) s += x[(u64)(r0 + r) * h + c];
            if (flags & POOL_MEAN) {
                o[at + c] = s / count;
                at += h;
            }
            if (flags & POOL_MEAN_SQRT) o[at + c] = s / sqrtf(count);
        }
    }
}

// `pool_rows`' backward: every packed row's gradient (t x h, all rows written) from the
// embeddings' (items x width). A block an item.
extern "C" __global__ void pool_rows_backward(const float* g, const int* off, const int* len,
        int flags, int h, float* dx) {
    int item = blockIdx.x, n = len[item], r0 = off[item];
    int width = h * (((flags & POOL_CLS) != 0) + ((flags & POOL_MEAN) != 0) +
                     ((flags & POOL_MEAN_SQRT) != 0));
    float count = fmaxf((float)n, 1e-9f);
    const float* gi = g + (u64)item * width;
    for (u64 e = threadIdx.x; e < (u64)n * h; e += blockDim.x) {
        int pos = (int)(e / h), c = (int)(e % h), at = 0;
        float v = 0.0f;
        if (flags & POOL_CLS) {
            if (pos == 0) v += gi[c];
            at += h;
        }
        if (flags & POOL_MEAN) {
            v += gi[at + c] / count;
            at += h;
        }
        if (flags & POOL_MEAN_SQRT) v += gi[at + c] / sqrtf(count);
        dx[(u64)(r0 + pos) * h + c] = v;
    }
}

// Rows (n x h) divided by their L2 norm, at least 1e-12 (pooling.rs's `l2_normalize`, torch's
// F.normalize): y, and each row's norm for the backward. A warp a row.
extern "C" __global__ void normalize_rows(const float* x, int n, int h, float* y, float* norm) {
    int lane = threadIdx.x % 32, row = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    if (row >= n) return;
    const float* xr = x + (u64)row * h;
    float s = 0.0f;
    for (int c = lane; c < h; c += 32) s += xr[c] * xr[c];
    float nr = fmaxf(sqrtf(warp_sum(s)), 1e-12f);
    for (int c = lane; c < h; c += 32) y[(u64)row * h + c] = xr[c] / nr;
    if (lane == 0) norm[row] = nr;
}

// `normalize_rows`' backward: dx = (dy - y (y . dy)) / norm, or dy / norm where the norm was
// the floor (there it is a constant). dx may be dy (each lane reads its columns before it
// writes them, after the row's sum). A warp a row.
extern "C" __global__ void normalize_rows_backward(const float* y, const float* norm,
        const float* dy, int n, int h, float* dx) {
    int lane = threadIdx.x % 32, row = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    if (row >= n) return;
    const float* yr = y + (u64)row * h;
    const float* dr = dy + (u64)row * h;
    float s = 0.0f;
    for (int c = lane; c < h; c += 32) s += yr[c] * dr[c];
    float dot = warp_sum(s), nr = norm[row];
    if (!(nr > 1e-12f)) dot = 0.0f;
    for (int c = lane; c < h; c += 32) dx[(u64)row * h + c] = (dr[c] - yr[c] * dot) / nr;
}

// Whether candidate j is out of anchor i's softmax: mnr-masked's false negative, another row
// j < b whose anchor or positive text is row i's (ids: b x 2, one numbering for both columns;
// null: none is)
__device__ __forceinline__ bool excluded(const u32* ids, int i, int j, int b) {
    return ids && j < b && j != i && (ids[2 * j] == ids[2 * i] || ids[2 * j + 1] == ids[2 * i + 1]);
}

// In-batch ranking's cross-entropy (train/losses/functional.rs's `in_batch_ranking`) over the
// scores s (b x c, anchors by candidates), anchor i's target candidate i: loss[i] = the
// logsumexp of row i's scale x s minus its target's, and s becomes the gradient of weight x
// the batch's mean loss, weight / b x scale x (softmax - one-hot); an excluded candidate
// counts in neither (candle adds -1e9 to its score: exp gives 0 there too). A warp a row.
extern "C" __global__ void ranking_rows(float* s, const u32* ids, int b, int c, float scale,
        float weight, float* loss) {
    int lane = threadIdx.x % 32, i = blockIdx.x * ROW_WARPS + threadIdx.x / 32;
    if (i >= b) return;
    float* r = s + (u64)i * c;
    float m = NEG_INF;
    for (int j = lane; j < c; j += 32)
        if (!excluded(ids, i, j, b)) m = fmaxf(m, scale * r[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    // read by every lane before the warp's sums below, so before any lane writes the row
    float target = scale * r[i];
    // the other candidates' share apart: the target's gradient is -(their sum) / z, not p - 1,
    // which loses the digits that matter once the target's probability nears 1
    float others = 0.0f;
    for (int j = lane; j < c; j += 32)
        if (j != i && !excluded(ids, i, j, b)) others += expf(scale * r[j] - m);
    others = warp_sum(others);
    float z = others + expf(target - m);
    if (lane == 0) loss[i] = m + logf(z) - target;
    float k = weight / (float)b * scale;
    for (int j = lane; j < c; j += 32) {
        float g;
        if (j == i) g = -others / z;
        else g = excluded(ids, i, j, b) ? 0.0f : expf(scale * r[j] - m) / z;
        r[j] = k * g;
    }
}
