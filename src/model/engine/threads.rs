//! How the engine's kernels share the cores with the BLAS and with each other: a kernel splits its
//! work only where the BLAS runs multi-threaded (`blas::may_split`; else its caller is one of
//! several threads), and a batch's parts run on threads of their own with a serial BLAS each.
use crate::model::kernels::blas::serial;

/// Run `f(0) .. f(n - 1)` on `n` threads with a serial BLAS each (one thread: here, with the
/// BLAS as it is), results in order: a batch's parts through the engine at once.
pub fn in_threads<R: Send, E: Send>(
    n: usize,
    f: impl Fn(usize) -> std::result::Result<R, E> + Sync,
) -> std::result::Result<Vec<R>, E> {
    if n <= 1 {
        return Ok(vec![f(0)?]);
    }
    let f = &f;
    serial(|| {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..n).map(|i| s.spawn(move || f(i))).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an engine thread panicked"))
                .collect()
        })
    })
}
