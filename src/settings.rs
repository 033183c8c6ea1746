//! Every `CONDENSER_*` run-time setting, read once a process into one value with one policy:
//! a value is trimmed and compared without case, empty is unset (the default, as shells leave
//! it), and anything else unknown is an error naming the variable and its valid values, raised by
//! the front end before any work (the binary's `main`, the Python module's first call), never a
//! panic deep in a kernel nor a silent default. The list below is the one docs/engine.md prints.
use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::OnceLock;

/// A switch: the engines may run (`on`, the default) or are kept off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Switch {
    On,
    Off,
}

/// CONDENSER_ISA: the widest CPU class code may run at (the CPU's own where unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IsaCap {
    Baseline,
    Avx2,
    Avx512,
}

/// CONDENSER_F32_GEMM: where condenser's f32 inference kernels run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F32Gemm {
    /// Each where it was measured faster than the BLAS.
    Auto,
    /// Both on any CPU with AVX2 + FMA.
    Own,
    /// Neither.
    Blas,
}

/// CONDENSER_BF16: where bf16 products run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bf16Setting {
    /// condenser's kernel: AMX tiles where the CPU has them, else AVX512-BF16.
    Auto,
    /// oneMKL's bf16 GEMM (the loaded BLAS must be oneMKL).
    Mkl,
    /// condenser's kernel, said outright.
    Own,
    /// condenser's AVX512-BF16 kernel, AMX kept off.
    Avx512Bf16,
}

/// CONDENSER_BLAS: which f32 GEMM library is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlasChoice {
    /// The vendor's first (oneMKL on Intel, OpenBLAS elsewhere), the other next.
    Auto,
    /// No BLAS: candle's own gemm.
    Off,
    /// OpenBLAS with OPENBLAS_CORETYPE as the environment sets it.
    Env,
    Mkl,
    OpenBlas,
    /// OpenBLAS with this kernel (one of `OPENBLAS_CORES`, as OpenBLAS spells it).
    Core(&'static str),
}

/// The kernel names OpenBLAS's x86-64 dynamic build takes as OPENBLAS_CORETYPE.
pub const OPENBLAS_CORES: &[&str] = &[
    "Katmai",
    "Coppermine",
    "Northwood",
    "Prescott",
    "Banias",
    "Atom",
    "Core2",
    "Penryn",
    "Dunnington",
    "Nehalem",
    "Athlon",
    "Opteron",
    "Opteron_SSE3",
    "Barcelona",
    "Nano",
    "Sandybridge",
    "Bobcat",
    "Bulldozer",
    "Piledriver",
    "Haswell",
    "Steamroller",
    "Excavator",
    "Zen",
    "SkylakeX",
    "Cooperlake",
    "SapphireRapids",
];

/// What a test needs and CONDENSER_STRICT may say this machine has (`runtime::skipped`).
pub const STRICT_NEEDS: &[&str] = &[
    "all",
    "baseline",
    "avx2",
    "avx512",
    "avx512bf16",
    "amx",
    "blas",
    "threads",
    "cxx",
    "gpu",
];

/// One variable: its name, the values it takes and what it does (docs/engine.md's table).
pub struct Variable {
    pub name: &'static str,
    pub values: &'static str,
    pub about: &'static str,
}

pub const VARIABLES: &[Variable] = &[
    Variable {
        name: "CONDENSER_ENGINE",
        values: "on (default), off; 1, 0 and candle are read as on, off, off",
        about: "off: every model through candle's graph (CPU and GPU engines kept off)",
    },
    Variable {
        name: "CONDENSER_GPU_ENGINE",
        values: "on (default), off; 1 and 0 as on and off",
        about: "off: the GPU engine kept off, candle's graph on the GPU",
    },
    Variable {
        name: "CONDENSER_ISA",
        values: "baseline, avx2, avx512 (unset: the CPU's widest)",
        about: "caps the CPU class condenser's kernels run at",
    },
    Variable {
        name: "CONDENSER_F32_GEMM",
        values: "auto (default), own, blas",
        about: "condenser's f32 inference kernels: where measured faster, always, or never",
    },
    Variable {
        name: "CONDENSER_BF16",
        values: "auto (default), mkl, own, avx512bf16",
        about: "where bf16 products run: condenser's kernel (AMX where the CPU has it), oneMKL's, \
                condenser's said outright, or its AVX512-BF16 kernel with AMX kept off",
    },
    Variable {
        name: "CONDENSER_BLAS",
        values: "auto (default; on and 1 too), off (or 0), env, mkl, openblas, or an OpenBLAS \
                 kernel name (haswell, skylakex, zen, ...)",
        about: "the f32 GEMM library loaded",
    },
    Variable {
        name: "CONDENSER_BLAS_LIB",
        values: "a path",
        about: "the one BLAS library tried (a name with \"mkl\" in it is oneMKL)",
    },
    Variable {
        name: "CONDENSER_HOME",
        values: "a folder (default ~/.cache/condenser)",
        about: "where installed models live",
    },
    Variable {
        name: "CONDENSER_INDEX_CHECKPOINT_SECS",
        values: "whole seconds (default 300)",
        about: "how often `index` checkpoints a build",
    },
    Variable {
        name: "CONDENSER_STRICT",
        values: "a comma list of all, baseline, avx2, avx512, avx512bf16, amx, blas, threads, \
                 cxx, gpu",
        about: "tests: what the machine has, so a test skipped for want of it fails",
    },
];

/// Every setting, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub engine: Switch,
    pub gpu_engine: Switch,
    pub isa: Option<IsaCap>,
    pub f32_gemm: F32Gemm,
    pub bf16: Bf16Setting,
    pub blas: BlasChoice,
    pub blas_lib: Option<PathBuf>,
    pub home: Option<PathBuf>,
    pub index_checkpoint_secs: Option<u64>,
    pub strict: Vec<&'static str>,
}

impl Settings {
    /// Parse from `get` (the environment, or a test's table): the first bad value is the error.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Result<Settings> {
        let value = |name: &str| -> Option<String> {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let blas_cores: Vec<(&str, BlasChoice)> = OPENBLAS_CORES
            .iter()
            .map(|c| (*c, BlasChoice::Core(c)))
            .collect();
        let blas = [
            ("auto", BlasChoice::Auto),
            ("on", BlasChoice::Auto),
            ("1", BlasChoice::Auto),
            ("off", BlasChoice::Off),
            ("0", BlasChoice::Off),
            ("env", BlasChoice::Env),
            ("mkl", BlasChoice::Mkl),
            ("openblas", BlasChoice::OpenBlas),
        ];
        let blas = pick(
            &value,
            "CONDENSER_BLAS",
            BlasChoice::Auto,
            &[&blas[..], &blas_cores].concat(),
        )?;
        let isa = pick(
            &value,
            "CONDENSER_ISA",
            None,
            &[
                ("baseline", Some(IsaCap::Baseline)),
                ("sse2", Some(IsaCap::Baseline)),
                ("avx2", Some(IsaCap::Avx2)),
                ("avx512", Some(IsaCap::Avx512)),
                ("avx-512", Some(IsaCap::Avx512)),
            ],
        )?;
        let f32_gemm = pick(
            &value,
            "CONDENSER_F32_GEMM",
            F32Gemm::Auto,
            &[
                ("auto", F32Gemm::Auto),
                ("own", F32Gemm::Own),
                ("blas", F32Gemm::Blas),
            ],
        )?;
        let bf16 = pick(
            &value,
            "CONDENSER_BF16",
            Bf16Setting::Auto,
            &[
                ("auto", Bf16Setting::Auto),
                ("mkl", Bf16Setting::Mkl),
                ("own", Bf16Setting::Own),
                ("avx512bf16", Bf16Setting::Avx512Bf16),
            ],
        )?;
        let index_checkpoint_secs = match value("CONDENSER_INDEX_CHECKPOINT_SECS") {
            None => None,
            Some(v) => Some(
                v.parse::<u64>()
                    .map_err(|_| bad("CONDENSER_INDEX_CHECKPOINT_SECS", &v))?,
            ),
        };
        let mut strict = Vec::new();
        for need in value("CONDENSER_STRICT").iter().flat_map(|v| v.split(',')) {
            let need = need.trim();
            match STRICT_NEEDS.iter().find(|n| n.eq_ignore_ascii_case(need)) {
                Some(n) => strict.push(*n),
                None if need.is_empty() => {}
                None => return Err(bad("CONDENSER_STRICT", need)),
            }
        }
        Ok(Settings {
            engine: pick(
                &value,
                "CONDENSER_ENGINE",
                Switch::On,
                &switch(&[("candle", Switch::Off)]),
            )?,
            gpu_engine: pick(&value, "CONDENSER_GPU_ENGINE", Switch::On, &switch(&[]))?,
            isa,
            f32_gemm,
            bf16,
            blas,
            blas_lib: value("CONDENSER_BLAS_LIB").map(PathBuf::from),
            home: value("CONDENSER_HOME").map(PathBuf::from),
            index_checkpoint_secs,
            strict,
        })
    }

    /// CONDENSER_STRICT says this machine has `need`.
    pub fn strict_about(&self, need: &str) -> bool {
        self.strict.iter().any(|s| *s == need || *s == "all")
    }
}

/// `name`'s value looked up (without case) in `table`, `default` where unset; a value not in
/// it is the error naming the variable's valid values.
fn pick<T: Copy>(
    value: &impl Fn(&str) -> Option<String>,
    name: &str,
    default: T,
    table: &[(&str, T)],
) -> Result<T> {
    let Some(v) = value(name) else {
        return Ok(default);
    };
    match table.iter().find(|(k, _)| k.eq_ignore_ascii_case(&v)) {
        Some(&(_, x)) => Ok(x),
        None => Err(bad(name, &v)),
    }
}

/// An on/off variable's table, `extra` spellings after the usual ones.
fn switch(extra: &[(&'static str, Switch)]) -> Vec<(&'static str, Switch)> {
    let usual = [
        ("on", Switch::On),
        ("1", Switch::On),
        ("off", Switch::Off),
        ("0", Switch::Off),
    ];
    [&usual[..], extra].concat()
}

/// The error for `name`'s value `v`: the variable, the value and what it takes.
fn bad(name: &str, v: &str) -> Error {
    let values = VARIABLES
        .iter()
        .find(|x| x.name == name)
        .map_or("", |x| x.values);
    Error::msg(format!(
        "{name}={v:?} is not a value it takes: {values} (unset it for the default)"
    ))
}

static SETTINGS: OnceLock<std::result::Result<Settings, String>> = OnceLock::new();

/// The process's settings, read from its environment on the first call: what the front ends
/// call before any work, so a bad value stops the command with its message.
pub fn check() -> Result<&'static Settings> {
    SETTINGS
        .get_or_init(|| Settings::read(|k| std::env::var(k).ok()).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| Error::msg(e.clone()))
}

/// The process's settings, for the code that acts on them. The binary and the Python module
/// call `check` first, so a bad value has stopped them before this is reached; a program that
/// links the library and skips `check` stops here with the same message.
pub fn get() -> &'static Settings {
    match check() {
        Ok(s) => s,
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
#[path = "settings_test.rs"]
mod tests;
