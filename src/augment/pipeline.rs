//! AugSBERT's augmentation as one streaming job: read the pairs, sample new ones, label every pair
//! that has no gold label with the cross-encoder (block by block, in length-sorted batches) and
//! write each labelled block as it is done, into a Parquet file renamed into place at the end.
//! A shard draws the same sample (it is seeded) and labels only its blocks of the pair list.
use super::{random_pairs, ranking_depth, semantic_ranking, take_ranked, Bm25, Sampling};
use crate::data::{self, ColumnSpec};
use crate::error::{Error, Result};
use crate::eval::accuracy::argmax;
use crate::flags;
use crate::model::CrossEncoderModel;
use crate::model::SentenceEncoder;
use crate::shard::parts::{self, Parts, Resume, Stale};
use arrow_array::{ArrayRef, Float32Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use indicatif::ProgressBar;
use std::path::PathBuf;
use std::sync::Arc;

/// Pairs labelled and written per block (global blocks, the same in a shard and a whole run):
/// bounds the memory of scores and output batches.
const CHUNK: usize = crate::shard::BLOCK;

/// What to sample and label, and where to: `augment`'s flags (besides the models).
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
pub struct AugmentSpec {
    /// Pairs: sentence1, sentence2 and, where known, label
    #[arg(long = flags::INPUT, required_unless_present = "corpus")]
    pub input: Option<PathBuf>,
    /// Columns `sentence1,sentence2[,label]`: a named label column must exist (unless --unlabeled);
    /// `label?` reads it only where the file has it; two names: every row is unlabelled;
    /// `label|score`: the first of those the file has
    #[arg(long = flags::COLUMNS, default_value = "sentence1,sentence2,label|score")]
    pub columns: ColumnSpec,
    /// How new pairs are drawn
    #[arg(long = flags::SAMPLE, value_enum, default_value = "random")]
    pub sampling: Sampling,
    /// New partners per sentence
    #[arg(long = flags::TOP_K, default_value_t = 3)]
    pub top_k: usize,
    #[command(flatten)]
    #[serde(flatten)]
    pub seed: flags::Seed,
    /// Label the input's gold pairs with the cross-encoder too
    #[arg(long)]
    pub relabel_gold: bool,
    /// Ignore the input's labels: all rows are unlabelled target data (domain transfer)
    #[arg(long = flags::UNLABELED)]
    pub unlabeled: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub batch: flags::InferenceBatch,
    /// Output .parquet: sentence1, sentence2, label (Float32), origin (gold|target|sampled)
    #[arg(long = flags::OUT)]
    #[serde(skip)]
    pub out: PathBuf,
    /// Label only this shard's pairs, into the shard's file.
    #[arg(skip)]
    #[serde(skip)]
    pub shard: Option<crate::shard::ShardRun>,
    /// Parts an interrupted run left with other settings: refused, or replaced (a recipe's step)
    #[arg(skip)]
    #[serde(skip)]
    pub stale: Stale,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AugmentSummary {
    pub gold: usize,
    pub target: usize,
    pub sampled: usize,
    /// Pairs the cross-encoder labelled.
    pub labelled: usize,
    /// The file written (the shard's when sharded).
    pub out: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    Gold,
    Target,
    Sampled,
}

impl AugmentSpec {
    /// The input pairs (clap requires them unless `--corpus` is given).
    fn input(&self) -> Result<&std::path::Path> {
        self.input
            .as_deref()
            .ok_or_else(|| Error::msg("augment needs --input (pairs to label and sample from)"))
    }
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Gold => "gold",
            Origin::Target => "target",
            Origin::Sampled => "sampled",
        }
    }
}

/// The label column to read, if any: a named (non-optional) label column the file lacks is an
/// error unless the input is declared unlabelled, so a misspelt name never turns gold data into
/// silver.
fn label_column(spec: &AugmentSpec) -> Result<Option<String>> {
    spec.columns.expect(2, 3, "augment")?;
    let Some(label) = spec.columns.0.get(2) else {
        return Ok(None);
    };
    if spec.unlabeled {
        return Ok(None);
    }
    let input = spec.input()?;
    let have = data::column_names(input)?;
    if let Some(name) = label.pick(&have) {
        return Ok(Some(name.to_string()));
    }
    if label.optional {
        return Ok(None);
    }
    Err(Error::column(
        input,
        &label.to_string(),
        format!(
            "missing label column; the file has: {}. Name the label column with --columns, or pass \
             --unlabeled to treat every row as unlabelled target data",
            have.join(", ")
        ),
    ))
}

/// Read, sample, label and write; `progress` counts the pairs labelled. `resume`: the run's
/// settings (`AugmentJob::shard_settings`), which an interrupted run's parts must share to be
/// resumed (shard::parts: the labelled chunks it finished are kept, the rest labelled).
pub fn augment(
    spec: &AugmentSpec,
    labeler: &CrossEncoderModel,
    sampler: Option<&SentenceEncoder>,
    resume: &Resume,
    progress: &ProgressBar,
) -> Result<AugmentSummary> {
    let semantic = matches!(spec.sampling, Sampling::Semantic | Sampling::Bm25Semantic);
    if semantic != sampler.is_some() {
        return Err(Error::msg(if semantic {
            "semantic sampling needs a bi-encoder (--model)"
        } else {
            "--model (the semantic sampler) is only used with --sample semantic or bm25+semantic"
        }));
    }
    let label = label_column(spec)?;
    let (input, cols) = (spec.input()?, &spec.columns.0);
    let have = data::column_names(input)?;
    let names = [
        cols[0].require(input, &have)?,
        cols[1].require(input, &have)?,
    ];
    let mut want = names.to_vec();
    want.extend(label.as_deref());
    let (mut s1, mut s2, mut gold) = (Vec::new(), Vec::new(), Vec::new());
    for b in data::open(spec.input()?, &want)? {
        let b = b?;
        s1.extend(b.texts(names[0])?.into_iter().map(String::from));
        s2.extend(b.texts(names[1])?.into_iter().map(String::from));
        gold.extend(match &label {
            Some(l) => b.optional_labels(l)?,
            None => vec![None; b.num_rows()],
        });
    }
    let (r1, r2): (Vec<&str>, Vec<&str>) = (
        s1.iter().map(String::as_str).collect(),
        s2.iter().map(String::as_str).collect(),
    );
    let depth = ranking_depth(&r1, &r2, spec.top_k);
    let mut rankings = Vec::new();
    if matches!(spec.sampling, Sampling::Bm25 | Sampling::Bm25Semantic) {
        rankings.push(Bm25::ranking(&r1, &r2, depth));
    }
    if let Some(enc) = sampler {
        let bar = ProgressBar::hidden();
        rankings.push(semantic_ranking(
            &r1,
            &r2,
            spec.top_k,
            enc,
            spec.batch.batch_size,
            &bar,
        )?);
    }
    let existing = r1.iter().copied().zip(r2.iter().copied());
    let sampled = match spec.sampling {
        Sampling::Random => random_pairs(&r1, &r2, spec.top_k, spec.seed.seed),
        Sampling::None => Vec::new(),
        _ => take_ranked(&rankings, existing, spec.top_k),
    };
    // every row: (s1, s2, gold label kept, origin)
    let mut rows: Vec<(&str, &str, Option<f64>, Origin)> =
        Vec::with_capacity(r1.len() + sampled.len());
    for i in 0..r1.len() {
        let origin = if gold[i].is_some() {
            Origin::Gold
        } else {
            Origin::Target
        };
        rows.push((r1[i], r2[i], gold[i].filter(|_| !spec.relabel_gold), origin));
    }
    rows.extend(sampled.iter().map(|&(x, y)| (x, y, None, Origin::Sampled)));
    let total = rows.len();
    let range = spec
        .shard
        .as_ref()
        .map_or(0..total, |s| s.shard.rows(total));
    let dest = spec
        .shard
        .as_ref()
        .map_or(spec.out.clone(), |s| s.shard.file(&spec.out));
    let rows = &rows[range.clone()];
    let mut summary = AugmentSummary {
        out: dest.clone(),
        ..AugmentSummary::default()
    };
    for r in rows {
        match r.3 {
            Origin::Gold => summary.gold += 1,
            Origin::Target => summary.target += 1,
            Origin::Sampled => summary.sampled += 1,
        }
    }
    summary.labelled = rows.iter().filter(|r| r.2.is_none()).count();
    progress.set_length(summary.labelled as u64);
    let mut resume = resume.clone();
    let input_hash = format!("{:016x}", data::file_xxh3(spec.input()?)?);
    resume
        .settings
        .insert("input_xxh3".into(), input_hash.into());
    let mut parts = Parts::open(&dest, "augment", &resume, &range)?;
    let done = parts.done(&range);
    if done > 0 {
        let labelled = rows[..done].iter().filter(|r| r.2.is_none()).count();
        progress.suspend(|| {
            crate::runtime::notes::note(&format!(
                "resuming: {done} pairs ({labelled} labelled) were written by an interrupted run ({})",
                parts::folder(&dest).display()
            ))
        });
        progress.set_position(labelled as u64);
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("sentence1", DataType::Utf8, false),
        Field::new("sentence2", DataType::Utf8, false),
        Field::new("label", DataType::Float32, false),
        Field::new("origin", DataType::Utf8, false),
    ]));
    for chunk in rows[done..].chunks(CHUNK) {
        let todo: Vec<usize> = (0..chunk.len()).filter(|&i| chunk[i].2.is_none()).collect();
        let pairs: Vec<(&str, &str)> = todo.iter().map(|&i| (chunk[i].0, chunk[i].1)).collect();
        let scores = labeler.predict(&pairs, spec.batch.batch_size, progress)?;
        let mut labels: Vec<f32> = chunk.iter().map(|r| r.2.unwrap_or(0.0) as f32).collect();
        for (&i, s) in todo.iter().zip(&scores) {
            // one label: the score; classes: the most probable class id
            labels[i] = if s.len() == 1 { s[0] } else { argmax(s) as f32 };
        }
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from_iter_values(chunk.iter().map(|r| r.0))),
            Arc::new(StringArray::from_iter_values(chunk.iter().map(|r| r.1))),
            Arc::new(Float32Array::from(labels)),
            Arc::new(StringArray::from_iter_values(
                chunk.iter().map(|r| r.3.name()),
            )),
        ];
        parts.write(
            &RecordBatch::try_new(schema.clone(), arrays).map_err(|e| Error::file(&spec.out, e))?,
            chunk.len(),
        )?;
    }
    let wrote = parts.finish(&dest)?;
    if let Some(run) = &spec.shard {
        run.finish("augment", &dest, total, range, wrote)?;
    }
    Ok(summary)
}
