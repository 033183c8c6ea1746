use crate::error::{Error, Result};
use candle_core::{DType, Tensor, D};
use std::path::Path;

/// One pooling mode, as `--pooling` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PoolingMode {
    Cls,
    Mean,
    Max,
    #[value(alias = "mean_sqrt_len")]
    MeanSqrtLen,
}

impl From<PoolingMode> for Pooling {
    fn from(m: PoolingMode) -> Pooling {
        let none = Pooling {
            cls: false,
            max: false,
            mean: false,
            mean_sqrt_len: false,
        };
        match m {
            PoolingMode::Cls => Pooling { cls: true, ..none },
            PoolingMode::Mean => Pooling { mean: true, ..none },
            PoolingMode::Max => Pooling { max: true, ..none },
            PoolingMode::MeanSqrtLen => Pooling {
                mean_sqrt_len: true,
                ..none
            },
        }
    }
}

/// sentence-transformers' pooling modes. Several may be on; their outputs are concatenated in
/// sentence-transformers' order (cls, max, mean, mean_sqrt_len).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pooling {
    pub cls: bool,
    pub max: bool,
    pub mean: bool,
    pub mean_sqrt_len: bool,
}

impl Pooling {
    pub const MEAN: Pooling = Pooling {
        cls: false,
        max: false,
        mean: true,
        mean_sqrt_len: false,
    };
    pub const CLS: Pooling = Pooling {
        cls: true,
        max: false,
        mean: false,
        mean_sqrt_len: false,
    };
    pub const MAX: Pooling = Pooling {
        cls: false,
        max: true,
        mean: false,
        mean_sqrt_len: false,
    };

    /// The modes on, in sentence-transformers' order and with its names (cls, max, mean,
    /// mean_sqrt_len): how stored embeddings and model cards record the pooling.
    pub fn mode_names(&self) -> Vec<&'static str> {
        [
            (self.cls, "cls"),
            (self.max, "max"),
            (self.mean, "mean"),
            (self.mean_sqrt_len, "mean_sqrt_len"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect()
    }

    /// The modes on, joined for a sentence (`mean`, `cls + mean`).
    pub fn mode_name(&self) -> String {
        self.mode_names().join(" + ")
    }

    /// Whether the embedding reads each text's first token alone (`[CLS]` pooling only).
    pub fn first_token_only(&self) -> bool {
        self.cls && !self.max && !self.mean && !self.mean_sqrt_len
    }

    /// How many modes are on (the embedding is hidden size times this).
    pub fn modes(&self) -> usize {
        [self.cls, self.max, self.mean, self.mean_sqrt_len]
            .iter()
            .filter(|m| **m)
            .count()
    }

    /// 1_Pooling/config.json.
    pub fn load(path: &Path) -> Result<Pooling> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::file(path, e))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Error::file(path, format!("invalid JSON: {e}")))?;
        let flag = |k: &str| v.get(k).and_then(|b| b.as_bool()).unwrap_or(false);
        for unsupported in ["pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"] {
            if flag(unsupported) {
                return Err(Error::file(path, format!("{unsupported} is not supported")));
            }
        }
        let p = Pooling {
            cls: flag("pooling_mode_cls_token"),
            max: flag("pooling_mode_max_tokens"),
            mean: flag("pooling_mode_mean_tokens"),
            mean_sqrt_len: flag("pooling_mode_mean_sqrt_len_tokens"),
        };
        if !(p.cls || p.max || p.mean || p.mean_sqrt_len) {
            return Err(Error::file(path, "no pooling mode is on"));
        }
        Ok(p)
    }

    /// The sentence-transformers 1_Pooling/config.json for this pooling.
    pub fn to_json(&self, dim: usize) -> serde_json::Value {
        serde_json::json!({
            "word_embedding_dimension": dim,
            "pooling_mode_cls_token": self.cls,
            "pooling_mode_mean_tokens": self.mean,
            "pooling_mode_max_tokens": self.max,
            "pooling_mode_mean_sqrt_len_tokens": self.mean_sqrt_len,
            "pooling_mode_weightedmean_tokens": false,
            "pooling_mode_lasttoken": false,
            "include_prompt": true
        })
    }

    /// Pool token states (b, s, h) under a (b, s) 0/1 mask into (b, h * modes).
    pub fn forward(&self, states: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        let m = mask.to_dtype(states.dtype())?.unsqueeze(2)?; // (b, s, 1)
        let mut parts = Vec::new();
        if self.cls {
            parts.push(states.narrow(1, 0, 1)?.squeeze(1)?);
        }
        if self.max {
            // padded positions get a very negative value so they never win (as sentence-transformers)
            let pad = ((m.ones_like()? - &m)? * -1e9)?;
            parts.push(states.broadcast_add(&pad)?.max(1)?);
        }
        if self.mean || self.mean_sqrt_len {
            let sum = states.broadcast_mul(&m)?.sum(1)?;
            let count = m.sum(1)?.to_dtype(DType::F32)?.clamp(1e-9, f64::MAX)?;
            if self.mean {
                parts.push(sum.broadcast_div(&count.to_dtype(sum.dtype())?)?);
            }
            if self.mean_sqrt_len {
                parts.push(sum.broadcast_div(&count.sqrt()?.to_dtype(sum.dtype())?)?);
            }
        }
        Tensor::cat(&parts, D::Minus1)
    }
}

impl Pooling {
    /// One text's embedding from its `n` token rows (row-major, `h` wide, no padding), appended
    /// to `out`: the same modes in the same order as `forward`, the engine's packed output pooled
    /// without a padded copy.
    pub fn pool_rows(&self, rows: &[f32], h: usize, out: &mut Vec<f32>) {
        let n = rows.len() / h.max(1);
        if n == 0 {
            // no row to pool (a text that is its left-out prompt alone): zeros, as the mean of
            // nothing is in sentence-transformers (its sum over a mask of zeros)
            out.resize(out.len() + h * self.modes(), 0.0);
            return;
        }
        if self.cls {
            out.extend_from_slice(&rows[..h]);
        }
        if self.max {
            let start = out.len();
            out.extend_from_slice(&rows[..h]);
            for r in rows.chunks_exact(h).skip(1) {
                for (m, &v) in out[start..].iter_mut().zip(r) {
                    *m = m.max(v);
                }
            }
        }
        if self.mean || self.mean_sqrt_len {
            let mut sum = vec![0f32; h];
            for r in rows.chunks_exact(h) {
                crate::model::kernels::vector::add_into(&mut sum, r);
            }
            let count = (n as f32).max(1e-9);
            if self.mean {
                out.extend(sum.iter().map(|v| v / count));
            }
            if self.mean_sqrt_len {
                out.extend(sum.iter().map(|v| v / count.sqrt()));
            }
        }
    }
}

/// `x` divided by its L2 norm (at least 1e-12), in place: `l2_normalize` on one row.
pub fn l2_normalize_row(x: &mut [f32]) {
    let norm = x.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    x.iter_mut().for_each(|v| *v /= norm);
}

/// L2 normalisation as torch.nn.functional.normalize (eps 1e-12).
pub fn l2_normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let norm = x
        .sqr()?
        .sum_keepdim(D::Minus1)?
        .sqrt()?
        .clamp(1e-12, f64::MAX)?;
    x.broadcast_div(&norm)
}
