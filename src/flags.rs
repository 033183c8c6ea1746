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
