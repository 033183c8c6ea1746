use super::progress::out;
use condenser::data::Io;
use condenser::error::Result;
use condenser::model::folders::interpolate::interpolate;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The model fine-tuning started from (alpha 0)
    #[arg(value_parser = condenser::model::folders::home::parse_model, long)]
    start: PathBuf,
    /// The fine-tuned model (alpha 1); its folder's settings are kept
    #[arg(value_parser = condenser::model::folders::home::parse_model, long)]
    end: PathBuf,
    /// The share of the fine-tuned weights
    #[arg(long, default_value_t = 0.5)]
    alpha: f64,
    /// Output model folder
    #[arg(long)]
    out: PathBuf,
    /// Replace the model in an --out that already holds one (refused without it)
    #[arg(long)]
    pub(super) overwrite: bool,
}

pub fn run(a: Args) -> Result<()> {
    let n = interpolate(&a.start, &a.end, a.alpha, &a.out)?;
    out(&format!(
        "{n} tensors, {:.2} x {} + {:.2} x {} -> {}\n",
        1.0 - a.alpha,
        a.start.display(),
        a.alpha,
        a.end.display(),
        a.out.display()
    ));
    Ok(())
}

impl Args {
    pub fn io(&self) -> Io {
        Io::new()
            .input("--start", &self.start)
            .input("--end", &self.end)
            .model_output("--out", &self.out, false, self.overwrite)
    }
}
