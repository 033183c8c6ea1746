use super::model_opts::ModelOpts;
use super::shard_opts::{shard_note, ShardOpts};
use super::{out, progress};
use condenser::augment::mine::{
    mine, write_mined, Candidates, MineOptions, MineSource, MinedFormat, Miners, NegativeSampling,
};
use condenser::data::ColumnSpec;
use condenser::error::{Error, Result};
use condenser::model::CrossEncoderModel;
use condenser::shard::model_fingerprint;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The bi-encoder that finds candidates (not needed with --candidates bm25)
    #[arg(long)]
    model: Option<PathBuf>,
    /// A retrieval folder (BEIR or ours): its (query, relevant document) pairs, its corpus
    #[arg(long, conflicts_with_all = ["input", "corpus"], required_unless_present = "input")]
    retrieval: Option<PathBuf>,
    /// --retrieval: the qrels split [default: test where the folder has qrels/, else its qrels file]
    #[arg(long, requires = "retrieval")]
    split: Option<String>,
    /// (anchor, positive) pairs
    #[arg(long)]
    input: Option<PathBuf>,
    /// --input: the anchor and positive columns
    #[arg(long, default_value = "anchor,positive", requires = "input")]
    columns: ColumnSpec,
    /// --input: documents to mine from besides the positives (text column, or id,title?,text);
    /// every positive must be in it
    #[arg(long, requires = "input")]
    corpus: Option<PathBuf>,
    /// Rescore candidates with this cross-encoder: its scores drive the filters and are written
    #[arg(long)]
    cross_encoder: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "bi-encoder")]
    candidates: Candidates,
    /// Skip the first candidates (the most likely false negatives)
    #[arg(long, default_value_t = 0)]
    range_min: usize,
    /// Consider candidates up to this rank [default: range-min + num-negatives, + 10 x num-negatives with a filter]
    #[arg(long)]
    range_max: Option<usize>,
    /// Drop candidates scoring above this
    #[arg(long)]
    max_score: Option<f32>,
    /// Drop candidates scoring below this
    #[arg(long)]
    min_score: Option<f32>,
    /// Drop candidates within this of the anchor's hardest positive's score
    #[arg(long)]
    absolute_margin: Option<f32>,
    /// Drop candidates above the hardest positive's score minus this fraction of it
    #[arg(long)]
    relative_margin: Option<f32>,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    num_negatives: u64,
    #[arg(long, value_enum, default_value = "top")]
    sampling: NegativeSampling,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long, value_enum, default_value = "n-tuple")]
    format: MinedFormat,
    /// Write the retriever's scores even without a cross-encoder (always written with one)
    #[arg(long)]
    output_scores: bool,
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// Output .parquet
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
    /// A shard mines its blocks of 64 (unique) anchors against the whole corpus
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(a: Args) -> Result<()> {
    let fingerprint = |m: &Option<PathBuf>| -> Result<String> {
        m.as_ref().map_or(Ok("-".into()), |p| model_fingerprint(p))
    };
    let shard = a.shard.resolve(&[
        (
            "sources",
            format!(
                "{:?}",
                (
                    &a.model,
                    &a.retrieval,
                    &a.split,
                    &a.input,
                    &a.columns.to_string(),
                    &a.corpus,
                    &a.cross_encoder
                )
            ),
        ),
        (
            "mining",
            format!(
                "{:?}",
                (
                    a.candidates,
                    a.range_min,
                    a.range_max,
                    a.max_score,
                    a.min_score,
                    a.absolute_margin,
                    a.relative_margin,
                    a.num_negatives,
                    a.sampling,
                    a.seed,
                    a.format,
                    a.output_scores
                )
            ),
        ),
        ("batch", format!("{:?}", (a.batch_size, &a.model_opts))),
        ("model_fingerprint", fingerprint(&a.model)?),
        ("cross_encoder_fingerprint", fingerprint(&a.cross_encoder)?),
    ])?;
    let source = match (&a.retrieval, &a.input) {
        (Some(dir), _) => MineSource::Retrieval {
            dir: dir.clone(),
            split: a.split.clone(),
        },
        (None, Some(file)) => MineSource::Pairs {
            file: file.clone(),
            columns: a.columns.clone(),
            corpus: a.corpus.clone(),
        },
        (None, None) => unreachable!("clap requires --retrieval or --input"),
    };
    if a.model.is_some() && a.candidates == Candidates::Bm25 {
        return Err(Error::msg(
            "--model is not used with --candidates bm25: leave it out",
        ));
    }
    let o = MineOptions {
        candidates: a.candidates,
        range_min: a.range_min,
        range_max: a.range_max,
        num_negatives: a.num_negatives as usize,
        sampling: a.sampling,
        seed: a.seed,
        max_score: a.max_score,
        min_score: a.min_score,
        absolute_margin: a.absolute_margin,
        relative_margin: a.relative_margin,
        format: a.format,
        batch_size: a.batch_size as usize,
    };
    let inference = a.model_opts.inference()?;
    let encoder = a.model.as_ref().map(|m| inference.encoder(m)).transpose()?;
    let ce = a
        .cross_encoder
        .as_ref()
        .map(|c| CrossEncoderModel::load(c, &inference.device))
        .transpose()?;
    let texts = source.read()?;
    let t0 = std::time::Instant::now();
    let bar = progress::bar(Some(0), "texts");
    let models = Miners {
        encoder: encoder.as_ref(),
        cross_encoder: ce.as_ref(),
    };
    let mined = mine(
        texts.input(),
        &models,
        &o,
        shard.as_ref().map(|r| r.shard),
        &bar,
    )?;
    bar.finish_and_clear();
    let scores = a.output_scores || mined.rescored;
    let dest = shard
        .as_ref()
        .map_or(a.out.clone(), |r| r.shard.file(&a.out));
    let rows = if mined.rows.is_empty() && shard.is_some() {
        0 // a shard without anchors writes only its manifest
    } else {
        write_mined(&mined, o.format, o.num_negatives, scores, &dest)?
    };
    if let Some(r) = &shard {
        r.finish(
            "mine",
            &dest,
            mined.anchors.len(),
            mined.range.clone(),
            rows > 0,
        )?;
    }
    let got: usize = mined.rows.iter().map(|r| r.negatives.len()).sum();
    out(&format!(
        "{} anchors, {} corpus texts; {got} negatives ({:.2} per anchor, {} candidates filtered); \
         {rows} rows -> {} in {:.1} s\n{}{}\n",
        mined.range.len(),
        mined.corpus.len(),
        got as f64 / mined.range.len().max(1) as f64,
        mined.filtered,
        dest.display(),
        t0.elapsed().as_secs_f64(),
        shard_note(shard.as_ref(), mined.range.len(), "anchors"),
        a.model_opts.matmuls()
    ));
    Ok(())
}
