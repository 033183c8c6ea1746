//! coCondenser's documents and spans. A document is one record of the block file (consecutive
//! corpus text); from it two random windows are cut, each wrapped as "`[CLS]` span `[SEP]`". Windows
//! start at a word start, so masking never sees half a word.
use super::masking::Masker;
use rand::Rng;

/// Two random spans of at most `span` body tokens from `doc` ("`[CLS]` body `[SEP]`").
pub fn two_spans(doc: &[u32], span: usize, masker: &Masker, rng: &mut impl Rng) -> [Vec<u32>; 2] {
    let (cls, sep) = (doc[0], doc[doc.len() - 1]);
    let body = &doc[1..doc.len() - 1];
    let w = span.min(body.len()).max(1);
    let mut cut = || {
        let mut s = rng.random_range(0..=body.len().saturating_sub(w));
        while s > 0 && masker.is_continuation(body[s]) {
            s -= 1;
        }
        let mut v = Vec::with_capacity(w + 2);
        v.push(cls);
        v.extend_from_slice(&body[s..(s + w).min(body.len())]);
        v.push(sep);
        v
    };
    [cut(), cut()]
}
