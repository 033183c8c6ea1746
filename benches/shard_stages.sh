#!/usr/bin/env bash
# Per-shard throughput and peak memory of each sharded stage on real data (docs/distributed.md,
# "Scale on paper"). Each stage runs as shard 0 of N through /usr/bin/time; prints the CPU, the
# matmul library, seconds, units per second and peak RSS. Run from the repository root after
# `bash datasets/fetch.sh && cargo build --release`; CE=a cross-encoder folder (default: the
# transfer grid's STSb cross-encoder).
set -euo pipefail
B=${CONDENSER:-target/release/condenser}
M=datasets/model/all-MiniLM-L6-v2
D=datasets/data
CE=${CE:-out/transfer-grid/cross-encoders/stsb}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
measure() { # name units-label units command...
  local name=$1 label=$2 units=$3; shift 3
  /usr/bin/time -f '%e %M' -o "$W/time" "$@" > "$W/log" 2>&1 || { cat "$W/log"; exit 1; }
  read -r secs kb < "$W/time"
  # "log": the count the command printed (a shard's "(N rows)", mine's "N anchors")
  if [ "$units" = log ]; then
    units=$(grep -oE '^shard [0-9]+/[0-9]+ \([0-9]+|^[0-9]+ anchors' "$W/log" | grep -oE '[0-9]+( anchors)?$' | grep -oE '^[0-9]+' | head -1)
  fi
  grep -m1 'matmuls' "$W/log" > "$W/mm" || true
  printf '%-34s %8.1f s  %9.0f %s/s  peak %6.0f MB  %s\n' "$name" "$secs" \
    "$(echo "$units / $secs" | bc -l)" "$label" "$(echo "$kb / 1024" | bc -l)" "$(cut -c1-60 "$W/mm")"
}
measure "encode (STSb train, 2 columns)" texts 11498 \
  "$B" encode --model $M --input $D/stsb/train.parquet --columns sentence1,sentence2 --out "$W/e.parquet"
measure "augment label (MRPC train)" pairs 4076 \
  "$B" augment --cross-encoder "$CE" --input $D/mrpc/train.parquet --unlabeled --sample none --out "$W/a.parquet"
measure "mine shard 0/4 (Cranfield)" anchors log \
  "$B" mine --model $M --retrieval $D/cranfield --num-negatives 3 --out "$W/m.parquet" --shard 0/4
measure "mine whole (Cranfield)" anchors log \
  "$B" mine --model $M --retrieval $D/cranfield --num-negatives 3 --out "$W/m1.parquet"
measure "overlap exact (wikitext2+stsb+mrpc)" rows 12010 \
  "$B" domain-overlap --out "$W/o" w=$D/wikitext2/test.parquet s=$D/stsb/train.parquet m=$D/mrpc/train.parquet
measure "overlap --approx 1024 (same)" rows 12010 \
  "$B" domain-overlap --approx 1024 --out "$W/o2" w=$D/wikitext2/test.parquet s=$D/stsb/train.parquet m=$D/mrpc/train.parquet
measure "overlap --approx shard 0/4 (same)" rows log \
  "$B" domain-overlap --approx 1024 --out "$W/o3" --shard 0/4 w=$D/wikitext2/test.parquet s=$D/stsb/train.parquet m=$D/mrpc/train.parquet
