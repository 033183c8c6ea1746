#!/bin/bash
# Queries without judgments (issue 34, part 4), measured on dev folds: a user with real queries
# (a search log) but no relevance labels. On each development collection the judged queries are
# split in half and the train half into 3 dev folds, as recipes/retrieval-adaptation.toml does;
# each fold's train queries are taken without their judgments (`augment --queries --query-split
# train`), paired with their top $TOP documents by BM25 (q-bm25) or by BM25 fused with the stock
# model (q-fused), and the stock model trains on those pairs with $LOSS at batch 32 (the recipe's
# label settings), seeds 1-3, scored on the fold's dev queries beside the stock model; `condenser
# choose` without a test set reports the paired gains. Test is never read here.
# Results in out/dev34/<collection>/folds/eval-q-f<k> and .../choice-q.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-split.sh
TOP=${TOP:-3}
LOSS=${LOSS:-mnr-masked}
for col in ${COLLECTIONS:-cacm cranfield}; do
  dev_split $col
  for k in 0 1 2; do
    models=(--model $M)
    for v in bm25 fused; do
      pairs=$f/q-$v-f$k.parquet
      retriever=()
      [ $v = fused ] && retriever=(--retriever $M)
      [ -f $pairs ] || $C augment --corpus $f/fold-$k --queries $f/fold-$k --query-split train \
        --positives $v "${retriever[@]}" --positives-per-query $TOP --out $pairs
      for s in 1 2 3; do
        m=$f/q$v-f$k-s$s
        [ -f $m/model.safetensors ] || $C train-biencoder --init $M --train $pairs --loss $LOSS \
          --columns anchor,positive --max-seq-length 256 --epochs 1 --lr 5e-5 --batch-size 32 \
          --seed $s --out $m
        models+=(--model $m)
      done
    done
    e=$f/eval-q-f$k
    [ -f $e/per_query.csv ] || $C evaluate "${models[@]}" --retrieval dev-f$k=$f/fold-$k --split test --out $e
  done
  $C choose --dev $f/eval-q-f0/results.csv --dev $f/eval-q-f1/results.csv \
    --dev $f/eval-q-f2/results.csv --baseline all-MiniLM-L6-v2 --out $f/choice-q
done
