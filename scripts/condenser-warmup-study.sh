#!/bin/bash
# Condenser without harm (issue 34, part 6), on dev queries only: continued Condenser training
# from all-MiniLM-L6-v2 hurt retrieval (-0.046 ndcg@10 on Cranfield) because its fresh MLM head
# starts from nothing and the backbone serves it while it learns the vocabulary. Here the head
# warms up first with the backbone frozen (`pretrain --freeze-backbone`, $WARM_LR), then training
# continues from it at a low rate ($LOW_LR) with the coCondenser span loss (`--continue-from
# --cocondenser`); c-plain is the old route (fresh head, backbone at the recipe's 2e-5). Each
# model is scored zero-shot on the train half of the judged queries (the recipe's split; test is
# never read) beside the stock model, seeds 1-3, and `condenser choose` without a test set
# reports the paired gains. Results in out/dev34/<collection>/condenser/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dev-split.sh
WARM_LR=${WARM_LR:-1e-3}
LOW_LR=${LOW_LR:-1e-5}
LEN=${LEN:-128}
for col in ${COLLECTIONS:-cacm cranfield}; do
  dev_split $col
  c=$o/condenser
  models=(--model $M)
  for s in 1 2 3; do
    [ -f $c/c-plain-s$s/model.safetensors ] || $C pretrain --model $M --corpus $D \
      --max-seq-length $LEN --lr 2e-5 --seed $s --out $c/c-plain-s$s
    [ -f $c/warm-s$s/model.safetensors ] || $C pretrain --model $M --corpus $D --freeze-backbone \
      --max-seq-length $LEN --lr $WARM_LR --seed $s --out $c/warm-s$s
    [ -f $c/c-warm-s$s/model.safetensors ] || $C pretrain --continue-from $c/warm-s$s --corpus $D \
      --cocondenser --max-seq-length $LEN --lr $LOW_LR --seed $s --out $c/c-warm-s$s
    models+=(--model $c/c-plain-s$s --model $c/c-warm-s$s)
  done
  [ -f $c/eval/per_query.csv ] || $C evaluate "${models[@]}" --retrieval dev=$o/data --split train --out $c/eval
  $C choose --dev $c/eval/results.csv --baseline all-MiniLM-L6-v2 --out $c/choice
done
