#!/usr/bin/env bash
# On the lent GPU machine: issue 7's and issue 17's acceptance checks in one call
# (benches/gpu_checks.py). Needs .cuda/dist/condenser (scripts/build-cuda.sh, here) and datasets/
# there: both are carried (see scripts/README.md for the carry plan under the 64 MiB limit).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
ldd .cuda/dist/condenser | grep -E "cuda|cublas|curand|nvrtc" || true
python3 benches/gpu_checks.py --bin .cuda/dist/condenser --device "${DEVICE:-cuda}" --out "${OUT:-out/gpu-checks}" "$@"
