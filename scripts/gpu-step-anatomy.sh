#!/usr/bin/env bash
# On the lent GPU machine: where a bi-encoder training step's time goes (issue 17, part 4), without
# nsys (it cannot write reports there). benches/cuda/cuhook.c, preloaded, counts and times every
# CUDA driver call (kernel launches, allocations, copies, synchronisations, module loads); two runs
# of 10 and 40 MNR steps (batch 64, STSb train pairs) give the per-step counts by difference, and
# batch 8 vs 64 vs 256 shows whether a step's time follows its work or its launches. Last, two runs
# of the same 6 steps must save the same weights (dropout masks drawn on the GPU, seeded).
# PRECISION=bf16 times and repeats --precision bf16 instead (the GPU engine's bf16 products).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
cc -O2 -shared -fPIC -o /tmp/cuhook.so benches/cuda/cuhook.c -ldl || exit 1
d=$(mktemp -d)
python3 -c 'import sys, pyarrow.parquet as pq, pyarrow as pa; t = pq.read_table(sys.argv[1]); pq.write_table(pa.table({"anchor": t["sentence1"], "positive": t["sentence2"]}), sys.argv[2])' \
  datasets/data/stsb/train.parquet "$d/mnr.parquet"
step() { # batch steps [preload]
  env ${3:+LD_PRELOAD=$3} "${BIN:-.cuda/dist/condenser}" train-biencoder --init datasets/model/all-MiniLM-L6-v2 \
    --train "$d/mnr.parquet" --loss mnr --batch-size "$1" --max-seq-length 128 --max-steps "$2" \
    --checkpoint-steps 1000000 --out "$d/bi-$1-$2" --device "${DEVICE:-cuda}" \
    --precision "${PRECISION:-f32}" 2>&1 | grep -E "examples/s|cuhook" | sed "s/^/batch $1, $2 steps: /"
}
step 64 10 /tmp/cuhook.so
step 64 40 /tmp/cuhook.so
for b in ${BATCHES-8 256}; do # BATCHES="" skips the other batch sizes
  step "$b" 10
  step "$b" 40
done
for r in a b; do
  "${BIN:-.cuda/dist/condenser}" train-biencoder --init datasets/model/all-MiniLM-L6-v2 --train "$d/mnr.parquet" \
    --loss mnr --batch-size 64 --max-steps 6 --out "$d/rep-$r" --device "${DEVICE:-cuda}" \
    --precision "${PRECISION:-f32}" >/dev/null 2>&1
  echo "same 6 steps, run $r: $(sha256sum <"$d/rep-$r/model.safetensors")"
done
rm -rf "$d"
