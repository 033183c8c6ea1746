//! The CPU class, detected at run time, and code compiled for it. condenser is built for the
//! x86-64 baseline (it must run on any machine it is copied to), so a loop the compiler would
//! vectorise with AVX2 or AVX-512 gets SSE2 unless it is compiled a second and third time with
//! those features enabled and the right copy is picked when it runs: `dispatch!` does that.
//!
//! Classes (as benchmarks name them): AVX2 + FMA (AMD Zen 2/3, Intel Haswell to Skylake client),
//! AVX-512 (Zen 4/5, Skylake-X and later), each with AVX512-BF16 and AMX noted where present.
//! CONDENSER_ISA=baseline|avx2|avx512 caps the class (never above what the CPU has), so every
//! path can be tested and measured on a machine that has the widest one.
use std::sync::OnceLock;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// SSE2 only (any x86-64, or another architecture).
    Baseline,
    /// AVX2 and FMA.
    Avx2,
    /// AVX-512 F/BW/DQ/VL (with AVX2 and FMA).
    Avx512,
}

impl Isa {
    /// The class's short name, as CONDENSER_ISA and CONDENSER_STRICT spell it.
    pub fn tag(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline (SSE2)",
            Isa::Avx2 => "AVX2+FMA",
            Isa::Avx512 => "AVX-512",
        }
    }
}

/// The widest class this CPU has.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512bw") && has!("avx512dq") && has!("avx512vl") {
            return Isa::Avx512;
        }
        if has!("avx2") && has!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// The class code runs at: the detected one, capped by CONDENSER_ISA (crate::settings refuses an
/// unknown value before any work: a typo must not silently measure the wrong path).
pub fn active() -> Isa {
    static ACTIVE: OnceLock<Isa> = OnceLock::new();
    *ACTIVE.get_or_init(|| {
        use crate::settings::IsaCap;
        let cap = crate::settings::get().isa.map(|c| match c {
            IsaCap::Baseline => Isa::Baseline,
            IsaCap::Avx2 => Isa::Avx2,
            IsaCap::Avx512 => Isa::Avx512,
        });
        cap.map_or(detected(), |c| c.min(detected()))
    })
}

/// AMD's CPU family (cpuid leaf 1, with the extended family), None on other vendors. Read once
/// a process: the kernel choices that ask (`own_f32_attention`, per attention call) would
/// otherwise run cpuid, a VM exit under a hypervisor, every time.
fn amd_family() -> Option<u32> {
    static FAMILY: OnceLock<Option<u32>> = OnceLock::new();
    *FAMILY.get_or_init(read_amd_family)
}

fn read_amd_family() -> Option<u32> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid;
        let v = __cpuid(0);
        let amd = [v.ebx, v.edx, v.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
        let eax = __cpuid(1).eax;
        let base = (eax >> 8) & 0xF;
        let family = base + if base == 0xF { (eax >> 20) & 0xFF } else { 0 };
        amd.then_some(family)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        None
    }
}

/// Whether this is an AMD Zen 4 (CPU family 25 with AVX-512; Zen 3, the same family, has none),
/// which runs a 512-bit instruction as two 256-bit halves: its FMA peak is the AVX2 one.
pub fn amd_zen4() -> bool {
    amd_family() == Some(25) && detected() == Isa::Avx512
}

/// Whether this is an AMD Zen 5 (CPU family 26, AVX-512 on full-width 512-bit units).
pub fn amd_zen5() -> bool {
    amd_family() == Some(26) && detected() == Isa::Avx512
}

/// Whether condenser's own f32 kernel (`f32_gemm`) runs the frozen Linears by default over the
/// BLAS: on the classes where it was measured faster (issue 35, issue 57, benches/README.md):
/// AVX2 + FMA (Zen 3), AVX-512 on AMD Zen 4 and Zen 5 (Zen 5: the whole encode 4.6-8.2% faster
/// than on OpenBLAS's SkylakeX kernel). Intel AVX-512 CPUs keep the BLAS (oneMKL): on a Xeon
/// with AMX (family 6 model 207) the kernel ran the layer's four products at 156-192 GFLOP/s
/// against oneMKL's 207-289, and Cranfield's encode 10-25% slower (benches/README.md, 2026-11-29).
pub fn own_f32_linears() -> bool {
    match active() {
        Isa::Avx2 => true,
        Isa::Avx512 => amd_zen4() || amd_zen5(),
        Isa::Baseline => false,
    }
}

/// Whether condenser's own f32 attention kernel (`head_attention`) runs by default over the BLAS
/// route (a GEMM a head's scores, a fused softmax, a GEMM its context): AVX2 + FMA (Zen 3) and
/// AVX-512 on Zen 4. Not on Zen 5: with the own Linears, Cranfield's encode ran 84.9 documents/s
/// through the kernel and 103.9 through the BLAS route, and since the kernel's exp vectorises
/// (8d28368) 95.1-96.8 against 97.4 (2026-11-28, benches/README.md): a tie, not a win. On Zen 4
/// after 8d28368 the kernel still led: 46.3 / 46.3 against 44.8 / 46.0 (2026-11-29).
pub fn own_f32_attention() -> bool {
    match active() {
        Isa::Avx2 => true,
        Isa::Avx512 => amd_zen4(),
        Isa::Baseline => false,
    }
}

/// Whether the CPU has AMX with bf16 tiles (cpuid leaf 7, EDX bits 22 and 24).
pub fn has_amx_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        leaf7.edx & (1 << 22) != 0 && leaf7.edx & (1 << 24) != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The CPU class for summaries and benchmarks: the class code runs at, plus AVX512-BF16 and AMX
/// where the CPU has them.
pub fn describe() -> String {
    let mut s = active().name().to_string();
    if active() != detected() {
        s += &format!(
            " (capped by CONDENSER_ISA; the CPU has {})",
            detected().name()
        );
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512bf16") {
            s += " + AVX512-BF16";
        }
        // cpuid leaf 7, EDX bit 24: AMX-TILE (std's detection of it is not stable yet)
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        if leaf7.edx & (1 << 24) != 0 {
            s += " + AMX";
        }
    }
    s
}

/// Define `pub fn $name(args) -> R` whose body is compiled three times (AVX-512, AVX2+FMA,
/// baseline) and runs in the copy for `active()`, and `pub mod $name { pub fn at(isa, args) }`
/// that runs a given copy (tests compare every copy the CPU can run with the baseline one). The
/// body is safe Rust (a target-feature copy only runs where the CPU has its features), with one
/// exception: the constant `WIDE`, true in the AVX-512 copy only, lets a body call AVX-512
/// intrinsics (which the compiler does not make from portable code) in an `unsafe` block under
/// `if WIDE`, sound because that copy runs only where the CPU has AVX-512.
#[macro_export]
macro_rules! dispatch {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            $name::at($crate::model::kernels::isa::active(), $($arg),*)
        }

        #[allow(non_snake_case, clippy::too_many_arguments)]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[inline(always)]
            fn body<const WIDE: bool>($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")]
            unsafe fn wide($($arg: $ty),*) $(-> $ret)? { body::<true>($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2,fma")]
            unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { body::<false>($($arg),*) }

            /// The copy for `isa`, capped at what this CPU has.
            pub fn at(isa: $crate::model::kernels::isa::Isa, $($arg: $ty),*) $(-> $ret)? {
                use $crate::model::kernels::isa::{detected, Isa};
                match isa.min(detected()) {
                    // SAFETY: capped at `detected`, so the CPU has the copy's features
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => unsafe { wide($($arg),*) },
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => unsafe { avx2($($arg),*) },
                    _ => body::<false>($($arg),*),
                }
            }
        }
    };
}
