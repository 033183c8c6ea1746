//! Process-wide settings the `condenser` binary applies at start (a library user decides for
//! their own process).

pub mod cancel;
// the GPU's opening and memory figures: runtime/cuda.rs in a CUDA build, runtime/no_cuda.rs
// (no GPU to open, no figures) in any other
#[cfg_attr(not(feature = "cuda"), path = "runtime/no_cuda.rs")]
mod cuda;
pub mod notes;
pub mod progress;

pub use cuda::{gpu_memory_peak_mb, gpu_memory_peak_reset};

/// Keep large tensor buffers in the malloc heap. glibc serves blocks over 32 MB with fresh mmap
/// pages and unmaps them on free, so every attention-sized temporary (100 MB at 256 tokens) costs
/// ~25k page faults: on Cranfield that was a third of the run in system time.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only adjusts allocator thresholds; called before any threads allocate.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// The file that holds condenser's code in this process: the `condenser` executable, or the
/// Python extension's shared library when Python loaded it (where `current_exe` is the
/// interpreter, the same for every build of condenser). None where the platform cannot tell.
pub fn code_file() -> Option<std::path::PathBuf> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        let here = code_file as *const libc::c_void;
        // SAFETY: dladdr only reads the loader's tables for an address inside this image and
        // fills `info`; dli_fname, when set, is a NUL-terminated path the loader owns.
        let found = unsafe { libc::dladdr(here, &mut info) } != 0 && !info.dli_fname.is_null();
        if found {
            let name = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) };
            let path = std::path::PathBuf::from(name.to_string_lossy().into_owned());
            // the main program's name is argv[0] as run, which may not be a path from here
            if path.is_file() {
                return Some(path);
            }
        }
    }
    std::env::current_exe().ok()
}

/// This process's peak resident memory so far (Linux's VmHWM), in MB; None where unknown.
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Say that a check was skipped and why (a CPU without the instructions a path needs, no BLAS):
/// written straight to the process's stderr, past the test harness's capture, so a skipped test
/// shows in every log instead of passing silently. `needs` names what was missing (`avx2`,
/// `avx512`, `avx512bf16`, `blas`, `threads`, `cxx`: g++); where CONDENSER_STRICT lists it (or
/// is `all`), the machine is known to have it, and the skip is a failure (CI sets it from
/// /proc/cpuinfo and the tools it installs).
pub fn skipped(check: &str, needs: &str, why: &str) {
    use std::io::Write;
    let known = crate::settings::get().strict_about(needs);
    assert!(
        !known,
        "{check} was skipped for want of {needs} ({why}), which CONDENSER_STRICT says this machine has"
    );
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {check}: {why}");
}

/// A `--device` value, checked when the flags are parsed: `cpu`, `cuda` or `cuda:N`. Opening a
/// CUDA device needs a binary built with the `cuda` feature (scripts/build-cuda.sh) and a
/// visible GPU; either lack is one clear error.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeviceSpec {
    #[default]
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let spec = spec.trim().to_ascii_lowercase();
        if spec == "cpu" {
            return Ok(DeviceSpec::Cpu);
        }
        let bad = || "expected cpu, cuda or cuda:N".to_string();
        match spec.strip_prefix("cuda") {
            Some("") => Ok(DeviceSpec::Cuda(0)),
            Some(n) => n
                .strip_prefix(':')
                .and_then(|n| n.parse::<usize>().ok())
                .map(DeviceSpec::Cuda)
                .ok_or_else(bad),
            None => Err(bad()),
        }
    }
}

/// Serialised as written on the command line (`cpu`, `cuda:1`).
impl serde::Serialize for DeviceSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => write!(f, "cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl DeviceSpec {
    pub fn open(self) -> crate::error::Result<candle_core::Device> {
        match self {
            DeviceSpec::Cpu => Ok(candle_core::Device::Cpu),
            DeviceSpec::Cuda(n) => cuda::open(n),
        }
    }
}

/// The compute type of a model (`--dtype`); embeddings and scores always come out as f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComputeType {
    F32,
    Bf16,
    F16,
}

impl ComputeType {
    pub fn dtype(self) -> candle_core::DType {
        match self {
            ComputeType::F32 => candle_core::DType::F32,
            ComputeType::Bf16 => candle_core::DType::BF16,
            ComputeType::F16 => candle_core::DType::F16,
        }
    }

    /// The flag's value, or the default: f32 on the CPU, bf16 on a GPU.
    pub fn or_default(choice: Option<ComputeType>, device: &candle_core::Device) -> ComputeType {
        choice.unwrap_or(if device.is_cpu() {
            ComputeType::F32
        } else {
            ComputeType::Bf16
        })
    }
}

/// The CPU's vendor id ("GenuineIntel", "AuthenticAMD"; empty where unknown), which picks the
/// BLAS (model/kernels/blas/).
pub fn cpu_vendor() -> String {
    cpuinfo_field("vendor_id").unwrap_or_default()
}

fn cpuinfo_field(name: &str) -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|t| {
        t.lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    })
}

/// The CPU's model name (/proc/cpuinfo), for benchmark and training summaries: a speed figure
/// holds only on the CPU it was measured on.
pub fn cpu_model() -> String {
    cpuinfo_field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The checkout whose datasets/ a library test reads: where it was built, or (a test binary
/// carried to the lent GPU machine, scripts/README.md) the folder it runs in.
#[cfg(test)]
pub(crate) fn test_root() -> std::path::PathBuf {
    let built = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    if built.join("datasets/model").exists() {
        built.to_path_buf()
    } else {
        std::env::current_dir().expect("a working folder")
    }
}

#[cfg(test)]
mod tests {
    /// In a test binary condenser's code is linked into the executable, so the file dladdr names
    /// is the executable itself (from Python it is the extension: python/tests).
    #[test]
    fn the_code_file_is_the_image_that_holds_this_function() {
        let file = super::code_file().expect("linux names the image");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(
            std::fs::canonicalize(file).unwrap(),
            std::fs::canonicalize(exe).unwrap()
        );
    }
}
