//! gpu/kernels/ on the CPU, for tests: compiled once a test process by g++ with emulate.h into a
//! shared library (then unlinked: the mapping stays), its kernels launched by name with the
//! arguments cuLaunchKernel would take. Host memory stands in for device memory, so a kernel's
//! pointers are the test's own buffers.
use std::ffi::{c_char, c_void, CStr, CString};
use std::path::Path;
use std::sync::OnceLock;

type LaunchFn = unsafe extern "C" fn(*const c_char, u32, u32, u32, u32, *mut *mut c_void) -> i32;
type NamesFn = unsafe extern "C" fn() -> *const c_char;

pub(crate) struct Emulator {
    launch: LaunchFn,
    names: NamesFn,
}

/// The emulated kernels, or why there are none here (no g++: the caller skips). A g++ that fails
/// on gpu/kernels/ panics: that is a broken kernel source, not a missing tool.
pub(crate) fn emulator() -> Result<&'static Emulator, String> {
    static EMU: OnceLock<Result<Emulator, String>> = OnceLock::new();
    EMU.get_or_init(build).as_ref().map_err(Clone::clone)
}

fn build() -> Result<Emulator, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/model/engine/gpu/kernels");
    let out = tempfile::tempdir().map_err(|e| format!("a temporary folder: {e}"))?;
    let lib = out.path().join("libengine_emulated.so");
    let run = std::process::Command::new("g++")
        .args(["-std=c++20", "-O2", "-shared", "-fPIC", "-pthread"])
        .arg("-o")
        .arg(&lib)
        .arg(dir.join("emulate.cpp"))
        .output();
    let run = match run {
        Ok(r) => r,
        Err(e) => return Err(format!("g++ did not start: {e}")),
    };
    assert!(
        run.status.success(),
        "g++ failed on gpu/kernels/ (emulate.cpp):\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let path = CString::new(lib.to_string_lossy().as_bytes()).expect("a path without NUL");
    // SAFETY: dlopen of the library just built; its handle is kept for the process's life
    let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "dlopen of {}", lib.display());
    let symbol = |name: &CStr| {
        // SAFETY: a symbol of the open library
        let s = unsafe { libc::dlsym(handle, name.as_ptr()) };
        assert!(!s.is_null(), "{name:?} missing from the emulated kernels");
        s
    };
    // SAFETY: emulate.cpp defines both with these signatures
    let (launch, names) = unsafe {
        (
            std::mem::transmute::<*mut c_void, LaunchFn>(symbol(c"emu_launch")),
            std::mem::transmute::<*mut c_void, NamesFn>(symbol(c"emu_kernels")),
        )
    };
    Ok(Emulator { launch, names })
}

/// A kernel's arguments, each kept at a fixed address until the launch (cuLaunchKernel's form:
/// an array of pointers to the values).
#[derive(Default)]
pub(crate) struct Args {
    values: Vec<Box<dyn std::any::Any>>,
    pointers: Vec<*mut c_void>,
}

impl Args {
    /// Append a by-value argument: a number, a `KernelMask`, or a buffer's pointer.
    pub(crate) fn arg<T: Copy + 'static>(mut self, v: T) -> Args {
        let b = Box::new(v);
        self.pointers.push(&*b as *const T as *mut c_void);
        self.values.push(b);
        self
    }

    /// Append a buffer the kernel writes (its pointer).
    pub(crate) fn out(self, v: &mut [impl Copy + 'static]) -> Args {
        self.arg(v.as_mut_ptr())
    }

    /// Append a buffer the kernel reads (its pointer; null where None).
    pub(crate) fn inp<T: Copy + 'static>(self, v: Option<&[T]>) -> Args {
        self.arg(v.map_or(std::ptr::null(), <[T]>::as_ptr))
    }
}

impl Emulator {
    /// Run kernel `name` on a grid of `grid` blocks of `threads` threads, to completion.
    pub(crate) fn launch(&self, name: &str, grid: (u32, u32), threads: u32, mut args: Args) {
        assert!(threads.is_multiple_of(32), "whole warps");
        let n = CString::new(name).expect("a kernel name");
        // SAFETY: the arguments match the kernel's parameters (the caller's duty, as with
        // cuLaunchKernel), and every buffer they point to outlives this call
        let rc = unsafe {
            (self.launch)(
                n.as_ptr(),
                grid.0,
                grid.1,
                1,
                threads,
                args.pointers.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "gpu/kernels/ has no kernel {name}");
    }

    /// The kernels emulate.cpp registers.
    pub(crate) fn kernels(&self) -> Vec<String> {
        // SAFETY: a static NUL-terminated string of emulate.cpp
        let s = unsafe { CStr::from_ptr((self.names)()) };
        s.to_string_lossy()
            .split_whitespace()
            .map(String::from)
            .collect()
    }
}

/// The kernels gpu/kernels/ defines: its `extern "C" __global__` functions, and the attention pair
/// of each head width its ATTENTION_WIDTH lines instantiate.
pub(crate) fn kernels_in_source() -> Vec<String> {
    let mut names = Vec::new();
    for line in super::ENGINE_SOURCE.lines() {
        if let Some(rest) = line.strip_prefix("extern \"C\" __global__ void ") {
            names.push(rest.split('(').next().unwrap_or_default().to_string());
        }
        if let Some(d) = line
            .strip_prefix("ATTENTION_WIDTH(")
            .and_then(|r| r.strip_suffix(')'))
        {
            names.push(format!("attention_forward_{d}"));
            names.push(format!("attention_backward_{d}"));
        }
    }
    names
}
