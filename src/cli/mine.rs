use super::model_opts::ModelOpts;
use super::progress::{self, out};
use super::search_flags::UseIndex;
use super::shard_opts::{shard_note, ShardOpts};
use crate::augment::mine::{MineJob, MineOptions, MineSource};
use crate::data::ColumnSpec;
use crate::data::Io;
use crate::error::Result;
use crate::flags::CorpusEmbeddings;
use crate::shard::parts::Stale;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(mut_arg("corpus_embeddings", |a| a.requires("model")))]
pub struct Args {
    /// The bi-encoder that finds candidates (not needed with --candidates bm25)
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
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
    // (with --model: `condenser encode --model M`'s output)
    #[command(flatten)]
    corpus_embeddings: CorpusEmbeddings,
    /// Rescore candidates with this cross-encoder: its scores drive the filters and are written
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
    cross_encoder: Option<PathBuf>,
    #[command(flatten)]
    use_index: UseIndex,
    #[command(flatten)]
    options: MineOptions,
    /// Write the retriever's scores even without a cross-encoder (always written with one)
    #[arg(long)]
    output_scores: bool,
    /// Output .parquet
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    model_opts: ModelOpts,
    /// A shard mines its blocks of 64 (unique) anchors against the whole corpus
    #[command(flatten)]
    shard: ShardOpts,
    /// Parts an interrupted run left with other settings: refused, or replaced (a recipe's step)
    #[arg(skip)]
    pub stale: Stale,
}

pub fn run(a: Args) -> Result<()> {
    let source = match (a.retrieval, a.input) {
        (Some(dir), _) => MineSource::Retrieval {
            dir,
            split: a.split,
        },
        (None, Some(file)) => MineSource::Pairs {
            file,
            columns: a.columns,
            corpus: a.corpus,
        },
        (None, None) => unreachable!("clap requires --retrieval or --input"),
    };
    let job = MineJob {
        source,
        model: a.model,
        cross_encoder: a.cross_encoder,
        options: a.options,
        inference: a.model_opts.inference()?,
        output_scores: a.output_scores,
        corpus_embeddings: a.corpus_embeddings.corpus_embeddings,
        breadth: a.use_index.breadth(),
        index: a.use_index.index,
        out: a.out,
        stale: a.stale,
    };
    let shard = a.shard.resolve(|| job.shard_settings())?;
    let bar = progress::bar(Some(0), "texts");
    let s = job.run(shard.as_ref(), &bar)?;
    bar.finish_and_clear();
    // negatives and filtered count the anchors this process mined
    let mined = s.anchors - s.resumed;
    let resumed = if s.resumed > 0 {
        format!(
            " (of them {mined} now: {} mined by the interrupted run)",
            s.resumed
        )
    } else {
        String::new()
    };
    out(&format!(
        "{} anchors{resumed}, {} corpus texts; {} negatives ({:.2} per anchor, {} candidates filtered); \
         {} rows -> {} in {:.1} s\n{}{}\n",
        s.anchors,
        s.corpus,
        s.negatives,
        s.negatives as f64 / mined.max(1) as f64,
        s.filtered,
        s.rows,
        s.dest.display(),
        s.seconds,
        shard_note(shard.as_ref(), s.anchors, "anchors"),
        a.model_opts.matmuls()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .inputs("--model", &self.model)
            .inputs("--retrieval", &self.retrieval)
            .inputs("--input", &self.input)
            .inputs("--corpus", &self.corpus)
            .inputs(
                "--corpus-embeddings",
                &self.corpus_embeddings.corpus_embeddings,
            )
            .inputs("--cross-encoder", &self.cross_encoder)
            .inputs("--index", &self.use_index.index)
            .output("--out", &self.out)
    }
}
