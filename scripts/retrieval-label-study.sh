#!/bin/bash
# The label method's loss and batch size in recipes/retrieval-adaptation.toml, chosen on dev folds
# (issue 34). CACM's train queries have about 15 relevant documents each (up to 51), so a batch of
# 32 pairs from a fold's 17 queries repeats queries and makes a query's other relevant documents
# its negatives (false negatives). Two cures: a smaller batch, which lets the trainer's
# no-duplicates arrangement keep each query once a batch, or mnr-masked, which leaves a repeated
# query's other positives out of its negatives at the same batch. On each development collection
# the judged queries are split in half as the recipe splits them, the train half into the
# recipe's 3 dev folds; each variant in $VARIANTS (b<batch>: mnr, m<batch>: mnr-masked) trains
# on a fold's train pairs with seeds 1-3 and is scored on the fold's dev queries beside the stock
# model. Test is never read here. Results in out/dev34/<collection>/folds/eval-f<k>-<variants>;
# `condenser choose` over them (without --retrieval) in .../choice-<variants>.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-split.sh
VARIANTS=${VARIANTS:-b32 m32}
for col in ${COLLECTIONS:-cacm cranfield}; do
  dev_split $col
  for k in 0 1 2; do
    pairs=$f/pairs-f$k.parquet
    [ -f $pairs ] || $C mine --retrieval $f/fold-$k --split train --candidates bm25 --num-negatives 1 --out $pairs
    models=(--model $M)
    for v in $VARIANTS; do
      loss=mnr
      [ "${v:0:1}" = m ] && loss=mnr-masked
      for s in 1 2 3; do
        m=$f/$v-f$k-s$s
        [ -f $m/model.safetensors ] || $C train-biencoder --init $M --train $pairs --loss $loss \
          --columns anchor,positive --max-seq-length 256 --epochs 1 --lr 5e-5 --batch-size ${v:1} \
          --seed $s --out $m
        models+=(--model $m)
      done
    done
    e=$f/eval-f$k-$(echo $VARIANTS | tr ' ' _)
    [ -f $e/per_query.csv ] || $C evaluate "${models[@]}" --retrieval dev-f$k=$f/fold-$k --split test --out $e
  done
done
for col in ${COLLECTIONS:-cacm cranfield}; do
  f=out/dev34/$col/folds
  v=$(echo $VARIANTS | tr ' ' _)
  $C choose --dev $f/eval-f0-$v/results.csv --dev $f/eval-f1-$v/results.csv \
    --dev $f/eval-f2-$v/results.csv --baseline all-MiniLM-L6-v2 --out $f/choice-$v
done
