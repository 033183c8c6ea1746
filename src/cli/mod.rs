//! Command-line drivers: each subcommand parses its flags, calls the library and prints.
mod analyze;
mod augment;
mod convert;
mod domain_overlap;
mod encode;
mod evaluate;
mod pretrain;
mod progress;
mod run;
mod similarity;
mod train_biencoder;
mod train_cross_encoder;
mod train_nli;
mod train_opts;

use crate::error::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "condenser",
    version,
    about = "Domain overlap, AugSBERT and Condenser pre-training for sentence encoders"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Jaccard similarity of WordPiece n-gram sets between datasets
    DomainOverlap(domain_overlap::Args),
    /// Embed a text column of a dataset into a Parquet file
    Encode(encode::Args),
    /// Evaluate models on STS, classification and retrieval datasets in one run
    Evaluate(evaluate::Args),
    /// Cosine similarity matrix of sentences, with a heatmap
    Similarity(similarity::Args),
    /// Train a cross-encoder (BERT + classification head) on labelled pairs
    TrainCrossEncoder(train_cross_encoder::Args),
    /// Train a sentence encoder (bi-encoder) with a sentence-transformers loss
    TrainBiencoder(train_biencoder::Args),
    /// SBERT's NLI training: softmax over (u, v, |u-v|), or MNR on the entailment pairs
    TrainNli(train_nli::Args),
    /// Sample new pairs (random or BM25) and label them with a cross-encoder (AugSBERT)
    Augment(augment::Args),
    /// Convert a dataset (Parquet, Arrow IPC, CSV, TSV, JSONL) to Parquet (zstd)
    Convert(convert::Args),
    /// Condenser pre-training (or continued training) of a BERT on a text corpus
    Pretrain(pretrain::Args),
    /// Run a recipe (TOML steps), skipping finished steps: a re-run resumes
    Run(run::Args),
    /// Analyses of a model (attention: how broadly [CLS] attends, per layer)
    #[command(subcommand)]
    Analyze(analyze::Analysis),
}

pub fn main() -> Result<()> {
    dispatch(Cli::parse().command)
}

/// Run one subcommand from its argv (argv[0] is the program name), as a recipe step does.
pub fn run_argv(argv: impl IntoIterator<Item = String>) -> Result<()> {
    dispatch(parse_argv(argv)?)
}

/// Parse a subcommand's argv without running it.
fn parse_argv(argv: impl IntoIterator<Item = String>) -> Result<Command> {
    Ok(Cli::try_parse_from(argv)
        .map_err(|e| crate::error::Error::msg(e.to_string()))?
        .command)
}

fn dispatch(c: Command) -> Result<()> {
    match c {
        Command::DomainOverlap(a) => domain_overlap::run(a),
        Command::Encode(a) => encode::run(a),
        Command::Evaluate(a) => evaluate::run(a),
        Command::Similarity(a) => similarity::run(a),
        Command::TrainCrossEncoder(a) => train_cross_encoder::run(a),
        Command::TrainBiencoder(a) => train_biencoder::run(a),
        Command::TrainNli(a) => train_nli::run(a),
        Command::Augment(a) => augment::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Pretrain(a) => pretrain::run(a),
        Command::Run(a) => run::run(a),
        Command::Analyze(a) => analyze::run(a),
    }
}

/// Split "a,b,c" flags into names.
fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .collect()
}

/// Print to stdout; a closed pipe (`condenser ... | head`) ends output quietly instead of panicking.
fn out(text: &str) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_all(text.as_bytes()).and_then(|_| o.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {e}");
        }
    }
}

/// "NAME=PATH", or a bare PATH named by its file stem.
fn named_path(spec: &str) -> (String, std::path::PathBuf) {
    match spec.split_once('=') {
        Some((n, p)) if !n.is_empty() => (n.to_string(), p.into()),
        _ => {
            let p = std::path::PathBuf::from(spec);
            let name = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| spec.into());
            (name, p)
        }
    }
}

/// Flags every command that runs a model shares.
#[derive(clap::Args, Clone, Debug)]
struct ModelOpts {
    /// Override the folder's pooling: cls, mean, max or mean-sqrt-len
    #[arg(long)]
    pooling: Option<String>,
    /// Override max_seq_length (tokens, including [CLS] and [SEP])
    #[arg(long)]
    max_seq_length: Option<usize>,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Compute type: f32, bf16 or f16 [default: f32 on the CPU, bf16 on a GPU]
    #[arg(long)]
    dtype: Option<String>,
}

impl ModelOpts {
    fn load(&self, dir: &std::path::Path) -> Result<crate::model::SentenceEncoder> {
        let device = crate::runtime::device(&self.device)?;
        let dtype = crate::runtime::dtype(self.dtype.as_deref(), &device)?;
        let mut enc = crate::model::SentenceEncoder::load_as(dir, &device, dtype)?;
        if let Some(p) = &self.pooling {
            enc.pooling = crate::model::Pooling::parse(p)?;
        }
        if let Some(m) = self.max_seq_length {
            enc.max_seq_length = m.clamp(2, enc.bert.config.max_position_embeddings);
        }
        Ok(enc)
    }
}
