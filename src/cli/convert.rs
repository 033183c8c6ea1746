use super::{out, progress, split_list};
use crate::data;
use crate::error::{Error, Result};
use rand::seq::index::sample;
use rand::SeedableRng;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Input dataset (.parquet, .arrow, .csv, .tsv, .jsonl)
    input: PathBuf,
    /// Output .parquet (written atomically)
    output: PathBuf,
    /// Columns to keep (default: all)
    #[arg(long)]
    columns: Option<String>,
    /// Keep a random sample of N rows (in their original order), e.g. a small labelled train set
    #[arg(long)]
    sample: Option<usize>,
    /// Seed of --sample
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

pub fn run(a: Args) -> Result<()> {
    if data::Format::from_path(&a.output)? != data::Format::Parquet {
        return Err(Error::file(&a.output, "the output must be a .parquet file"));
    }
    let columns = match &a.columns {
        Some(c) => split_list(c),
        None => data::column_names(&a.input)?,
    };
    let cols: Vec<&str> = columns.iter().map(String::as_str).collect();
    let reader = data::open(&a.input, &cols)?;
    let bar = progress::bar(reader.total_rows, "rows");
    let rows = match a.sample {
        None => data::stream_to_parquet(reader, &a.output, &bar, |b| Ok(b.data.clone()))?,
        Some(n) => write_sample(reader, n, a.seed, &a)?,
    };
    bar.finish_and_clear();
    out(&format!("wrote {rows} rows to {}\n", a.output.display()));
    Ok(())
}

/// N rows drawn without replacement (seeded), kept in file order.
fn write_sample(reader: data::BatchReader, n: usize, seed: u64, a: &Args) -> Result<usize> {
    let batches: Vec<arrow_array::RecordBatch> =
        reader.map(|b| b.map(|b| b.data)).collect::<Result<_>>()?;
    let schema = batches
        .first()
        .map(|b| b.schema())
        .ok_or_else(|| Error::file(&a.input, "empty dataset"))?;
    let all = arrow_select::concat::concat_batches(&schema, &batches)
        .map_err(|e| Error::file(&a.input, e))?;
    if n > all.num_rows() {
        return Err(Error::file(
            &a.input,
            format!("--sample {n}: the file has only {} rows", all.num_rows()),
        ));
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut idx: Vec<u32> = sample(&mut rng, all.num_rows(), n)
        .into_iter()
        .map(|i| i as u32)
        .collect();
    idx.sort_unstable();
    let take = arrow_array::UInt32Array::from(idx);
    let picked =
        arrow_select::take::take_record_batch(&all, &take).map_err(|e| Error::file(&a.input, e))?;
    data::write_parquet(&a.output, picked.schema(), [&picked])?;
    Ok(n)
}
