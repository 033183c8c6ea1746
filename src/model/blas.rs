//! OpenBLAS's cblas_sgemm, found at run time with dlopen. On this project's CPUs it runs BERT's
//! matmuls at ~2x candle's gemm (benches/README.md); where no OpenBLAS is found, or
//! CONDENSER_BLAS=0 is set, callers fall back to candle's own matmul and nothing else changes.
//!
//! Where it is looked for, in order: CONDENSER_BLAS_LIB (a path); the system's OpenBLAS
//! (libopenblas.so.0, as Debian's libopenblas0 installs it); the copy `datasets/fetch.sh` unpacks
//! from PyPI's scipy-openblas32 wheel into datasets/lib (no root needed, so README's commands get
//! the fast path on any machine; its symbols carry a `scipy_` prefix).
//!
//! CONDENSER_BLAS also picks OpenBLAS's kernel: unset or `auto`, the best one for the CPU
//! (SkylakeX's AVX-512 kernel where the CPU has it); `env`, whatever OPENBLAS_CORETYPE says; any
//! other value is a core type name passed to OpenBLAS (`haswell`, `skylakex`, ...).
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
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
    /// The library file that was loaded.
    pub library: String,
    /// OpenBLAS's kernel ("Haswell", "SkylakeX", ...).
    pub core: String,
}

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

/// The wheel's library, unpacked by datasets/fetch.sh.
const BUNDLED: &str = "datasets/lib/libscipy_openblas.so";

/// A library to try: how dlopen finds it and the prefix of its symbols.
struct Candidate {
    name: CString,
    prefix: &'static str,
}

fn candidates() -> Vec<Candidate> {
    let c = |name: &str, prefix| {
        CString::new(name)
            .ok()
            .map(|name| Candidate { name, prefix })
    };
    let prefix_of = |p: &Path| {
        if p.file_name()
            .is_some_and(|f| f.to_string_lossy().contains("scipy_openblas"))
        {
            "scipy_"
        } else {
            ""
        }
    };
    let mut list = Vec::new();
    if let Some(p) = explicit_lib() {
        let p = PathBuf::from(p);
        list.extend(c(&p.to_string_lossy(), prefix_of(&p)));
        // an explicit library is the only one tried: a typo must not silently fall through
        return list;
    }
    for sys in ["libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"] {
        list.extend(c(sys, ""));
    }
    // the source tree this binary was built in, then the tree around the executable
    // (target/release/condenser -> ../../datasets/lib)
    let mut bundled = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(root) = exe.ancestors().nth(3) {
            bundled.push(root.join(BUNDLED));
        }
    }
    for p in bundled.into_iter().filter(|p| p.is_file()) {
        list.extend(c(&p.to_string_lossy(), "scipy_"));
    }
    list
}

/// CONDENSER_BLAS_LIB when set to something (an empty value counts as unset, as shells leave it).
fn explicit_lib() -> Option<std::ffi::OsString> {
    std::env::var_os("CONDENSER_BLAS_LIB").filter(|p| !p.is_empty())
}

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
    let found = candidates().into_iter().find_map(|c| open(&c));
    if found.is_none() {
        if let Some(p) = explicit_lib() {
            // the run still works, on candle's slower gemm; say so where the user looks
            eprintln!(
                "warning: CONDENSER_BLAS_LIB={} could not be loaded as OpenBLAS; using candle's gemm",
                PathBuf::from(p).display()
            );
        }
    }
    found
}

/// dlopen one candidate and resolve its symbols.
fn open(c: &Candidate) -> Option<Blas> {
    let sym = |h: *mut libc::c_void, name: &str| -> *mut libc::c_void {
        let full = CString::new(format!("{}{name}", c.prefix)).expect("no NUL in symbol names");
        // SAFETY: a live handle and a NUL-terminated name
        unsafe { libc::dlsym(h, full.as_ptr()) }
    };
    // SAFETY: dlopen with a NUL-terminated name; the handle is never closed, so every function
    // pointer taken from it stays valid for the life of the process.
    let h = unsafe { libc::dlopen(c.name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if h.is_null() {
        return None;
    }
    let f = sym(h, "cblas_sgemm");
    if f.is_null() {
        return None;
    }
    // SAFETY: the symbols are OpenBLAS's, with these C signatures.
    unsafe {
        let sgemm = std::mem::transmute::<*mut libc::c_void, Sgemm>(f);
        // OpenBLAS now owns the cores during matmuls; candle's spinning elementwise pool
        // would fight its threads (measured 1.5x slower on 2 cores), so keep it serial.
        if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
            set_env("CANDLE_NUM_THREADS", "1");
        }
        // the kernel OpenBLAS chose, for benchmarks to report
        let g = sym(h, "openblas_get_corename");
        let core = if g.is_null() {
            String::new()
        } else {
            let g = std::mem::transmute::<*mut libc::c_void, CoreName>(g);
            CStr::from_ptr(g()).to_string_lossy().into_owned()
        };
        let (set, get) = (
            sym(h, "openblas_set_num_threads"),
            sym(h, "openblas_get_num_threads"),
        );
        let threads = (!set.is_null() && !get.is_null()).then(|| {
            (
                std::mem::transmute::<*mut libc::c_void, SetThreads>(set),
                std::mem::transmute::<*mut libc::c_void, GetThreads>(get),
            )
        });
        Some(Blas {
            sgemm,
            threads,
            library: c.name.to_string_lossy().into_owned(),
            core,
        })
    }
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
    let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
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

impl Blas {
    /// OpenBLAS runs single-threaded right now (inside `serial`, or set so): callers then
    /// parallelise themselves.
    pub fn is_serial(&self) -> bool {
        // SAFETY: OpenBLAS's thread-count query has no preconditions
        self.threads.is_some_and(|(_, get)| unsafe { get() } <= 1)
    }
}

/// What runs CPU f32 matmuls, for summaries and benchmarks.
pub fn describe() -> String {
    match blas() {
        Some(b) => {
            let file = Path::new(&b.library)
                .file_name()
                .map_or(b.library.clone(), |f| f.to_string_lossy().into_owned());
            format!("OpenBLAS {file} ({} kernel)", b.core)
        }
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
        self.sgemm_beta(ta, tb, m, n, k, a, lda, b, ldb, 0.0, c)
    }

    /// C = op(A) op(B) + beta C: with beta 1, C's prior contents (a bias in every row) are added
    /// by the GEMM itself, without another pass over C.
    #[allow(clippy::too_many_arguments)]
    pub fn sgemm_beta(
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
        beta: f32,
        c: &mut [f32],
    ) {
        self.gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, n)
    }

    /// The general form: C (m x n, leading dimension ldc) = op(A) op(B) + beta C. With ldc wider
    /// than n, C is a column block of a wider matrix (one attention head inside (s, hidden)).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
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
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) {
        assert!(ldc >= n && c.len() >= (m - 1) * ldc + n);
        let need = |t: i32, ld: usize, rows: usize, cols: usize| {
            if t == NO_TRANS {
                (rows - 1) * ld + cols
            } else {
                (cols - 1) * ld + rows
            }
        };
        assert!(a.len() >= need(ta, lda, m, k));
        assert!(b.len() >= need(tb, ldb, k, n));
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
                beta,
                c.as_mut_ptr(),
                ldc as i32,
            )
        }
    }
}
