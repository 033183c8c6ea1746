//! The flags every training command shares, and the TrainConfig they make.
use crate::data::Io;
use crate::error::Result;
use crate::flags;
use crate::model::Precision;
use crate::runtime::DeviceSpec;
use crate::study::pick::Choice;
use crate::train::TrainConfig;
use std::path::{Path, PathBuf};

/// "at least 1" for counts that divide or step.
fn positive() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..)
}

#[derive(clap::Args, Clone, Debug)]
pub struct TrainOpts {
    /// Passes over the training data
    #[arg(long = flags::EPOCHS, default_value_t = 1, value_parser = positive())]
    epochs: usize,
    /// Examples per optimizer step (not the inference commands' --batch-size)
    #[arg(long = flags::BATCH_SIZE, default_value_t = 16, value_parser = positive())]
    pub(super) batch_size: usize,
    /// Peak learning rate [default: 2e-5; pretrain: 1e-4]
    #[arg(long = flags::LR)]
    lr: Option<f64>,
    /// The learning rate `pick --setting lr` chose on dev, read from its choice file
    #[arg(long, conflicts_with = "lr")]
    lr_from: Option<PathBuf>,
    /// Warm-up as a fraction of the optimizer steps
    #[arg(long = flags::WARMUP, default_value_t = 0.1)]
    warmup: f64,
    #[command(flatten)]
    seed: flags::Seed,
    #[command(flatten)]
    max_seq_length: flags::MaxSeqLength,
    /// Batches whose gradients add up before each optimizer step
    #[arg(long, default_value_t = 1, value_parser = positive())]
    grad_accum: usize,
    /// AdamW's decoupled weight decay (not on biases and LayerNorm weights)
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f64,
    /// Dropout on hidden states and attention [default: config.json's hidden_dropout_prob and
    /// attention_probs_dropout_prob]
    #[arg(long)]
    dropout: Option<f32>,
    /// Evaluate on --dev every N optimizer steps (always at the end)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    eval_steps: Option<u64>,
    /// Write checkpoint/ (weights, optimizer state, position) every N optimizer steps, for --resume
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    checkpoint_steps: u64,
    /// Stop after N optimizer steps (the schedule spans them)
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_steps: Option<u64>,
    /// Continue the killed run in --out from its last checkpoint (the same settings required)
    #[arg(long)]
    pub(super) resume: bool,
    /// Write into an --out that already holds a model or a run (its checkpoint is discarded);
    /// without this or --resume such a folder is refused
    #[arg(long, conflicts_with = "resume")]
    pub(super) overwrite: bool,
    /// Keep checkpoint/ (weights and optimizer state, for continuing later) after the run
    /// finishes; by default a finished run leaves only the model, its card and its log
    #[arg(long)]
    pub(super) keep_checkpoint: bool,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    pub(super) device: DeviceSpec,
    /// CPU threads that split each batch, for losses that are a mean over examples or tokens (a
    /// run is reproducible bit for bit for a given count) [default: RAYON_NUM_THREADS, else the
    /// cores]
    #[arg(long, value_parser = positive())]
    threads: Option<usize>,
    /// Precision of the Linear layers' products, forward and backward, on the CPU (f32 master
    /// weights and AdamW state either way; f16 with dynamic loss scaling)
    #[arg(long, value_enum, default_value = "f32")]
    pub(super) precision: Precision,
    /// Batches in the training file's order every epoch (rows 1 to --batch-size the first
    /// batch), instead of a seeded shuffle (without repeated texts in a batch, for losses with
    /// in-batch negatives): to see exactly the batches another tool saw
    #[arg(long)]
    no_shuffle: bool,
}

impl TrainOpts {
    /// `out` as the guard's model folder, with how the user allowed an existing one.
    pub fn model_output(&self, io: Io, out: &Path) -> Io {
        io.inputs("--lr-from", &self.lr_from).model_output(
            "--out",
            out,
            self.resume,
            self.overwrite,
        )
    }

    /// The guard's view of a fine-tuning command: its start (`flag`), train and dev data read,
    /// `out` written as a model folder.
    pub fn fine_tuning_io(
        &self,
        (flag, start): (&str, &Path),
        train: &[PathBuf],
        dev: &Option<PathBuf>,
        out: &Path,
    ) -> Io {
        let io = Io::new()
            .input(flag, start)
            .inputs("--train", train)
            .inputs("--dev", dev);
        self.model_output(io, out)
    }

    pub fn seed(&self) -> u64 {
        self.seed.seed
    }

    /// Tokens per training text (pre-training: per block).
    pub fn max_seq_length(&self) -> usize {
        self.max_seq_length.training()
    }

    /// The --max-seq-length the user gave, if any.
    pub fn given_max_seq_length(&self) -> Option<usize> {
        self.max_seq_length.inference()
    }

    pub fn device(&self) -> Result<candle_core::Device> {
        self.device.open()
    }

    /// The peak learning rate: --lr, the value --lr-from's choice file holds (said in a line),
    /// or the command's default.
    fn lr(&self, default_lr: f64) -> Result<f64> {
        let Some(f) = &self.lr_from else {
            return Ok(self.lr.unwrap_or(default_lr));
        };
        let c = Choice::load(f, "lr")?;
        let lr: f64 = c.value.parse().map_err(|_| {
            crate::error::Error::file(f, format!("lr '{}' is not a number", c.value))
        })?;
        super::progress::out(&format!(
            "note: learning rate {lr}, chosen on {} by {} ({})\n",
            c.dataset,
            c.metric,
            f.display()
        ));
        Ok(lr)
    }

    pub fn config(&self, out: &Path, default_lr: f64) -> Result<TrainConfig> {
        Ok(TrainConfig {
            epochs: self.epochs,
            batch_size: self.batch_size,
            lr: self.lr(default_lr)?,
            warmup: self.warmup,
            weight_decay: self.weight_decay,
            max_grad_norm: 1.0,
            grad_accum: self.grad_accum,
            seed: self.seed.seed,
            dropout: self.dropout,
            eval_steps: self.eval_steps,
            checkpoint_steps: self.checkpoint_steps,
            max_steps: self.max_steps,
            threads: self
                .threads
                .unwrap_or_else(candle_core::utils::get_num_threads),
            precision: self.precision,
            no_shuffle: self.no_shuffle,
            out: out.to_path_buf(),
        })
    }
}
