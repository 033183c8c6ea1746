//! The GPU engine (issue 57, item 1; docs/gpu.md, "The GPU engine"): the CPU engine's forward and
//! backward (../layer.rs, ../embeddings.rs) on a device, with buffers allocated once for a row
//! capacity, the products on the device's GEMM and everything else on engine.cu's kernels
//! (kernels/cuda). `Device` abstracts the card, so that the tests run the whole engine on the CPU
//! (emulated.rs) against the CPU engine; a card then proves only the device calls (cuda.rs).
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod device;
#[cfg(test)]
pub(crate) mod emulated;
#[cfg(test)]
mod kernels_test;
pub mod layer;
#[cfg(test)]
mod layer_test;
pub mod leaf;
pub mod stack;
#[cfg(test)]
mod stack_test;
