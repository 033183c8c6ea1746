#!/usr/bin/env bash
# On the lent GPU machine: issue 57's card checks in three calls made back to back (the machine
# stays warm 30 s after a call; each call may carry 64 MiB, so MiniLM's weights, the three
# binaries and the data come in three parts, prepared here by `bash scripts/gpu-card.sh pack`).
# Every call copies what it carried into /tmp/stage (kept while the machine is warm) and rebuilds
# from it what has arrived: the model folder, datasets/data/{stsb,mrpc}, datasets/lib, the
# binaries. Results go to $OUT.
#   call 1, carry .carry1: bash scripts/gpu-card.sh small   # the card tests that need no model
#   call 2, carry .carry2: bash scripts/gpu-card.sh engine  # item 1: every card test, the step bench
#   call 3, carry .carry3 and .whl: bash scripts/gpu-card.sh speed   # parity, then issue 80's
#                                    # peers on one clock (train_peers.py, encode_peers.py)
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
  for s in corpus queries qrels; do cp "$(realpath datasets/data/cranfield/$s.parquet)" ".carry3/cranfield-$s.parquet"; done
  # sentence-transformers' trainer needs `datasets`, which the card's image lacks
  mkdir -p .whl && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
  du -sh .carry1 .carry2 .carry3 .whl
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
if [ -f "$stage/cranfield-corpus.parquet" ]; then
  mkdir -p datasets/data/cranfield
  for s in corpus queries qrels; do cp "$stage/cranfield-$s.parquet" "datasets/data/cranfield/$s.parquet"; done
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
  TESTS="a_layer_on_the_gpu a_whole_bert_on_the_gpu train::adamw" STAGE=$stage SKIP_BENCH=1 \
    timeout 150 bash scripts/gpu-engine-checks.sh
  ;;
engine)
  STAGE=$stage timeout 280 bash scripts/gpu-engine-checks.sh
  ;;
speed)
  # (the GPU engine is the default on a card: encode, both trainings; fixture and STSb test
  # check the encode's numbers through it)
  timeout "${PARITY_S:-90}" bash scripts/gpu-checks.sh --fixture "$stage/reference-minilm.json" \
    --only ${ONLY:-fixture_parity stsb_test} 2>&1 | tee "$out/gpu-checks.log"
  # issue 80: every side on one clock (benches/train_peers.py, encode_peers.py). The card's image
  # has no `datasets` (sentence-transformers' trainer needs it): carried as wheels in .whl
  # (scripts/README.md), installed under /tmp/site
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  source scripts/cuda-env.sh
  timeout "${PEERS_S:-420}" python3 benches/train_peers.py --bin .cuda/dist/condenser --device cuda \
    --steps "${STEPS:-500}" --warmup 20 --runs "${RUNS:-5}" --workloads ${WORKLOADS:-stsb cranfield} \
    --tasks ${TASKS:-mnr ce} --out "$out" 2>&1 | tee "$out/train-peers.log"
  timeout "${ENCODE_S:-150}" python3 benches/encode_peers.py --bin .cuda/dist/condenser --device cuda \
    --runs "${RUNS:-5}" --batch 128 --out "$out" 2>&1 | tee "$out/encode-peers.log"
  for p in ${ANATOMY_PRECISIONS-}; do # (ANATOMY_PRECISIONS="f32 bf16" runs them)
    PRECISION=$p BATCHES="" timeout "${ANATOMY_S:-90}" bash scripts/gpu-step-anatomy.sh 2>&1 |
      tee "$out/step-anatomy-$p.log"
  done
  ;;
*) echo "unknown step $what" >&2; exit 2 ;;
esac
