use super::progress::{self, out};
use super::train_driver::RunCard;
use super::train_opts::TrainOpts;
use crate::data::retrieval::corpus_file;
use crate::data::Io;
use crate::error::{Error, Result};
use crate::model::folders::card::CardKind;
use crate::model::ModelFolder;
use crate::train::corpus;
use crate::train::pretrain::{HeadInit, PretrainSpec, PretrainTask};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Starting BERT (HF or sentence-transformers folder); the Condenser head starts fresh
    #[arg(value_parser = crate::model::folders::home::parse_model,
        long,
        conflicts_with = "continue_from",
        required_unless_present = "continue_from"
    )]
    model: Option<PathBuf>,
    /// A Condenser output folder to continue from, head included (the paper's continued training)
    #[arg(long)]
    continue_from: Option<PathBuf>,
    /// Corpus files: datasets with a text column, or plain text (.txt), a text a line; or a
    /// retrieval folder (BEIR's or ours), its corpus file (repeatable)
    #[arg(long = "corpus", required = true)]
    corpus: Vec<PathBuf>,
    /// Text columns of tabular corpus files, comma-separated: each file gives every one of them
    /// it has ("text,sentence1,sentence2": a corpus beside pair files)
    #[arg(long, default_value = "text")]
    column: String,
    /// Output: the backbone as an HF BERT folder, condenser_head.safetensors, logs, checkpoint/
    #[arg(long)]
    out: PathBuf,
    /// Layers of the Condenser head [default: 2, the paper's]
    #[arg(long)]
    head_layers: Option<usize>,
    /// Layer whose token states feed the head [default: half the backbone's depth]
    #[arg(long)]
    skip_from: Option<usize>,
    /// Plain MLM on the last layer, no Condenser head: the control that shows how much of a
    /// Condenser's effect is more pre-training alone (the same text, steps and masking)
    #[arg(long, conflicts_with_all = ["head_layers", "skip_from", "no_late_mlm", "cocondenser", "freeze_backbone", "continue_from"])]
    plain_mlm: bool,
    /// Train the head's MLM loss only (no late-layer MLM)
    #[arg(long)]
    no_late_mlm: bool,
    /// coCondenser: documents of two blocks' length, two random spans of --max-seq-length from
    /// each (batch size counts documents), and the span contrastive loss added
    #[arg(long)]
    cocondenser: bool,
    /// Train the head alone, the backbone left as it is: a fresh head's warm-up before the
    /// backbone trains (then `--continue-from` this run's folder)
    #[arg(long)]
    freeze_backbone: bool,
    #[command(flatten)]
    pub(super) train_opts: TrainOpts,
}

pub fn run(a: Args) -> Result<()> {
    let (init, head) = match (&a.model, &a.continue_from) {
        (Some(m), None) => (m.clone(), HeadInit::Fresh),
        (None, Some(c)) => (c.clone(), HeadInit::Continue),
        _ => return Err(Error::msg("give one of --model DIR or --continue-from DIR")),
    };
    let folder = ModelFolder::open(&init)?;
    let skip_from = a.skip_from.unwrap_or(folder.config.num_hidden_layers / 2);
    let head_layers = if a.plain_mlm {
        0
    } else {
        a.head_layers.unwrap_or(2)
    };
    let (max_len, note) = folder.config.fit_length(a.train_opts.max_seq_length());
    if let Some(n) = note {
        out(&format!("note: {n}\n"));
    }
    // coCondenser's documents hold two spans' worth of text, so the spans overlap only partly
    let body = max_len - 2;
    let doc_len = if a.cocondenser { 2 * body + 2 } else { max_len };
    let files: Vec<_> = a
        .corpus
        .iter()
        .map(|p| corpus_file(p))
        .collect::<Result<_>>()?;
    let bar = progress::bar(None, "texts tokenized");
    let tok = folder.tokenizer()?;
    let (blocks, built) = corpus::prepare(&a.out, &files, &a.column, &tok, doc_len, &bar)?;
    bar.finish_and_clear();
    let objective = if a.plain_mlm {
        "plain MLM on the last layer, no Condenser head".to_string()
    } else {
        format!(
            "head {head_layers} layers reading layer {skip_from}{}",
            if a.no_late_mlm { "" } else { " + late MLM" }
        )
    };
    out(&format!(
        "corpus: {} {} of up to {doc_len} tokens ({}); {objective}{}{}\n",
        blocks.len,
        if a.cocondenser { "documents" } else { "blocks" },
        if built { "tokenized now" } else { "cached" },
        if a.cocondenser {
            " + span contrast"
        } else {
            ""
        },
        if a.freeze_backbone {
            "; backbone frozen (head only)"
        } else {
            ""
        }
    ));
    let spec = PretrainSpec {
        head_layers,
        skip_from,
        head_mlm: !a.plain_mlm,
        late_mlm: !a.no_late_mlm,
        cocondenser: a.cocondenser.then_some(body),
        freeze_backbone: a.freeze_backbone,
        seed: a.train_opts.seed(),
    };
    let mut task = PretrainTask::new(&init, head, blocks, &spec, &a.train_opts.device()?)?;
    out(&format!("{}\n", task.mlm_head_note(head)));
    let card = RunCard {
        kind: CardKind::Pretrained,
        base: &init,
        data: a.corpus.iter().map(|c| ("corpus", c.as_path())).collect(),
    };
    a.train_opts.run(&mut task, &a.out, 1e-4, card)
}

impl Args {
    pub fn io(&self) -> Io {
        let io = Io::new()
            .inputs("--model", &self.model)
            .inputs("--continue-from", &self.continue_from)
            .inputs("--corpus", &self.corpus);
        self.train_opts.model_output(io, &self.out)
    }
}
