#!/usr/bin/env bash
# Condenser pre-training variants from a masked-LM BERT, judged on STSb DEV only (never test):
# each variant is pre-trained as condenser-sts's pt-cd step is, with the given pretrain flags, then
# fine-tuned at 500 and 1,000 pairs (condenser-sts's subsets and chosen learning rates, 3 seeds)
# and scored on STSb dev. Needs a finished `condenser run recipes/condenser-sts.toml` in $CS.
# Usage: [WARM=STEPS] scripts/condenser-study.sh NAME [pretrain flags...]
#   e.g. scripts/condenser-study.sh cd-600 --max-steps 600 --checkpoint-steps 100
#   WARM=100: the Condenser head first warms up for 100 steps with the backbone frozen
#   (--freeze-backbone, at WARM_LR, default 1e-3), and the variant continues from it.
set -euo pipefail
name=$1; shift
B=${CONDENSER:-target/release/condenser}
CS=${CS:-out/condenser-sts}
OUT=${OUT:-out/condenser-study}
model=${MODEL:-datasets/model/bert-tiny-mlm}
d=datasets/data
corpus=(--corpus $d/wikitext2/valid.parquet --corpus $d/stsb/train.parquet --corpus $d/mrpc/train.parquet
  --corpus $d/rte/train.parquet --corpus $d/cranfield --corpus $d/cacm --corpus $d/med --corpus $d/time)
for f in datasets/brown/*.parquet; do corpus+=(--corpus "$f"); done
pt=$OUT/pt/$name
mkdir -p "$OUT"
start=(--model "$model")
if [ "${WARM:-0}" -gt 0 ] && [ ! -f "$pt/model.safetensors" ]; then
  /usr/bin/time -f "warm-up $name: %e s, %M KB" "$B" pretrain --model "$model" --out "$pt-head" \
    --batch-size 32 --max-steps "$WARM" --lr "${WARM_LR:-1e-3}" --freeze-backbone --checkpoint-steps 50 \
    --seed 1 --column text,sentence1,sentence2 "${corpus[@]}" --overwrite > "$OUT/$name.warm.log" 2>&1
  start=(--continue-from "$pt-head")
fi
# condenser-sts's 300 steps unless the flags name others
steps=(--max-steps 300 --checkpoint-steps 50)
case " $* " in *" --max-steps "*) steps=() ;; esac
if [ ! -f "$pt/model.safetensors" ]; then
  /usr/bin/time -f "pretrain $name: %e s, %M KB" "$B" pretrain "${start[@]}" --out "$pt" --batch-size 32 \
    "${steps[@]}" --seed 1 --column text,sentence1,sentence2 "${corpus[@]}" "$@" \
    --overwrite > "$OUT/$name.pretrain.log" 2>&1
fi
models=()
for size in 500 1000; do
  for seed in 1 2 3; do
    m=$OUT/ft/$name-n$size-s$seed
    [ -f "$m/model.safetensors" ] || "$B" train-biencoder --init "$pt" --train "$CS/gold/n$size.parquet" \
      --loss cosine --pooling cls --epochs 4 --batch-size 16 --lr-from "$CS/lr/n$size.json" \
      --seed "$seed" --out "$m" --overwrite > /dev/null
    models+=(--model "$m")
  done
done
"$B" evaluate "${models[@]}" --sts "stsb-dev=$d/stsb/dev.parquet" --out "$OUT/eval/$name" > /dev/null
for size in 500 1000; do
  awk -F, -v s="-n$size-" '$2=="stsb-dev" && $4=="spearman_cosine" && index($1,s) {v[++n]=$5; t+=$5}
    END {m=t/n; for(i=1;i<=n;i++) q+=(v[i]-m)^2; printf "%s n%s dev %.4f +- %.4f\n", "'"$name"'", "'"$size"'", m, sqrt(q/(n-1))}' \
    "$OUT/eval/$name/results.csv"
done
