//! A loaded BLAS library: its entry points (cblas_sgemm, oneMKL's bf16 GEMM, the thread-count
//! calls) and the checked calls through them, whose bounds checks keep every access inside the
//! slices handed in.

pub const ROW_MAJOR: i32 = 101;
pub const NO_TRANS: i32 = 111;
pub const TRANS: i32 = 112;

pub(super) type Sgemm = unsafe extern "C" fn(
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

/// oneMKL's cblas_gemm_bf16bf16f32: (layout, transa, transb, m, n, k, alpha, A, lda, B, ldb,
/// beta, C, ldc) with bf16 (u16) operands and f32 C.
pub(super) type GemmBf16 = unsafe extern "C" fn(
    i32,
    i32,
    i32,
    i32,
    i32,
    i32,
    f32,
    *const u16,
    i32,
    *const u16,
    i32,
    f32,
    *mut f32,
    i32,
);

pub(super) type CoreName = unsafe extern "C" fn() -> *const libc::c_char;
pub(super) type MklVersion = unsafe extern "C" fn(*mut libc::c_char, i32);
pub(super) type SetThreads = unsafe extern "C" fn(i32);
pub(super) type GetThreads = unsafe extern "C" fn() -> i32;

/// Which library a [`Blas`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vendor {
    OpenBlas,
    Mkl,
}

pub struct Blas {
    pub vendor: Vendor,
    pub(super) sgemm: Sgemm,
    pub(super) threads: Option<(SetThreads, GetThreads)>,
    /// The library file that was loaded.
    pub library: String,
    /// OpenBLAS's kernel ("Haswell", "SkylakeX", ...), or MKL's version.
    pub core: String,
    /// oneMKL's bf16 GEMM, where the library has one (AMX on Sapphire Rapids and later).
    pub(super) gemm_bf16: Option<GemmBf16>,
}

impl Blas {
    /// OpenBLAS runs single-threaded right now (inside `serial`, or set so): callers then
    /// parallelise themselves.
    pub fn is_serial(&self) -> bool {
        self.threads() <= 1
    }

    /// The library's thread count now (1 where it cannot say).
    pub fn threads(&self) -> usize {
        // SAFETY: the library's thread-count query has no preconditions
        self.threads
            .map_or(1, |(_, get)| unsafe { get() }.max(1) as usize)
    }
}

impl Blas {
    /// Whether the library has a bf16 GEMM (oneMKL's).
    pub fn has_bf16(&self) -> bool {
        self.gemm_bf16.is_some()
    }

    /// C (m x n, leading dimension ldc) = A B + beta C with A (m x k) and B (k x n) row-major bf16
    /// (round-to-nearest-even bits), f32 accumulation: oneMKL's bf16 GEMM.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_bf16(
        &self,
        m: usize,
        n: usize,
        k: usize,
        a: &[u16],
        b: &[u16],
        beta: f32,
        c: &mut [f32],
        ldc: usize,
    ) -> candle_core::Result<()> {
        let Some(f) = self.gemm_bf16 else {
            candle_core::bail!("the loaded BLAS ({}) has no bf16 GEMM", self.library)
        };
        if m == 0 || n == 0 || k == 0 {
            candle_core::bail!("bf16 gemm: an empty matrix ({m} x {k} times {k} x {n})");
        }
        let [mi, ni, ki, ldci] = ints("bf16 gemm", [m, n, k, ldc])?;
        let fits = ldc >= n
            && a.len() >= need(NO_TRANS, k, m, k)
            && b.len() >= need(NO_TRANS, n, k, n)
            && c.len() >= need(NO_TRANS, ldc, m, n);
        if !fits {
            candle_core::bail!("bf16 gemm: buffers too small for {m} x {k} times {k} x {n}");
        }
        // SAFETY: the checks above keep every access inside the slices, and every size fits i32
        unsafe {
            f(
                ROW_MAJOR,
                NO_TRANS,
                NO_TRANS,
                mi,
                ni,
                ki,
                1.0,
                a.as_ptr(),
                ki,
                b.as_ptr(),
                ni,
                beta,
                c.as_mut_ptr(),
                ldci,
            )
        };
        Ok(())
    }

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
    ) -> candle_core::Result<()> {
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
    ) -> candle_core::Result<()> {
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
    ) -> candle_core::Result<()> {
        if m == 0 || n == 0 || k == 0 {
            candle_core::bail!("sgemm: an empty matrix ({m} x {k} times {k} x {n})");
        }
        let [mi, ni, ki, ldai, ldbi, ldci] = ints("sgemm", [m, n, k, lda, ldb, ldc])?;
        // a row-major operand's leading dimension spans at least its row (its columns)
        let wide = |t: i32, ld: usize, rows: usize, cols: usize| match t == NO_TRANS {
            true => ld >= cols,
            false => ld >= rows,
        };
        let fits = wide(NO_TRANS, ldc, m, n)
            && wide(ta, lda, m, k)
            && wide(tb, ldb, k, n)
            && c.len() >= need(NO_TRANS, ldc, m, n)
            && a.len() >= need(ta, lda, m, k)
            && b.len() >= need(tb, ldb, k, n);
        if !fits {
            candle_core::bail!(
                "sgemm: buffers or leading dimensions too small for {m} x {k} times {k} x {n} \
                 (lda {lda}, ldb {ldb}, ldc {ldc})"
            );
        }
        // SAFETY: the checks above keep every access inside the slices, and every size fits i32
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                ta,
                tb,
                mi,
                ni,
                ki,
                1.0,
                a.as_ptr(),
                ldai,
                b.as_ptr(),
                ldbi,
                beta,
                c.as_mut_ptr(),
                ldci,
            )
        };
        Ok(())
    }
}

/// The elements an operand spans: `rows` x `cols` (as stored: transposed operands swap them)
/// with leading dimension `ld`.
fn need(t: i32, ld: usize, rows: usize, cols: usize) -> usize {
    match t == NO_TRANS {
        true => (rows - 1).saturating_mul(ld).saturating_add(cols),
        false => (cols - 1).saturating_mul(ld).saturating_add(rows),
    }
}

/// Sizes as the BLAS's 32-bit ints, or an error naming the call (a cast would wrap).
fn ints<const N: usize>(call: &str, v: [usize; N]) -> candle_core::Result<[i32; N]> {
    let mut out = [0i32; N];
    for (o, &x) in out.iter_mut().zip(&v) {
        *o = i32::try_from(x).map_err(|_| {
            candle_core::Error::Msg(format!(
                "{call}: a size of {x} exceeds the BLAS's 32-bit integers"
            ))
        })?;
    }
    Ok(out)
}
