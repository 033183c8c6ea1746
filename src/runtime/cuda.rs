//! The GPU a run asked for (`--device cuda:N`), opened as candle's device with the settings a
//! run on it wants, and the memory figures the summaries read from it (a CUDA build's).
pub fn open(ordinal: usize) -> crate::error::Result<candle_core::Device> {
    let dev = candle_core::Device::new_cuda(ordinal).map_err(|e| {
        crate::error::Error::context(format!("--device cuda:{ordinal}: no usable CUDA GPU"), e)
    })?;
    if let candle_core::Device::Cuda(d) = &dev {
        // candle runs everything on one stream, so cudarc's per-allocation events (kept to order
        // a buffer's uses across streams) only cost: two created and destroyed per tensor, ~8 ms
        // of a batch-64 MNR step on an H200. SAFETY: nothing here uses a second stream.
        unsafe { d.cuda_stream().context().disable_event_tracking() };
        let _ = OPENED_GPU.set(d.cuda_stream().context().cu_device());
    }
    Ok(dev)
}

/// The GPU this process opened (one per process): its memory pool is read for the summaries.
static OPENED_GPU: std::sync::OnceLock<candle_core::cuda::cudarc::driver::sys::CUdevice> =
    std::sync::OnceLock::new();

/// The opened GPU's default memory pool (cudarc allocates from it), and the two high-water
/// marks read and reset on it: used by live buffers, reserved by the pool.
fn gpu_pool() -> Option<(
    candle_core::cuda::cudarc::driver::sys::CUmemoryPool,
    [candle_core::cuda::cudarc::driver::sys::CUmemPool_attribute; 2],
)> {
    use candle_core::cuda::cudarc::driver::sys;
    let dev = *OPENED_GPU.get()?;
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: dev came from an opened context; pool is written by the call.
    let r = unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, dev) };
    (r == sys::CUresult::CUDA_SUCCESS).then_some((
        pool,
        [
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
        ],
    ))
}

/// The opened GPU's memory high-water marks so far, in MB: (used by live buffers, reserved by
/// the stream-ordered pool that cudarc allocates from). The pool keeps freed blocks, so the GPU
/// holds `reserved` (what nvidia-smi shows), while the host's peak RSS says nothing of either.
/// None without a GPU.
pub fn gpu_memory_peak_mb() -> Option<(f64, f64)> {
    use candle_core::cuda::cudarc::driver::sys;
    let (pool, [used, reserved]) = gpu_pool()?;
    let attr = |a: sys::CUmemPool_attribute| -> Option<f64> {
        let mut v: u64 = 0;
        // SAFETY: both attributes are u64 (cuuint64_t) per the driver API; pool is the device's.
        let r = unsafe { sys::cuMemPoolGetAttribute(pool, a, &mut v as *mut u64 as *mut _) };
        (r == sys::CUresult::CUDA_SUCCESS).then_some(v as f64 / (1024.0 * 1024.0))
    };
    Some((attr(used)?, attr(reserved)?))
}

/// Start the GPU pool's high-water marks afresh (a recipe reads them per step).
pub fn gpu_memory_peak_reset() {
    let Some((pool, marks)) = gpu_pool() else {
        return;
    };
    for a in marks {
        let mut zero: u64 = 0;
        // SAFETY: the attributes are u64; the driver takes only 0 for these two.
        unsafe {
            candle_core::cuda::cudarc::driver::sys::cuMemPoolSetAttribute(
                pool,
                a,
                &mut zero as *mut u64 as *mut _,
            )
        };
    }
}
