//! The GPU engine's CUDA kernels (issue 57, item 1; docs/gpu.md, "The GPU engine"): engine/,
//! one source in three files (common.cuh, rows.cu, attention.cu), compiled by NVRTC at run time in a `cuda` build, and by g++ on the CPU for the tests that hold
//! each kernel to the CPU engine's result (emulated.rs, on every CI: no card needed to find a
//! wrong index or formula). Kept in every build, since the tests need no CUDA.
use super::dropout_hash::Mask;

/// The kernels' one source, as NVRTC compiles it (emulate.cpp includes the same three files in
/// the same order).
pub const ENGINE_SOURCE: &str = concat!(
    include_str!("engine/common.cuh"),
    include_str!("engine/rows.cu"),
    include_str!("engine/attention.cu")
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

// SAFETY: plain data, laid out as the kernels' Mask (repr(C), the same fields in the same order)
#[cfg(feature = "cuda")]
unsafe impl candle_core::cuda::cudarc::driver::DeviceRepr for KernelMask {}

#[cfg(test)]
pub(crate) mod emulated;
