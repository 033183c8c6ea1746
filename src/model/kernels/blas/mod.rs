//! The CPU's f32 GEMM (cblas_sgemm), found at run time with dlopen: OpenBLAS or Intel's oneMKL.
//! Either runs BERT's matmuls at ~2x candle's gemm (benches/README.md); where neither is found,
//! or CONDENSER_BLAS=0 is set, callers fall back to candle's own matmul and nothing else changes.
//!
//! Which one, chosen at run time (CONDENSER_BLAS): unset or `auto`, the vendor's library first on
//! Intel CPUs (oneMKL, as PyTorch uses there; AMX and AVX-512 kernels OpenBLAS lacks) and
//! OpenBLAS first elsewhere (on AMD Zen, measured here: OpenBLAS sgemm 194-206 GFLOP/s, MKL
//! 171-202, and MKL's bf16 GEMM no faster than its sgemm: it does not use AVX512-BF16 on AMD);
//! `openblas` or `mkl` insists on one (a warning when it is missing); `env` is OpenBLAS with
//! OPENBLAS_CORETYPE as set; any other value is an OpenBLAS core type (`haswell`, `skylakex`).
//!
//! Where they are looked for: CONDENSER_BLAS_LIB (a path, the only one tried: a file name with
//! "mkl" in it is MKL); the system's (libopenblas.so.0 as Debian installs it, libmkl_rt.so on the
//! loader's path); the copies `datasets/fetch.sh` unpacks from PyPI wheels into datasets/lib
//! (scipy-openblas32, whose symbols carry a `scipy_` prefix, and mkl), so README's commands get
//! the fast path on any machine without root.
mod library;
mod load;

pub use library::{Blas, Vendor, NO_TRANS, ROW_MAJOR, TRANS};
pub use load::prepare_env;

use library::SetThreads;
use std::path::Path;
use std::sync::OnceLock;

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

/// The loaded BLAS, if any.
pub fn blas() -> Option<&'static Blas> {
    BLAS.get_or_init(load::load).as_ref()
}

/// Run `f` with OpenBLAS single-threaded, for callers that run matmuls on several threads of
/// their own at once (OpenBLAS's own workers would oversubscribe the cores); restored after.
pub fn serial<R>(f: impl FnOnce() -> R) -> R {
    let Some((set, get)) = blas().and_then(|b| b.threads) else {
        return f();
    };
    /// Restores the thread count when dropped: after `f` returns and when it panics.
    struct Restore(SetThreads, i32);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: the library's thread-count call; no matmul of ours runs at this point
            unsafe { (self.0)(self.1) }
        }
    }
    // SAFETY: the library's thread-count calls, made from this thread while no matmul runs.
    let _restore = Restore(set, unsafe { get() });
    unsafe { set(1) };
    f()
}

/// What runs CPU f32 matmuls, for summaries and benchmarks.
pub fn describe() -> String {
    match blas() {
        Some(b) => {
            let file = Path::new(&b.library)
                .file_name()
                .map_or(b.library.clone(), |f| f.to_string_lossy().into_owned());
            let note = if load::ENV_SKIPPED.load(std::sync::atomic::Ordering::Relaxed) {
                "; loaded after threads started, so its environment was left as it was"
            } else {
                ""
            };
            match b.vendor {
                Vendor::OpenBlas => format!("OpenBLAS {file} ({} kernel{note})", b.core),
                Vendor::Mkl => format!("oneMKL {file} ({}{note})", b.core),
            }
        }
        None => "candle's gemm".into(),
    }
}
