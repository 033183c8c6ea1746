//! The subcommands: their flag types (one module each) and the call each one makes; a recipe's
//! steps run through the same dispatch (`exec`), handed to the commands that run recipes.
use super::{
    analyze, augment, choose, convert, domain_overlap, encode, evaluate, index, interpolate, loco,
    merge, mine, pick, pretrain, report, run_recipe, search, similarity, split, train_biencoder,
    train_cross_encoder, train_nli, transfer_grid,
};
use crate::data::Io;
use crate::error::{Error, Result};
use crate::recipe::StepMode;
use crate::shard::parts::Stale;
use clap::{Parser, Subcommand};

/// Domain overlap, AugSBERT and Condenser pre-training for sentence encoders
#[derive(Parser)]
#[command(name = "condenser", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
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
    /// AugSBERT: new pairs (random, BM25, semantic or BM25+semantic sampling) labelled by a
    /// cross-encoder; or pseudo-query pairs from a corpus, or from unjudged queries, without one
    Augment(augment::Args),
    /// Hard negatives for (anchor, positive) pairs (sentence-transformers' mine_hard_negatives)
    Mine(mine::Args),
    /// Top-k search against stored corpus embeddings: exact and streamed, or through an `index`
    Search(search::Args),
    /// An IVF or HNSW index of stored corpus embeddings for search, mine and evaluate (resumable)
    Index(index::Args),
    /// Interpolate a fine-tuned model's weights with its start's (WiSE-FT)
    Interpolate(interpolate::Args),
    /// Choose a method on dev queries, then read test once for it and the stock model
    Choose(choose::Args),
    /// Split a retrieval folder by query, or a pair file by row, deterministically (xxh3 with a seed)
    Split(split::Args),
    /// Merge the shards of a sharded run into the whole run's output (all there, same settings)
    Merge(merge::Args),
    /// Convert a dataset (Parquet, Arrow IPC, CSV, TSV, JSONL, text) to Parquet (zstd)
    Convert(convert::Args),
    /// Condenser pre-training (or continued training) of a BERT on a text corpus
    Pretrain(pretrain::Args),
    /// Run a recipe (TOML steps), skipping finished steps: a re-run resumes
    Run(run_recipe::Args),
    /// Methods over seeds from evaluate's results: mean +- sd, and gains beyond twice the sd
    Report(report::Args),
    /// Pick a training setting (a learning rate) on dev results: the value whose models score best
    Pick(pick::Args),
    /// Leave one collection out: each choice rule set on the other development collections and
    /// scored on the test half of the one left out
    Loco(loco::Args),
    /// The domain-transfer grid: every source's cross-encoder labels every target's pairs
    TransferGrid(transfer_grid::Args),
    /// Analyses of a model (attention: how broadly `[CLS]` attends, per layer)
    #[command(subcommand)]
    Analyze(analyze::Analysis),
}

impl Command {
    /// What the command reads and writes, for the output guard (data::Io).
    fn io(&self) -> Io {
        match self {
            Command::DomainOverlap(a) => a.io(),
            Command::Encode(a) => a.io(),
            Command::Evaluate(a) => a.io(),
            Command::Similarity(a) => a.io(),
            Command::TrainCrossEncoder(a) => a.io(),
            Command::TrainBiencoder(a) => a.io(),
            Command::TrainNli(a) => a.io(),
            Command::Augment(a) => a.io(),
            Command::Mine(a) => a.io(),
            Command::Search(a) => a.io(),
            Command::Index(a) => a.io(),
            Command::Interpolate(a) => a.io(),
            Command::Choose(a) => a.io(),
            Command::Split(a) => a.io(),
            Command::Convert(a) => a.io(),
            Command::Merge(a) => a.io(),
            Command::Pretrain(a) => a.io(),
            Command::Run(a) => a.io(),
            Command::Report(a) => a.io(),
            Command::Pick(a) => a.io(),
            Command::Loco(a) => a.io(),
            Command::TransferGrid(a) => a.io(),
            Command::Analyze(a) => a.io(),
        }
    }

    /// A recipe re-running a step it ran before replaces that step's model folder (or an
    /// interrupted run's parts of its output).
    fn allow_overwrite(&mut self) {
        match self {
            Command::TrainCrossEncoder(a) => a.train_opts.overwrite = true,
            Command::TrainBiencoder(a) => a.train_opts.overwrite = true,
            Command::TrainNli(a) => a.train_opts.overwrite = true,
            Command::Pretrain(a) => a.train_opts.overwrite = true,
            Command::Interpolate(a) => a.overwrite = true,
            // their parts of an interrupted run with other settings are the step's own outputs
            Command::Encode(a) => a.stale = Stale::Replace,
            Command::Augment(a) => a.job.spec.stale = Stale::Replace,
            Command::Mine(a) => a.stale = Stale::Replace,
            _ => {}
        }
    }
}

/// Run a command: the output guard first, before anything is read.
pub fn dispatch(c: Command) -> Result<()> {
    c.io().check()?;
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
        Command::Search(a) => search::run(a),
        Command::Index(a) => index::run(a),
        Command::Interpolate(a) => interpolate::run(a),
        Command::Choose(a) => choose::run(a),
        Command::Split(a) => split::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Pretrain(a) => pretrain::run(a),
        Command::Run(a) => run_recipe::run(a, &exec),
        Command::Report(a) => report::run(a),
        Command::Pick(a) => pick::run(a),
        Command::Loco(a) => loco::run(a),
        Command::TransferGrid(a) => transfer_grid::run(a, &exec),
        Command::Analyze(a) => analyze::run(a),
    }
}

/// Why a captured command line did not run: clap refused its words (the kind and clap's message),
/// or the command failed.
#[derive(Debug)]
pub enum RunError {
    Usage(clap::error::ErrorKind, String),
    Failed(Error),
}

/// A command line (the program's name first) run as the binary runs it, its stdout captured
/// (cli::summary): the command's summary as JSON: `command`, `argv`, `seconds`, `outputs` (the
/// paths its guard names, by flag), `printed` (what the binary would print on stdout) and the
/// figures its driver recorded. Python's command functions call this.
pub fn run_captured(argv: Vec<String>) -> std::result::Result<serde_json::Value, RunError> {
    let cli = Cli::try_parse_from(&argv)
        .map_err(|e| RunError::Usage(e.kind(), e.to_string().trim_end().to_string()))?;
    let outputs: serde_json::Map<String, serde_json::Value> = cli
        .command
        .io()
        .outputs()
        .iter()
        .map(|(flag, p)| {
            (
                flag.trim_start_matches('-').replace('-', "_"),
                p.display().to_string().into(),
            )
        })
        .collect();
    super::command_line::set(&argv);
    let started = std::time::Instant::now();
    let (done, s) = super::summary::capture(|| dispatch(cli.command));
    done.map_err(RunError::Failed)?;
    let mut v = serde_json::Map::new();
    v.insert(
        "command".into(),
        argv.get(1).cloned().unwrap_or_default().into(),
    );
    v.insert("argv".into(), argv.into());
    v.insert("seconds".into(), started.elapsed().as_secs_f64().into());
    v.insert("outputs".into(), outputs.into());
    v.insert("printed".into(), s.printed.into());
    v.extend(s.fields);
    Ok(v.into())
}

pub fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    super::command_line::set(&argv);
    dispatch(Cli::parse().command)
}

/// A recipe step's argv (the program's name first) parsed and guarded, and run unless dry.
fn exec(argv: Vec<String>, mode: StepMode) -> Result<()> {
    let argv_copy = argv.clone();
    let mut cli = Cli::try_parse_from(argv).map_err(|e| Error::msg(e.to_string().trim_end()))?;
    let overwrite = match mode {
        StepMode::Parse => return Ok(()),
        StepMode::Check { overwrite } | StepMode::Run { overwrite } => overwrite,
    };
    if overwrite {
        cli.command.allow_overwrite();
    }
    match mode {
        StepMode::Run { .. } => {
            super::command_line::set(&argv_copy);
            dispatch(cli.command)
        }
        _ => cli.command.io().check(),
    }
}
