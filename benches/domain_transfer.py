#!/usr/bin/env python3
"""Domain transfer: how well a source cross-encoder's labels of a target dataset (labels hidden)
agree with the target's true labels.

    condenser augment --cross-encoder out/ce-stsb --input datasets/data/medqp/all.parquet \
        --unlabeled --sample random --top-k 3 --seed 42 --out out/medqp-silver.parquet
    python3 benches/domain_transfer.py datasets/data/medqp/all.parquet out/medqp-silver.parquet

The augment output starts with the input rows in order (origin "target"); their cross-encoder labels
are compared with the input's true labels: average precision (binary truth) and Spearman.
"""
import sys

import pyarrow.parquet as pq
from scipy.stats import spearmanr


def average_precision(scores, truth):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    pos, hits, ap, prev_recall, i = sum(truth), 0, 0.0, 0.0, 0
    while i < len(order):  # ties form one threshold, as sklearn
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        hits += sum(truth[order[k]] for k in range(i, j + 1))
        recall = hits / pos
        ap += (recall - prev_recall) * hits / (j + 1)
        prev_recall, i = recall, j + 1
    return ap


truth = [int(x) for x in pq.read_table(sys.argv[1]).column("label").to_pylist()]
out = pq.read_table(sys.argv[2]).to_pydict()
n = len(truth)
assert all(o == "target" for o in out["origin"][:n])
scores = out["label"][:n]
print(f"target pairs {n}, sampled pairs {out['origin'].count('sampled')}")
print(f"AP {average_precision(scores, truth):.4f} (positive rate {sum(truth) / n:.3f}), "
      f"Spearman {spearmanr(scores, truth)[0]:.4f}")
