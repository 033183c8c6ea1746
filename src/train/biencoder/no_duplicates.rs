//! Batches without repeated texts, the aim of sentence-transformers' NO_DUPLICATES batch sampler
//! (which its docs recommend for losses with in-batch negatives): a text twice in a batch (one
//! query with two relevant documents, say) makes one row's positive another row's negative, a false
//! negative. Rows are dealt round-robin into the epoch's ceil(n / batch) batches, the rows whose
//! texts repeat most first (ties in the shuffled order), each into the next batch with room that
//! holds none of its texts. Unlike the greedy sampler, this finds a duplicate-free arrangement
//! whenever no text occurs in more rows than there are batches, and keeps the trainer's batch
//! count; a row that fits nowhere goes to the next batch with room.
use crate::hash::{FastMap, FastSet};
use xxhash_rust::xxh3::xxh3_64;

/// Rows of `order` (shuffled) rearranged so that each consecutive `batch` rows share no text
/// where possible; `texts[column][row]` are token ids.
pub fn arrange(order: Vec<usize>, texts: &[Vec<Vec<u32>>], batch: usize) -> Vec<usize> {
    let n = order.len();
    if n == 0 || batch == 0 {
        return order;
    }
    let keys: Vec<Vec<u64>> = (0..texts.first().map_or(0, Vec::len))
        .map(|row| {
            texts
                .iter()
                .map(|col| {
                    xxh3_64(
                        &col[row]
                            .iter()
                            .flat_map(|t| t.to_le_bytes())
                            .collect::<Vec<u8>>(),
                    )
                })
                .collect()
        })
        .collect();
    let mut count: FastMap<u64, usize> = FastMap::default();
    for &r in &order {
        for &k in &keys[r] {
            *count.entry(k).or_default() += 1;
        }
    }
    let weight = |r: usize| keys[r].iter().map(|k| count[k]).max().unwrap_or(0);
    let mut rows = order;
    rows.sort_by_key(|&r| std::cmp::Reverse(weight(r))); // stable: shuffled within a weight
    let nb = n.div_ceil(batch);
    let cap = |b: usize| {
        if b + 1 == nb {
            n - batch * (nb - 1)
        } else {
            batch
        }
    };
    let mut batches: Vec<Vec<usize>> = vec![Vec::with_capacity(batch); nb];
    let mut seen: Vec<FastSet<u64>> = vec![FastSet::default(); nb];
    let mut next = 0;
    for r in rows {
        let from_next = (0..nb).map(|i| (next + i) % nb);
        let pick = from_next
            .clone()
            .find(|&b| batches[b].len() < cap(b) && keys[r].iter().all(|k| !seen[b].contains(k)))
            .or_else(|| from_next.clone().find(|&b| batches[b].len() < cap(b)))
            .expect("the batches hold exactly n rows");
        batches[pick].push(r);
        seen[pick].extend(keys[r].iter().copied());
        next = (pick + 1) % nb;
    }
    batches.concat()
}

/// The most rows one text occurs in, when that is more than an epoch's batches of `batch` rows:
/// then no arrangement avoids a repeated text in some batch (and `arrange` puts the overflow
/// wherever there is room), which the user is told.
pub fn unavoidable_repeats(texts: &[Vec<Vec<u32>>], batch: usize) -> Option<(usize, usize)> {
    let n = texts.first().map_or(0, Vec::len);
    let batches = n.div_ceil(batch.max(1));
    let mut count: FastMap<&[u32], usize> = FastMap::default();
    for row in 0..n {
        let mut once: FastSet<&[u32]> = FastSet::default();
        for col in texts {
            // a text counted once per row even when two columns of the row hold it
            if once.insert(&col[row]) {
                *count.entry(&col[row]).or_default() += 1;
            }
        }
    }
    let most = count.values().copied().max().unwrap_or(0);
    (most > batches).then_some((most, batches))
}

#[cfg(test)]
mod tests {
    use super::{arrange, unavoidable_repeats};

    #[test]
    fn batches_hold_no_repeated_text_and_every_row_once() {
        // 10 queries with 1..=4 positives each: 23 rows in 5 batches of 5, so a query's
        // positives can always go to different batches (greedy filling fails here)
        let mut anchors = Vec::new();
        let mut positives = Vec::new();
        for q in 0..10u32 {
            for p in 0..(q % 4 + 1) {
                anchors.push(vec![q]);
                positives.push(vec![100 + q * 10 + p]);
            }
        }
        let n = anchors.len();
        let texts = vec![anchors.clone(), positives];
        let order = arrange((0..n).rev().collect(), &texts, 5);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
        assert_eq!(n, 23);
        for b in order.chunks(5) {
            let mut qs: Vec<&Vec<u32>> = b.iter().map(|&r| &anchors[r]).collect();
            qs.sort();
            qs.dedup();
            assert_eq!(qs.len(), b.len(), "batch {b:?} repeats a query");
        }
        assert_eq!(
            unavoidable_repeats(&texts, 5),
            None,
            "4 positives, 5 batches"
        );
        // batches of 8: 3 batches, and queries 3 and 7 hold 4 rows each
        assert_eq!(unavoidable_repeats(&texts, 8), Some((4, 3)));
    }
}
