//! The GPU engine's CUDA kernels (issue 57, item 1; docs/gpu.md, "The GPU engine"): engine/,
//! one source in five files (common.cuh, rows.cu, attention.cu, heads.cu: pooling and the
//! ranking loss, and optim.cu: the optimizer's),
//! compiled by NVRTC at run time in a `cuda` build, and by g++ on the CPU for the tests that
//! hold each kernel to the CPU's result (emulated.rs, on every CI: no GPU needed to find a
//! wrong index or formula). Kept in every build, since the tests need no CUDA.
use crate::model::kernels::dropout_hash::Mask;

/// The kernels' one source, as NVRTC compiles it (emulate.cpp includes the same files in the
/// same order; a build without CUDA reads it in tests only).
#[cfg(any(test, feature = "cuda"))]
pub const ENGINE_SOURCE: &str = concat!(
    include_str!("common.cuh"),
    include_str!("rows.cu"),
    include_str!("attention.cu"),
    include_str!("heads.cu"),
    include_str!("optim.cu")
);

/// A dropout site as the kernels' `Mask` takes it (by value, as a kernel argument).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelMask {
    seed: u64,
    below: u32,
    scale: f32,
    on: u32,
    pad: u32,
}

impl KernelMask {
    /// The kernels' form of `mask` (a site that drops nothing where None).
    pub fn of(mask: Option<&Mask>) -> KernelMask {
        match mask {
            Some(m) => {
                let (seed, below, scale) = m.parts();
                KernelMask {
                    seed,
                    below,
                    scale,
                    on: 1,
                    pad: 0,
                }
            }
            None => KernelMask::default(),
        }
    }
}

/// A parameter as optim.cu's `Slot` takes it: the addresses of its weight, gradient and moments
/// (n f32 values each) and its weight-decay factor. One slot a parameter, in a table of them,
/// makes a step's AdamW one launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slot {
    pub w: u64,
    pub g: u64,
    pub m: u64,
    pub v: u64,
    pub n: u64,
    pub decay: f32,
    pad: u32,
}

impl Slot {
    pub fn new([w, g, m, v]: [u64; 4], n: usize, decay: f32) -> Slot {
        Slot {
            w,
            g,
            m,
            v,
            n: n as u64,
            decay,
            pad: 0,
        }
    }

    /// The table's bytes, as the kernels read them.
    pub fn bytes(table: &[Slot]) -> &[u8] {
        // SAFETY: repr(C) plain numbers without padding (5 x 8 + 4 + 4 bytes)
        unsafe { std::slice::from_raw_parts(table.as_ptr() as *const u8, size_of_val(table)) }
    }
}

/// The kernels as NVRTC compiles them, once a process (the engine and the optimizer load their
/// functions from the same module).
#[cfg(feature = "cuda")]
pub fn engine_ptx() -> candle_core::Result<&'static str> {
    static PTX: std::sync::OnceLock<std::result::Result<String, String>> =
        std::sync::OnceLock::new();
    let ptx = PTX.get_or_init(|| {
        candle_core::cuda::cudarc::nvrtc::compile_ptx(ENGINE_SOURCE)
            .map(|p| p.to_src())
            .map_err(|e| format!("{e:?}"))
    });
    match ptx {
        Ok(p) => Ok(p),
        Err(e) => candle_core::bail!("compiling the GPU engine's kernels (gpu/kernels/): {e}"),
    }
}

/// The device address of a contiguous f32 CUDA tensor's first element (its storage's address
/// plus the layout's offset), as a kernel or cuBLAS takes it. The address stays good while `t`
/// lives: the caller keeps it over every launch that reads it.
#[cfg(feature = "cuda")]
pub fn f32_address(
    t: &candle_core::Tensor,
    stream: &candle_core::cuda::cudarc::driver::CudaStream,
) -> candle_core::Result<u64> {
    use candle_core::cuda::cudarc::driver::DevicePtr;
    let (storage, layout) = t.storage_and_layout();
    let (candle_core::Storage::Cuda(s), Some((start, _))) =
        (&*storage, layout.contiguous_offsets())
    else {
        candle_core::bail!("a contiguous CUDA tensor expected")
    };
    let slice = s.as_cuda_slice::<f32>()?;
    let (ptr, _sync) = slice.device_ptr(stream);
    Ok(ptr + 4 * start as u64)
}

/// The module name the engine's kernels load under (candle's cache of custom functions).
#[cfg(feature = "cuda")]
pub const ENGINE_MODULE: &str = "condenser_engine";

// SAFETY: plain data, laid out as the kernels' Mask (repr(C), the same fields in the same order)
#[cfg(feature = "cuda")]
unsafe impl candle_core::cuda::cudarc::driver::DeviceRepr for KernelMask {}

#[cfg(test)]
pub(crate) mod emulated;
