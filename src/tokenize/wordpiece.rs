//! An exact fast path for the standard BERT pipeline (BertNormalizer with clean_text +
//! BertPreTokenizer + WordPiece) on ASCII text. On ASCII every Unicode step of that pipeline
//! (NFD, accent stripping, CJK padding, Unicode punctuation) is the identity or a byte test, so
//! byte-level code yields the same ids as the tokenizers crate at a fraction of the cost. Text it
//! cannot vouch for (non-ASCII, or containing an added token such as "`[MASK]`") is declined and
//! the caller falls back to the crate. Tests prove equality on every shared dataset.
use crate::hash::FastMap;
use tokenizers::{Model, ModelWrapper, NormalizerWrapper, PreTokenizerWrapper};

#[derive(Clone)]
pub struct FastWordPiece {
    /// Pieces that may start a word (the whole vocab, as WordPiece looks up the raw substring).
    starts: FastMap<Box<[u8]>, u32>,
    /// Continuation pieces, keyed without their "##" prefix.
    conts: FastMap<Box<[u8]>, u32>,
    unk: u32,
    max_chars: usize,
    lowercase: bool,
    /// Added tokens (lowercased) whose presence makes us decline, and their first bytes.
    guards: Vec<Vec<u8>>,
    guard_first: [bool; 256],
}

impl FastWordPiece {
    /// None unless the tokenizer is exactly the pipeline this fast path reproduces.
    pub fn new(t: &tokenizers::Tokenizer) -> Option<FastWordPiece> {
        let lowercase = match t.get_normalizer()? {
            NormalizerWrapper::BertNormalizer(n) if n.clean_text => n.lowercase,
            _ => return None,
        };
        if !matches!(
            t.get_pre_tokenizer()?,
            PreTokenizerWrapper::BertPreTokenizer(_)
        ) {
            return None;
        }
        let ModelWrapper::WordPiece(wp) = t.get_model() else {
            return None;
        };
        let vocab = wp.get_vocab();
        let unk = *vocab.get(&wp.unk_token)?;
        let prefix = wp.continuing_subword_prefix.as_bytes();
        let mut starts = FastMap::default();
        let mut conts = FastMap::default();
        for (tok, &id) in &vocab {
            let b = tok.as_bytes();
            starts.insert(b.into(), id);
            if let Some(rest) = b.strip_prefix(prefix) {
                conts.insert(rest.into(), id);
            }
        }
        let guards: Vec<Vec<u8>> = t
            .get_added_tokens_decoder()
            .values()
            .map(|a| a.content.to_ascii_lowercase().into_bytes())
            .filter(|g| !g.is_empty())
            .collect();
        let mut guard_first = [false; 256];
        for g in &guards {
            guard_first[g[0] as usize] = true;
            guard_first[g[0].to_ascii_uppercase() as usize] = true;
        }
        Some(FastWordPiece {
            starts,
            conts,
            unk,
            max_chars: wp.max_input_chars_per_word,
            lowercase,
            guards,
            guard_first,
        })
    }

    /// Append the ids of `text` to `out` and return true, or return false (out untouched) when the
    /// text needs the full Unicode pipeline.
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) -> bool {
        let bytes = text.as_bytes();
        if !bytes.is_ascii() || self.has_guard(bytes) {
            return false;
        }
        let mut word: Vec<u8> = Vec::with_capacity(32);
        for &b in bytes {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.flush(&mut word, out),
                // clean_text drops other control characters without splitting the word
                0..=0x1f | 0x7f => {}
                _ if b.is_ascii_punctuation() => {
                    self.flush(&mut word, out);
                    word.push(b);
                    self.flush(&mut word, out);
                }
                _ => word.push(if self.lowercase {
                    b.to_ascii_lowercase()
                } else {
                    b
                }),
            }
        }
        self.flush(&mut word, out);
        true
    }

    fn has_guard(&self, bytes: &[u8]) -> bool {
        if !bytes.iter().any(|&b| self.guard_first[b as usize]) {
            return false;
        }
        let lower = bytes.to_ascii_lowercase();
        self.guards
            .iter()
            .any(|g| lower.windows(g.len()).any(|w| w == g.as_slice()))
    }

    /// Greedy longest-match-first WordPiece, as the tokenizers crate does it: a word with a piece
    /// that matches nothing, or longer than max_chars, becomes one [UNK].
    fn flush(&self, word: &mut Vec<u8>, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        let mark = out.len();
        if word.len() > self.max_chars {
            out.push(self.unk);
            word.clear();
            return;
        }
        let mut start = 0;
        while start < word.len() {
            let map = if start == 0 {
                &self.starts
            } else {
                &self.conts
            };
            let mut end = word.len();
            let id = loop {
                if let Some(&id) = map.get(&word[start..end]) {
                    break Some(id);
                }
                end -= 1;
                if end == start {
                    break None;
                }
            };
            match id {
                Some(id) => out.push(id),
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    break;
                }
            }
            start = end;
        }
        word.clear();
    }
}
