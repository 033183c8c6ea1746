//! Model cards: the README.md sentence-transformers writes on every save, here for every folder
//! condenser saves (bi-encoder, cross-encoder, pre-trained backbone, interpolation). What made the
//! model is written down where the model is: its base model, the command line, the training data
//! (file, rows, columns, SHA-256, so a reader can check they hold the same file), the loss and
//! hyperparameters, the figures the run computed, condenser's version, the hardware and wall time,
//! and how to load it in sentence-transformers and in condenser.
use crate::data::write_atomic;
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// What a folder holds, which decides its card's tags and how to load it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CardKind {
    /// A sentence-transformers bi-encoder (train-biencoder, train-nli).
    BiEncoder,
    /// A BertForSequenceClassification cross-encoder (train-cross-encoder).
    CrossEncoder,
    /// A pre-trained BERT backbone (pretrain: Condenser, coCondenser or plain MLM).
    Pretrained,
    /// Two models' weights mixed (interpolate).
    Interpolated,
}

/// One data file a run read, as the card lists it.
#[derive(Clone, Debug)]
pub struct DataFile {
    /// What the run used it for: "train", "dev".
    pub role: String,
    pub path: String,
    pub rows: usize,
    pub columns: Vec<String>,
    pub sha256: String,
}

impl DataFile {
    /// `path` described for the card: a data file, or each data file directly in a folder (a
    /// retrieval folder's corpus, queries and qrels).
    pub fn describe(role: &str, path: &Path) -> Result<Vec<DataFile>> {
        let files: Vec<std::path::PathBuf> = if path.is_dir() {
            let mut f: Vec<_> = std::fs::read_dir(path)
                .map_err(|e| Error::file(path, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && crate::data::Format::from_path(p).is_ok())
                .collect();
            f.sort();
            f
        } else {
            vec![path.to_path_buf()]
        };
        files
            .iter()
            .map(|f| {
                Ok(DataFile {
                    role: role.to_string(),
                    path: f.display().to_string(),
                    rows: crate::data::count_rows(f)?,
                    columns: crate::data::column_names(f)?,
                    sha256: sha256_file(f)?,
                })
            })
            .collect()
    }
}

/// Whether `dir` holds a training run that finished: the card and the log are written last,
/// after the model, so a run killed before its end has neither both (and its checkpoint is
/// what continues it).
pub fn finished_run(dir: &Path) -> bool {
    dir.join("README.md").is_file() && dir.join("train_log.csv").is_file()
}

/// The SHA-256 of a file's bytes, in hex (what `sha256sum` prints).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::file(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::file(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A model card, filled by the command that saved the folder.
#[derive(Clone, Debug)]
pub struct Card {
    pub kind: CardKind,
    /// The starting model (for an interpolation: its two ends, in `notes`).
    pub base_model: String,
    /// The command line that made the folder.
    pub command: String,
    pub data: Vec<DataFile>,
    /// The loss (empty for an interpolation).
    pub loss: String,
    pub hyperparameters: Vec<(String, String)>,
    /// Figures the run computed (its dev evaluations).
    pub evaluation: Vec<(String, String)>,
    /// Where it ran: the CPU model, or the GPU and the host CPU.
    pub hardware: String,
    pub wall_seconds: f64,
    /// Lines about this kind of folder (what an interpolation mixes, a pre-training's head).
    pub notes: Vec<String>,
}

impl Card {
    /// The card's Markdown, sentence-transformers' headings and YAML front matter.
    pub fn markdown(&self, dir: &Path) -> String {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string());
        let folder = super::folder::ModelFolder::open(dir).ok();
        let (library, pipeline, what) = match self.kind {
            CardKind::BiEncoder | CardKind::Interpolated => (
                "sentence-transformers",
                "sentence-similarity",
                "a [sentence-transformers](https://www.SBERT.net) model: it maps sentences and \
                 paragraphs to a dense vector space for semantic similarity, search and clustering",
            ),
            CardKind::CrossEncoder => (
                "sentence-transformers",
                "text-ranking",
                "a [sentence-transformers](https://www.SBERT.net) CrossEncoder \
                 (BertForSequenceClassification): it scores a pair of texts",
            ),
            CardKind::Pretrained => (
                "transformers",
                "feature-extraction",
                "a pre-trained BERT backbone (the pre-training head is dropped, kept beside it in \
                 condenser_head.safetensors): a starting point for fine-tuning",
            ),
        };
        let mut s = String::new();
        s += "---\n";
        s += &format!("base_model: {}\n", yaml(&self.base_model));
        s += &format!("library_name: {library}\npipeline_tag: {pipeline}\ntags:\n");
        s += "- condenser\n- sentence-transformers\n";
        if !self.loss.is_empty() {
            s += &format!("- loss:{}\n", yaml(&self.loss));
        }
        s += "---\n\n";
        s += &format!(
            "# {name}\n\nThis is {what}. condenser {} made it from `{}`.\n\n",
            env!("CARGO_PKG_VERSION"),
            self.base_model
        );
        s += "## Model Details\n\n";
        s += &format!("- **Base model:** `{}`\n", self.base_model);
        if let Some(f) = &folder {
            s += &format!(
                "- **Maximum sequence length:** {} tokens\n- **Output dimensionality:** {}\n",
                f.max_seq_length, f.config.hidden_size
            );
            if self.kind != CardKind::CrossEncoder {
                s += &format!(
                    "- **Pooling:** {}{}\n",
                    f.pooling.mode_name(),
                    if f.normalize {
                        ", then L2-normalised"
                    } else {
                        ""
                    }
                );
            }
        }
        for n in &self.notes {
            s += &format!("- {n}\n");
        }
        s += "\n## Usage\n\n";
        s += &usage(self.kind, dir);
        s += "\n## Training Details\n\n";
        s += &format!("Made with:\n\n```\n{}\n```\n\n", self.command);
        if !self.loss.is_empty() {
            s += &format!("- **Loss:** {}\n", self.loss);
        }
        s += &format!(
            "- **Hardware:** {}\n- **Wall time:** {:.1} s\n- **condenser version:** {}\n\n",
            self.hardware,
            self.wall_seconds,
            env!("CARGO_PKG_VERSION")
        );
        if !self.data.is_empty() {
            s += "### Data\n\n| role | file | rows | columns | SHA-256 |\n|---|---|---|---|---|\n";
            for d in &self.data {
                s += &format!(
                    "| {} | `{}` | {} | {} | `{}` |\n",
                    d.role,
                    d.path,
                    d.rows,
                    d.columns.join(", "),
                    d.sha256
                );
            }
            s += "\n";
        }
        if !self.hyperparameters.is_empty() {
            s += "### Hyperparameters\n\n| name | value |\n|---|---|\n";
            for (k, v) in &self.hyperparameters {
                s += &format!("| {k} | {v} |\n");
            }
            s += "\n";
        }
        s += "## Evaluation\n\n";
        if self.evaluation.is_empty() {
            s += "The run computed no evaluation (no dev data was given).\n";
        } else {
            s += "| figure | value |\n|---|---|\n";
            for (k, v) in &self.evaluation {
                s += &format!("| {k} | {v} |\n");
            }
        }
        s
    }

    /// Write `dir/README.md` atomically.
    pub fn write(&self, dir: &Path) -> Result<()> {
        write_atomic(&dir.join("README.md"), self.markdown(dir).as_bytes())
    }
}

/// A YAML scalar, quoted where YAML would read it otherwise.
fn yaml(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    match plain {
        true => s.to_string(),
        false => format!("{s:?}"),
    }
}

/// How to load the folder in sentence-transformers and in condenser.
fn usage(kind: CardKind, dir: &Path) -> String {
    let d = dir.display();
    match kind {
        CardKind::BiEncoder | CardKind::Interpolated => format!(
            "sentence-transformers:\n\n```python\nfrom sentence_transformers import \
             SentenceTransformer\n\nmodel = SentenceTransformer(\"{d}\")\nembeddings = \
             model.encode([\"The weather is lovely today.\", \"It's so sunny outside!\"])\n\
             similarities = model.similarity(embeddings, embeddings)\n```\n\ncondenser:\n\n\
             ```\ncondenser encode --model {d} --input texts.parquet --columns text --out \
             embeddings.parquet\ncondenser evaluate --model {d} --sts stsb=test.parquet --out \
             eval\n```\n"
        ),
        CardKind::CrossEncoder => format!(
            "sentence-transformers:\n\n```python\nfrom sentence_transformers import \
             CrossEncoder\n\nmodel = CrossEncoder(\"{d}\")\nscores = model.predict([(\"A man \
             is eating.\", \"A man eats food.\")])\n```\n\ncondenser (label pairs, rerank \
             candidates):\n\n```\ncondenser augment --cross-encoder {d} --input pairs.parquet \
             --out silver.parquet\ncondenser mine --cross-encoder {d} ...\n```\n"
        ),
        CardKind::Pretrained => format!(
            "Fine-tune it (its `[CLS]` is what Condenser pre-trains for):\n\n```\ncondenser \
             train-biencoder --init {d} --train pairs.parquet --loss mnr --pooling cls --out \
             fine-tuned\n```\n\nsentence-transformers (a plain BERT folder: give it a \
             pooling):\n\n```python\nfrom sentence_transformers import SentenceTransformer, \
             models\n\nbert = models.Transformer(\"{d}\")\nmodel = SentenceTransformer(modules=\
             [bert, models.Pooling(bert.get_word_embedding_dimension(), \"cls\")])\n```\n"
        ),
    }
}
