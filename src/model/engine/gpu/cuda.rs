//! The GPU: memory and launches through cudarc's driver API on candle's stream (so that the
//! engine's work and candle's heads and losses stay in order without a synchronisation), the
//! products on a cuBLAS handle of its own (plain f32 math: no TF32, whatever candle's handle is
//! set to), gpu/kernels/ compiled by NVRTC once a process. Proven on a GPU by the tests that run
//! layer_test.rs's check here (docs/gpu.md); the CPU's CI builds it only in the `cuda` build.
use super::device::{Addr, Arg, Counts, Device, Op, Operands};
use crate::model::engine::gpu::kernels::{engine_ptx, f32_address, ENGINE_MODULE};
use candle_core::cuda::cudarc::cublas::{sys as blas, CudaBlas};
use candle_core::cuda::cudarc::driver::{
    result as driver, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda::{CudaDevice, WrapErr};
use candle_core::{bail, Result, Tensor};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

pub struct Cuda {
    dev: CudaDevice,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    functions: RefCell<HashMap<String, CudaFunction>>,
    counts: Cell<Counts>,
}

impl Cuda {
    pub fn new(dev: &CudaDevice) -> Result<Cuda> {
        let stream = dev.cuda_stream();
        let blas = CudaBlas::new(stream.clone()).w()?;
        Ok(Cuda {
            dev: dev.clone(),
            stream,
            blas,
            functions: RefCell::new(HashMap::new()),
            counts: Cell::new(Counts::default()),
        })
    }

    fn function(&self, name: &str) -> Result<CudaFunction> {
        if let Some(f) = self.functions.borrow().get(name) {
            return Ok(f.clone());
        }
        let f = self
            .dev
            .get_or_load_custom_func(name, ENGINE_MODULE, engine_ptx()?)?
            .into_cuda_function();
        self.functions.borrow_mut().insert(name.into(), f.clone());
        Ok(f)
    }
}

/// The GPU `bert` lives on when the GPU engine trains or encodes it: f32 weights on a CUDA
/// device, BERT's GELU, heads of width 32 or 64 (the CUDA kernels'), the engine on (`gpu::on`).
/// None: candle's graph runs it. The default since its GPU tests passed on an H200
/// (2026-11-29, docs/gpu.md); opt-in before. The one place a task asks.
pub fn gpu_for(bert: &crate::model::Bert) -> Option<CudaDevice> {
    use crate::model::Activation;
    let w = bert.embeddings.word.embeddings();
    let fits = super::on()
        && w.dtype() == candle_core::DType::F32
        && bert
            .layers
            .iter()
            .all(|l| l.act == Activation::Gelu && matches!(l.attention.head_dim, 32 | 64));
    match w.device() {
        candle_core::Device::Cuda(d) if fits => Some(d.clone()),
        _ => None,
    }
}

impl Device for Cuda {
    type Mem = CudaSlice<u8>;

    fn alloc(&self, bytes: usize) -> Result<CudaSlice<u8>> {
        self.count(|c| {
            c.allocations += 1;
            c.bytes += bytes as u64;
        });
        self.stream.alloc_zeros::<u8>(bytes).w()
    }

    fn addr(&self, m: &CudaSlice<u8>) -> Addr {
        let (p, _sync) = m.device_ptr(&self.stream);
        p
    }

    fn upload(&self, dst: Addr, src: &[u8]) -> Result<()> {
        // SAFETY: dst is inside a live allocation of this device with room for src (Buf::write
        // checks); from pageable memory the call returns once src is staged, so src may go
        unsafe { driver::memcpy_htod_async(dst, src, self.stream.cu_stream()) }.w()
    }

    fn download(&self, src: Addr, dst: &mut [u8]) -> Result<()> {
        // SAFETY: src spans dst.len() bytes of a live allocation (Buf::read checks); the stream
        // is synchronised before dst is read
        unsafe { driver::memcpy_dtoh_async(dst, src, self.stream.cu_stream()) }.w()?;
        self.stream.synchronize().w()
    }

    fn copy(&self, dst: Addr, src: Addr, bytes: usize) -> Result<()> {
        self.count(|c| c.launches += 1);
        // SAFETY: both span `bytes` of live allocations of this device (the engine's buffers and
        // the model's tensors), on this stream
        unsafe { driver::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }.w()
    }

    fn zero(&self, dst: Addr, bytes: usize) -> Result<()> {
        self.count(|c| c.launches += 1);
        // SAFETY: dst spans `bytes` of a live allocation of this device, on this stream
        unsafe { driver::memset_d8_async(dst, 0, bytes, self.stream.cu_stream()) }.w()
    }

    fn tensor_addr(&self, t: &Tensor) -> Result<Addr> {
        f32_address(t, &self.stream).map_err(|e| e.context("gpu engine"))
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
        let op = |o: Op| match o {
            Op::N => blas::cublasOperation_t::CUBLAS_OP_N,
            Op::T => blas::cublasOperation_t::CUBLAS_OP_T,
        };
        let i = |v: usize| -> Result<i32> {
            i32::try_from(v).map_err(|_| candle_core::Error::Msg(format!("gemm: {v} past i32")))
        };
        let ab = match ty {
            Operands::F32 => blas::cudaDataType::CUDA_R_32F,
            Operands::Bf16 => blas::cudaDataType::CUDA_R_16BF,
        };
        let alpha = 1f32;
        self.count(|c| c.launches += 1);
        // row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS gets B first.
        // f32 compute: no TF32 for f32 operands, f32 sums of bf16 products for bf16 ones
        // SAFETY: A and B are live buffers of `ty`'s values and C of f32 on this device, spanning
        // these extents (the engine's shapes), on the handle's stream
        let status = unsafe {
            blas::cublasGemmEx(
                *self.blas.handle(),
                op(ob),
                op(oa),
                i(n)?,
                i(m)?,
                i(k)?,
                &alpha as *const f32 as *const std::ffi::c_void,
                b as *const std::ffi::c_void,
                ab,
                i(ldb)?,
                a as *const std::ffi::c_void,
                ab,
                i(lda)?,
                &beta as *const f32 as *const std::ffi::c_void,
                c as *mut std::ffi::c_void,
                blas::cudaDataType::CUDA_R_32F,
                i(ldc)?,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        if status != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            bail!("cuBLAS GEMM ({ty:?}, {m} x {n} x {k}): {status:?}")
        }
        Ok(())
    }

    fn launch(&self, kernel: &str, grid: (u32, u32), threads: u32, args: &[Arg]) -> Result<()> {
        let f = self.function(kernel)?;
        let mut b = self.stream.launch_builder(&f);
        for a in args {
            match a {
                Arg::Addr(p) => b.arg(p),
                Arg::I32(v) => b.arg(v),
                Arg::U64(v) => b.arg(v),
                Arg::F32(v) => b.arg(v),
                Arg::Mask(m) => b.arg(m),
            };
        }
        let cfg = LaunchConfig {
            grid_dim: (grid.0, grid.1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        self.count(|c| c.launches += 1);
        // SAFETY: the arguments match the CUDA kernels' parameters for `kernel` (layer.rs builds them
        // beside the kernel's signature; the emulated device's tests check the same lists) and
        // point into live allocations of this device
        unsafe { b.launch(cfg) }.w()?;
        Ok(())
    }

    fn counter(&self) -> &Cell<Counts> {
        &self.counts
    }
}
