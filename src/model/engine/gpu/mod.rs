//! The GPU engine (issue 57, item 1; docs/gpu.md, "The GPU engine"): the CPU engine's forward and
//! backward (../cpu/layer.rs, ../cpu/embeddings.rs) on a device, with buffers allocated once for a row
//! capacity, the products on the device's GEMM and everything else on the CUDA kernels
//! (gpu/kernels/). `Device` abstracts the GPU, so that the tests run the whole engine on the CPU
//! (emulated.rs) against the CPU engine; a GPU then proves only the device calls (cuda.rs).
#[cfg(test)]
mod attention_test;
pub mod buffers;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
#[cfg(test)]
pub(crate) mod emulated;
pub mod grads;
pub mod heads;
pub mod kernels;
#[cfg(test)]
mod kernels_test;
pub mod layer;
#[cfg(test)]
mod layer_test;
pub mod leaf;
mod products;
pub mod stack;
#[cfg(test)]
mod stack_test;
mod workspace;

/// Whether the GPU engine may run a model on a GPU: a `cuda` build, the engines not turned off
/// (CONDENSER_ENGINE=off, or CONDENSER_GPU_ENGINE=off for the GPU alone). Which models it takes
/// is `cuda::gpu_for`'s to say.
pub fn on() -> bool {
    let on = crate::settings::get().gpu_engine == crate::settings::Switch::On;
    cfg!(feature = "cuda") && on && super::cpu::enabled()
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
