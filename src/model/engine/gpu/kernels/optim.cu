// The optimizer's kernels (after attention.cu): AdamW over every parameter of a step in one
// launch, and the gradients' global sum of squares in two, each parameter a slot of a table
// the host uploads (train/adamw/slots.rs). One launch a parameter was ~200 launches a step for
// MiniLM's 101 parameters (update and norm), half of a step's budget of 400 (issue 57).

// A parameter as the optimizer's table holds it (gpu/kernels/mod.rs's `Slot`, the same fields
// in the same order): its weight, gradient and moments, n values each, and its weight-decay
// factor (1 - lr wd, or 1 where it does not decay).
struct Slot {
    float* w;
    const float* g;
    float* m;
    float* v;
    u64 n;
    float decay;
    u32 pad;
};

// w, m, v updated in place for slot blockIdx.y, as train/adamw/host.rs's adamw_chunk (torch's AdamW for
// an f32 parameter): m = lerp(m, g, c1), v = b2 v + c2 g^2, w = decay w - step m / (sqrt(v) /
// bc2_sqrt + eps), g scaled first. A slot's values are shared by gridDim.x blocks.
extern "C" __global__ void adamw_slots(const Slot* slots, float scale, float c1, float b2,
        float c2, float step_size, float bc2_sqrt, float eps) {
    const Slot s = slots[blockIdx.y];
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < s.n;
         i += (u64)blockDim.x * gridDim.x) {
        float gi = s.g[i] * scale;
        float mi = s.m[i] + (gi - s.m[i]) * c1;
        float vi = s.v[i] * b2 + gi * gi * c2;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        s.w[i] = s.w[i] * s.decay - step_size * mi / denom;
        s.m[i] = mi;
        s.v[i] = vi;
    }
}

// The sum of a 256-thread block's values, in a fixed order (thread 0 gets it).
__device__ __forceinline__ float block_sum_256(float v) {
    __shared__ float s[256];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    return s[0];
}

// partial[blockIdx.y * gridDim.x + blockIdx.x] = block x's share of slot y's sum of g^2 (a fixed
// grid-stride share, so the sum is the same every run: no atomics). 256 threads a block.
extern "C" __global__ void sum_squares_slots(const Slot* slots, float* partial) {
    const Slot s = slots[blockIdx.y];
    float acc = 0.0f;
    for (u64 i = blockIdx.x * 256ull + threadIdx.x; i < s.n; i += 256ull * gridDim.x) {
        acc += s.g[i] * s.g[i];
    }
    float total = block_sum_256(acc);
    if (threadIdx.x == 0) partial[(u64)blockIdx.y * gridDim.x + blockIdx.x] = total;
}

// out[0] = the sum of x[0 .. n) in a fixed order: one block of 256 threads.
extern "C" __global__ void sum_all(const float* x, u64 n, float* out) {
    float acc = 0.0f;
    for (u64 i = threadIdx.x; i < n; i += 256) acc += x[i];
    float total = block_sum_256(acc);
    if (threadIdx.x == 0) out[0] = total;
}
