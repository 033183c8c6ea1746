#!/usr/bin/env bash
# Build condenser with the `cuda` feature from registry packages alone: a CUDA toolkit assembled
# from NVIDIA's PyPI wheels into .cuda/ (git-ignored), then a release build for Hopper (sm_90).
# The binary lands in .cuda/dist/condenser (+ .xz, the form carried to the GPU machine).
#
# CUDA is pinned to 13.0: the lent machines' driver (580) runs CUDA 13.0, and their PyTorch
# (2.11+cu130) brings the 13.x cuBLAS/cuRAND/NVRTC libraries the binary loads at run time, so
# nothing large needs carrying. PTX from a newer nvcc may be refused by that driver.
#   bash scripts/build-cuda.sh            # download (once), assemble, build
#   CUDA_COMPUTE_CAP=80 bash scripts/build-cuda.sh   # another GPU generation
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/.cuda"
wheels="$root/wheels"
home="$root/toolkit"
mkdir -p "$wheels" "$home"

pins=(
  nvidia-cuda-nvcc==13.0.88
  nvidia-cuda-crt==13.0.88
  nvidia-nvvm==13.0.88
  nvidia-cuda-runtime==13.0.96
  nvidia-cuda-cccl==13.0.85
  nvidia-cublas==13.0.2.14
  nvidia-curand==10.4.0.35
  nvidia-cuda-nvrtc==13.0.88
)
for p in "${pins[@]}"; do
  name="${p%%==*}"
  ls "$wheels"/"${name//-/_}"-*.whl >/dev/null 2>&1 ||
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 \
      --python-version 3.12 --dest "$wheels" "$p"
done

# every wheel holds nvidia/cu13/{bin,include,lib,nvvm,...}: merge them into one CUDA_HOME
if [ ! -x "$home/bin/nvcc" ]; then
  tmp="$root/unpack"
  rm -rf "$tmp" && mkdir -p "$tmp"
  for w in "$wheels"/*.whl; do
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" "$tmp"
  done
  src=$(dirname "$(find "$tmp" -path '*/bin/nvcc' | head -1)")/..
  cp -a "$src"/. "$home"/
  rm -rf "$tmp"
  chmod +x "$home"/bin/* "$home"/nvvm/bin/* 2>/dev/null || true
  # wheels ship versioned sonames only; the linker wants the plain names
  for lib in "$home"/lib/lib*.so.*; do
    base="${lib%%.so.*}.so"
    [ -e "$base" ] || ln -s "$(basename "$lib")" "$base"
  done
  [ -d "$home/lib64" ] || ln -s lib "$home/lib64"
fi

# libcuda comes with the driver, not the toolkit: link against a stub holding the driver API's
# names (taken from cudarc's bindings); at run time the driver's libcuda.so.1 answers
if [ ! -e "$home/lib/stubs/libcuda.so" ]; then
  mkdir -p "$home/lib/stubs"
  cudarc=$(cargo metadata --features cuda --format-version 1 2>/dev/null |
    python3 -c 'import json, sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "cudarc"))')
  grep -ohE '\bfn cu[A-Za-z0-9_]+' "$(dirname "$cudarc")"/src/driver/sys/mod.rs |
    sed 's/fn //' | sort -u | sed 's/.*/void &(void) {}/' >"$root/cuda_stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$home/lib/stubs/libcuda.so" "$root/cuda_stub.c"
fi

export CUDA_HOME="$home" CUDA_PATH="$home" CUDA_ROOT="$home"
export PATH="$home/bin:$PATH"
export LIBRARY_PATH="$home/lib:$home/lib/stubs:${LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="$home/lib:${LD_LIBRARY_PATH:-}"
export CUDA_COMPUTE_CAP="${CUDA_COMPUTE_CAP:-90}"
nvcc --version | tail -2
# the GPU engine's kernels as NVRTC compiles them at run time, then nvcc's register and spill
# report for this generation (a spill is a kernel to rework on a card)
# (the four files joined as mod.rs's ENGINE_SOURCE joins them)
engine="$root/engine.cu"
cat src/model/engine/gpu/kernels/{common.cuh,rows.cu,attention.cu,heads.cu,optim.cu} >"$engine"
python3 scripts/nvrtc-check.py "$home/lib/libnvrtc.so" "$engine" "$CUDA_COMPUTE_CAP"
nvcc -cubin -arch="sm_$CUDA_COMPUTE_CAP" -Xptxas -v -o "$root/engine.cubin" "$engine" 2>&1 |
  grep -E "Compiling entry|registers|spill" | paste - - - | sed -E 's/ptxas info +: //g; s/ +/ /g'
cargo build --release --package condenser --features cuda --target-dir "$root/target"
mkdir -p "$root/dist"
cp "$root/target/release/condenser" "$root/dist/condenser"
strip "$root/dist/condenser"
# the kernels' PTX makes the binary ~70 MB, over what the GPU machine is sent at once; xz: ~9 MB
xz -T0 -6 -f -k "$root/dist/condenser"
echo "built $root/dist/condenser and condenser.xz (CUDA 13.0, sm_$CUDA_COMPUTE_CAP)"
# ENGINE_CHECKS=1: also the library's test binary and the GPU engine's step bench, stripped and
# xz-compressed (~8 and ~10 MB), for scripts/gpu-engine-checks.sh on the lent machine
if [ "${ENGINE_CHECKS:-0}" = 1 ]; then
  # (cargo bench builds with the bench profile, which is release's; it takes no --release)
  for what in "test --release --lib" "bench --bench gpu_engine"; do
    exe=$(cargo $what --features cuda --no-run --target-dir "$root/target" \
      --message-format json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    # the test harness of the library, or the bench (a binary target builds no test here)
    if m.get("executable") and "bin" not in m.get("target", {}).get("kind", []):
        print(m["executable"])' | tail -1)
    [ -x "$exe" ] || { echo "cargo $what built no executable" >&2; exit 1; }
    name=$([ "${what%% *}" = test ] && echo lib-tests || echo gpu-engine-bench)
    cp "$exe" "$root/dist/$name" && strip "$root/dist/$name"
    xz -T0 -6 -f "$root/dist/$name"
    echo "built $root/dist/$name.xz"
  done
fi
