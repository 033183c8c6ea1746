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

/// A finished block of anchors: their results, and the texts their indices point into.
pub struct Mined<'a, 'b> {
    pub anchors: &'b [&'a str],
    pub corpus: &'b [&'a str],
    pub rows: Vec<MinedAnchor>,
}

/// Where `mine` puts each block of anchors as it finishes it (the run's output parts).
pub trait MinedBlocks {
    /// The (distinct) anchors this run mines, all or a shard's: returns the first not done yet
    /// (past the blocks an interrupted run finished).
    fn begin(&mut self, range: &Range<usize>) -> Result<usize>;
    /// A finished block of `anchors` anchors.
    fn block(&mut self, m: &Mined, anchors: usize) -> Result<()>;
}

/// What a run mined, for its summary.
pub struct MineStats {
    /// Distinct anchors and corpus texts of the whole input.
    pub anchors: usize,
    pub corpus: usize,
    /// The anchors of this run (all, or a shard's), and the first this process mined (later than
    /// the range's start where it resumed an interrupted run).
    pub range: Range<usize>,
    pub from: usize,
    /// Negatives chosen and candidates removed by the filters, in the blocks this process mined.
    pub negatives: usize,
    pub filtered: usize,
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

/// Mine `input`'s anchors (all, or `shard`'s), handing each finished block to `out`.
pub fn mine(
    input: MineInput<'_>,
    models: &Miners,
    o: &MineOptions,
    shard: Option<Shard>,
    out: &mut dyn MinedBlocks,
    progress: &ProgressBar,
) -> Result<MineStats> {
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
    let from = out.begin(&range)?;
    progress.set_length(progress.length().unwrap_or(0) + (range.end - from) as u64);
    let (mut negatives, mut filtered) = (0, 0);
    // global blocks of anchors: a shard, or a resumed run, embeds and rescores exactly as the
    // whole run does
    for start in (from..range.end).step_by(BLOCK) {
        let block = start..(start + BLOCK).min(range.end);
        let n = block.len();
        let (rows, f) = mine_block(
            block, &anchors, &corpus, &positives, &index, models, o, k, progress,
        )?;
        negatives += rows.iter().map(|r| r.negatives.len()).sum::<usize>();
        filtered += f;
        let m = Mined {
            anchors: &anchors,
            corpus: &corpus,
            rows,
        };
        out.block(&m, n)?;
    }
    Ok(MineStats {
        anchors: anchors.len(),
        corpus: corpus.len(),
        range,
        from,
        negatives,
        filtered,
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
