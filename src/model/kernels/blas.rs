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
type MklVersion = unsafe extern "C" fn(*mut libc::c_char, i32);
type SetThreads = unsafe extern "C" fn(i32);
type GetThreads = unsafe extern "C" fn() -> i32;

/// Which library a [`Blas`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    OpenBlas,
    Mkl,
}

pub struct Blas {
    pub vendor: Vendor,
    sgemm: Sgemm,
    threads: Option<(SetThreads, GetThreads)>,
    /// The library file that was loaded.
    pub library: String,
    /// OpenBLAS's kernel ("Haswell", "SkylakeX", ...), or MKL's version.
    pub core: String,
}

static BLAS: OnceLock<Option<Blas>> = OnceLock::new();

/// The wheels' libraries, unpacked by datasets/fetch.sh.
const BUNDLED: &str = "datasets/lib/libscipy_openblas.so";
const BUNDLED_MKL: &str = "datasets/lib/mkl/libmkl_rt.so.3";

/// A library to try: how dlopen finds it, the prefix of its symbols, which library it is.
struct Candidate {
    name: CString,
    prefix: &'static str,
    vendor: Vendor,
}

/// The source tree this binary was built in, then the tree around the executable
/// (target/release/condenser -> ../../), joined with `rel`, where that file exists.
fn bundled(rel: &str) -> Vec<PathBuf> {
    let mut list = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)];
    if let Ok(exe) = std::env::current_exe() {
        if let Some(root) = exe.ancestors().nth(3) {
            list.push(root.join(rel));
        }
    }
    list.retain(|p| p.is_file());
    list
}

fn candidates(order: &[Vendor]) -> Vec<Candidate> {
    let c = |name: &str, prefix, vendor| {
        CString::new(name).ok().map(|name| Candidate {
            name,
            prefix,
            vendor,
        })
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
        let mkl = p
            .file_name()
            .is_some_and(|f| f.to_string_lossy().contains("mkl"));
        let vendor = if mkl { Vendor::Mkl } else { Vendor::OpenBlas };
        list.extend(c(&p.to_string_lossy(), prefix_of(&p), vendor));
        // an explicit library is the only one tried: a typo must not silently fall through
        return list;
    }
    for &v in order {
        match v {
            Vendor::OpenBlas => {
                for sys in ["libopenblas.so.0", "libopenblas.so", "libopenblasp.so.0"] {
                    list.extend(c(sys, "", v));
                }
                for p in bundled(BUNDLED) {
                    list.extend(c(&p.to_string_lossy(), "scipy_", v));
                }
            }
            Vendor::Mkl => {
                for sys in ["libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so"] {
                    list.extend(c(sys, "", v));
                }
                for p in bundled(BUNDLED_MKL) {
                    list.extend(c(&p.to_string_lossy(), "", v));
                }
            }
        }
    }
    list
}

/// CONDENSER_BLAS_LIB when set to something (an empty value counts as unset, as shells leave it).
fn explicit_lib() -> Option<std::ffi::OsString> {
    std::env::var_os("CONDENSER_BLAS_LIB").filter(|p| !p.is_empty())
}

fn load() -> Option<Blas> {
    use Vendor::*;
    let choice = std::env::var("CONDENSER_BLAS")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let auto_core = || {
        if let Some(core) = best_core() {
            set_env("OPENBLAS_CORETYPE", core);
        }
    };
    let order: &[Vendor] = match choice.as_str() {
        "0" | "off" => return None,
        "env" => &[OpenBlas],
        "openblas" => {
            auto_core();
            &[OpenBlas]
        }
        "mkl" => &[Mkl],
        "" | "auto" => {
            auto_core();
            if crate::runtime::cpu_vendor() == "GenuineIntel" {
                &[Mkl, OpenBlas]
            } else {
                &[OpenBlas, Mkl]
            }
        }
        core => {
            set_env("OPENBLAS_CORETYPE", core);
            &[OpenBlas]
        }
    };
    let found = candidates(order).into_iter().find_map(|c| open(&c));
    if found.is_none() {
        // the run still works, on candle's slower gemm; say so where the user looks
        if let Some(p) = explicit_lib() {
            eprintln!(
                "warning: CONDENSER_BLAS_LIB={} could not be loaded as a BLAS; using candle's gemm",
                PathBuf::from(p).display()
            );
        } else if choice == "mkl" || choice == "openblas" {
            eprintln!(
                "warning: CONDENSER_BLAS={choice}: the library was not found (bash \
                 datasets/fetch.sh installs both); using candle's gemm"
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
    if c.vendor == Vendor::Mkl && std::env::var_os("MKL_THREADING_LAYER").is_none() {
        // GNU OpenMP (libgomp, with gcc everywhere) rather than Intel's libiomp5, which the
        // wheel does not bring
        set_env("MKL_THREADING_LAYER", "GNU");
    }
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
        // the kernel OpenBLAS chose, or MKL's version, for benchmarks to report
        let core = match c.vendor {
            Vendor::OpenBlas => {
                let g = sym(h, "openblas_get_corename");
                if g.is_null() {
                    String::new()
                } else {
                    let g = std::mem::transmute::<*mut libc::c_void, CoreName>(g);
                    CStr::from_ptr(g()).to_string_lossy().into_owned()
                }
            }
            Vendor::Mkl => {
                let g = sym(h, "MKL_Get_Version_String");
                let mut buf = [0 as libc::c_char; 256];
                if !g.is_null() {
                    let g = std::mem::transmute::<*mut libc::c_void, MklVersion>(g);
                    g(buf.as_mut_ptr(), buf.len() as i32 - 1);
                }
                let v = CStr::from_ptr(buf.as_ptr()).to_string_lossy();
                // "Intel(R) oneAPI Math Kernel Library Version 2026.2-Product Build ..."
                v.split("Version ")
                    .nth(1)
                    .and_then(|r| r.split('-').next())
                    .unwrap_or("")
                    .trim()
                    .to_string()
            }
        };
        let (set, get) = match c.vendor {
            Vendor::OpenBlas => (
                sym(h, "openblas_set_num_threads"),
                sym(h, "openblas_get_num_threads"),
            ),
            Vendor::Mkl => (sym(h, "MKL_Set_Num_Threads"), sym(h, "MKL_Get_Max_Threads")),
        };
        let threads = (!set.is_null() && !get.is_null()).then(|| {
            (
                std::mem::transmute::<*mut libc::c_void, SetThreads>(set),
                std::mem::transmute::<*mut libc::c_void, GetThreads>(get),
            )
        });
        Some(Blas {
            vendor: c.vendor,
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
            match b.vendor {
                Vendor::OpenBlas => format!("OpenBLAS {file} ({} kernel)", b.core),
                Vendor::Mkl => format!("oneMKL {file} ({})", b.core),
            }
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
