//! Whole-word masking for MLM (BERT's recipe, as the Condenser reference uses it): words are a
//! word-start piece and its `##` continuations; special tokens are never masked; whole words are
//! picked in random order until max(1, round(0.15 x maskable tokens)) tokens are covered (a word
//! that would overshoot is skipped); each picked token becomes `[MASK]` 80%, a random token 10%,
//! itself 10%. The loss reads only the picked positions.
use crate::error::{Error, Result};
use crate::tokenize::Tokenizer;
use rand::seq::SliceRandom;
use rand::Rng;

pub struct Masker {
    /// Per vocabulary id: a `##` continuation piece.
    continuation: Vec<bool>,
    /// Per vocabulary id: a special token (`[CLS]`, `[SEP]`, `[PAD]`, `[MASK]`, [UNK]...).
    special: Vec<bool>,
    pub mask_id: u32,
    pub rate: f64,
}

/// A masked sequence: model input, and the positions with their original tokens (the targets).
#[derive(Clone, Debug, PartialEq)]
pub struct Masked {
    pub input: Vec<u32>,
    pub positions: Vec<usize>,
    pub targets: Vec<u32>,
}

impl Masker {
    pub fn new(tok: &Tokenizer) -> Result<Masker> {
        let n = tok.vocab_size();
        let mut continuation = vec![false; n];
        let mut special = vec![false; n];
        for id in 0..n as u32 {
            if let Some(t) = tok.token(id) {
                continuation[id as usize] = t.starts_with("##");
                special[id as usize] = t.starts_with('[') && t.ends_with(']')
                    || t.starts_with('<') && t.ends_with('>');
            }
        }
        let mask_id = tok
            .token_id("[MASK]")
            .ok_or_else(|| Error::file(tok.source(), "the vocabulary has no [MASK] token"))?;
        Ok(Masker {
            continuation,
            special,
            mask_id,
            rate: 0.15,
        })
    }

    /// A `##` continuation piece (not a word start).
    pub fn is_continuation(&self, id: u32) -> bool {
        self.continuation.get(id as usize).copied().unwrap_or(false)
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special.get(id as usize).copied().unwrap_or(false)
    }

    /// Word spans [start, end) over the non-special positions of `ids`.
    pub fn words(&self, ids: &[u32]) -> Vec<(usize, usize)> {
        let mut words: Vec<(usize, usize)> = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            if self.is_special(id) {
                continue;
            }
            let cont = self.is_continuation(id);
            match words.last_mut() {
                Some(w) if cont && w.1 == i => w.1 = i + 1,
                _ => words.push((i, i + 1)),
            }
        }
        words
    }

    pub fn mask(&self, ids: &[u32], rng: &mut impl Rng) -> Masked {
        let mut words = self.words(ids);
        let maskable: usize = words.iter().map(|w| w.1 - w.0).sum();
        let want = ((self.rate * maskable as f64).round() as usize)
            .max(1)
            .min(maskable);
        words.shuffle(rng);
        let mut positions = Vec::with_capacity(want);
        for (s, e) in words {
            if positions.len() >= want {
                break;
            }
            if positions.len() + (e - s) > want && !positions.is_empty() {
                continue;
            }
            positions.extend(s..e);
        }
        positions.sort_unstable();
        let mut input = ids.to_vec();
        let targets: Vec<u32> = positions.iter().map(|&p| ids[p]).collect();
        let vocab = self.special.len() as u32;
        for &p in &positions {
            let r: f64 = rng.random();
            if r < 0.8 {
                input[p] = self.mask_id;
            } else if r < 0.9 {
                // a random ordinary token (never a special one, as the reference's vocabulary draw
                // rarely yields and which would break the sequence's structure)
                loop {
                    let t = rng.random_range(0..vocab);
                    if !self.is_special(t) {
                        input[p] = t;
                        break;
                    }
                }
            }
        }
        Masked {
            input,
            positions,
            targets,
        }
    }
}
