use crate::error::{Error, Result};

/// Packs an n-gram of token ids into one u128 key, each id stored as id+1 in `bits` bits, so
/// that a shorter trailing n-gram (stride > 1) never equals a full one. Ids map one to one to
/// WordPiece strings, so key equality is exactly the article's string equality of "a b".
#[derive(Clone, Copy, Debug)]
pub struct NgramPacker {
    pub n: usize,
    pub stride: usize,
    bits: u32,
}

impl NgramPacker {
    pub fn new(n: usize, stride: usize, vocab_size: usize) -> Result<NgramPacker> {
        if n == 0 || stride == 0 {
            return Err(Error::msg("--ngram and --stride must be at least 1"));
        }
        let bits = usize::BITS - vocab_size.leading_zeros(); // enough for ids + 1 <= vocab_size
        let max_n = (128 / bits) as usize;
        if n > max_n {
            return Err(Error::msg(format!("--ngram {n} is too large for a vocabulary of {vocab_size}: at most {max_n}")));
        }
        Ok(NgramPacker { n, stride, bits })
    }

    #[inline]
    fn pack(&self, gram: &[u32]) -> u128 {
        gram.iter().fold(0u128, |acc, &id| (acc << self.bits) | (id as u128 + 1))
    }

    /// Every n-gram of one text's ids. Stride 1: every full window of n adjacent tokens. Stride
    /// s > 1: the article's loop `for i in range(0, len(tokens), s): tokens[i:i+n]`, which keeps a
    /// trailing shorter n-gram.
    #[inline]
    pub fn for_each(&self, ids: &[u32], mut f: impl FnMut(u128)) {
        if self.stride == 1 {
            for w in ids.windows(self.n) {
                f(self.pack(w));
            }
        } else {
            for i in (0..ids.len()).step_by(self.stride) {
                f(self.pack(&ids[i..(i + self.n).min(ids.len())]));
            }
        }
    }
}
