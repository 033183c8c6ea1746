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
#   SPLITS="0 1" ...                                   # each collection split twice (the recipe's
#                                                      # split_seed; issue 82): out/loco/<name>-s<k>,
#                                                      # loco's NAME/s<k>, a collection's splits left
#                                                      # out together (default: "0", as before)
# Each run resumes where it stopped (the recipe's state); peak RSS in out/loco/<name>.time.
# A finished run's figures that loco reads (report/report.json, report/test/{results,per_query}.csv) and its
# time are kept in docs/results/loco-runs/<name>[-s<k>]/, committed: a study longer than a session
# resumes on a new checkout from them (a kept run is not rerun; KEPT=none reruns everything), and
# loco over them reproduces the shipped rule without rerunning any (COLLECTIONS=none).
#   SPLITS="0 1" COLLECTIONS=none SHIP=true ...          # the shipped rules from the eight kept
#                                                      # halves into recipes/retrieval-adaptation-rules.json
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
SPLITS=${SPLITS:-0}
KEPT=${KEPT:-docs/results/loco-runs}
# split 0 keeps the folder name it always had (out/loco/<name>), so earlier runs resume
dir_of() { if [ "$2" = 0 ]; then echo out/loco/$1; else echo out/loco/$1-s$2; fi; }
# where loco reads a run: its out folder once finished, else the kept copy
finished() {
  local d=$1 kept=$KEPT/$(basename $1)
  if [ -f $d/report/test/results.csv ]; then echo $d
  elif [ -f $kept/report/test/results.csv ]; then echo $kept; fi
}
keep() {
  local d=$1 kept=$KEPT/$(basename $1)
  [ "$KEPT" = none ] && return
  mkdir -p $kept/report/test
  cp $d/report/report.json $d/report/report.md $kept/report/
  cp $d/report/test/results.csv $d/report/test/per_query.csv $kept/report/test/
  if [ -f $d.time ]; then
    grep -E "Elapsed|Maximum resident" $d.time > $kept/time.txt
    (uname -m; grep -m1 "model name" /proc/cpuinfo; nproc) >> $kept/time.txt
  fi
}
one() {
  local c=$1 k=$2 others timer=() d
  d=$(dir_of $c $k)
  if [ "$KEPT" != none ] && [ "$(finished $d)" = $KEPT/$(basename $d) ]; then
    echo "$d: kept in $KEPT, not rerun" >&2; return
  fi
  others=$(for o in $ALL; do [ $o = $c ] || printf '%s ' $o; done)
  # timed into .time.new, kept as .time only where some step ran: a rerun of a finished run
  # (every step skipped) must not replace the run's own time with its 1-second check
  [ -x /usr/bin/time ] && timer=(/usr/bin/time -v -o $d.time.new)
  "${timer[@]}" $C run recipes/retrieval-adaptation.toml \
    --set data=datasets/data/$c --set name=$c --set out=$d --set also=$also \
    --set split_seed=$k --set gpl=$GPL --set sources="$others" --set device=$DEVICE > $d.log.new 2>&1
  if grep -q "^\[[0-9]*/[0-9]*\] .*: done, skipped$" $d.log.new && \
     ! grep -q "^\[[0-9]*/[0-9]*\] " <(grep -v ": done, skipped$" $d.log.new); then
    rm -f $d.time.new $d.log.new
  else
    [ -f $d.time.new ] && mv $d.time.new $d.time
    mv $d.log.new $d.log
  fi
  keep $d
}
runs=${COLLECTIONS:-$ALL}
[ "$runs" = none ] && runs=
for k in $SPLITS; do
  for c in $runs; do
    if [ "${PARALLEL:-false}" = true ]; then one $c $k & else one $c $k; fi
  done
done
# a run that failed stops the study here (its log says why), not at loco's missing report
failed=0
for job in $(jobs -p); do wait $job || failed=1; done
[ $failed = 0 ] || { echo "a run failed: see out/loco/*.log" >&2; exit 1; }
done_runs=()
for k in $SPLITS; do
  for c in $ALL; do
    d=$(finished $(dir_of $c $k))
    name=$c; [ "$SPLITS" = 0 ] || name=$c/s$k
    [ -n "$d" ] && done_runs+=(--collection $name=$d)
  done
done
$C loco "${done_runs[@]}" --label-free $label_free --out out/loco/report
if [ "${SHIP:-false}" = true ]; then
  # a rule shipped from fewer runs than asked for would pass for the whole study: refused
  want=$(( $(wc -w <<<"$SPLITS") * $(wc -w <<<"$ALL") ))
  if [ $(( ${#done_runs[@]} / 2 )) -ne $want ]; then
    echo "SHIP=true: loco ran on $(( ${#done_runs[@]} / 2 )) finished runs of the $want asked for" \
      "(SPLITS=\"$SPLITS\" over $ALL); recipes/retrieval-adaptation-rules.json left as it was" >&2
    exit 1
  fi
  # through a temporary file, renamed: the recipe never reads half a rule file
  cp out/loco/report/loco.json recipes/retrieval-adaptation-rules.json.tmp
  mv recipes/retrieval-adaptation-rules.json.tmp recipes/retrieval-adaptation-rules.json
  echo "shipped out/loco/report/loco.json as recipes/retrieval-adaptation-rules.json" >&2
fi
