//! A build without CUDA: no model is taken by the GPU engine (`gpu_for`) and `Cuda` is a device
//! that cannot be made, so the encoders' and trainers' GPU routes compile in every build,
//! unreachable in this one, without a `cfg` of their own (cuda.rs is the real one).
use super::device::{Addr, Arg, Counts, Device, Op, Operands};
use candle_core::cuda::CudaDevice;
use candle_core::{bail, Result, Tensor};
use std::cell::Cell;
use std::convert::Infallible;

/// The CUDA device of a build that has none: no value exists.
pub enum Cuda {}

impl Cuda {
    pub fn new(_: &CudaDevice) -> Result<Cuda> {
        bail!("this condenser was built without CUDA (cargo's `cuda` feature)")
    }
}

/// Without CUDA no model runs on the GPU engine.
pub fn gpu_for(_: &crate::model::Bert) -> Option<CudaDevice> {
    None
}

impl Device for Cuda {
    type Mem = Infallible;

    fn alloc(&self, _: usize) -> Result<Infallible> {
        match *self {}
    }

    fn addr(&self, _: &Infallible) -> Addr {
        match *self {}
    }

    fn upload(&self, _: Addr, _: &[u8]) -> Result<()> {
        match *self {}
    }

    fn download(&self, _: Addr, _: &mut [u8]) -> Result<()> {
        match *self {}
    }

    fn copy(&self, _: Addr, _: Addr, _: usize) -> Result<()> {
        match *self {}
    }

    fn zero(&self, _: Addr, _: usize) -> Result<()> {
        match *self {}
    }

    fn tensor_addr(&self, _: &Tensor) -> Result<Addr> {
        match *self {}
    }

    fn gemm(
        &self,
        _: Operands,
        _: (Op, Op),
        _: (usize, usize, usize),
        _: (Addr, usize),
        _: (Addr, usize),
        _: f32,
        _: (Addr, usize),
    ) -> Result<()> {
        match *self {}
    }

    fn launch(&self, _: &str, _: (u32, u32), _: u32, _: &[Arg]) -> Result<()> {
        match *self {}
    }

    fn counter(&self) -> &Cell<Counts> {
        match *self {}
    }
}
