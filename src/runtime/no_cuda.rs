//! A build without CUDA: no GPU to open (the error says how to build one that has), no memory
//! figures.
pub fn gpu_memory_peak_mb() -> Option<(f64, f64)> {
    None
}

pub fn gpu_memory_peak_reset() {}

pub fn open(ordinal: usize) -> crate::error::Result<candle_core::Device> {
    Err(crate::error::Error::msg(format!(
        "--device cuda:{ordinal}: this condenser was built without the `cuda` feature \
         (build it with scripts/build-cuda.sh, or cargo build --release --features cuda)"
    )))
}
