//! Pair sets repeat sentences often (STSb, MRPC): each distinct text is encoded once and its
//! vector spread back to every row that holds it.
use crate::error::Result;
use crate::model::{Embeddings, SentenceEncoder};
use indicatif::ProgressBar;
use std::collections::HashMap;

/// Encode each distinct text once and spread the rows back (pair sets repeat sentences often).
pub fn encode_unique(
    enc: &SentenceEncoder,
    texts: &[&[String]],
    batch: usize,
    pb: &ProgressBar,
) -> Result<Vec<Embeddings>> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut unique: Vec<&str> = Vec::new();
    for t in texts.iter().flat_map(|s| s.iter()) {
        index.entry(t.as_str()).or_insert_with(|| {
            unique.push(t.as_str());
            unique.len() - 1
        });
    }
    pb.set_length(unique.len() as u64);
    let emb = enc.encode(&unique, batch, pb)?;
    Ok(texts
        .iter()
        .map(|side| {
            let mut data = Vec::with_capacity(side.len() * emb.dim);
            for t in side.iter() {
                data.extend_from_slice(emb.row(index[t.as_str()]));
            }
            Embeddings { dim: emb.dim, data }
        })
        .collect())
}
