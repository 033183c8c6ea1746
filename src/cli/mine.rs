use super::model_opts::ModelOpts;
use super::{out, progress};
use condenser::augment::mine::{
    mine, write_mined, Candidates, MineOptions, MineSource, MinedFormat, Miners, NegativeSampling,
};
use condenser::data::ColumnSpec;
use condenser::error::{Error, Result};
use condenser::model::cross_encoder::CrossEncoderModel;
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
}

pub fn run(a: Args) -> Result<()> {
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
    let mined = mine(texts.input(), &models, &o, &bar)?;
    bar.finish_and_clear();
    let scores = a.output_scores || mined.rescored;
    let rows = write_mined(&mined, o.format, o.num_negatives, scores, &a.out)?;
    let got: usize = mined.rows.iter().map(|r| r.negatives.len()).sum();
    out(&format!(
        "{} anchors, {} corpus texts; {got} negatives ({:.2} per anchor, {} candidates filtered); \
         {rows} rows -> {} in {:.1} s\n{}\n",
        mined.anchors.len(),
        mined.corpus.len(),
        got as f64 / mined.anchors.len() as f64,
        mined.filtered,
        a.out.display(),
        t0.elapsed().as_secs_f64(),
        a.model_opts.matmuls()
    ));
    Ok(())
}
