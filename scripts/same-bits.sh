#!/bin/bash
# Issue 83's acceptance: two condenser binaries (an earlier commit's and this one's) give the
# same bits for encode (f32, and bf16 where the CPU has AVX512-BF16 or AMX), 12 steps of
# train-biencoder (mnr, cached-mnr), of train-cross-encoder and of pretrain, and evaluate on
# Cranfield. Each output is compared byte for byte (results.json without its timings).
#   bash scripts/same-bits.sh OLD_BINARY NEW_BINARY [WORK_DIR]
# On a GPU (both binaries built with scripts/build-cuda.sh): SAME_BITS_DEVICE=cuda:0 runs every
# job there (the GPU engine's bi-encoder, cross-encoder and encode; pretrain on candle's graph),
# bf16 encode included.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 work=${3:-out/same-bits}
d=datasets/data
mini=datasets/model/all-MiniLM-L6-v2
tiny=datasets/model/bert-tiny-mlm
rm -rf "$work" && mkdir -p "$work"
bf16=false
grep -qE 'avx512_bf16|amx_bf16' /proc/cpuinfo && bf16=true
device=${SAME_BITS_DEVICE:-}
[ -n "$device" ] && bf16=true
# each job: a name and the arguments after the binary, {out} standing for its output folder
jobs=(
  "encode-f32|encode --model $mini --input $d/stsb/test.parquet --columns sentence1 --out {out}/e.parquet"
  "train-mnr|train-biencoder --init $mini --train $d/stsb/train.parquet --loss mnr --columns sentence1,sentence2 --batch-size 16 --max-steps 12 --seed 1 --out {out}"
  "train-cached-mnr|train-biencoder --init $mini --train $d/stsb/train.parquet --loss cached-mnr --columns sentence1,sentence2 --mini-batch-size 4 --batch-size 16 --max-steps 12 --seed 1 --out {out}"
  "train-cross|train-cross-encoder --model $mini --train $d/stsb/train.parquet --batch-size 16 --max-steps 12 --out {out}"
  "pretrain|pretrain --model $tiny --corpus $d/wikitext2/valid.parquet --batch-size 8 --max-steps 12 --out {out}"
  "evaluate|evaluate --model $mini --retrieval cranfield=$d/cranfield --out {out}"
)
$bf16 && jobs+=("encode-bf16|encode --model $mini --input $d/stsb/test.parquet --columns sentence1 --dtype bf16 --out {out}/e.parquet")
same=0 differ=0
for j in "${jobs[@]}"; do
  name=${j%%|*} args=${j#*|}
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    out=$work/$side/$name
    mkdir -p "$out"
    # shellcheck disable=SC2086
    "$bin" ${args//\{out\}/$out} ${device:+--device $device} > "$work/$side/$name.log" 2>&1
  done
  # the files each run wrote, less those that name times, paths or the run's own log
  diffs=$(cd "$work" && diff -rq -x '*.log' -x 'README.md' -x 'train_log*' -x 'summary*' \
    -x 'state*' -x '*.json' old/$name new/$name || true)
  for f in $(cd "$work/old/$name" && find . -name '*.json' ! -name 'state*'); do
    a=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k,None) for k in ("seconds","elapsed","time","started","wall_seconds")] if isinstance(d,dict) else None; print(json.dumps(d,sort_keys=True))' "$work/old/$name/$f" 2>/dev/null || cat "$work/old/$name/$f")
    b=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k,None) for k in ("seconds","elapsed","time","started","wall_seconds")] if isinstance(d,dict) else None; print(json.dumps(d,sort_keys=True))' "$work/new/$name/$f" 2>/dev/null || cat "$work/new/$name/$f")
    [ "$a" = "$b" ] || diffs="$diffs"$'\n'"$f differs"
  done
  if [ -z "${diffs//[$'\n']/}" ]; then echo "same bits: $name"; same=$((same + 1))
  else echo "DIFFER: $name:$diffs"; differ=$((differ + 1)); fi
done
on=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)
[ -n "$device" ] && on="$device: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "$same same, $differ differ ($on)"
[ $differ = 0 ]
