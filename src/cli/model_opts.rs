//! Flags every command that runs a model for inference shares.
use crate::error::Result;
use crate::flags;
use crate::model::{InferenceOptions, PoolingMode};
use crate::runtime::{ComputeType, DeviceSpec};

#[derive(clap::Args, Clone, Debug)]
pub struct ModelOpts {
    /// Override the folder's pooling
    #[arg(long, value_enum)]
    pooling: Option<PoolingMode>,
    #[command(flatten)]
    max_seq_length: flags::MaxSeqLength,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    device: DeviceSpec,
    /// Compute type [default: f32 on the CPU, bf16 on a GPU]
    #[arg(long, value_enum)]
    dtype: Option<ComputeType>,
}

impl ModelOpts {
    pub fn inference(&self) -> Result<InferenceOptions> {
        Ok(InferenceOptions {
            device: self.device.open()?,
            dtype: self.dtype,
            pooling: self.pooling,
            max_seq_length: self.max_seq_length.inference(),
        })
    }

    /// What runs the matmuls, for the command's summary.
    pub fn matmuls(&self) -> String {
        let base = matmuls(self.device);
        match (self.device, self.dtype) {
            (DeviceSpec::Cpu, Some(ComputeType::Bf16)) => {
                // the attention's products follow where the bf16 head kernel serves
                let attention = if crate::model::kernels::bf16::supported() {
                    "; attention's products in bf16 on condenser's AVX512-BF16 kernel (heads a \
                    multiple of 32 wide)"
                } else {
                    "; attention in f32"
                };
                format!(
                    "{base}; Linear products in bf16 on {}{attention}",
                    crate::model::kernels::precision::bf16_backend()
                )
            }
            (DeviceSpec::Cpu, Some(ComputeType::F16)) => {
                format!("{base}; Linear products on f16-rounded operands")
            }
            _ => inference_matmuls(self.device),
        }
    }
}

/// What runs an f32 inference's matmuls on `device`: `matmuls`, and condenser's f32 kernel for
/// the frozen Linears (and the attention) where it is chosen (kernels/f32_gemm/).
pub fn inference_matmuls(device: DeviceSpec) -> String {
    let base = matmuls(device);
    use crate::model::kernels::f32_gemm;
    match f32_gemm::runs_here() {
        Some(what) if matches!(device, DeviceSpec::Cpu) => {
            format!("{base}; {what} on {}", f32_gemm::describe())
        }
        _ => base,
    }
}

/// What runs CPU matmuls on `device`, for summaries.
pub fn matmuls(device: DeviceSpec) -> String {
    match device {
        DeviceSpec::Cpu => format!(
            "CPU matmuls: {} on {}",
            crate::model::kernels::blas::describe(),
            crate::runtime::cpu_model()
        ),
        d => format!("device: {d}"),
    }
}
