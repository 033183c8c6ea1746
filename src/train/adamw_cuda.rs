//! AdamW's update and the gradients' squared norm on a CUDA device, one kernel launch a parameter.
//! As tensor ops the update took ~17 launches and as many allocations a parameter (~1,700 a step
//! for MiniLM's 101 parameters) and the norm ~3 more, in a training step whose time goes to
//! launches, not arithmetic (benches/README.md, "GPU checks": ~5,700 launches a step). The
//! kernels are compiled by NVRTC once a process (NVRTC is among the CUDA libraries the `cuda`
//! build already loads).
use super::adamw_host::Coefficients;
use candle_core::cuda::cudarc::driver::{CudaFunction, DevicePtr, LaunchConfig, PushKernelArg};
use candle_core::cuda::{CudaDevice, WrapErr};
use candle_core::{DType, Device, Result, Storage, Tensor};
use std::sync::OnceLock;

const SOURCE: &str = r#"
// w, m, v updated in place as adamw_host.rs's adamw_chunk (torch's AdamW for an f32 parameter)
extern "C" __global__ void adamw_f32(float* w, const float* g, float* m, float* v,
        unsigned long long n, float scale, float c1, float b2, float c2, float decay,
        float step_size, float bc2_sqrt, float eps) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)blockDim.x * gridDim.x) {
        float gi = g[i] * scale;
        float mi = m[i] + (gi - m[i]) * c1;
        float vi = v[i] * b2 + gi * gi * c2;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        w[i] = w[i] * decay - step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
}

// out[blockIdx.x] = this block's sum of x^2 (of x when !square: the partial sums' own sum) over
// a fixed grid-stride share: with a fixed grid the sum is the same every run (no atomics), so
// clipping is too
extern "C" __global__ void sum_squares_f32(const float* x, unsigned long long n, float* out,
        int square) {
    __shared__ float s[256];
    float acc = 0.0f;
    for (unsigned long long i = blockIdx.x * 256ull + threadIdx.x; i < n; i += 256ull * gridDim.x) {
        acc += square ? x[i] * x[i] : x[i];
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
"#;

/// Blocks a tensor's sum of squares is split over (each writes one partial sum).
const PARTIALS: usize = 64;

fn function(dev: &CudaDevice, name: &str) -> Result<CudaFunction> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    let ptx = PTX.get_or_init(|| {
        candle_core::cuda::cudarc::nvrtc::compile_ptx(SOURCE)
            .map(|p| p.to_src())
            .map_err(|e| format!("{e:?}"))
    });
    let ptx = ptx
        .as_ref()
        .map_err(|e| candle_core::Error::Msg(format!("compiling the AdamW kernels: {e}")))?;
    Ok(dev
        .get_or_load_custom_func(name, "condenser_adamw", ptx)?
        .into_cuda_function())
}

/// The CUDA device of an f32 tensor laid out contiguously, else None (the caller then takes
/// the tensor-op route, which is correct for any dtype and layout).
pub fn eligible(t: &Tensor) -> Option<CudaDevice> {
    match t.device() {
        Device::Cuda(d) if t.dtype() == DType::F32 && t.is_contiguous() => Some(d.clone()),
        _ => None,
    }
}

/// The device address of a contiguous f32 tensor's first element. The address stays valid while
/// `t` lives; the caller keeps it alive over the launch.
fn address(t: &Tensor, dev: &CudaDevice) -> Result<u64> {
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cuda(s) = &*storage else {
        candle_core::bail!("adamw: a CUDA tensor expected")
    };
    let slice = s.as_cuda_slice::<f32>()?;
    let stream = dev.cuda_stream();
    let (ptr, _sync) = slice.device_ptr(&stream);
    Ok(ptr + 4 * layout.start_offset() as u64)
}

fn grid(n: usize) -> LaunchConfig {
    LaunchConfig::for_num_elems(n.min(1 << 24) as u32)
}

/// w, m, v <- AdamW(w, m, v, g) in place, one launch. m and v are the optimizer's own tensors,
/// never shared (its checkpoint state is a copy), so writing them in place is unseen elsewhere.
pub fn update(w: &Tensor, g: &Tensor, m: &Tensor, v: &Tensor, c: &Coefficients) -> Result<()> {
    let dev = eligible(w).ok_or_else(|| candle_core::Error::Msg("adamw: f32 CUDA".into()))?;
    let n = w.elem_count();
    let g = g.contiguous()?;
    for t in [&g, m, v] {
        if eligible(t).is_none() || t.elem_count() != n {
            candle_core::bail!("adamw: gradient and moments must be contiguous f32 beside w");
        }
    }
    let ptrs = [
        address(w, &dev)?,
        address(&g, &dev)?,
        address(m, &dev)?,
        address(v, &dev)?,
    ];
    let f = function(&dev, "adamw_f32")?;
    let stream = dev.cuda_stream();
    let n64 = n as u64;
    let mut b = stream.launch_builder(&f);
    for p in &ptrs {
        b.arg(p);
    }
    b.arg(&n64);
    let consts = [
        c.scale,
        c.c1,
        c.b2,
        c.c2,
        c.decay,
        c.step_size,
        c.bc2_sqrt,
        c.eps,
    ];
    for k in &consts {
        b.arg(k);
    }
    // SAFETY: four live f32 buffers of n elements on this device's stream, matching the kernel
    unsafe { b.launch(grid(n)) }.w()?;
    Ok(())
}

/// Sum of squares of f32 CUDA tensors, summed on the device in a fixed order and read once.
pub fn sum_squares(ts: &[Tensor], dev: &CudaDevice) -> Result<f64> {
    let stream = dev.cuda_stream();
    let total = ts.len() * PARTIALS;
    let partial = stream.alloc_zeros::<f32>(total + 1).w()?;
    let (base, _sync) = partial.device_ptr(&stream);
    let f = function(dev, "sum_squares_f32")?;
    let launch = |x: u64, n: u64, out: u64, blocks: u32, square: i32| -> Result<()> {
        let mut b = stream.launch_builder(&f);
        b.arg(&x);
        b.arg(&n);
        b.arg(&out);
        b.arg(&square);
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: x holds n live f32 values and out `blocks` f32 slots, on this stream
        unsafe { b.launch(cfg) }.w()?;
        Ok(())
    };
    for (i, t) in ts.iter().enumerate() {
        let t = t.contiguous()?;
        let x = address(&t, dev)?;
        let out = base + 4 * (i * PARTIALS) as u64;
        launch(x, t.elem_count() as u64, out, PARTIALS as u32, 1)?;
    }
    // the partial sums summed as they are (squaring them again gave (sum x^2)^2: caught by
    // sum_squares_of_known_values on the GPU)
    launch(base, total as u64, base + 4 * total as u64, 1, 0)?;
    let all = stream.clone_dtoh(&partial).w()?;
    Ok(all[total] as f64)
}

#[cfg(test)]
mod tests {
    use crate::train::AdamW;
    use candle_core::{Device, Tensor, Var};

    /// Sums of squares whose values are exact in f32: 1..n ones (several blocks, ragged tails),
    /// two tensors at once, and 1 + 4 + 9.
    #[test]
    fn sum_squares_of_known_values() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let dev =
            super::eligible(&Tensor::zeros(1, candle_core::DType::F32, &gpu).unwrap()).unwrap();
        for n in [1usize, 3, 256, 257, 16384, 16385, 70001] {
            let ones = Tensor::ones(n, candle_core::DType::F32, &gpu).unwrap();
            let r = super::sum_squares(std::slice::from_ref(&ones), &dev).unwrap();
            let r2 = super::sum_squares(&[ones.clone(), ones], &dev).unwrap();
            assert_eq!(
                (r, r2),
                (n as f64, 2.0 * n as f64),
                "sum of squares of ones({n})"
            );
        }
        let t = Tensor::new(&[1f32, 2., 3.], &gpu).unwrap();
        assert_eq!(super::sum_squares(&[t], &dev).unwrap(), 14.0);
    }

    /// The one-launch update and norm against the CPU's (host kernel) on the same values, three
    /// steps with clipping-like scales and weight decay; skipped where no CUDA device answers.
    #[test]
    fn one_launch_update_matches_the_cpu() {
        let Ok(gpu) = Device::new_cuda(0) else {
            crate::runtime::skipped("a CUDA kernel", "gpu", "no CUDA device on this machine");
            return;
        };
        let cpu = Device::Cpu;
        let n = 70_001; // several blocks and a ragged tail
        let w0: Vec<f32> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0)
            .collect();
        let make = |d: &Device| {
            let w = Var::from_slice(&w0, n, d).unwrap();
            let b = Var::from_slice(&w0[..384], 384, d).unwrap();
            vec![("l.weight".to_string(), w), ("l.bias".to_string(), b)]
        };
        // tensor moments on the GPU (the one-launch route), host moments on the CPU
        let mut on_gpu = AdamW::with_tensor_moments(make(&gpu), 0.01).unwrap();
        let mut on_cpu = AdamW::new(make(&cpu), 0.01);
        for step in 0..3 {
            let g: Vec<f32> = (0..n)
                .map(|i| (((i + 31 * step) * 104_729) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let grads = |d: &Device| {
                vec![
                    Some(Tensor::from_slice(&g, n, d).unwrap()),
                    Some(Tensor::from_slice(&g[..384], 384, d).unwrap()),
                ]
            };
            let (gg, gc) = (grads(&gpu), grads(&cpu));
            let (ng, nc) = (
                AdamW::grad_norm(&gg).unwrap(),
                AdamW::grad_norm(&gc).unwrap(),
            );
            let again = AdamW::grad_norm(&gg).unwrap();
            eprintln!("step {step}: norm {ng} on the GPU (again {again}), {nc} on the CPU");
            assert!(
                (ng - nc).abs() <= 1e-5 * nc,
                "norm {ng} on the GPU, {nc} on the CPU"
            );
            assert_eq!(ng, again, "the GPU norm is not repeatable");
            let scale = 0.5 / (step + 1) as f64;
            on_gpu.step(&gg, 1e-2, scale).unwrap();
            on_cpu.step(&gc, 1e-2, scale).unwrap();
        }
        for (a, b) in on_gpu.vars().iter().zip(on_cpu.vars()) {
            let a = a
                .as_tensor()
                .to_device(&cpu)
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            let b = b.as_tensor().to_vec1::<f32>().unwrap();
            let worst = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            eprintln!(
                "weights: worst difference {worst:e}; first {:?} vs {:?}",
                &a[..3],
                &b[..3]
            );
            assert!(worst <= 1e-6, "weights differ by {worst} after 3 steps");
        }
    }
}
