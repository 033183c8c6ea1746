use super::shard_opts::{shard_note, ShardOpts};
use super::train_opts::matmuls;
use super::{out, progress};
use condenser::augment::{augment, AugmentSpec, Sampling};
use condenser::data::ColumnSpec;
use condenser::error::Result;
use condenser::model::CrossEncoderModel;
use condenser::runtime::DeviceSpec;
use condenser::shard::model_fingerprint;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// A trained cross-encoder folder (from train-cross-encoder or any BertForSequenceClassification)
    #[arg(long)]
    cross_encoder: PathBuf,
    /// Pairs: sentence1, sentence2 and, where known, label
    #[arg(long)]
    input: PathBuf,
    /// How new pairs are drawn
    #[arg(long, value_enum, default_value = "random")]
    sample: Sampling,
    /// The bi-encoder of semantic sampling (--sample semantic or bm25+semantic)
    #[arg(long)]
    model: Option<PathBuf>,
    /// New partners per sentence
    #[arg(long, default_value_t = 3)]
    top_k: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Columns sentence1,sentence2[,label]: a named label column must exist (unless --unlabeled);
    /// `label?` reads it only where the file has it; two names: every row is unlabelled
    #[arg(long, default_value = "sentence1,sentence2,label")]
    columns: ColumnSpec,
    /// Label the input's gold pairs with the cross-encoder too
    #[arg(long)]
    relabel_gold: bool,
    /// Ignore the input's labels: all rows are unlabelled target data (domain transfer)
    #[arg(long)]
    unlabeled: bool,
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    batch_size: u64,
    /// cpu, cuda or cuda:N (CUDA needs a build with the `cuda` feature)
    #[arg(long, default_value = "cpu")]
    device: DeviceSpec,
    /// Output .parquet: sentence1, sentence2, label (Float32), origin (gold|target|sampled)
    #[arg(long)]
    out: PathBuf,
    /// A shard draws the whole (seeded) sample and labels its blocks of the pair list
    #[command(flatten)]
    shard: ShardOpts,
}

pub fn run(a: Args) -> Result<()> {
    let mut settings = vec![
        ("cross_encoder", a.cross_encoder.display().to_string()),
        (
            "cross_encoder_fingerprint",
            model_fingerprint(&a.cross_encoder)?,
        ),
        ("input", a.input.display().to_string()),
        ("sample", format!("{:?}", a.sample)),
        ("top_k", a.top_k.to_string()),
        ("seed", a.seed.to_string()),
        ("columns", a.columns.to_string()),
        ("relabel_gold", a.relabel_gold.to_string()),
        ("unlabeled", a.unlabeled.to_string()),
        ("batch_size", a.batch_size.to_string()),
    ];
    if let Some(m) = &a.model {
        settings.push(("model_fingerprint", model_fingerprint(m)?));
    }
    let shard = a.shard.resolve(&settings)?;
    let spec = AugmentSpec {
        input: a.input,
        columns: a.columns,
        sampling: a.sample,
        top_k: a.top_k,
        seed: a.seed,
        relabel_gold: a.relabel_gold,
        unlabeled: a.unlabeled,
        batch_size: a.batch_size as usize,
        out: a.out,
        shard: shard.clone(),
    };
    let device = a.device.open()?;
    let labeler = CrossEncoderModel::load(&a.cross_encoder, &device)?;
    let sampler = a
        .model
        .as_ref()
        .map(|m| condenser::model::SentenceEncoder::load(m, &device))
        .transpose()?;
    let bar = progress::bar(Some(0), "pairs labelled");
    let s = augment(&spec, &labeler, sampler.as_ref(), &bar)?;
    bar.finish_and_clear();
    let rows = s.gold + s.target + s.sampled;
    out(&format!(
        "wrote {rows} pairs ({} gold, {} target, {} sampled; {} labelled by the cross-encoder) to {}\n{}{}\n",
        s.gold,
        s.target,
        s.sampled,
        s.labelled,
        s.out.display(),
        shard_note(shard.as_ref(), rows, "pairs"),
        matmuls(a.device)
    ));
    Ok(())
}
