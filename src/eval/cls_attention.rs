//! The Condenser paper's attention analysis: how broadly the `[CLS]` token attends, per layer, as the
//! entropy of its attention distribution over the tokens, averaged over heads and sentences.
use crate::error::{Context, Error, Result};
use crate::model::{SentenceEncoder, TokenBatch};
use candle_core::{DType, D};
use indicatif::ProgressBar;

/// `[CLS]` attention entropies over a set of texts.
pub struct ClsEntropy {
    /// Mean entropy (nats) of `[CLS]`'s attention in each layer.
    pub layers: Vec<f64>,
    /// The ceiling: the mean entropy of uniform attention over each text's tokens.
    pub uniform: f64,
}

pub fn cls_attention_entropy(
    enc: &SentenceEncoder,
    texts: &[String],
    batch_size: usize,
    progress: &ProgressBar,
) -> Result<ClsEntropy> {
    let mut seqs = texts
        .iter()
        .map(|t| enc.token_ids(t))
        .collect::<Result<Vec<_>>>()?;
    // length-sorted batches pad little; padded keys get zero attention and add no entropy
    seqs.sort_by_key(|s| s.len());
    let layers = enc.bert.layers.len();
    let mut sums = vec![0f64; layers];
    let mut count = 0usize;
    let err = |e: candle_core::Error| Error::context("model forward", e);
    for chunk in seqs.chunks(batch_size.max(1)) {
        let refs: Vec<&[u32]> = chunk.iter().map(|s| s.as_slice()).collect();
        let b = TokenBatch::new(&refs, None, enc.special.pad, &enc.device).map_err(err)?;
        let (_, probs) = enc
            .bert
            .forward_all(&b.ids, &b.type_ids, &b.mask)
            .map_err(err)?;
        for (l, p) in probs.iter().enumerate() {
            // (b, heads, query, key): the [CLS] query's row
            let cls = p
                .narrow(2, 0, 1)
                .and_then(|c| c.to_dtype(DType::F64))
                .map_err(err)?;
            let h = (&cls * (&cls + 1e-30).and_then(|c| c.log()).map_err(err)?)
                .and_then(|t| t.sum(D::Minus1)?.sum_all()?.to_scalar::<f64>())
                .map_err(err)?;
            sums[l] -= h;
        }
        count += chunk.len() * enc.bert.config.num_attention_heads;
        progress.inc(chunk.len() as u64);
    }
    let uniform =
        seqs.iter().map(|s| (s.len() as f64).ln()).sum::<f64>() / seqs.len().max(1) as f64;
    Ok(ClsEntropy {
        layers: sums.into_iter().map(|s| s / count.max(1) as f64).collect(),
        uniform,
    })
}

/// The analysis of several models side by side: what `analyze attention` writes.
pub struct AttentionReport {
    pub models: Vec<String>,
    /// Per model, the mean `[CLS]` attention entropy of each layer.
    pub layers: Vec<Vec<f64>>,
    /// Uniform attention's entropy (the first model's tokenization), the ceiling.
    pub uniform: f64,
    pub texts: usize,
}

impl AttentionReport {
    /// One row per layer, one column per model.
    pub fn to_csv(&self) -> Result<String> {
        let depth = self.layers.iter().map(Vec::len).max().unwrap_or(0);
        let mut w = csv::Writer::from_writer(Vec::new());
        let mut head = vec!["layer".to_string()];
        head.extend(self.models.iter().cloned());
        w.write_record(&head).doing("attention_entropy.csv")?;
        for l in 0..depth {
            let mut row = vec![(l + 1).to_string()];
            row.extend(
                self.layers
                    .iter()
                    .map(|r| r.get(l).map(|v| format!("{v:.4}")).unwrap_or_default()),
            );
            w.write_record(&row).doing("attention_entropy.csv")?;
        }
        let bytes = w
            .into_inner()
            .map_err(|e| e.into_error())
            .doing("attention_entropy.csv")?;
        Ok(String::from_utf8(bytes).expect("CSV of UTF-8 fields"))
    }

    /// attention_entropy.csv and attention_entropy.svg/.png in `dir`.
    pub fn save(&self, dir: &std::path::Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::file(dir, e))?;
        crate::data::write_atomic(
            &dir.join("attention_entropy.csv"),
            self.to_csv()?.as_bytes(),
        )?;
        let depth = self.layers.iter().map(Vec::len).max().unwrap_or(0);
        let mut series: Vec<(String, Vec<(f64, f64)>)> = self
            .models
            .iter()
            .zip(&self.layers)
            .map(|(n, r)| {
                let pts = r.iter().enumerate().map(|(l, v)| ((l + 1) as f64, *v));
                (n.clone(), pts.collect())
            })
            .collect();
        series.push((
            "uniform over the tokens".into(),
            (1..=depth).map(|l| (l as f64, self.uniform)).collect(),
        ));
        use crate::plot::Figure;
        crate::plot::line_chart("entropy of [CLS] attention (nats)", "layer", &series)
            .save(&dir.join("attention_entropy"))
    }
}
