//! The flag names the library writes into steps it plans (the transfer grid) and the binary's
//! parsers declare (`#[arg(long = flags::X)]`): one table, so renaming a flag renames it in both
//! places, and removing one the grid uses fails to compile there.
/// Every command's output (file or folder).
pub const OUT: &str = "out";
/// A model folder: encode, evaluate, mine, augment's sampler, train-cross-encoder's start.
pub const MODEL: &str = "model";
/// train-biencoder's starting model.
pub const INIT: &str = "init";
/// Training data (training commands).
pub const TRAIN: &str = "train";
/// Dev data (training commands).
pub const DEV: &str = "dev";
pub const LOSS: &str = "loss";
pub const EPOCHS: &str = "epochs";
pub const BATCH_SIZE: &str = "batch-size";
pub const LR: &str = "lr";
pub const WARMUP: &str = "warmup";
pub const SEED: &str = "seed";
/// train-cross-encoder: train on both orders of every pair.
pub const BOTH_ORDERS: &str = "both-orders";
/// domain-overlap's tokenizer.
pub const TOKENIZER: &str = "tokenizer";
/// Column lists (convert, augment, encode...).
pub const COLUMNS: &str = "columns";
/// convert's row sample size; augment's sampling method.
pub const SAMPLE: &str = "sample";
pub const CROSS_ENCODER: &str = "cross-encoder";
/// `augment --corpus`: pseudo-query pairs from a corpus alone.
pub const CORPUS: &str = "corpus";
/// augment's and encode's input file.
pub const INPUT: &str = "input";
/// augment: every input row is unlabelled target data.
pub const UNLABELED: &str = "unlabeled";
/// augment: partners per sentence.
pub const TOP_K: &str = "top-k";

/// The flags several commands share, each declared once and flattened where it is used
/// (`#[command(flatten)]`), so that a flag means the same, with the same default and bounds,
/// everywhere. Training's `--batch-size` is another flag on purpose: examples per optimizer step
/// (default 16, sentence-transformers' fit), declared with the other training flags.
///
/// `--seed`: what every seeded choice starts from (samples, shuffles, dropout, hashes).
#[derive(Clone, Copy, Debug, clap::Args, serde::Serialize)]
pub struct Seed {
    /// Seed of every random or hashed choice the command makes (the same seed, the same result)
    #[arg(long = SEED, default_value_t = DEFAULT_SEED)]
    pub seed: u64,
}

/// `--seed`'s default, for every command.
pub const DEFAULT_SEED: u64 = 42;

/// `--max-seq-length`: tokens per text, `[CLS]` and `[SEP]` included; longer texts are truncated.
#[derive(Clone, Copy, Debug, clap::Args)]
pub struct MaxSeqLength {
    /// Tokens per text, `[CLS]` and `[SEP]` included (at least 8; longer texts are truncated)
    /// [default: training 128; inference the model folder's]
    #[arg(long, value_parser = clap::value_parser!(u64).range(8..))]
    pub max_seq_length: Option<u64>,
}

/// Training's `--max-seq-length` when none is given (sentence-transformers' common setting).
pub const TRAINING_MAX_SEQ_LENGTH: usize = 128;

impl MaxSeqLength {
    /// The length to train at.
    pub fn training(&self) -> usize {
        self.inference().unwrap_or(TRAINING_MAX_SEQ_LENGTH)
    }

    /// The length asked for inference, if any (else the model folder's).
    pub fn inference(&self) -> Option<usize> {
        self.max_seq_length.map(|m| m as usize)
    }
}

/// `--batch-size` of the commands that run a model without training it (encode, evaluate,
/// search's queries, augment's labelling, mine): texts a forward takes at once. Results change
/// with it by float rounding only (the batch a text lands in sets its GEMM blocking); speed and
/// memory do change.
#[derive(Clone, Copy, Debug, clap::Args, serde::Serialize)]
pub struct InferenceBatch {
    /// A forward's size: N texts (or pairs) at max length; on the CPU the engine packs up to N x
    /// max length tokens of length-sorted texts, at most 1,024 (larger batches were no faster,
    /// only larger in memory) or one text at max length where longer (results change with it by
    /// float rounding only)
    #[arg(long = BATCH_SIZE, default_value_t = 32,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub batch_size: usize,
}

/// `--prompt-name` / `--prompt`: what sentence-transformers' `encode(prompt_name=, prompt=)`
/// puts before every text.
#[derive(Clone, Debug, Default, clap::Args, serde::Serialize)]
pub struct PromptFlags {
    /// A prompt of the model's config_sentence_transformers.json to put before every text
    /// [default: its default_prompt_name's, if any; for a retrieval folder's corpus its
    /// "document" prompt]
    #[arg(long, conflicts_with = "prompt")]
    pub prompt_name: Option<String>,
    /// A text to put before every text, instead of a named prompt ("" for none)
    #[arg(long)]
    pub prompt: Option<String>,
}

/// `--corpus-embeddings`: a corpus's vectors as `condenser encode` stored them.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct CorpusEmbeddings {
    /// The corpus's embeddings as `condenser encode` wrote them (a file, or the folder of a
    /// sharded encode, read in shard order), read instead of embedding the corpus again and
    /// refused when made by another model or with other settings
    #[arg(long)]
    pub corpus_embeddings: Option<std::path::PathBuf>,
}

/// `--vector-cache`: a folder keeping each model's corpus vectors between evaluations.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct VectorCacheDir {
    /// Keep each model's retrieval-corpus vectors in this folder and read them back when the
    /// same model (by its files' content) encodes the same corpus again with the same settings
    /// and build (a recipe scores a model on several query sets of one corpus)
    #[arg(long)]
    pub vector_cache: Option<std::path::PathBuf>,
}

impl CorpusEmbeddings {
    /// The store, where a command's clap declaration requires it (`mut_arg(.., required)`).
    pub fn required(&self) -> &std::path::Path {
        self.corpus_embeddings
            .as_deref()
            .expect("clap requires --corpus-embeddings here")
    }
}
