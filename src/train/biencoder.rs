//! Training a sentence encoder (sentence-transformers' SentenceTransformer.fit) with one of its
//! losses; the result is a sentence-transformers folder.
use super::dev::DevSet;
use super::losses::{cosine_mse, cross_entropy, in_batch_ranking, mse, softmax_features, triplet};
use super::params;
use super::trainer::TrainTask;
use crate::error::{Error, Result};
use crate::model::save::{save_sentence_encoder, EncoderLayout};
use crate::model::{Bert, Dropout, Linear, ModelFolder, Pooling, SentenceEncoder};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{VarBuilder, VarMap};
use std::collections::HashMap;
use std::path::Path;

/// The bi-encoder losses, with sentence-transformers' definitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BiLoss {
    /// CosineSimilarityLoss: MSE of cos(u, v) against a [0, 1] label.
    Cosine,
    /// MSELoss: the embedding against a teacher's embedding.
    Mse,
    /// SoftmaxLoss: Linear(3 dim, n) on (u, v, |u - v|), cross-entropy.
    Softmax { num_labels: usize },
    /// MultipleNegativesRankingLoss: 20 x cosine, in-batch negatives and optional hard negatives.
    Mnr,
    /// DPR: dot product, in-batch negatives and optional hard negatives.
    Contrastive,
    /// TripletLoss: euclidean distance, margin 5.
    Triplet,
}

pub const SOFTMAX_HEAD: &str = "softmax_head";

impl BiLoss {
    pub fn parse(name: &str, num_labels: usize) -> Result<BiLoss> {
        Ok(match name {
            "cosine" => BiLoss::Cosine,
            "mse" => BiLoss::Mse,
            "softmax" => BiLoss::Softmax { num_labels },
            "mnr" => BiLoss::Mnr,
            "contrastive" => BiLoss::Contrastive,
            "triplet" => BiLoss::Triplet,
            _ => {
                return Err(Error::msg(format!(
                    "unknown loss '{name}': cosine, mse, softmax, mnr, contrastive or triplet"
                )))
            }
        })
    }

    /// Default columns; a trailing '?' marks one used only when the file has it.
    pub fn default_columns(self) -> &'static str {
        match self {
            BiLoss::Cosine | BiLoss::Softmax { .. } => "sentence1,sentence2,label",
            BiLoss::Mse => "sentence,embedding",
            BiLoss::Mnr | BiLoss::Contrastive => "anchor,positive,negative?",
            BiLoss::Triplet => "anchor,positive,negative",
        }
    }

    /// Text columns the loss reads (the rest of the columns are a label or a vector).
    fn text_columns(self, given: usize) -> usize {
        match self {
            BiLoss::Cosine | BiLoss::Softmax { .. } => 2,
            BiLoss::Mse => 1,
            BiLoss::Mnr | BiLoss::Contrastive | BiLoss::Triplet => given,
        }
    }
}

/// Tokenized training examples: `texts[column][row]`, and per row a label or a teacher vector.
#[derive(Default)]
pub struct BiData {
    pub texts: Vec<Vec<Vec<u32>>>,
    pub labels: Vec<f32>,
    pub targets: Vec<f32>,
}

impl BiData {
    pub fn len(&self) -> usize {
        self.texts.first().map_or(0, |c| c.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

pub struct BiEncoderTask {
    pub enc: SentenceEncoder,
    pub head: Option<Linear>,
    pub loss: BiLoss,
    pub data: BiData,
    pub dev: Option<DevSet>,
    varmap: VarMap,
    folder: ModelFolder,
}

impl BiEncoderTask {
    /// The encoder from any BERT folder: HF, sentence-transformers, a cross-encoder or a Condenser
    /// checkpoint (only the BERT backbone is read; heads are ignored).
    pub fn new(
        init: &Path,
        loss: BiLoss,
        pooling: Option<Pooling>,
        max_seq_length: usize,
        seed: u64,
        device: &Device,
    ) -> Result<Self> {
        let device = device.clone();
        let folder = ModelFolder::open(init)?;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let bert =
            Bert::load(vb.clone(), &folder.config).map_err(|e| Error::file(&folder.weights, e))?;
        let pooling = pooling.unwrap_or(folder.pooling);
        let max_len = max_seq_length.clamp(2, folder.config.max_position_embeddings);
        let enc = SentenceEncoder::new(
            bert,
            folder.tokenizer()?,
            pooling,
            folder.normalize,
            max_len,
            &device,
        )?;
        let head = match loss {
            BiLoss::Softmax { num_labels } => Some(
                Linear::load(vb.pp(SOFTMAX_HEAD), 3 * enc.dim(), num_labels)
                    ?,
            ),
            _ => None,
        };
        params::fill(&varmap, &folder.weights, seed)?;
        Ok(BiEncoderTask {
            enc,
            head,
            loss,
            data: BiData::default(),
            dev: None,
            varmap,
            folder,
        })
    }

    /// Read and tokenize training examples; `columns` as `--columns` (see BiLoss::default_columns).
    pub fn read_data(&self, path: &Path, columns: &str) -> Result<BiData> {
        let names = crate::data::column_names(path)?;
        let mut want = Vec::new();
        for c in columns.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            match c.strip_suffix('?') {
                Some(opt) if !names.iter().any(|n| n == opt) => {}
                Some(opt) => want.push(opt.to_string()),
                None => want.push(c.to_string()),
            }
        }
        let loss_name = format!("{:?}", self.loss).to_lowercase();
        let missing: Vec<&String> = want.iter().filter(|w| !names.contains(w)).collect();
        let need_texts = self.loss.text_columns(want.len());
        let min = match self.loss {
            BiLoss::Mnr | BiLoss::Contrastive => 2,
            BiLoss::Triplet => 3,
            _ => need_texts + 1,
        };
        if !missing.is_empty() || want.len() < min {
            return Err(Error::file(
                path,
                format!(
                    "loss {loss_name} reads columns '{columns}' but the file has [{}]{}; name yours with --columns",
                    names.join(", "),
                    if missing.is_empty() { String::new() } else {
                        format!(" (missing: {})", missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "))
                    }
                ),
            ));
        }
        let refs: Vec<&str> = want.iter().map(String::as_str).collect();
        let mut data = BiData {
            texts: vec![Vec::new(); need_texts],
            ..Default::default()
        };
        for b in crate::data::open(path, &refs)? {
            let b = b?;
            for (c, name) in want.iter().take(need_texts).enumerate() {
                for t in b.texts(name)? {
                    data.texts[c].push(self.enc.token_ids(t)?);
                }
            }
            let Some(extra) = want.get(need_texts) else {
                continue;
            };
            match self.loss {
                BiLoss::Mse => {
                    for (i, v) in b.vectors(extra)?.into_iter().enumerate() {
                        if v.len() != self.enc.dim() {
                            return Err(Error::cell(
                                path,
                                b.first_row + i + 1,
                                extra,
                                format!(
                                    "teacher vector has {} values, the encoder's embeddings {}",
                                    v.len(),
                                    self.enc.dim()
                                ),
                            ));
                        }
                        data.targets.extend(v);
                    }
                }
                BiLoss::Softmax { num_labels } => {
                    let l = b.labels(extra)?;
                    super::cross_encoder::check_labels(path, extra, &l, num_labels.max(2))
                        .map_err(|e| e.shift_row(b.first_row))?;
                    data.labels.extend(l.iter().map(|&x| x as f32));
                }
                _ => data
                    .labels
                    .extend(b.labels(extra)?.iter().map(|&x| x as f32)),
            }
        }
        if data.is_empty() {
            return Err(Error::file(path, "no training examples"));
        }
        Ok(data)
    }

    /// Tokenized examples from in-memory pairs (sentence1, sentence2, label).
    pub fn pair_data(&self, p: &crate::data::Pairs) -> Result<BiData> {
        let tok = |col: &[String]| {
            col.iter()
                .map(|t| self.enc.token_ids(t))
                .collect::<Result<Vec<_>>>()
        };
        let data = BiData {
            texts: vec![tok(&p.sentence1)?, tok(&p.sentence2)?],
            labels: p.labels.iter().map(|&l| l as f32).collect(),
            targets: Vec::new(),
        };
        if data.is_empty() {
            return Err(Error::msg("no training examples"));
        }
        Ok(data)
    }

    /// Embeddings of the rows `idx` of every text column, one forward pass: (columns x b, dim).
    fn embed_columns(&self, idx: &[usize], drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let seqs: Vec<&[u32]> = self
            .data
            .texts
            .iter()
            .flat_map(|col| idx.iter().map(move |&i| col[i].as_slice()))
            .collect();
        self.enc.embed_t(&seqs, drop)
    }
}

impl BiEncoderTask {
    /// The encoder and head over untracked copies of the weights, for evaluation.
    fn frozen(&self) -> Result<(SentenceEncoder, Option<Linear>)> {
        let vb = params::frozen(&self.varmap, &self.enc.device);
        let err = |e: candle_core::Error| Error::msg(e.to_string());
        let bert = Bert::load(vb.clone(), &self.folder.config).map_err(err)?;
        let head = match &self.head {
            Some(h) => {
                let (out, inp) = h.weight.dims2().map_err(err)?;
                Some(Linear::load(vb.pp(SOFTMAX_HEAD), inp, out).map_err(err)?)
            }
            None => None,
        };
        Ok((self.enc.with_bert(bert), head))
    }
}

impl TrainTask for BiEncoderTask {
    fn num_examples(&self) -> usize {
        self.data.len()
    }

    /// Every loss but the in-batch ranking ones (whose negatives are the rest of the batch).
    fn per_example_mean(&self) -> bool {
        !matches!(self.loss, BiLoss::Mnr | BiLoss::Contrastive)
    }

    fn loss(&self, idx: &[usize], drop: Option<&Dropout>) -> candle_core::Result<Tensor> {
        let b = idx.len();
        let dev = &self.enc.device;
        let emb = self.embed_columns(idx, drop)?;
        let col = |c: usize| emb.narrow(0, c * b, b);
        let labels = || Tensor::from_iter(idx.iter().map(|&i| self.data.labels[i]), dev);
        match self.loss {
            BiLoss::Cosine => cosine_mse(&col(0)?, &col(1)?, &labels()?),
            BiLoss::Mse => {
                let d = self.enc.dim();
                let t: Vec<f32> = idx
                    .iter()
                    .flat_map(|&i| self.data.targets[i * d..(i + 1) * d].iter().copied())
                    .collect();
                mse(&emb, &Tensor::from_vec(t, (b, d), dev)?)
            }
            BiLoss::Softmax { .. } => {
                let head = self.head.as_ref().expect("softmax loss has a head");
                let logits = head.forward(&softmax_features(&col(0)?, &col(1)?)?)?;
                cross_entropy(&logits, &labels()?.to_dtype(DType::U32)?)
            }
            BiLoss::Mnr => {
                in_batch_ranking(&col(0)?, &emb.narrow(0, b, emb.dim(0)? - b)?, 20.0, true)
            }
            BiLoss::Contrastive => {
                in_batch_ranking(&col(0)?, &emb.narrow(0, b, emb.dim(0)? - b)?, 1.0, false)
            }
            BiLoss::Triplet => triplet(&col(0)?, &col(1)?, &col(2)?, 5.0),
        }
    }

    fn evaluate(&self) -> Result<Option<(String, f64)>> {
        self.dev
            .as_ref()
            .map(|d| {
                let (enc, head) = self.frozen()?;
                d.evaluate(&enc, head.as_ref())
            })
            .transpose()
    }

    fn varmap(&self) -> &VarMap {
        &self.varmap
    }

    /// The sentence-transformers folder; a softmax head goes beside it in softmax_head.safetensors.
    fn save(&self, dir: &Path) -> Result<()> {
        let (mut backbone, mut head) = (HashMap::new(), HashMap::new());
        for (name, var) in params::vars(&self.varmap) {
            match name.strip_prefix(&format!("{SOFTMAX_HEAD}.")) {
                Some(h) => head.insert(h.to_string(), var.as_tensor().clone()),
                None => backbone.insert(name, var.as_tensor().clone()),
            };
        }
        let layout = EncoderLayout {
            pooling: self.enc.pooling,
            normalize: self.enc.normalize,
            max_seq_length: self.enc.max_seq_length,
        };
        save_sentence_encoder(&self.folder, backbone, &layout, dir)?;
        if !head.is_empty() {
            params::save_tensors(&head, &dir.join("softmax_head.safetensors"))?;
        }
        Ok(())
    }
}
