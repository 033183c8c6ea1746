//! Command-line drivers: each subcommand's flags (typed and validated by clap once) and one call
//! into the library; printing happens here and nowhere in the library.
mod analyze;
mod augment;
mod convert;
mod domain_overlap;
mod encode;
mod evaluate;
mod merge;
mod mine;
mod model_opts;
mod pretrain;
mod progress;
mod run;
mod shard_opts;
mod similarity;
mod split;
mod train_biencoder;
mod train_cross_encoder;
mod train_nli;
mod train_opts;
mod transfer_grid;

use clap::{Parser, Subcommand};
use condenser::error::{Error, Result};

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
    /// Evaluate models on STS, classification, retrieval and class-accuracy datasets in one run
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
    /// Hard negatives for (anchor, positive) pairs: bi-encoder and/or BM25 candidates, optional
    /// cross-encoder rescoring and false-negative filters (sentence-transformers' mine_hard_negatives)
    Mine(mine::Args),
    /// Split a retrieval folder by query, or a pair file by row, deterministically (xxh3 with a seed)
    Split(split::Args),
    /// Merge the shards of a sharded encode, augment, mine or domain-overlap run into the whole
    /// run's output (checked: every shard present, the same settings and N)
    Merge(merge::Args),
    /// Convert a dataset (Parquet, Arrow IPC, CSV, TSV, JSONL, text) to Parquet (zstd)
    Convert(convert::Args),
    /// Condenser pre-training (or continued training) of a BERT on a text corpus
    Pretrain(pretrain::Args),
    /// Run a recipe (TOML steps), skipping finished steps: a re-run resumes
    Run(run::Args),
    /// The domain-transfer grid: every source's cross-encoder labels every target, bi-encoders on
    /// the silver targets, all scored per target, and whether bigram overlap forecasts the gain
    TransferGrid(transfer_grid::Args),
    /// Analyses of a model (attention: how broadly [CLS] attends, per layer)
    #[command(subcommand)]
    Analyze(analyze::Analysis),
}

pub fn main() -> Result<()> {
    dispatch(Cli::parse().command)
}

/// Run one subcommand from its argv (argv[0] is the program name), as a recipe step does.
fn run_argv(argv: impl IntoIterator<Item = String>) -> Result<()> {
    dispatch(parse_argv(argv)?)
}

/// Parse a subcommand's argv without running it.
fn parse_argv(argv: impl IntoIterator<Item = String>) -> Result<Command> {
    Ok(Cli::try_parse_from(argv)
        .map_err(|e| Error::msg(e.to_string().trim_end()))?
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
        Command::Mine(a) => mine::run(a),
        Command::Split(a) => split::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Pretrain(a) => pretrain::run(a),
        Command::Run(a) => run::run(a),
        Command::TransferGrid(a) => transfer_grid::run(a),
        Command::Analyze(a) => analyze::run(a),
    }
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

/// A `NAME=PATH` flag value (or a bare PATH, named by its file stem).
#[derive(Clone, Debug)]
struct Named {
    name: String,
    path: std::path::PathBuf,
}

impl std::str::FromStr for Named {
    type Err = String;
    fn from_str(spec: &str) -> std::result::Result<Self, String> {
        let (name, path) = match spec.split_once('=') {
            Some((n, p)) if !n.is_empty() => (n.to_string(), std::path::PathBuf::from(p)),
            _ => {
                let p = std::path::PathBuf::from(spec);
                let name = p
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("'{spec}': expected NAME=PATH or a path"))?;
                (name, p)
            }
        };
        Ok(Named { name, path })
    }
}

/// A model folder's short name for tables and plots: its last path component.
fn short_name(dir: &std::path::Path) -> String {
    dir.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}
