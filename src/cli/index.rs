use super::index_flags::IndexFlags;
use super::progress::{self, out};
use crate::data::Io;
use crate::error::Result;
use crate::flags::CorpusEmbeddings;
use crate::search::{
    build_index, default_index_path, Calibration, StoredEmbeddings, DEFAULT_EF_SEARCH,
};
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(mut_arg("corpus_embeddings", |a| a.required(true)))]
pub struct Args {
    #[command(flatten)]
    corpus: CorpusEmbeddings,
    #[command(flatten)]
    flags: IndexFlags,
    /// The index file (its description is written beside it as FILE.json)
    /// [default: beside the embeddings, NAME.ivf or NAME.usearch (index.* in a shard folder)]
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(a: Args) -> Result<()> {
    let store = StoredEmbeddings::open_as_made(a.corpus.required())?;
    let (settings, target) = a.flags.resolve(store.rows()?)?;
    let dest = a
        .out
        .unwrap_or_else(|| default_index_path(a.corpus.required(), &settings));
    let bar = progress::bar(Some(0), "vectors indexed");
    let s = build_index(&store, &settings, target, &dest, &bar)?;
    bar.finish_and_clear();
    let resumed = match (s.resumed_at, s.discarded_checkpoint) {
        (0, true) => " (its checkpoint was of other settings or embeddings: started over)".into(),
        (0, false) => String::new(),
        (n, _) => format!(" (resumed at row {n})"),
    };
    out(&format!(
        "indexed {} vectors{resumed} -> {} ({:.0} MB; {}) in {:.1} s\n",
        s.rows,
        dest.display(),
        s.bytes as f64 / 1e6,
        settings.describe(),
        s.seconds
    ));
    let how = |c: &Calibration| {
        format!(
            "recall@10 {:.4} against exact search for {} of its own vectors",
            c.recall, c.queries
        )
    };
    out(&match &s.calibration {
        None => format!(
            "searches default to {} {DEFAULT_EF_SEARCH} (a graph's breadth is not calibrated)\n",
            s.breadth_flag
        ),
        Some(c) if c.reached() => {
            format!("searches default to {} {} ({})\n", s.breadth_flag, c.breadth, how(c))
        }
        Some(c) => format!(
            "warning: no breadth tried reached recall@10 {}: searches default to the widest, {} {} ({})\n",
            c.target_recall, s.breadth_flag, c.breadth, how(c)
        ),
    });
    if let (Some(c), Some(second)) = (&s.calibration, &s.second_lists) {
        out(&format!("{}\n", second.describe(c, s.breadth_flag)));
    }
    Ok(())
}

impl Args {
    /// The store's files (a shard folder's own, where the default index lies), and --out.
    pub fn io(&self) -> Io {
        let store = self.corpus.required();
        let files: Vec<PathBuf> = match std::fs::read_dir(store) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
                .collect(),
            Err(_) => vec![store.to_path_buf()],
        };
        let io = Io::new().inputs("--corpus-embeddings", &files);
        match &self.out {
            Some(out) => io.output("--out", out),
            None => io,
        }
    }
}
