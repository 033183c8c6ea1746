#!/usr/bin/env bash
# On the lent GPU machine: issue 7's acceptance checks in one call (benches/gpu_checks.py), with
# the CUDA 13 libraries the binary links (cuBLAS, cuBLASLt, cuRAND, NVRTC) taken from the machine's
# PyTorch install. Needs .cuda/dist/condenser (scripts/build-cuda.sh, here) and datasets/ there:
# both are carried (see scripts/README.md for the carry plan under the 64 MiB limit).
set -euo pipefail
cd "$(dirname "$0")/.."
libs=$(python3 - <<'PY'
import glob, os, site
dirs = set()
for sp in site.getsitepackages():
    for so in glob.glob(os.path.join(sp, "nvidia", "**", "lib", "lib*.so*"), recursive=True):
        dirs.add(os.path.dirname(so))
print(":".join(sorted(dirs)))
PY
)
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
[ -x .cuda/dist/condenser ] ||
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    .cuda/dist/condenser.xz .cuda/dist/condenser
chmod +x .cuda/dist/condenser
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
ldd .cuda/dist/condenser | grep -E "cuda|cublas|curand|nvrtc" || true
python3 benches/gpu_checks.py --bin .cuda/dist/condenser --device "${DEVICE:-cuda}" --out "${OUT:-out/gpu-checks}" "$@"
