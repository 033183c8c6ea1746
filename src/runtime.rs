//! Process-wide settings the `condenser` binary applies at start (a library user decides for
//! their own process).

/// Keep large tensor buffers in the malloc heap. glibc serves blocks over 32 MB with fresh mmap
/// pages and unmaps them on free, so every attention-sized temporary (100 MB at 256 tokens) costs
/// ~25k page faults: on Cranfield that was a third of the run in system time.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator thresholds; called before any threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

/// The device a `--device` flag names: `cpu`, `cuda` or `cuda:N`. CUDA needs a binary built with
/// the `cuda` feature (scripts/build-cuda.sh) and a visible GPU; either lack is one clear error.
pub fn device(spec: &str) -> crate::error::Result<candle_core::Device> {
    use crate::error::Error;
    let spec = spec.trim().to_ascii_lowercase();
    if spec == "cpu" {
        return Ok(candle_core::Device::Cpu);
    }
    let bad = || Error::msg(format!("--device {spec}: expected cpu, cuda or cuda:N"));
    let ordinal = match spec.strip_prefix("cuda") {
        Some("") => 0,
        Some(n) => n
            .strip_prefix(':')
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(bad)?,
        None => return Err(bad()),
    };
    cuda(ordinal)
}

/// The compute type a `--dtype` flag names; without one, f32 on the CPU and bf16 on a GPU.
pub fn dtype(
    spec: Option<&str>,
    device: &candle_core::Device,
) -> crate::error::Result<candle_core::DType> {
    use candle_core::DType;
    Ok(
        match spec.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            None if device.is_cpu() => DType::F32,
            None | Some("bf16") => DType::BF16,
            Some("f32") => DType::F32,
            Some("f16") => DType::F16,
            Some(s) => {
                return Err(crate::error::Error::msg(format!(
                    "--dtype {s}: expected f32, bf16 or f16"
                )))
            }
        },
    )
}

#[cfg(feature = "cuda")]
fn cuda(ordinal: usize) -> crate::error::Result<candle_core::Device> {
    candle_core::Device::new_cuda(ordinal).map_err(|e| {
        crate::error::Error::context(format!("--device cuda:{ordinal}: no usable CUDA GPU"), e)
    })
}

#[cfg(not(feature = "cuda"))]
fn cuda(ordinal: usize) -> crate::error::Result<candle_core::Device> {
    Err(crate::error::Error::msg(format!(
        "--device cuda:{ordinal}: this condenser was built without the `cuda` feature \
         (build it with scripts/build-cuda.sh, or cargo build --release --features cuda)"
    )))
}

/// The CPU's model name (/proc/cpuinfo), for benchmark and training summaries: a speed figure
/// holds only on the CPU it was measured on.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}
