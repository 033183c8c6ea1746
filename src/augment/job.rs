//! An `augment` run as the command describes it: the cross-encoder that labels, the bi-encoder of
//! semantic sampling, the device, and what to sample and label (`AugmentSpec`).
use super::{augment, AugmentSpec, AugmentSummary};
use crate::error::Result;
use crate::flags;
use crate::model::kernels::precision::Precision;
use crate::model::{CrossEncoderModel, SentenceEncoder};
use crate::runtime::DeviceSpec;
use crate::shard::parts::Resume;
use crate::shard::{self, Settings};
use indicatif::ProgressBar;
use std::path::PathBuf;

#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct AugmentJob {
    /// A trained cross-encoder folder (from train-cross-encoder or any BertForSequenceClassification)
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::CROSS_ENCODER, required_unless_present = "corpus")]
    pub cross_encoder: Option<PathBuf>,
    /// The bi-encoder of semantic sampling (--sample semantic or bm25+semantic)
    #[arg(value_parser = crate::model::folders::home::parse_model, long = flags::MODEL)]
    pub model: Option<PathBuf>,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    pub device: DeviceSpec,
    #[command(flatten)]
    #[serde(flatten)]
    pub spec: AugmentSpec,
}

impl AugmentJob {
    /// What every shard of this run must share (settings and model fingerprints).
    pub fn shard_settings(&self) -> Result<Settings> {
        shard::settings(
            self,
            &[
                ("cross_encoder", self.cross_encoder.as_deref()),
                ("model", self.model.as_deref()),
            ],
        )
    }

    /// Load the models, then sample, label and write (`augment`).
    pub fn run(&self, progress: &ProgressBar) -> Result<AugmentSummary> {
        let device = self.device.open()?;
        let ce = self
            .cross_encoder
            .as_ref()
            .ok_or_else(|| crate::error::Error::msg("augment needs --cross-encoder"))?;
        // frozen models in f32 (augment has no --dtype): on AVX2 CPUs their Linears are made ready
        // once for condenser's f32 kernel, as encode's and evaluate's are
        let mut labeler = CrossEncoderModel::load(ce, &device)?;
        labeler.model.set_precision(Precision::F32)?;
        let sampler = self
            .model
            .as_ref()
            .map(|m| -> Result<SentenceEncoder> {
                let mut enc = SentenceEncoder::load(m, &device)?;
                enc.bert.set_precision(Precision::F32)?;
                Ok(enc)
            })
            .transpose()?;
        let resume = Resume {
            settings: self.shard_settings()?,
            stale: self.spec.stale,
        };
        augment(&self.spec, &labeler, sampler.as_ref(), &resume, progress)
    }
}
