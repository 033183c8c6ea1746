//! The mining loop: distinct anchors and corpus texts, each block of anchors' candidates searched,
//! rescored, filtered and sampled into negatives.
use super::candidates::CorpusIndex;
use super::options::{MineOptions, Miners, NegativeSampling};
use crate::error::{Error, Result};
use crate::model::CrossEncoderModel;
use crate::shard::Shard;
use indicatif::ProgressBar;
use rand::seq::index::sample;
use rand::SeedableRng;
use std::collections::HashMap;
use std::ops::Range;

/// The pairs to mine for and the texts to mine from.
pub struct MineInput<'a> {
    pub anchors: Vec<&'a str>,
    pub positives: Vec<&'a str>,
    /// Further documents (a retrieval corpus); the positives are always part of the corpus.
    pub corpus: Vec<&'a str>,
}

/// One distinct anchor's result: its positives and chosen negatives (corpus indices) with scores.
pub struct MinedAnchor {
    pub anchor: usize,
    pub positives: Vec<(usize, f32)>,
    pub negatives: Vec<(usize, f32)>,
}

/// Anchors mined per block: a shard is a run of whole blocks, embedded and rescored as in a whole
/// run. Small, because an anchor costs a search and up to range-max cross-encoder pairs.
pub const BLOCK: usize = 64;

pub struct Mined<'a> {
    pub anchors: Vec<&'a str>,
    pub corpus: Vec<&'a str>,
    pub rows: Vec<MinedAnchor>,
    /// Scores come from the cross-encoder (written for MarginMSE) rather than the retriever.
    pub rescored: bool,
    /// Candidates removed by the score and margin filters.
    pub filtered: usize,
    /// The (unique) anchors mined: all of them, or a shard's range.
    pub range: Range<usize>,
}

/// Distinct values in first-seen order, and each value's index.
fn index<'a>(values: impl IntoIterator<Item = &'a str>) -> (Vec<&'a str>, HashMap<&'a str, usize>) {
    let mut at = HashMap::new();
    let mut list = Vec::new();
    for v in values {
        at.entry(v).or_insert_with(|| {
            list.push(v);
            list.len() - 1
        });
    }
    (list, at)
}

pub fn mine<'a>(
    input: MineInput<'a>,
    models: &Miners,
    o: &MineOptions,
    shard: Option<Shard>,
    progress: &ProgressBar,
) -> Result<Mined<'a>> {
    o.validate(models.cross_encoder.is_some())?;
    if input.anchors.is_empty() {
        return Err(Error::msg("no (anchor, positive) pairs to mine for"));
    }
    let (corpus, doc_at) = index(input.corpus.iter().chain(&input.positives).copied());
    let (anchors, anchor_at) = index(input.anchors.iter().copied());
    let mut positives: Vec<Vec<usize>> = vec![Vec::new(); anchors.len()];
    for (a, p) in input.anchors.iter().zip(&input.positives) {
        let (a, p) = (anchor_at[a], doc_at[p]);
        if !positives[a].contains(&p) {
            positives[a].push(p);
        }
    }
    let max_positives = positives.iter().map(Vec::len).max().unwrap_or(0);
    let k = o.range_max() + max_positives;
    let index = CorpusIndex::build(&corpus, models, o, progress)?;
    let range = shard.map_or(0..anchors.len(), |s| s.rows_in(anchors.len(), BLOCK));
    progress.set_length(progress.length().unwrap_or(0) + range.len() as u64);
    let mut rows = Vec::with_capacity(range.len());
    let mut filtered = 0;
    // global blocks of anchors: a shard embeds and rescores exactly as the whole run does
    for start in range.clone().step_by(BLOCK) {
        let block = start..(start + BLOCK).min(range.end);
        let (r, f) = mine_block(
            block, &anchors, &corpus, &positives, &index, models, o, k, progress,
        )?;
        rows.extend(r);
        filtered += f;
    }
    Ok(Mined {
        anchors,
        corpus,
        rows,
        rescored: models.cross_encoder.is_some(),
        filtered,
        range,
    })
}

/// Candidates, filters and negatives of the anchors in `block` (global indices).
#[allow(clippy::too_many_arguments)]
fn mine_block(
    block: Range<usize>,
    anchors: &[&str],
    corpus: &[&str],
    positives: &[Vec<usize>],
    index: &CorpusIndex,
    models: &Miners,
    o: &MineOptions,
    k: usize,
    progress: &ProgressBar,
) -> Result<(Vec<MinedAnchor>, usize)> {
    let (b, n) = (block.start, block.len());
    let found = index.find(
        &anchors[block.clone()],
        &positives[block.clone()],
        models,
        o,
        k,
        progress,
    )?;
    let mut cands = found.candidates;
    let mut pos_scores: Vec<Vec<(usize, f32)>> = positives[block]
        .iter()
        .zip(found.positive_scores)
        .map(|(p, s)| p.iter().copied().zip(s).collect())
        .collect();
    let ce = models.cross_encoder;
    if let Some(ce) = ce.filter(|_| o.filters()) {
        let lists = cands.iter_mut().chain(pos_scores.iter_mut()).enumerate();
        let lists = lists.map(|(i, l)| (b + i % n, l)).collect();
        rescore(ce, anchors, corpus, lists, o.batch.batch_size, progress)?;
    }
    let mut filtered = 0;
    let mut rows = Vec::with_capacity(n);
    for (i, (mut c, ps)) in cands.into_iter().zip(pos_scores).enumerate() {
        let a = b + i;
        c.retain(|(d, _)| !positives[a].contains(d));
        let hardest = ps.iter().map(|p| p.1).fold(f32::INFINITY, f32::min);
        let before = c.len();
        c.retain(|&(_, s)| keep(s, hardest, o));
        filtered += before - c.len();
        c.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
        c.truncate(o.range_max());
        let window: Vec<(usize, f32)> = c.into_iter().skip(o.range_min).collect();
        let negatives = pick(window, a, o);
        rows.push(MinedAnchor {
            anchor: a,
            positives: ps,
            negatives,
        });
    }
    if let Some(ce) = ce.filter(|_| !o.filters()) {
        let lists = rows
            .iter_mut()
            .flat_map(|r| [(r.anchor, &mut r.positives), (r.anchor, &mut r.negatives)])
            .collect();
        rescore(ce, anchors, corpus, lists, o.batch.batch_size, progress)?;
    }
    Ok((rows, filtered))
}
fn keep(s: f32, hardest: f32, o: &MineOptions) -> bool {
    let margin_ok = o.absolute_margin.is_none_or(|m| s + m <= hardest);
    let relative_ok = o
        .relative_margin
        .is_none_or(|r| s <= hardest - hardest.abs() * r);
    margin_ok
        && relative_ok
        && o.max_score.is_none_or(|m| s <= m)
        && o.min_score.is_none_or(|m| s >= m)
}

/// `num_negatives` from the window (already ordered by score): the first, or a seeded random
/// subset put back in score order.
fn pick(window: Vec<(usize, f32)>, anchor: usize, o: &MineOptions) -> Vec<(usize, f32)> {
    let n = o.num_negatives.min(window.len());
    match o.sampling {
        NegativeSampling::Top => window.into_iter().take(n).collect(),
        NegativeSampling::Random => {
            // one stream per anchor: a result does not depend on the other anchors
            let mut rng = rand::rngs::StdRng::seed_from_u64(crate::hash::mix64(
                o.seed.seed ^ crate::hash::mix64(anchor as u64),
            ));
            let mut chosen = sample(&mut rng, window.len(), n).into_vec();
            chosen.sort_unstable();
            chosen.into_iter().map(|i| window[i]).collect()
        }
    }
}

/// Replace the scores of each (anchor, documents) list by the cross-encoder's, in one batched run.
fn rescore(
    ce: &CrossEncoderModel,
    anchors: &[&str],
    corpus: &[&str],
    mut lists: Vec<(usize, &mut Vec<(usize, f32)>)>,
    batch: usize,
    progress: &ProgressBar,
) -> Result<()> {
    let pairs: Vec<(&str, &str)> = lists
        .iter()
        .flat_map(|(a, l)| l.iter().map(move |&(d, _)| (anchors[*a], corpus[d])))
        .collect();
    progress.set_length(progress.length().unwrap_or(0) + pairs.len() as u64);
    let mut scores = ce.scores(&pairs, batch, progress)?.into_iter();
    for x in lists.iter_mut().flat_map(|(_, l)| l.iter_mut()) {
        x.1 = scores.next().expect("one score per pair") as f32;
    }
    Ok(())
}
