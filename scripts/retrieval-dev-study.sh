#!/bin/bash
# The label-free default of recipes/retrieval-adaptation.toml, chosen on dev queries (issue 34):
# on each development collection (Cranfield, CACM) the judged queries are split in half as the
# recipe splits them, and every model is scored on the train half only (the dev queries); test is
# never read here. p: MNR on pseudo-query pairs (the recipe's p step); p-a<alpha>: p interpolated
# with the stock weights (WiSE-FT). Results in out/dev34/<collection>/dev-*/results.csv; about
# 40 min on 2 cores. docs/results/retrieval-adaptation.md has the table.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-split.sh
lr=5e-5
mkdir -p out/dev34
for col in cranfield cacm; do
  dev_split $col
  [ -f $o/pseudo.parquet ] || $C augment --corpus $D --seed 0 --out $o/pseudo.parquet
  [ -f $o/dev-stock/results.csv ] || $C evaluate --model $M --retrieval $col=$o/data --split train --out $o/dev-stock
  for s in 1 2 3; do
    p=$o/p-lr$lr-s$s
    [ -f $p/model.safetensors ] || $C train-biencoder --init $M --train $o/pseudo.parquet --loss mnr \
      --columns anchor,positive --max-seq-length 256 --epochs 1 --lr $lr --batch-size 32 --seed $s --out $p
    models=(--model $p)
    for a in 0.25 0.5; do
      [ -f $p-a$a/model.safetensors ] || $C interpolate --start $M --end $p --alpha $a --out $p-a$a
      models+=(--model $p-a$a)
    done
    [ -f $o/dev-p-lr$lr-s$s/results.csv ] || $C evaluate "${models[@]}" --retrieval $col=$o/data --split train --out $o/dev-p-lr$lr-s$s
  done
done
