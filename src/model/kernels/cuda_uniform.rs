//! Seeded uniform draws on a CUDA device for dropout masks, from a Philox generator of our own.
//! candle's device generator (cuRAND's XORWOW) can only be re-seeded by building a new one, which
//! runs XORWOW's state set-up again, and its draws depend on every draw before them; Philox is
//! counter-based, so it is re-seeded per mask without set-up and a mask depends on its seed alone.
use candle_core::cuda::cudarc::curand::{result, sys};
use candle_core::cuda::cudarc::driver::DevicePtrMut;
use candle_core::cuda::{CudaDevice, CudaStorage, WrapErr};
use candle_core::{op::BackpropOp, Result, Shape, Storage, Tensor};
use std::sync::Mutex;

/// A cuRAND generator handle; used under GENERATORS' lock only.
struct Generator(sys::curandGenerator_t);
// SAFETY: the handle is only touched while GENERATORS is locked.
unsafe impl Send for Generator {}

/// One Philox generator per candle stream (one per opened device), bound to that stream.
static GENERATORS: Mutex<Vec<(usize, Generator)>> = Mutex::new(Vec::new());

fn curand(e: result::CurandError) -> candle_core::Error {
    candle_core::Error::Msg(format!("cuRAND: {e:?}"))
}

/// `shape` uniform values in (0, 1], a function of `seed` alone, on `dev`'s stream.
pub fn uniform(dev: &CudaDevice, shape: &Shape, seed: u64) -> Result<Tensor> {
    let stream = dev.cuda_stream();
    let key = stream.cu_stream() as usize;
    let mut gens = GENERATORS.lock().unwrap();
    let at = match gens.iter().position(|g| g.0 == key) {
        Some(i) => i,
        None => {
            let g = result::create_generator_kind(
                sys::curandRngType_t::CURAND_RNG_PSEUDO_PHILOX4_32_10,
            )
            .map_err(curand)?;
            // SAFETY: a live generator and candle's live stream for this device
            unsafe { result::set_stream(g, stream.cu_stream() as sys::cudaStream_t) }
                .map_err(curand)?;
            gens.push((key, Generator(g)));
            gens.len() - 1
        }
    };
    let g = gens[at].1 .0;
    let n = shape.elem_count();
    // SAFETY: every element is written by the generator before the tensor is read
    let mut data = unsafe { stream.alloc::<f32>(n) }.w()?;
    // SAFETY: a live generator (never freed) and a buffer of n f32 on the generator's stream
    unsafe {
        result::set_seed(g, seed).map_err(curand)?;
        result::set_offset(g, 0).map_err(curand)?;
        let (ptr, _sync) = data.device_ptr_mut(&stream);
        result::generate::uniform_f32(g, ptr as *mut f32, n).map_err(curand)?;
    }
    let storage = CudaStorage::wrap_cuda_slice(data, dev.clone());
    Ok(Tensor::from_storage(
        Storage::Cuda(storage),
        shape.clone(),
        BackpropOp::none(),
        false,
    ))
}
