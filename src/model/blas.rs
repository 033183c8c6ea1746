//! OpenBLAS's cblas_sgemm, found at run time with dlopen. On this project's CPUs it runs BERT's
//! matmuls at ~2x candle's gemm (benches/README.md); where no OpenBLAS is installed, or
//! CONDENSER_BLAS=0 is set, callers fall back to candle's own matmul and nothing else changes.
//!
//! CONDENSER_BLAS also picks OpenBLAS's kernel: unset or `auto`, the best one for the CPU
//! (SkylakeX's AVX-512 kernel where the CPU has it); `env`, whatever OPENBLAS_CORETYPE says; any
//! other value is a core type name passed to OpenBLAS (`haswell`, `skylakex`, ...).
use std::ffi::CStr;
use std::sync::OnceLock;

pub const ROW_MAJOR: i32 = 101;
pub const NO_TRANS: i32 = 111;
pub const TRANS: i32 = 112;

type Sgemm = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
    *const f32,
    i32,
    *const f32,
    i32,
    f32,
    *mut f32,
    i32,
);

type CoreName = unsafe extern "C" fn() -> *const libc::c_char;
type SetThreads = unsafe extern "C" fn(i32);
type GetThreads = unsafe extern "C" fn() -> i32;

pub struct Blas {
    sgemm: Sgemm,
    threads: Option<(SetThreads, GetThreads)>,
    pub library: &'static str,
    /// OpenBLAS's kernel ("Haswell", "SkylakeX", ...).
    pub core: String,
}

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

const CANDIDATES: [&CStr; 3] = [c"libopenblas.so.0", c"libopenblas.so", c"libopenblasp.so.0"];

fn load() -> Option<Blas> {
    let choice = std::env::var("CONDENSER_BLAS").unwrap_or_default();
    match choice.to_ascii_lowercase().as_str() {
        "0" | "off" => return None,
        "env" => {}
        "" | "auto" => {
            if let Some(core) = best_core() {
                set_env("OPENBLAS_CORETYPE", core);
            }
        }
        core => set_env("OPENBLAS_CORETYPE", core),
    }
    for name in CANDIDATES {
        // SAFETY: dlopen/dlsym with NUL-terminated names; the handle is never closed, so the
        // function pointer stays valid for the life of the process.
        unsafe {
            let h = libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if h.is_null() {
                continue;
            }
            let f = libc::dlsym(h, c"cblas_sgemm".as_ptr());
            if !f.is_null() {
                let sgemm = std::mem::transmute::<*mut libc::c_void, Sgemm>(f);
                // OpenBLAS now owns the cores during matmuls; candle's spinning elementwise pool
                // would fight its threads (measured 1.5x slower on 2 cores), so keep it serial.
                if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
                    set_env("CANDLE_NUM_THREADS", "1");
                }
                // the kernel OpenBLAS chose, for benchmarks to report
                let g = libc::dlsym(h, c"openblas_get_corename".as_ptr());
                let core = if g.is_null() {
                    String::new()
                } else {
                    let g = std::mem::transmute::<*mut libc::c_void, CoreName>(g);
                    CStr::from_ptr(g()).to_string_lossy().into_owned()
                };
                let (set, get) = (
                    libc::dlsym(h, c"openblas_set_num_threads".as_ptr()),
                    libc::dlsym(h, c"openblas_get_num_threads".as_ptr()),
                );
                let threads = (!set.is_null() && !get.is_null()).then(|| {
                    (
                        std::mem::transmute::<*mut libc::c_void, SetThreads>(set),
                        std::mem::transmute::<*mut libc::c_void, GetThreads>(get),
                    )
                });
                return Some(Blas {
                    sgemm,
                    threads,
                    library: name.to_str().unwrap_or("openblas"),
                    core,
                });
            }
        }
    }
    None
}

/// The kernel for this CPU. Debian's OpenBLAS 0.3.21 predates newer AVX-512 CPUs (Zen 4/5) and
/// detects them as Haswell (AVX2); machine-wide settings often pin Haswell too (numpy's sake).
/// The AVX-512 kernel trains BERT ~1.5x faster here (benches/README.md), so it wins over a
/// machine-wide OPENBLAS_CORETYPE; CONDENSER_BLAS=env restores that one.
fn best_core() -> Option<&'static str> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        return Some("SKYLAKEX");
    }
    None
}

fn set_env(k: &str, v: &str) {
    // Called once, at model load, before candle's or OpenBLAS's thread pools read these.
    let (k, v) = (
        std::ffi::CString::new(k).unwrap(),
        std::ffi::CString::new(v).unwrap(),
    );
    // SAFETY: NUL-terminated strings; done before the libraries that read them start threads.
    unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
}

/// The loaded BLAS, if any.
pub fn blas() -> Option<&'static Blas> {
    BLAS.get_or_init(load).as_ref()
}

/// Run `f` with OpenBLAS single-threaded, for callers that run matmuls on several threads of
/// their own at once (OpenBLAS's own workers would oversubscribe the cores); restored after.
pub fn serial<R>(f: impl FnOnce() -> R) -> R {
    let Some((set, get)) = blas().and_then(|b| b.threads) else {
        return f();
    };
    // SAFETY: OpenBLAS's thread-count calls, made from this thread while no matmul runs.
    let before = unsafe { get() };
    unsafe { set(1) };
    let r = f();
    unsafe { set(before) };
    r
}

/// What runs CPU f32 matmuls, for summaries and benchmarks.
pub fn describe() -> String {
    match blas() {
        Some(b) => format!("{} ({} kernel)", b.library, b.core),
        None => "candle's gemm".into(),
    }
}

impl Blas {
    /// C (m x n, row-major, ldc = n) = op(A) op(B), with op given by the trans flags.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm(
        &self,
        ta: i32,
        tb: i32,
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        lda: usize,
        b: &[f32],
        ldb: usize,
        c: &mut [f32],
    ) {
        assert!(c.len() >= m * n);
        assert!(
            a.len()
                >= if ta == NO_TRANS {
                    (m - 1) * lda + k
                } else {
                    (k - 1) * lda + m
                }
        );
        assert!(
            b.len()
                >= if tb == NO_TRANS {
                    (k - 1) * ldb + n
                } else {
                    (n - 1) * ldb + k
                }
        );
        // SAFETY: the asserts above keep every access inside the slices.
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                ta,
                tb,
                m as i32,
                n as i32,
                k as i32,
                1.0,
                a.as_ptr(),
                lda as i32,
                b.as_ptr(),
                ldb as i32,
                0.0,
                c.as_mut_ptr(),
                n as i32,
            )
        }
    }
}
