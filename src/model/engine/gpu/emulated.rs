//! The CPU standing in for a GPU (tests only): host memory by address, the CPU's BLAS for the
//! GEMMs, gpu/kernels/ built by g++ for the kernels (gpu/kernels/emulated.rs).
use super::device::{Addr, Arg, Counts, Device, Op, Operands};
use crate::model::engine::gpu::kernels::emulated::{Args, Emulator};
use crate::model::kernels::blas::{Blas, NO_TRANS, TRANS};
use candle_core::{bail, Result, Storage, Tensor};
use std::cell::Cell;

pub struct Emulated {
    emu: &'static Emulator,
    blas: &'static Blas,
    counts: Cell<Counts>,
}

impl Emulated {
    /// The emulated device, or None after saying why `check` was skipped (no g++, no BLAS: a
    /// failure where CONDENSER_STRICT says the machine has them).
    pub fn for_test(check: &str) -> Option<Emulated> {
        let emu = match crate::model::engine::gpu::kernels::emulated::emulator() {
            Ok(e) => e,
            Err(why) => {
                crate::runtime::skipped(check, "cxx", &why);
                return None;
            }
        };
        let Some(blas) = crate::model::kernels::blas::blas() else {
            crate::runtime::skipped(check, "blas", "no BLAS here");
            return None;
        };
        Some(Emulated::new(emu, blas))
    }

    /// The BLAS its products run on (the CPU engine's, which the tests compare with).
    pub fn blas(&self) -> &'static Blas {
        self.blas
    }

    pub fn new(emu: &'static Emulator, blas: &'static Blas) -> Emulated {
        Emulated {
            emu,
            blas,
            counts: Cell::new(Counts::default()),
        }
    }
}

/// The f32 elements a row-major operand spans: `rows` rows of `cols`, `ld` apart.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

impl Device for Emulated {
    // u64s: 8-byte aligned, as device memory is (aligned further than any element read)
    type Mem = Vec<u64>;

    fn alloc(&self, bytes: usize) -> Result<Vec<u64>> {
        self.count(|c| {
            c.allocations += 1;
            c.bytes += bytes as u64;
        });
        Ok(vec![0u64; bytes.div_ceil(8)])
    }

    fn addr(&self, m: &Vec<u64>) -> Addr {
        m.as_ptr() as Addr
    }

    fn upload(&self, dst: Addr, src: &[u8]) -> Result<()> {
        // SAFETY: dst is an address inside a live allocation of this device with room for src
        // (Buf::write checks the extent)
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst as *mut u8, src.len()) };
        Ok(())
    }

    fn download(&self, src: Addr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: as in upload (Buf::read checks the extent)
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn copy(&self, dst: Addr, src: Addr, bytes: usize) -> Result<()> {
        self.count(|c| c.launches += 1);
        // SAFETY: both span `bytes` of live allocations (the engine's buffers and tensors)
        unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, bytes) };
        Ok(())
    }

    fn zero(&self, dst: Addr, bytes: usize) -> Result<()> {
        self.count(|c| c.launches += 1);
        // SAFETY: dst spans `bytes` of a live allocation
        unsafe { std::ptr::write_bytes(dst as *mut u8, 0, bytes) };
        Ok(())
    }

    fn tensor_addr(&self, t: &Tensor) -> Result<Addr> {
        let (storage, layout) = t.storage_and_layout();
        let (Storage::Cpu(s), Some((start, _))) = (&*storage, layout.contiguous_offsets()) else {
            bail!("emulated device: a contiguous CPU tensor expected")
        };
        // the storage stays put while the tensor lives: the address outlives the guard
        Ok(s.as_slice::<f32>()?[start..].as_ptr() as Addr)
    }

    fn gemm(
        &self,
        ty: Operands,
        (oa, ob): (Op, Op),
        (m, n, k): (usize, usize, usize),
        (a, lda): (Addr, usize),
        (b, ldb): (Addr, usize),
        beta: f32,
        (c, ldc): (Addr, usize),
    ) -> Result<()> {
        let (ar, ac) = if oa == Op::N { (m, k) } else { (k, m) };
        let (br, bc) = if ob == Op::N { (k, n) } else { (n, k) };
        let flag = |o: Op| if o == Op::N { NO_TRANS } else { TRANS };
        // bf16 operands widened to the f32 values they are (exact), then the f32 product: the
        // products of two bf16 values are exact in f32, as a GPU's bf16 GEMM takes them
        let widened = |at: Addr, n: usize| -> Vec<f32> {
            // SAFETY: a live buffer of this device holding n bf16 values (the engine's shapes)
            let bits = unsafe { std::slice::from_raw_parts(at as *const u16, n) };
            bits.iter()
                .map(|&b| f32::from_bits((b as u32) << 16))
                .collect()
        };
        let (na, nb) = (span(ar, ac, lda), span(br, bc, ldb));
        let (wa, wb);
        // SAFETY: the operands are live f32 buffers of this device spanning these extents (the
        // engine's shapes); C does not overlap A or B
        let (a, b, c) = unsafe {
            let (a, b) = match ty {
                Operands::F32 => (
                    std::slice::from_raw_parts(a as *const f32, na),
                    std::slice::from_raw_parts(b as *const f32, nb),
                ),
                Operands::Bf16 => {
                    (wa, wb) = (widened(a, na), widened(b, nb));
                    (wa.as_slice(), wb.as_slice())
                }
            };
            (
                a,
                b,
                std::slice::from_raw_parts_mut(c as *mut f32, span(m, n, ldc)),
            )
        };
        self.count(|c| c.launches += 1);
        self.blas
            .gemm(flag(oa), flag(ob), m, n, k, a, lda, b, ldb, beta, c, ldc)
    }

    fn launch(&self, kernel: &str, grid: (u32, u32), threads: u32, args: &[Arg]) -> Result<()> {
        let mut a = Args::default();
        for &x in args {
            a = match x {
                Arg::Addr(p) => a.arg(p),
                Arg::I32(v) => a.arg(v),
                Arg::U64(v) => a.arg(v),
                Arg::F32(v) => a.arg(v),
                Arg::Mask(m) => a.arg(m),
            };
        }
        self.count(|c| c.launches += 1);
        self.emu.launch(kernel, grid, threads, a);
        Ok(())
    }

    fn counter(&self) -> &Cell<Counts> {
        &self.counts
    }
}
