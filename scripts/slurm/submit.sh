#!/usr/bin/env bash
# Submit a sharded stage as a Slurm job array of N tasks and its merge as a dependent job; prints
# the merge job's id. The stage's --out must be the last two arguments.
#   bash scripts/slurm/submit.sh 4 encode --model M --input X --columns text --out emb.parquet
#   bash scripts/slurm/submit.sh 16 domain-overlap --approx 1024 a=A b=B --out out/overlap
#   bash scripts/slurm/submit.sh 8 augment --cross-encoder CE --input P --unlabeled --out silver.parquet
#   bash scripts/slurm/submit.sh 8 mine --model M --retrieval DIR --split train --out negatives.parquet
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
n=$1; shift
out=${*: -1}
array=$(sbatch --parsable --array=0-$((n - 1)) --export=ALL "$here/shard.sbatch" "$@")
merge=$(sbatch --parsable --dependency=afterok:"$array" --export=ALL "$here/merge.sbatch" "$out")
echo "array job $array ($n shards of $1), merge job $merge -> $out" >&2
echo "$merge"
