//! A `mine` run as the command describes it: where the pairs and corpus come from, which models
//! find and rescore candidates, the mining options and the output; run whole or as one shard.
use super::{mine, mined_batch, Candidates, MineOptions, MineSource, Mined, MinedBlocks, Miners};
use crate::data;
use crate::error::{Error, Result};
use crate::model::InferenceOptions;
use crate::search::StoredEmbeddings;
use crate::shard::parts::{self, Parts, Resume, Stale};
use crate::shard::{self, Settings, ShardRun};
use indicatif::ProgressBar;
use serde::Serialize;
use std::ops::Range;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Serialize)]
pub struct MineJob {
    pub source: MineSource,
    /// The bi-encoder that finds candidates (None with BM25 candidates alone).
    pub model: Option<PathBuf>,
    /// Rescores candidates: its scores drive the filters and are written.
    pub cross_encoder: Option<PathBuf>,
    pub options: MineOptions,
    pub inference: InferenceOptions,
    /// Write the retriever's scores even without a cross-encoder.
    pub output_scores: bool,
    /// The corpus's stored embeddings (`encode`'s output), instead of embedding it here.
    pub corpus_embeddings: Option<PathBuf>,
    /// An index of `corpus_embeddings` (`condenser index`) and its search width.
    pub index: Option<PathBuf>,
    pub breadth: crate::search::Breadth,
    /// The whole run's output (a shard writes beside it).
    #[serde(skip)]
    pub out: PathBuf,
    /// Parts an interrupted run left with other settings: refused, or replaced (a recipe's step).
    #[serde(skip)]
    pub stale: Stale,
}

/// What a run did, for the command's summary line.
pub struct MineSummary {
    pub anchors: usize,
    /// Anchors an interrupted run had mined (this process mined the rest).
    pub resumed: usize,
    pub corpus: usize,
    pub negatives: usize,
    pub filtered: usize,
    pub rows: usize,
    pub dest: PathBuf,
    pub seconds: f64,
}

impl MineJob {
    /// What every shard of this run must share (settings and model fingerprints).
    pub fn shard_settings(&self) -> Result<Settings> {
        let settings = shard::settings(
            self,
            &[
                ("model", self.model.as_deref()),
                ("cross_encoder", self.cross_encoder.as_deref()),
            ],
        )?;
        match &self.corpus_embeddings {
            Some(store) => crate::search::with_inputs(settings, &[store], self.index.as_deref()),
            None => Ok(settings),
        }
    }

    /// Load the models, read the texts, mine (this shard's anchors, or all) and write the rows
    /// (and a shard's manifest).
    pub fn run(&self, shard: Option<&ShardRun>, progress: &ProgressBar) -> Result<MineSummary> {
        if self.model.is_some() && self.options.candidates == Candidates::Bm25 {
            return Err(Error::msg(
                "--model is not used with --candidates bm25: leave it out",
            ));
        }
        let inference = &self.inference;
        let encoder = self
            .model
            .as_ref()
            .map(|m| inference.encoder(m))
            .transpose()?;
        let ce = self
            .cross_encoder
            .as_ref()
            .map(|c| inference.cross_encoder(c))
            .transpose()?;
        let stored = match (&self.corpus_embeddings, &encoder, &self.model) {
            (None, ..) => None,
            (Some(path), Some(enc), Some(model)) => {
                Some(StoredEmbeddings::for_model(path, enc, model)?)
            }
            (Some(_), ..) => {
                return Err(Error::msg(
                    "--corpus-embeddings are the bi-encoder's vectors: give its --model (not with --candidates bm25)",
                ))
            }
        };
        let texts = self.source.read()?;
        let t0 = std::time::Instant::now();
        let models = Miners {
            encoder: encoder.as_ref(),
            cross_encoder: ce.as_ref(),
            stored: stored.as_ref(),
            index: self.index.as_deref().map(|p| (p, self.breadth)),
        };
        let o = &self.options;
        let dest = shard.map_or(self.out.clone(), |r| r.shard.file(&self.out));
        // the parts of an interrupted run count only for the same texts
        let mut settings = self.shard_settings()?;
        settings.insert("texts_xxh3".into(), texts.fingerprint().into());
        let mut out = Blocks {
            dest: &dest,
            resume: Resume {
                settings,
                stale: self.stale,
            },
            parts: None,
            job: self,
            scores: self.output_scores || ce.is_some(),
            progress,
        };
        let stats = mine(
            texts.input(),
            &models,
            o,
            shard.map(|r| r.shard),
            &mut out,
            progress,
        )?;
        let wrote = match out.parts {
            Some(p) => p.finish(&dest)?,
            None => false,
        };
        if let Some(r) = shard {
            r.finish("mine", &dest, stats.anchors, stats.range.clone(), wrote)?;
        }
        Ok(MineSummary {
            anchors: stats.range.len(),
            resumed: stats.from - stats.range.start,
            corpus: stats.corpus,
            negatives: stats.negatives,
            filtered: stats.filtered,
            rows: if wrote { data::count_rows(&dest)? } else { 0 },
            dest,
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}

/// A run's output as `mine` hands it blocks: one part a block (shard::parts), so that a killed
/// run resumes after the blocks it finished.
struct Blocks<'r> {
    dest: &'r Path,
    resume: Resume,
    parts: Option<Parts>,
    job: &'r MineJob,
    scores: bool,
    progress: &'r ProgressBar,
}

impl MinedBlocks for Blocks<'_> {
    fn begin(&mut self, range: &Range<usize>) -> Result<usize> {
        let parts = Parts::open(self.dest, "mine", &self.resume, range)?;
        let done = parts.done(range);
        if done > 0 {
            self.progress.suspend(|| {
                crate::runtime::notes::note(&format!(
                    "resuming: {done} anchors were mined by an interrupted run ({})",
                    parts::folder(self.dest).display()
                ))
            });
        }
        let from = parts.resumed_at();
        self.parts = Some(parts);
        Ok(from)
    }

    fn block(&mut self, m: &Mined, anchors: usize) -> Result<()> {
        let o = &self.job.options;
        let batch = mined_batch(m, o.format, o.num_negatives, self.scores, self.dest)?;
        self.parts.as_mut().expect("begun").write(&batch, anchors)
    }
}
