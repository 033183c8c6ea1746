# Sourced on the lent GPU machine: puts the CUDA 13 libraries the binary links (cuBLAS, cuBLASLt,
# cuRAND, NVRTC) on the library path, taken from the machine's PyTorch install, and unpacks the
# carried binary (.cuda/dist/condenser.xz, see scripts/README.md) if needed.
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
