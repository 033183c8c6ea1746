//! Okapi BM25 (k1 1.2, b 0.75, Lucene's idf) over a set of sentences, for AugSBERT's BM25
//! sampling: each query sentence's top-scoring partners.
use super::distinct;
use crate::hash::FastMap;
use rayon::prelude::*;

pub struct Bm25<'a> {
    docs: Vec<&'a str>,
    postings: FastMap<String, Vec<(u32, u32)>>,
    lens: Vec<f32>,
    avg_len: f32,
    pub k1: f32,
    pub b: f32,
}

/// Lower-cased alphanumeric words.
fn terms(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_lowercase())
}

impl<'a> Bm25<'a> {
    pub fn new(docs: Vec<&'a str>) -> Bm25<'a> {
        let mut postings: FastMap<String, Vec<(u32, u32)>> = FastMap::default();
        let mut lens = Vec::with_capacity(docs.len());
        for (d, text) in docs.iter().enumerate() {
            let mut tf: FastMap<String, u32> = FastMap::default();
            let mut n = 0;
            for t in terms(text) {
                *tf.entry(t).or_default() += 1;
                n += 1;
            }
            lens.push(n as f32);
            for (t, c) in tf {
                postings.entry(t).or_default().push((d as u32, c));
            }
        }
        let avg_len = lens.iter().sum::<f32>() / lens.len().max(1) as f32;
        Bm25 {
            docs,
            postings,
            lens,
            avg_len,
            k1: 1.2,
            b: 0.75,
        }
    }

    /// Scores of every document for `query` (only documents sharing a term are non-zero).
    pub fn scores(&self, query: &str) -> Vec<f32> {
        let n = self.docs.len() as f32;
        let mut s = vec![0f32; self.docs.len()];
        for t in distinct_terms(query) {
            let Some(p) = self.postings.get(&t) else {
                continue;
            };
            let df = p.len() as f32;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            for &(d, tf) in p {
                let tf = tf as f32;
                let norm = self.k1 * (1.0 - self.b + self.b * self.lens[d as usize] / self.avg_len);
                s[d as usize] += idf * tf * (self.k1 + 1.0) / (tf + norm);
            }
        }
        s
    }

    /// Document indices by descending score (ties by index), positive scores only.
    pub fn ranked(&self, query: &str) -> Vec<usize> {
        let s = self.scores(query);
        let mut idx: Vec<usize> = (0..s.len()).filter(|&i| s[i] > 0.0).collect();
        idx.sort_by(|&a, &b| s[b].total_cmp(&s[a]).then(a.cmp(&b)));
        idx
    }

    pub fn doc(&self, i: usize) -> &'a str {
        self.docs[i]
    }

    /// For each distinct sentence1 (first-seen order), the distinct sentence2 values it shares a
    /// term with, by descending BM25: AugSBERT's BM25 sampling takes the top k that pass the dedup
    /// rules (`take_ranked`).
    /// Each list keeps its first `depth` (see `ranking_depth`).
    pub fn ranking(s1: &[&'a str], s2: &[&'a str], depth: usize) -> Vec<(&'a str, Vec<&'a str>)> {
        let index = Bm25::new(distinct(s2.iter().copied()));
        let queries = distinct(s1.iter().copied());
        queries
            .par_iter()
            .map(|q| {
                let ranked = index.ranked(q).into_iter().take(depth);
                (*q, ranked.map(|d| index.doc(d)).collect())
            })
            .collect()
    }
}

fn distinct_terms(s: &str) -> Vec<String> {
    let mut v: Vec<String> = terms(s).collect();
    v.sort();
    v.dedup();
    v
}
