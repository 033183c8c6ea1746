//! Loading a model folder for inference with the user's overrides, as every command that runs a
//! model does: a sentence encoder (and the softmax head saved beside it, if any) or, when the
//! folder is a BertForSequenceClassification, a cross-encoder.
use super::folder::ModelFolder;
use super::load::is_cross_encoder;
use crate::error::{Error, Result};
use crate::model::engine::Backend;
use crate::model::kernels::precision::Precision;
use crate::model::{CrossEncoderModel, Linear, Pooling, PoolingMode, SentenceEncoder};
use crate::runtime::ComputeType;
use candle_core::{DType, Device};
use std::path::Path;

/// The file a SoftmaxLoss classifier is saved to, beside the encoder.
pub const SOFTMAX_HEAD_FILE: &str = "softmax_head.safetensors";

#[derive(Clone, Debug)]
pub struct InferenceOptions {
    pub device: Device,
    /// Compute type (default: f32 on the CPU, bf16 on a GPU).
    pub dtype: Option<ComputeType>,
    /// Override the folder's pooling.
    pub pooling: Option<PoolingMode>,
    /// Override the folder's max_seq_length (tokens, `[CLS]` and `[SEP]` included).
    pub max_seq_length: Option<usize>,
}

/// Serialised as the flags that set it (a shard's settings record them).
impl serde::Serialize for InferenceOptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let device = match self.device.location() {
            candle_core::DeviceLocation::Cpu => "cpu".to_string(),
            candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
            candle_core::DeviceLocation::Metal { gpu_id } => format!("metal:{gpu_id}"),
        };
        let mut st = s.serialize_struct("InferenceOptions", 4)?;
        st.serialize_field("device", &device)?;
        st.serialize_field("dtype", &self.dtype)?;
        st.serialize_field("pooling", &self.pooling)?;
        st.serialize_field("max_seq_length", &self.max_seq_length)?;
        st.end()
    }
}

impl Default for InferenceOptions {
    fn default() -> Self {
        InferenceOptions {
            device: Device::Cpu,
            dtype: None,
            pooling: None,
            max_seq_length: None,
        }
    }
}

impl InferenceOptions {
    /// The weights' dtype: the compute type on a GPU (f32 where the GPU engine is to run the
    /// encoder: `engine_gpu`); on the CPU always f32, a lower --dtype running the Linears'
    /// products in it instead (`precision`).
    pub fn dtype(&self) -> DType {
        if self.device.is_cpu() || self.engine_gpu() {
            return DType::F32;
        }
        self.compute().dtype()
    }

    /// The compute type asked for, or the device's default.
    fn compute(&self) -> ComputeType {
        ComputeType::or_default(self.dtype, &self.device)
    }

    /// Whether the GPU engine is to run a model on this device (`Backend::gpu_expected`). Its
    /// weights then load in f32 (the engine's master copy) and bf16 runs as its bf16 products
    /// with f32 sums, attention and norms. A model the engine does not take is loaded again for
    /// candle at the compute dtype (`encoder`).
    fn engine_gpu(&self) -> bool {
        Backend::gpu_expected(&self.device, self.asked())
    }

    /// The Linears' precision the compute type asks for.
    fn asked(&self) -> Precision {
        match self.compute() {
            ComputeType::F32 => Precision::F32,
            ComputeType::Bf16 => Precision::Bf16,
            ComputeType::F16 => Precision::F16,
        }
    }

    /// The Linears' precision on the CPU and on the GPU engine (f32 elsewhere), refused where
    /// this CPU lacks it.
    pub fn precision(&self) -> Result<Precision> {
        if !self.device.is_cpu() && !self.engine_gpu() {
            return Ok(Precision::F32);
        }
        let p = self.asked();
        if self.device.is_cpu() {
            p.check_cpu("--dtype")?;
        }
        Ok(p)
    }

    /// A sentence encoder from `dir` with these options applied.
    pub fn encoder(&self, dir: &Path) -> Result<SentenceEncoder> {
        let mut enc = self.encoder_as(dir, self.dtype(), self.precision()?)?;
        if self.engine_gpu() && !enc.backend().is_gpu() {
            // the GPU engine does not run this model (its activation, head width or pooling):
            // candle's graph does, at the compute dtype, as without the engine
            enc = self.encoder_as(dir, self.compute().dtype(), Precision::F32)?;
        }
        let folder = super::folder::ModelFolder::open(dir)?;
        // a folder without a Pooling module is pooled by a default: say which; and a default
        // prompt sentence-transformers would prepend is not
        let pooling = self.pooling.is_none().then(|| folder.pooling_note());
        for n in [pooling.flatten(), folder.prompt_note()]
            .into_iter()
            .flatten()
        {
            crate::runtime::notes::note(&format!("note: {n}"));
        }
        Ok(enc)
    }

    /// A cross-encoder from `dir` (its weights in f32), its products in the options' precision
    /// on the CPU (on AVX2 in f32, the frozen Linears on condenser's kernel) and on a GPU
    /// engine (f32 or bf16, as the encoder's: bf16 unless --dtype says otherwise). Where the
    /// engine does not take the model, candle's graph scores in f32, and a --dtype asking for
    /// less is told so.
    pub fn cross_encoder(&self, dir: &Path) -> Result<CrossEncoderModel> {
        let mut ce = CrossEncoderModel::load(dir, &self.device)?;
        if self.device.is_cpu() || (self.engine_gpu() && ce.backend().is_gpu()) {
            ce.model.set_precision(self.precision()?)?;
        } else if let Some(asked) = self.dtype.filter(|d| *d != ComputeType::F32) {
            crate::runtime::notes::note(&format!(
                "note: the cross-encoder scores in f32 on this GPU (candle's graph: the GPU \
                 engine is off or does not take this model); --dtype {} applies on the CPU and \
                 on the GPU engine",
                asked.dtype().as_str()
            ));
        }
        Ok(ce)
    }

    /// `encoder` with its weights in `dtype` and its Linears in `precision`.
    fn encoder_as(
        &self,
        dir: &Path,
        dtype: DType,
        precision: Precision,
    ) -> Result<SentenceEncoder> {
        let mut enc = SentenceEncoder::load_as(dir, &self.device, dtype)?;
        enc.bert.set_precision(precision)?;
        if let Some(p) = self.pooling {
            enc.pooling = Pooling::from(p);
        }
        if let Some(m) = self.max_seq_length {
            enc.max_seq_length = fits_positions(m, enc.bert.config.max_position_embeddings, dir)?;
        }
        Ok(enc)
    }
}

/// A model folder loaded for evaluation.
pub enum Loaded {
    Encoder {
        enc: SentenceEncoder,
        head: Option<Linear>,
    },
    CrossEncoder(CrossEncoderModel),
}

impl Loaded {
    pub fn load(dir: &Path, o: &InferenceOptions) -> Result<Loaded> {
        let folder = ModelFolder::open(dir)?;
        if is_cross_encoder(&folder) {
            let mut ce = o.cross_encoder(dir)?;
            if let Some(m) = o.max_seq_length {
                // a pair's tokens, both texts and three special tokens, as the folder's max_length
                ce.tok.max_seq_length =
                    fits_positions(m, folder.config.max_position_embeddings, dir)?;
            }
            return Ok(Loaded::CrossEncoder(ce));
        }
        let enc = o.encoder(dir)?;
        let head_file = dir.join(SOFTMAX_HEAD_FILE);
        let head = if head_file.is_file() {
            let vb = candle_nn::VarBuilder::from_tensors(
                super::weights::read_weights(&head_file, &o.device)?,
                DType::F32,
                &o.device,
            );
            let w = vb
                .get_unchecked("weight")
                .map_err(|e| Error::file(&head_file, e))?;
            let (out, inp) = w.dims2().map_err(|e| Error::file(&head_file, e))?;
            Some(Linear::load(vb, inp, out).map_err(|e| Error::file(&head_file, e))?)
        } else {
            None
        };
        Ok(Loaded::Encoder { enc, head })
    }
}

/// A --max-seq-length the model can take: past its position embeddings it is refused, not cut
/// quietly to them (the user asked for texts the model cannot read whole).
pub fn fits_positions(asked: usize, positions: usize, dir: &Path) -> Result<usize> {
    if asked > positions {
        return Err(Error::file(
            dir,
            format!(
                "--max-seq-length {asked} is past the model's {positions} positions \
                 (max_position_embeddings in config.json): give at most {positions}"
            ),
        ));
    }
    Ok(asked)
}
