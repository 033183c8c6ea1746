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
            return Err(Error::msg(format!(
                "--ngram {n} is too large for a vocabulary of {vocab_size}: at most {max_n}"
            )));
        }
        Ok(NgramPacker { n, stride, bits })
    }

    #[inline]
    fn pack(&self, gram: &[u32]) -> u128 {
        gram.iter()
            .fold(0u128, |acc, &id| (acc << self.bits) | (id as u128 + 1))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// The article's string n-grams, in Python's semantics, as the oracle.
    fn strings(tokens: &[u32], n: usize, stride: usize) -> HashSet<String> {
        let join = |g: &[u32]| {
            g.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        };
        if stride == 1 {
            tokens.windows(n).map(join).collect()
        } else {
            (0..tokens.len())
                .step_by(stride)
                .map(|i| join(&tokens[i..(i + n).min(tokens.len())]))
                .collect()
        }
    }

    #[test]
    fn keys_are_one_to_one_with_string_ngrams() {
        let seqs: [&[u32]; 5] = [
            &[],
            &[7],
            &[7, 8],
            &[7, 8, 7, 8, 9],
            &[0, 30521, 0, 30521, 5, 0],
        ];
        for n in 1..=4 {
            for stride in 1..=3 {
                let p = NgramPacker::new(n, stride, 30522).unwrap();
                let (mut keys, mut strs) = (HashSet::new(), HashSet::new());
                for s in seqs {
                    p.for_each(s, |k| {
                        keys.insert(k);
                    });
                    strs.extend(strings(s, n, stride));
                }
                assert_eq!(keys.len(), strs.len(), "n={n} stride={stride}");
            }
        }
    }

    #[test]
    fn stride_two_keeps_the_trailing_short_gram() {
        let p = NgramPacker::new(2, 2, 100).unwrap();
        let mut v = Vec::new();
        p.for_each(&[1, 2, 3], |k| v.push(k));
        assert_eq!(v, [p.pack(&[1, 2]), p.pack(&[3])]);
        assert_ne!(p.pack(&[3]), p.pack(&[0, 3]));
    }

    #[test]
    fn too_long_ngrams_are_refused() {
        assert!(NgramPacker::new(8, 1, 30522).is_ok());
        assert!(NgramPacker::new(9, 1, 30522).is_err());
        assert!(NgramPacker::new(0, 1, 30522).is_err());
    }
}
