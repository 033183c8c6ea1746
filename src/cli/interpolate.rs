use super::progress::out;
use crate::data::Io;
use crate::error::Result;
use crate::model::folders::card::{Card, CardKind};
use crate::model::folders::home;
use crate::model::folders::interpolate::interpolate;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The model fine-tuning started from (alpha 0)
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
    start: PathBuf,
    /// The fine-tuned model (alpha 1); its folder's settings are kept
    #[arg(value_parser = crate::model::folders::home::parse_model, long)]
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
    let t0 = std::time::Instant::now();
    let n = interpolate(&a.start, &a.end, a.alpha, &a.out)?;
    Card {
        kind: CardKind::Interpolated,
        base_model: home::display_name(&a.start),
        command: super::command_line::get(),
        data: Vec::new(),
        loss: String::new(),
        hyperparameters: vec![("alpha (the end's share)".into(), a.alpha.to_string())],
        evaluation: Vec::new(),
        hardware: format!("CPU: {}", crate::runtime::cpu_model()),
        wall_seconds: t0.elapsed().as_secs_f64(),
        notes: vec![format!(
            "**Interpolation:** {:.2} x `{}` + {:.2} x `{}` (weight space, tensor by tensor; \
             the end's folder settings kept); how each end was made: its own README.md",
            1.0 - a.alpha,
            home::display_name(&a.start),
            a.alpha,
            home::display_name(&a.end)
        )],
    }
    .write(&a.out)?;
    out(&format!(
        "{n} tensors, {:.2} x {} + {:.2} x {} -> {} (model card README.md)\n",
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
