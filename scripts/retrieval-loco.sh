#!/bin/bash
# Leave one collection out (issue 55): recipes/retrieval-adaptation.toml on each development
# collection (Cranfield, CACM, MED, TIME) with test read for every candidate (`also`: their
# validation, as development collections), then `condenser loco`: each rule set on three of them
# and scored on the fourth's test half, and the rule shipped (least worst-case harm over all
# four, then the highest mean gain) into out/loco/report/loco.{md,json}.
#   COLLECTIONS="time med" scripts/retrieval-loco.sh   # some runs only (loco needs 3+ finished)
#   GPL=true ...                                       # also g: a cross-encoder trained on the
#                                                      # other collections' judgments, MarginMSE
#   DEVICE=cuda C=.cuda/dist/condenser ...             # on a GPU (one run at a time: four at
#                                                      # once ran out of its 80 GB, docs/gpu.md)
#   PARALLEL=true ...                                  # the collections at once (many CPU cores)
# Each run resumes where it stopped (the recipe's state); peak RSS in out/loco/<name>.time.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${C:-target/release/condenser}
ALL="cranfield cacm med time"
GPL=${GPL:-false}
DEVICE=${DEVICE:-cpu}
also=p,pw,b,bw,pb
label_free=p,pw
if [ "$GPL" = true ]; then also=$also,g; label_free=$label_free,g; fi
mkdir -p out/loco
one() {
  local c=$1 others timer=()
  others=$(for o in $ALL; do [ $o = $c ] || printf '%s ' $o; done)
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -v -o out/loco/$c.time)
  "${timer[@]}" $C run recipes/retrieval-adaptation.toml \
    --set data=datasets/data/$c --set name=$c --set out=out/loco/$c --set also=$also \
    --set gpl=$GPL --set sources="$others" --set device=$DEVICE > out/loco/$c.log 2>&1
}
for c in ${COLLECTIONS:-$ALL}; do
  if [ "${PARALLEL:-false}" = true ]; then one $c & else one $c; fi
done
# a run that failed stops the study here (its log says why), not at loco's missing report
failed=0
for job in $(jobs -p); do wait $job || failed=1; done
[ $failed = 0 ] || { echo "a run failed: see out/loco/*.log" >&2; exit 1; }
done_runs=()
for c in $ALL; do
  [ -f out/loco/$c/report/test/per_query.csv ] && done_runs+=(--collection $c=out/loco/$c)
done
$C loco "${done_runs[@]}" --label-free $label_free --out out/loco/report
