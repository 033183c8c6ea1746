//! Metric primitives with the definitions sentence-transformers uses (scipy's pearsonr/spearmanr,
//! sklearn's average_precision_score and matthews_corrcoef, its own threshold sweeps).

pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    sxy / (sxx * syy).sqrt()
}

/// Ranks 1..n with ties given their average rank (scipy.stats.rankdata's default).
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let mut ranks = vec![0.0; x.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && x[idx[j + 1]] == x[idx[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            ranks[k] = r;
        }
        i = j + 1;
    }
    ranks
}

pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&average_ranks(x), &average_ranks(y))
}

/// (score, label) sorted best first, where "best" is the highest score when higher is better.
fn ranked(scores: &[f64], labels: &[bool], higher_better: bool) -> Vec<(f64, bool)> {
    let mut rows: Vec<(f64, bool)> = scores.iter().copied().zip(labels.iter().copied()).collect();
    // a stable sort, like Python's sorted(): equal scores keep input order
    rows.sort_by(|a, b| {
        if higher_better {
            b.0.total_cmp(&a.0)
        } else {
            a.0.total_cmp(&b.0)
        }
    });
    rows
}

/// Best accuracy over thresholds between score groups, and its threshold.
pub fn best_accuracy(scores: &[f64], labels: &[bool], higher_better: bool) -> (f64, f64) {
    let rows = ranked(scores, labels, higher_better);
    let n = rows.len() as f64;
    let mut negatives = labels.iter().filter(|l| !**l).count() as f64;
    let mut positives = 0.0;
    let Some(first) = rows.first() else {
        return (0.0, -1.0);
    };
    // start with the threshold that predicts every pair dissimilar
    let mut best = (
        negatives / n,
        if higher_better {
            next_up(first.0)
        } else {
            next_down(first.0)
        },
    );
    for (i, &(s, l)) in rows.iter().enumerate() {
        if l {
            positives += 1.0;
        } else {
            negatives -= 1.0;
        }
        let last = i + 1 == rows.len();
        if !last && s == rows[i + 1].0 {
            continue;
        }
        let acc = (positives + negatives) / n;
        if acc > best.0 {
            let mut t = if last { s } else { (s + rows[i + 1].0) / 2.0 };
            if !last && t == rows[i + 1].0 {
                t = s;
            }
            best = (acc, t);
        }
    }
    best
}

fn next_up(x: f64) -> f64 {
    // the score dtype is float32 in sentence-transformers: step to the next f32
    let f = x as f32;
    f32::from_bits(if f >= 0.0 {
        f.to_bits() + 1
    } else {
        f.to_bits() - 1
    }) as f64
}

fn next_down(x: f64) -> f64 {
    -next_up(-x)
}

/// Best F1 over thresholds: (f1, precision, recall, threshold).
pub fn best_f1(scores: &[f64], labels: &[bool], higher_better: bool) -> (f64, f64, f64, f64) {
    let rows = ranked(scores, labels, higher_better);
    let total_pos = labels.iter().filter(|l| **l).count() as f64;
    let (mut best, mut extracted, mut correct) = ((0.0, 0.0, 0.0, 0.0), 0.0, 0.0);
    for (i, &(s, l)) in rows.iter().enumerate() {
        extracted += 1.0;
        if l {
            correct += 1.0;
        }
        let last = i + 1 == rows.len();
        if !last && s == rows[i + 1].0 {
            continue;
        }
        if correct > 0.0 {
            let (p, r) = (correct / extracted, correct / total_pos);
            let f1 = 2.0 * p * r / (p + r);
            if f1 > best.0 {
                best = (f1, p, r, if last { s } else { (s + rows[i + 1].0) / 2.0 });
            }
        }
    }
    best
}

/// sklearn's average_precision_score: sum over distinct thresholds of (R_n - R_{n-1}) P_n.
pub fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
    let rows = ranked(scores, labels, true);
    let total_pos = labels.iter().filter(|l| **l).count() as f64;
    if total_pos == 0.0 {
        return 0.0;
    }
    let (mut tp, mut seen, mut prev_recall, mut ap) = (0.0, 0.0, 0.0, 0.0);
    for (i, &(s, l)) in rows.iter().enumerate() {
        seen += 1.0;
        if l {
            tp += 1.0;
        }
        if i + 1 < rows.len() && rows[i + 1].0 == s {
            continue;
        }
        let recall = tp / total_pos;
        ap += (recall - prev_recall) * (tp / seen);
        prev_recall = recall;
    }
    ap
}

/// Matthews correlation coefficient of binary predictions (0 when undefined, as sklearn).
pub fn matthews(pred: &[bool], labels: &[bool]) -> f64 {
    let (mut tp, mut tn, mut fp, mut fn_) = (0f64, 0f64, 0f64, 0f64);
    for (&p, &l) in pred.iter().zip(labels) {
        match (p, l) {
            (true, true) => tp += 1.0,
            (false, false) => tn += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fn_ += 1.0,
        }
    }
    let den = ((tp + fp) * (tp + fn_) * (tn + fp) * (tn + fn_)).sqrt();
    if den == 0.0 {
        0.0
    } else {
        (tp * tn - fp * fn_) / den
    }
}

pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64) * (*y as f64))
        .sum()
}

/// The cosine in f64, as the evaluators report it (sentence-transformers' scores to 1e-7); norms
/// floored at 1e-12, the encoders' and search's epsilon (torch's `normalize`).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (na, nb) = (dot(a, a).sqrt().max(1e-12), dot(b, b).sqrt().max(1e-12));
    dot(a, b) / (na * nb)
}

pub fn euclidean(a: &[f32], b: &[f32]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| ((*x - *y) as f64).powi(2))
        .sum::<f64>()
        .sqrt()
}

pub fn manhattan(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| ((*x - *y) as f64).abs()).sum()
}
