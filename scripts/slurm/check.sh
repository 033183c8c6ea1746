#!/usr/bin/env bash
# The Slurm check: 4-task arrays of `encode` and `domain-overlap --approx` on real data through
# sbatch, each merged by a dependent job, compared with the single run. Run from the repository
# root after `bash datasets/fetch.sh`, `cargo build --release` and scripts/slurm/setup.sh.
set -euo pipefail
root=$(pwd)
export CONDENSER=${CONDENSER:-$root/target/release/condenser}
work=${1:-$root/out/slurm-check}
rm -rf "$work"; mkdir -p "$work"; cd "$work"
model=$root/datasets/model/all-MiniLM-L6-v2
data=$root/datasets/data
enc=(encode --model "$model" --input "$data/stsb/train.parquet" --columns sentence1,sentence2)
ovl=(domain-overlap --approx 1024 --tokenizer "$model" stsb="$data/stsb/train.parquet"
     mrpc="$data/mrpc/train.parquet" rte="$data/rte/train.parquet" medqp="$data/medqp/all.parquet"
     wikitext2="$data/wikitext2/test.parquet")
t0=$(date +%s)
m1=$(bash "$root/scripts/slurm/submit.sh" 4 "${enc[@]}" --out "$work/emb.parquet")
m2=$(bash "$root/scripts/slurm/submit.sh" 4 "${ovl[@]}" --out "$work/overlap")
squeue
# wait for both merges to leave the queue, then check they completed
while squeue -h -j "$m1,$m2" 2>/dev/null | grep -q .; do sleep 2; done
t1=$(date +%s)
for j in $m1 $m2; do
  state=$(scontrol show job "$j" 2>/dev/null | grep -o 'JobState=[A-Z]*' || true)
  echo "merge job $j: $state"
  [ "$state" = "JobState=COMPLETED" ] || { cat slurm-*.out; exit 1; }
done
echo "slurm arrays + merges: $((t1 - t0)) s"
echo "single runs for comparison:"
"$CONDENSER" "${enc[@]}" --out "$work/single-emb.parquet" | head -1
"$CONDENSER" "${ovl[@]}" --out "$work/single-overlap" > /dev/null
cmp "$work/overlap/overlap.json" "$work/single-overlap/overlap.json"
echo "overlap.json: the merged 4-shard sketch report is identical to the single run's"
python3 - "$work/emb.parquet" "$work/single-emb.parquet" <<'PY'
import sys, pyarrow.parquet as pq
a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
assert a.equals(b), "merged encode differs from the single run"
print(f"encode: merged 4 shards = single run, {a.num_rows} rows x {a.num_columns} columns, every float equal")
PY
ls "$work"/emb.shard-*.json | wc -l | xargs echo "shard manifests:"
