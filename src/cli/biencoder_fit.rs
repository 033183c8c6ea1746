//! What `train-biencoder` and `train-nli` share around their own data reading: the bi-encoder's
//! options from the training flags, and the run (the in-batch note, the card, the loop).
use super::progress::out;
use super::train_driver::RunCard;
use super::train_opts::TrainOpts;
use crate::error::Result;
use crate::model::folders::card::CardKind;
use crate::model::PoolingMode;
use crate::train::biencoder::{BiEncoderOptions, BiEncoderTask};
use crate::train::losses::{LossSpec, Target};
use std::path::Path;

/// The bi-encoder's options from the training flags (`train-nli` builds on them too).
pub(super) fn options(
    t: &TrainOpts,
    pooling: Option<PoolingMode>,
    num_labels: usize,
    mini_batch_size: Option<usize>,
) -> Result<BiEncoderOptions> {
    Ok(BiEncoderOptions {
        pooling: pooling.map(Into::into),
        max_seq_length: t.max_seq_length(),
        saved_max_seq_length: t.given_max_seq_length(),
        num_labels,
        seed: t.seed(),
        device: t.device()?,
        mini_batch_size,
    })
}

/// Train `task`, its data and dev set, into `out`: what a loss with in-batch negatives does with
/// repeated texts said first, then the run with its card (`train-nli` ends the same way).
pub(super) fn fit(
    task: &mut BiEncoderTask,
    spec: &LossSpec,
    init: &Path,
    train: &Path,
    dev: Option<&Path>,
    out_dir: &Path,
    t: &TrainOpts,
) -> Result<()> {
    if !spec.per_example {
        out(&format!(
            "loss {} uses in-batch negatives: batches are arranged without repeated texts{}{}\n",
            spec.name,
            match task.unavoidable_repeats(t.batch_size) {
                Some((most, batches)) => format!(
                    " where possible (not everywhere: a text is in {most} rows and an epoch has \
                     {batches} batches, so some of its rows share a batch and {})",
                    if spec.target == Target::TextIds {
                        "are left out of each other's negatives"
                    } else {
                        "serve as each other's negatives (mnr-masked leaves them out)"
                    }
                ),
                None => String::new(),
            },
            if spec.cached {
                format!(
                    ", embedded {} rows at a time (GradCache)",
                    task.mini_batch().unwrap_or(0)
                )
            } else {
                String::new()
            }
        ));
    }
    let card = RunCard::fine_tuning(CardKind::BiEncoder, init, [train], dev);
    t.run(task, out_dir, 2e-5, card)
}
