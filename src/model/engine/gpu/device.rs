//! What the GPU engine asks of a device: memory by address, row-major GEMMs, and the CUDA kernels'
//! kernels by name. Two devices answer: a CUDA GPU (cuda.rs: cuBLAS and NVRTC), and, for the
//! tests, the CPU (emulated.rs: the CPU's BLAS and the kernels built by g++), so that everything
//! the engine does between kernels (which buffer, which transposes, which strides) is tested on
//! every CI against the CPU engine, and a GPU has only the device calls left to prove.
use crate::model::engine::gpu::kernels::KernelMask;
use candle_core::{Result, Tensor, Var};
use std::cell::Cell;
use std::marker::PhantomData;

/// A device address, in bytes.
pub type Addr = u64;

/// A kernel argument, as the CUDA kernels' parameters take them: a buffer's address, a number, a mask.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    Addr(Addr),
    I32(i32),
    U64(u64),
    F32(f32),
    Mask(KernelMask),
}

/// A GEMM operand as stored (`N`) or transposed (`T`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    N,
    T,
}

/// What a GEMM's A and B hold: f32 values, or bf16 bits (u16s, --precision bf16: the kernels'
/// `to_bf16` made them). C is f32 either way, and the products are summed in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operands {
    F32,
    Bf16,
}

/// Launches and allocations so far (the step anatomy's figures: issue 57 wants under 400
/// launches a step and no allocation after the first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub launches: u64,
    pub allocations: u64,
    /// bytes of the device's own allocations (`alloc`; tensors made for candle not counted)
    pub bytes: u64,
}

/// A tensor made for the engine: an allocation and its fill.
fn made(c: &mut Counts) {
    c.allocations += 1;
    c.launches += 1;
}

/// What was counted between two readings (`after - before`).
impl std::ops::Sub for Counts {
    type Output = Counts;
    fn sub(self, before: Counts) -> Counts {
        Counts {
            launches: self.launches - before.launches,
            allocations: self.allocations - before.allocations,
            bytes: self.bytes - before.bytes,
        }
    }
}

pub trait Device {
    /// An allocation, freed when dropped.
    type Mem;
    /// `bytes` of zeros.
    fn alloc(&self, bytes: usize) -> Result<Self::Mem>;
    fn addr(&self, m: &Self::Mem) -> Addr;
    fn upload(&self, dst: Addr, src: &[u8]) -> Result<()>;
    /// Waits for the work before it.
    fn download(&self, src: Addr, dst: &mut [u8]) -> Result<()>;
    /// `bytes` from src to dst, on the device, in order with the work around it.
    fn copy(&self, dst: Addr, src: Addr, bytes: usize) -> Result<()>;
    /// `bytes` of zeros at dst.
    fn zero(&self, dst: Addr, bytes: usize) -> Result<()>;
    /// The address of a contiguous f32 tensor's first element, the tensor living on this device
    /// (the model's weights, read where they lie); valid while the tensor lives.
    fn tensor_addr(&self, t: &Tensor) -> Result<Addr>;
    /// Row-major C (m x n, row stride ldc) = op(A) op(B) + beta C, op(A) m x k, op(B) k x n,
    /// A and B holding `ty`'s values.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &self,
        ty: Operands,
        ops: (Op, Op),
        mnk: (usize, usize, usize),
        a: (Addr, usize),
        b: (Addr, usize),
        beta: f32,
        c: (Addr, usize),
    ) -> Result<()>;
    /// the CUDA kernels' `kernel` on `grid` blocks of `threads`.
    fn launch(&self, kernel: &str, grid: (u32, u32), threads: u32, args: &[Arg]) -> Result<()>;
    /// The device's launches and allocations so far, kept by its calls.
    fn counter(&self) -> &Cell<Counts>;

    fn counts(&self) -> Counts {
        self.counter().get()
    }

    fn count(&self, f: impl FnOnce(&mut Counts)) {
        let mut c = self.counter().get();
        f(&mut c);
        self.counter().set(c);
    }

    /// A new f32 tensor of zeros on `on` (candle's handle on this device) and its address: where
    /// the engine hands candle its gradients. An allocation and a fill, counted as `alloc` and
    /// `zero` are (on a GPU candle takes it from the same pool and zeroes it).
    fn new_tensor(&self, shape: &[usize], on: &candle_core::Device) -> Result<(Tensor, Addr)> {
        self.count(made);
        let t = Tensor::zeros(shape, candle_core::DType::F32, on)?;
        let a = self.tensor_addr(&t)?;
        Ok((t, a))
    }

    /// As `new_tensor`, a variable: a leaf whose gradient candle's backward computes, where the
    /// engine hands candle its rows (Var::from_tensor of a plain tensor would allocate and copy
    /// it once more, uncounted).
    fn new_var(&self, shape: &[usize], on: &candle_core::Device) -> Result<(Var, Addr)> {
        self.count(made);
        let v = Var::zeros(shape, candle_core::DType::F32, on)?;
        let a = self.tensor_addr(v.as_tensor())?;
        Ok((v, a))
    }
}

/// `len` elements of T on device D, zeroed.
pub struct Buf<D: Device, T> {
    _mem: D::Mem,
    addr: Addr,
    len: usize,
    _t: PhantomData<T>,
}

impl<D: Device, T: Copy> Buf<D, T> {
    pub fn zeros(dev: &D, len: usize) -> Result<Buf<D, T>> {
        let mem = dev.alloc(len.max(1) * size_of::<T>())?;
        let addr = dev.addr(&mem);
        Ok(Buf {
            _mem: mem,
            addr,
            len,
            _t: PhantomData,
        })
    }

    /// A buffer holding `data`.
    pub fn of(dev: &D, data: &[T]) -> Result<Buf<D, T>> {
        let b = Buf::zeros(dev, data.len())?;
        b.write(dev, 0, data)?;
        Ok(b)
    }

    /// The address of element i.
    pub fn at(&self, i: usize) -> Addr {
        self.addr + (i * size_of::<T>()) as Addr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `data` into elements i.. .
    pub fn write(&self, dev: &D, i: usize, data: &[T]) -> Result<()> {
        if i + data.len() > self.len {
            candle_core::bail!(
                "device buffer: {} elements at {i} past {}",
                data.len(),
                self.len
            )
        }
        // SAFETY: T is plain data (Copy numbers); its bytes are read as they lie
        let bytes = unsafe {
            std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data))
        };
        dev.upload(self.at(i), bytes)
    }

    /// Elements i .. i + n, read back.
    pub fn read(&self, dev: &D, i: usize, n: usize) -> Result<Vec<T>>
    where
        T: Default,
    {
        if i + n > self.len {
            candle_core::bail!("device buffer: {n} elements at {i} past {}", self.len)
        }
        let mut out = vec![T::default(); n];
        // SAFETY: as in `write`; every bit pattern is a valid f32, u32, i32 or u64
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, n * size_of::<T>())
        };
        dev.download(self.at(i), bytes)?;
        Ok(out)
    }
}
