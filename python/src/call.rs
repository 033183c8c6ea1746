//! How every long call runs: on a thread of its own with the GIL released (two Python threads
//! encoding at once both progress), inside the thread count `set_num_threads` chose, its bars
//! hidden where asked; the calling thread waits with the GIL released and looks at Python's
//! signals every 50 ms, so Ctrl-C cancels the call (runtime::cancel: it stops before its next
//! batch or step, leaving what a killed command leaves) and raises KeyboardInterrupt. A panic in
//! the call comes back as a RuntimeError, never through the interpreter.
use crate::errors::to_py;
use condenser::runtime::cancel::{self, Token};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use std::sync::{Arc, Condvar, Mutex, OnceLock, RwLock};
use std::time::Duration;

/// The thread pool `set_num_threads` made and its size (None: rayon's global pool,
/// RAYON_NUM_THREADS or the cores).
type Pool = RwLock<Option<(usize, Arc<rayon::ThreadPool>)>>;
static POOL: OnceLock<Pool> = OnceLock::new();

fn pool() -> &'static Pool {
    POOL.get_or_init(|| RwLock::new(None))
}

/// Every later call runs on `n` threads.
pub fn set_threads(n: usize) -> PyResult<()> {
    let p = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("set_num_threads({n}): {e}")))?;
    *pool().write().unwrap_or_else(|e| e.into_inner()) = Some((n, Arc::new(p)));
    Ok(())
}

/// The threads a call runs on.
pub fn threads() -> usize {
    match &*pool().read().unwrap_or_else(|e| e.into_inner()) {
        Some((n, _)) => *n,
        None => rayon::current_num_threads(),
    }
}

/// The threads `set_num_threads` chose, if it was called.
pub fn chosen_threads() -> Option<usize> {
    pool()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|p| p.0)
}

/// The result slot the call's thread fills and the waiting thread watches.
type Slot<R> = Arc<(
    Mutex<Option<std::thread::Result<condenser::Result<R>>>>,
    Condvar,
)>;

/// Run `f` as the module describes; `quiet` hides its progress bars.
pub fn run<R: Send>(
    py: Python<'_>,
    quiet: bool,
    f: impl FnOnce() -> condenser::Result<R> + Send,
) -> PyResult<R> {
    let token = Token::new();
    let slot: Slot<R> = Arc::new((Mutex::new(None), Condvar::new()));
    let pool = pool()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|p| p.1.clone());
    std::thread::scope(|s| {
        let (t, out) = (token.clone(), slot.clone());
        s.spawn(move || {
            // the token and the quiet flag are the thread's that runs `f` (a pool's thread,
            // where set_num_threads made one)
            let body = || cancel::within(&t, || condenser::cli::progress::quietly(quiet, f));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &pool {
                Some(p) => p.install(body),
                None => body(),
            }));
            *out.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            out.1.notify_all();
        });
        let wait = |limit: Option<Duration>| {
            let mut got = slot.0.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(r) = got.take() {
                    return Some(r);
                }
                match limit {
                    Some(d) => {
                        let (g, timeout) = slot
                            .1
                            .wait_timeout(got, d)
                            .unwrap_or_else(|e| e.into_inner());
                        got = g;
                        if timeout.timed_out() {
                            return got.take();
                        }
                    }
                    None => got = slot.1.wait(got).unwrap_or_else(|e| e.into_inner()),
                }
            }
        };
        loop {
            let done = py.detach(|| wait(Some(Duration::from_millis(50))));
            // the call's notes so far, to logging while the GIL is held (notes.rs)
            crate::notes::flush(py);
            if let Some(r) = done {
                return finish(r);
            }
            if let Err(e) = py.check_signals() {
                // the call stops at its next check: wait for it, so nothing runs on after the
                // exception (and its outputs are whole or absent when Python sees it)
                token.cancel();
                let _ = py.detach(|| wait(None));
                crate::notes::flush(py);
                return Err(e);
            }
        }
    })
}

fn finish<R>(r: std::thread::Result<condenser::Result<R>>) -> PyResult<R> {
    match r {
        Ok(r) => r.map_err(to_py),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(PyRuntimeError::new_err(format!(
                "condenser failed inside (a bug; please report it): {what}"
            )))
        }
    }
}
