//! Finding the BLAS at run time: the candidates in the order CONDENSER_BLAS asks for, dlopened
//! until one has cblas_sgemm, with its kernel or version name and thread-count calls.
use super::library::{Blas, CoreName, GemmBf16, GetThreads, MklVersion, SetThreads, Sgemm, Vendor};
use crate::settings::BlasChoice;

type SetThreadingLayer = unsafe extern "C" fn(i32) -> i32;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// The environment could not be set before the libraries started (the process had threads).
pub(super) static ENV_SKIPPED: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);
/// CANDLE_NUM_THREADS=1 was set by `prepare_env` (undone where no BLAS loads).
static CANDLE_SERIAL_SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The wheels' libraries, unpacked by datasets/fetch.sh.
const BUNDLED: &str = "datasets/lib/libscipy_openblas.so";
const BUNDLED_MKL: &str = "datasets/lib/mkl/libmkl_rt.so.3";

/// A library to try: how dlopen finds it, the prefix of its symbols, which library it is.
struct Candidate {
    name: CString,
    prefix: &'static str,
    vendor: Vendor,
}

/// The source tree this binary was built in, then the tree around the file holding condenser's
/// code (target/release/condenser -> ../../), joined with `rel`, where that file exists.
fn bundled(rel: &str) -> Vec<PathBuf> {
    let mut list = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)];
    if let Some(exe) = crate::runtime::code_file() {
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
        let p = p.to_path_buf();
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
fn explicit_lib() -> Option<&'static Path> {
    crate::settings::get().blas_lib.as_deref()
}

/// CONDENSER_BLAS (crate::settings).
fn choice() -> BlasChoice {
    crate::settings::get().blas
}

/// The environment the libraries read when they start: OpenBLAS's kernel for this CPU (the
/// AVX-512 one where it runs, over a machine-wide setting; CONDENSER_BLAS=env keeps that), and
/// candle's elementwise pool kept serial, since a loaded BLAS owns the cores during matmuls and
/// candle's spinning pool would fight its threads (measured 1.5x slower on 2 cores).
///
/// Called by the `condenser` binary first thing in `main`, while it has one thread (setenv is safe
/// only then) and before OpenBLAS (which reads OPENBLAS_CORETYPE and starts its threads as it
/// loads) or candle's pool start. Never at load time: a program that links the library decides
/// its own process's environment (runtime.rs); it gets the libraries' defaults unless it calls
/// this, and `describe` says so.
pub fn prepare_env() {
    prepare(Writer::SingleThreaded);
}

/// `prepare_env` for a library loaded into an interpreter (the Python module's import), which
/// writes the environment whatever threads run: numpy, imported first, has started its own
/// OpenBLAS's threads, and with the environment left alone Debian's OpenBLAS took its Cooperlake
/// kernel on a Zen 4 where the binary takes SkylakeX, so `train_biencoder` from Python and the
/// CLI gave other bits (CI, 2026-12-07). Python's own `os.environ[k] = v` calls setenv with
/// threads running too; this runs at import, holding the GIL, as that does.
pub fn prepare_env_in_interpreter() {
    prepare(Writer::Interpreter);
}

/// Who may write the environment, and when.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    /// Only while the process has one thread (the binary, first in main).
    SingleThreaded,
    /// An interpreter's import, as the interpreter itself writes its environment.
    Interpreter,
}

fn prepare(w: Writer) {
    match choice() {
        BlasChoice::Off => return, // candle's own gemm: its pool keeps every core
        BlasChoice::Env | BlasChoice::Mkl => {}
        BlasChoice::Auto | BlasChoice::OpenBlas => {
            if let Some(core) = best_core() {
                set_env(w, "OPENBLAS_CORETYPE", core);
            }
        }
        BlasChoice::Core(core) => {
            set_env(w, "OPENBLAS_CORETYPE", core);
        }
    }
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() && set_env(w, "CANDLE_NUM_THREADS", "1") {
        CANDLE_SERIAL_SET.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

pub(super) fn load() -> Option<Blas> {
    use Vendor::*;
    let choice = choice();
    let order: &[Vendor] = match choice {
        BlasChoice::Off => return None,
        BlasChoice::Mkl => &[Mkl],
        BlasChoice::Auto if crate::runtime::cpu_vendor() == "GenuineIntel" => &[Mkl, OpenBlas],
        BlasChoice::Auto => &[OpenBlas, Mkl],
        BlasChoice::Env | BlasChoice::OpenBlas | BlasChoice::Core(_) => &[OpenBlas],
    };
    let found = candidates(order).into_iter().find_map(|c| open(&c));
    let serial = CANDLE_SERIAL_SET.load(std::sync::atomic::Ordering::Relaxed);
    if found.is_none() && serial && single_threaded() {
        // no BLAS: candle's pool does the matmuls and should have every core
        // SAFETY: a NUL-terminated name, and no other thread exists to read the environment
        unsafe { libc::unsetenv(c"CANDLE_NUM_THREADS".as_ptr()) };
    }
    if found.is_none() {
        // the run still works, on candle's slower gemm; say so where the user looks
        if let Some(p) = explicit_lib() {
            crate::runtime::notes::note(&format!(
                "warning: CONDENSER_BLAS_LIB={} could not be loaded as a BLAS; using candle's gemm",
                p.display()
            ));
        } else if matches!(choice, BlasChoice::Mkl | BlasChoice::OpenBlas) {
            let choice = format!("{choice:?}").to_lowercase();
            crate::runtime::notes::note(&format!(
                "warning: CONDENSER_BLAS={choice}: the library was not found (bash \
                 datasets/fetch.sh installs both); using candle's gemm"
            ));
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
    if c.vendor == Vendor::Mkl && std::env::var_os("MKL_THREADING_LAYER").is_none() {
        // GNU OpenMP (libgomp, with gcc everywhere) rather than Intel's libiomp5, which the
        // wheel does not bring; set by MKL's own call (before any other), not the environment
        let f = sym(h, "MKL_Set_Threading_Layer");
        if !f.is_null() {
            // SAFETY: mkl_service.h's `int MKL_Set_Threading_Layer(int)`; 3 = MKL_THREADING_GNU
            unsafe { std::mem::transmute::<*mut libc::c_void, SetThreadingLayer>(f)(3) };
        }
    }
    let f = sym(h, "cblas_sgemm");
    if f.is_null() {
        return None;
    }
    // SAFETY: the symbols are OpenBLAS's, with these C signatures.
    unsafe {
        let sgemm = std::mem::transmute::<*mut libc::c_void, Sgemm>(f);
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
        let bf16 = sym(h, "cblas_gemm_bf16bf16f32");
        let gemm_bf16 = (c.vendor == Vendor::Mkl && !bf16.is_null())
            .then(|| std::mem::transmute::<*mut libc::c_void, GemmBf16>(bf16));
        Some(Blas {
            vendor: c.vendor,
            sgemm,
            threads,
            library: c.name.to_string_lossy().into_owned(),
            core,
            gemm_bf16,
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

/// Set an environment variable that a library reads when it starts (OpenBLAS's kernel, candle's
/// pool size); whether it was set. The binary sets it only while the process has a single thread
/// (setenv races with any other thread's getenv): from `prepare_env`, first in main; a program
/// that has started threads by then keeps the libraries' own defaults, said by `describe`. An
/// interpreter's import sets it as the interpreter does (`prepare_env_in_interpreter`).
fn set_env(w: Writer, k: &str, v: &str) -> bool {
    if w == Writer::SingleThreaded && !single_threaded() {
        ENV_SKIPPED.store(true, std::sync::atomic::Ordering::Relaxed);
        return false;
    }
    let (k, v) = (CString::new(k).unwrap(), CString::new(v).unwrap());
    // SAFETY: NUL-terminated strings; no other thread exists to read the environment, or (an
    // interpreter's import) the interpreter writes its environment the same way under its lock
    unsafe { libc::setenv(k.as_ptr(), v.as_ptr(), 1) };
    true
}

/// Whether this process runs one thread (Linux: one entry in /proc/self/task).
fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|d| d.count() == 1)
}
