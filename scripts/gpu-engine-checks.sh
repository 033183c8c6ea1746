#!/usr/bin/env bash
# On the lent GPU machine: the GPU engine's checks (issue 57, item 1) in one call. First the card
# tests of the `cuda` build's library test binary (the CUDA kernels through NVRTC, one layer
# and a whole BERT against the CPU engine: src/model/engine/gpu), then the training step against
# candle's graph (benches/gpu_engine.rs). Needs, beside this checkout: $STAGE/lib-tests.xz and
# $STAGE/gpu-engine-bench.xz (ENGINE_CHECKS=1 bash scripts/build-cuda.sh, here), the MiniLM
# folder and STSb train (carried as scripts/README.md plans). Writes to $OUT (default out/).
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${STAGE:-.cuda/dist}
out=${OUT:-out}
mkdir -p "$out"
# the CUDA 13 libraries from the machine's PyTorch (as scripts/cuda-env.sh finds them)
libs=$(python3 -c '
import glob, os, site
d = {os.path.dirname(p) for s in site.getsitepackages()
     for p in glob.glob(os.path.join(s, "nvidia", "**", "lib", "lib*.so*"), recursive=True)}
print(":".join(sorted(d)))')
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
for b in lib-tests $([ -n "${SKIP_BENCH:-}" ] || echo gpu-engine-bench); do
  [ -x "/tmp/$b" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$stage/$b.xz" "/tmp/$b"
  chmod +x "/tmp/$b"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# the tests that need a card: everything else in the binary runs on the CPU and is CI's
# (TESTS: other filters, e.g. the tests that need no model; CONDENSER_STRICT=gpu,blas makes a
# test that finds no card or no BLAS fail rather than say SKIPPED)
/tmp/lib-tests --test-threads 1 ${TESTS:-on_the_gpu sum_squares_of_known_values \
  one_launch_update_matches_the_cpu} 2>&1 | tee "$out/gpu-engine-tests${TESTS:+-some}.log" ||
  echo "some card tests FAILED (above); the bench runs all the same"
[ -n "${SKIP_BENCH:-}" ] && exit 0
/tmp/gpu-engine-bench "${MODEL:-datasets/model/all-MiniLM-L6-v2}" \
  "${STSB:-datasets/data/stsb/train.parquet}" "${STEPS:-20}" 2>&1 | tee "$out/gpu-engine-bench.log"
# the width-64 attention kernels (BERT-base's heads) timed too: MiniLM's weights read as 6 heads
# of 64 (the same shapes; a timing, not a model), so nothing more is carried. The folder (links
# and a config) is made in /tmp: links under $OUT do not come back
minilm=${MODEL:-datasets/model/all-MiniLM-L6-v2}
wide=/tmp/minilm-6x64
mkdir -p "$wide"
for f in "$minilm"/*; do [ "$(basename "$f")" = config.json ] || ln -sf "$(realpath "$f")" "$wide/"; done
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_attention_heads"] = 6
json.dump(c, open(sys.argv[2], "w"), indent=2)' "$minilm/config.json" "$wide/config.json"
/tmp/gpu-engine-bench "$wide" "${STSB:-datasets/data/stsb/train.parquet}" "${STEPS:-20}" 2>&1 |
  tee "$out/gpu-engine-bench-width64.log"
