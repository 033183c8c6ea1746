//! The GPU engine (issue 57, item 1; docs/gpu.md, "The GPU engine"): the CPU engine's forward and
//! backward (../cpu/layer.rs, ../cpu/embeddings.rs) on a device, with buffers allocated once for a row
//! capacity, the products on the device's GEMM and everything else on the CUDA kernels
//! (gpu/kernels/). `Device` abstracts the GPU, so that the tests run the whole engine on the CPU
//! (emulated.rs) against the CPU engine; a GPU then proves only the device calls (cuda.rs).
#[cfg(test)]
mod attention_test;
mod buffers;
// the GPU's device: cuda.rs in a CUDA build, no_cuda.rs (a `Cuda` no value can be, and no model
// taken) in any other, so that the engine's callers compile in every build without a cfg
#[cfg_attr(not(feature = "cuda"), path = "no_cuda.rs")]
mod cuda;
mod device;
#[cfg(test)]
mod emulated;
mod grads;
mod heads;
mod kernels;
#[cfg(test)]
mod kernels_test;
mod layer;
#[cfg(test)]
mod layer_test;
mod leaf;
mod products;
mod ranking;
mod stack;
#[cfg(test)]
mod stack_test;
mod training;
mod workspace;

// The engine's face: what the encoders, the trainers and the optimizer use of it (a stack and its
// leaves, the heads, the ranking loss, the gradients' arena, the device's memory and launches);
// the layers, kernels and workspaces behind it are its own.
pub use cuda::{gpu_for, Cuda};
pub use device::{Addr, Arg, Buf, Counts, Device};
#[cfg(test)]
pub(crate) use emulated::Emulated;
pub use grads::{Grads, Lease};
pub use heads::{DevicePooling, EmbedHead};
#[cfg(test)]
pub(crate) use kernels::emulated::{emulator, Args};
pub use kernels::Slot;
pub use leaf::{Leaf, PooledLeaf};
pub use ranking::{ranking_loss, Ranking, RankingRoom, Shape};
pub use stack::Stack;
pub use training::{Training, WholeBatch};

/// Whether the GPU engine may run a model on a GPU: a `cuda` build, the engines not turned off
/// (CONDENSER_ENGINE=off, or CONDENSER_GPU_ENGINE=off for the GPU alone). Which models it takes
/// is `cuda::gpu_for`'s to say.
pub fn on() -> bool {
    let on = crate::settings::get().gpu_engine == crate::settings::Switch::On;
    cfg!(feature = "cuda") && on && super::cpu::enabled()
}

/// A GPU test's device (candle's handle and the CUDA device), or None after saying why
/// `check` was skipped: no BLAS for its CPU side, or no CUDA device (runtime::skipped; a build
/// without CUDA has none, so the GPU tests compile and are type-checked in every build).
#[cfg(test)]
pub(crate) fn test_gpu(
    check: &str,
) -> Option<(candle_core::Device, candle_core::cuda::CudaDevice)> {
    if crate::model::kernels::blas::blas().is_none() {
        crate::runtime::skipped(check, "blas", "no BLAS here");
        return None;
    }
    match candle_core::Device::new_cuda(0) {
        Ok(candle_core::Device::Cuda(cd)) => Some((candle_core::Device::Cuda(cd.clone()), cd)),
        _ => {
            crate::runtime::skipped(check, "gpu", "no CUDA device");
            None
        }
    }
}

/// Every element of `got` within `tol` x max(1, max |want|) of `want`: the GPU engine's tests'
/// agreement with the CPU engine to f32 rounding (sums run in another order); `what` names the
/// buffer when it fails.
#[cfg(test)]
pub(crate) fn assert_close(what: &str, got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let scale = want.iter().fold(1f32, |m, v| m.max(v.abs()));
    let (i, worst) = got
        .iter()
        .zip(want)
        .map(|(a, b)| (a - b).abs())
        .enumerate()
        .fold((0, 0f32), |m, (i, d)| if d > m.1 { (i, d) } else { m });
    assert!(
        worst <= tol * scale,
        "{what}: element {i} is {} against {} (scale {scale})",
        got[i],
        want[i]
    );
}
