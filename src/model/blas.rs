//! OpenBLAS's cblas_sgemm, found at run time with dlopen. On this project's CPUs it runs BERT's
//! matmuls at ~2x candle's gemm (benches/README.md); where no OpenBLAS is installed, or
//! CONDENSER_BLAS=0 is set, callers fall back to candle's own matmul and nothing else changes.
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

pub struct Blas {
    sgemm: Sgemm,
    pub library: &'static str,
}

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

const CANDIDATES: [&CStr; 3] = [c"libopenblas.so.0", c"libopenblas.so", c"libopenblasp.so.0"];

fn load() -> Option<Blas> {
    if std::env::var("CONDENSER_BLAS").is_ok_and(|v| v == "0" || v == "off") {
        return None;
    }
    // Debian's OpenBLAS 0.3.21 predates newer AVX-512 CPUs (Zen 4/5) and falls back to its AVX2
    // (Haswell) kernel: ask for the SkylakeX one where the CPU has its ISA, unless the user
    // chose a core type (this project's machines set OPENBLAS_CORETYPE=Haswell: respected).
    #[cfg(target_arch = "x86_64")]
    if std::env::var_os("OPENBLAS_CORETYPE").is_none()
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        set_env("OPENBLAS_CORETYPE", "SKYLAKEX");
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
                return Some(Blas {
                    sgemm,
                    library: name.to_str().unwrap_or("openblas"),
                });
            }
        }
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
    unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 0) };
}

/// The loaded BLAS, if any.
pub fn blas() -> Option<&'static Blas> {
    BLAS.get_or_init(load).as_ref()
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
