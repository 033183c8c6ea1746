#!/usr/bin/env bash
# On the lent GPU machine: issue 57's card checks in three calls made back to back (the machine
# stays warm 30 s after a call; each call may carry 64 MiB, so MiniLM's weights, the three
# binaries and the data come in three parts, prepared here by `bash scripts/gpu-card.sh pack`).
# Every call copies what it carried into /tmp/stage (kept while the machine is warm) and rebuilds
# from it what has arrived: the model folder, datasets/data/{stsb,mrpc}, datasets/lib, the
# binaries. Results go to $OUT.
#   call 1, carry .carry1: bash scripts/gpu-card.sh small   # the card tests that need no model
#   call 2, carry .carry2: bash scripts/gpu-card.sh engine  # item 1: every card test, the step bench
#   call 3, carry .carry3: bash scripts/gpu-card.sh speed   # item 2 against sentence-transformers,
#                                                           # then the step anatomy on the engine
# `stage` in place of small or engine carries a part and runs nothing (a round that needs only
# speed's binary and data, or commands of its own after the three parts have arrived).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:?pack, small, engine or speed}
model=datasets/model/all-MiniLM-L6-v2

if [ "$what" = pack ]; then # here: split what travels into .carry1-3 (each under 64 MiB with the tree)
  set -e
  dist=.cuda/dist
  for f in lib-tests.xz gpu-engine-bench.xz condenser.xz; do
    [ -f "$dist/$f" ] || { echo "no $dist/$f: ENGINE_CHECKS=1 bash scripts/build-cuda.sh" >&2; exit 1; }
  done
  rm -rf .carry1 .carry2 .carry3 && mkdir -p .carry1/model .carry2 .carry3
  split -n 2 "$model/model.safetensors" .carry1/w.
  mv .carry1/w.ab .carry2/
  sha256sum <"$model/model.safetensors" | cut -d' ' -f1 >.carry2/w.sha256
  (cd "$model" && tar --exclude model.safetensors -cf - .) | tar -xf - -C .carry1/model
  cp "$dist/lib-tests.xz" .carry1/
  xz -T0 -6 -kc datasets/lib/libscipy_openblas.so >.carry1/libscipy_openblas.so.xz
  cp "$dist/gpu-engine-bench.xz" .carry2/
  for s in train dev test; do cp "$(realpath datasets/data/stsb/$s.parquet)" ".carry2/stsb-$s.parquet"; done
  cp "$(realpath datasets/data/mrpc/train.parquet)" .carry2/mrpc-train.parquet
  cp "$dist/condenser.xz" .carry3/
  cp ../shared/fixtures/reference-minilm.json .carry3/
  du -sh .carry1 .carry2 .carry3
  exit 0
fi

stage=/tmp/stage
out=${OUT:-out}
mkdir -p "$stage" "$out"
for c in .carry1 .carry2 .carry3; do [ -d "$c" ] && cp -r "$c"/. "$stage"/; done
unxz() { [ -f "$2" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; chmod +x "$2"; }
if [ -f "$stage/libscipy_openblas.so.xz" ]; then
  mkdir -p datasets/lib && unxz "$stage/libscipy_openblas.so.xz" datasets/lib/libscipy_openblas.so
  # the test binary looks for the bundled BLAS beside the tree it was built in: name it
  export CONDENSER_BLAS_LIB=$PWD/datasets/lib/libscipy_openblas.so
fi
if [ -f "$stage/w.aa" ] && [ -f "$stage/w.ab" ] && [ ! -f "$model/model.safetensors" ]; then
  mkdir -p "$model" && cp -r "$stage/model/." "$model/"
  cat "$stage/w.aa" "$stage/w.ab" >"$model/model.safetensors"
  [ "$(sha256sum <"$model/model.safetensors" | cut -d' ' -f1)" = "$(cat "$stage/w.sha256")" ] ||
    { echo "the weights arrived damaged" >&2; rm -f "$model/model.safetensors"; exit 1; }
fi
if [ -f "$stage/stsb-train.parquet" ]; then
  mkdir -p datasets/data/stsb datasets/data/mrpc
  for s in train dev test; do cp "$stage/stsb-$s.parquet" "datasets/data/stsb/$s.parquet"; done
  cp "$stage/mrpc-train.parquet" datasets/data/mrpc/train.parquet
fi
[ -f "$stage/condenser.xz" ] && mkdir -p .cuda/dist && unxz "$stage/condenser.xz" .cuda/dist/condenser
# a card test that cannot find its card or BLAS must fail, not say SKIPPED and pass
export CONDENSER_STRICT=gpu,blas

case "$what" in
stage) # only the staging above: a call that carries a part and runs nothing (then a later call's
  # own commands find the model, the data and the binaries in place)
  ls "$stage"
  ;;
small)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  TESTS="a_layer_on_the_card a_whole_bert_on_the_card adamw_cuda" STAGE=$stage SKIP_BENCH=1 \
    timeout 150 bash scripts/gpu-engine-checks.sh
  ;;
engine)
  STAGE=$stage timeout 280 bash scripts/gpu-engine-checks.sh
  ;;
speed)
  # (the GPU engine is the default on a card: encode, both trainings; fixture and STSb test
  # check the encode's numbers through it)
  timeout "${SPEED_S:-330}" bash scripts/gpu-checks.sh --fixture "$stage/reference-minilm.json" \
    --only ${ONLY:-train_throughput cross_encoder_step encode_throughput fixture_parity stsb_test} 2>&1 |
    tee "$out/gpu-checks.log"
  for p in ${ANATOMY_PRECISIONS-f32 bf16}; do # (ANATOMY_PRECISIONS="" skips them)
    PRECISION=$p BATCHES="" timeout "${ANATOMY_S:-90}" bash scripts/gpu-step-anatomy.sh 2>&1 |
      tee "$out/step-anatomy-$p.log"
  done
  ;;
*) echo "unknown step $what" >&2; exit 2 ;;
esac
