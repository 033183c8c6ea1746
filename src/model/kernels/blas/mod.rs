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
pub use load::{prepare_env, prepare_env_in_interpreter};

use library::SetThreads;
use std::path::Path;
use std::sync::OnceLock;

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

/// The loaded BLAS, if any.
pub fn blas() -> Option<&'static Blas> {
    BLAS.get_or_init(load::load).as_ref()
}

/// Serial scopes open in this process, and the library's thread count to restore when the last
/// closes. The count is process-wide, so scopes on two threads at once (two encodes in one
/// process; tests running side by side) must not restore it under each other: one scope's
/// restore while another still ran let the library split that one's GEMMs, and its bits changed
/// (tests/engine.rs `inference_is_the_same_bits_on_any_thread_count` failed once in CI so).
static SCOPES: std::sync::Mutex<(usize, i32)> = std::sync::Mutex::new((0, 0));

/// Run `f` with OpenBLAS single-threaded, for callers that run matmuls on several threads of
/// their own at once (OpenBLAS's own workers would oversubscribe the cores); the thread count is
/// restored when the last scope open in the process closes.
pub fn serial<R>(f: impl FnOnce() -> R) -> R {
    let Some((set, get)) = blas().and_then(|b| b.threads) else {
        return f();
    };
    /// Closes the scope when dropped: after `f` returns and when it panics.
    struct Scope(SetThreads);
    impl Drop for Scope {
        fn drop(&mut self) {
            let mut open = SCOPES.lock().unwrap_or_else(|e| e.into_inner());
            open.0 -= 1;
            if open.0 == 0 {
                // SAFETY: the library's thread-count call, under SCOPES' lock
                unsafe { (self.0)(open.1) }
            }
        }
    }
    {
        let mut open = SCOPES.lock().unwrap_or_else(|e| e.into_inner());
        if open.0 == 0 {
            // SAFETY: the library's thread-count calls, under SCOPES' lock
            open.1 = unsafe { get() };
            unsafe { set(1) };
        }
        open.0 += 1;
    }
    let _scope = Scope(set);
    f()
}

/// Whether a kernel may split its work across rayon's threads: not where the BLAS is serial (its
/// caller is then one of several threads with a core each: the engine's batches, a training
/// step's parts), nor on one thread. A split there put two threads on each core: the bf16 GEMM,
/// split so under the engine's two batch threads, ran bf16 Cranfield at 71.6-73.7 documents/s
/// against 80.8-81.9 kept on its caller's core (issue 35, 2-core Zen 4).
pub fn may_split() -> bool {
    rayon::current_num_threads() > 1 && !blas().is_some_and(Blas::is_serial)
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

#[cfg(test)]
mod tests {
    use super::library::GetThreads;
    use super::*;
    use std::sync::Barrier;

    /// The library's thread count at a moment when no serial scope is open in the process. Other
    /// tests open scopes of their own (every parallel encode does), so a count read at any
    /// moment may be one of theirs: read under SCOPES' lock while it holds none (this test
    /// failed about 1 run in 10 when it read the count unguarded).
    fn count_with_no_scope_open(get: GetThreads) -> i32 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        loop {
            {
                let open = SCOPES.lock().unwrap_or_else(|e| e.into_inner());
                if open.0 == 0 {
                    // SAFETY: the library's thread-count query, under SCOPES' lock
                    return unsafe { get() };
                }
            }
            assert!(
                std::time::Instant::now() < deadline,
                "other tests held serial scopes for 5 minutes"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// Two serial scopes on two threads, the first closing while the second is open: the library
    /// stays single-threaded until the second closes, then gets its count back.
    #[test]
    fn overlapping_serial_scopes_keep_the_library_serial_until_the_last_closes() {
        let Some((_, get)) = blas().and_then(|b| b.threads) else {
            crate::runtime::skipped(
                "serial BLAS scopes",
                "blas",
                "no BLAS with a thread-count call here",
            );
            return;
        };
        let before = count_with_no_scope_open(get);
        let (opened, first_closed) = (Barrier::new(2), Barrier::new(2));
        std::thread::scope(|s| {
            s.spawn(|| {
                serial(|| opened.wait());
                first_closed.wait();
            });
            serial(|| {
                opened.wait();
                first_closed.wait();
                // SAFETY: as above
                assert_eq!(
                    unsafe { get() },
                    1,
                    "the other scope's close restored the count"
                );
            });
        });
        assert_eq!(count_with_no_scope_open(get), before);
    }
}
