#!/usr/bin/env bash
# Lay out a fetched datasets/data folder as a mirror that `fetch.sh` reads elsewhere: DIR/<name>/<file>
# for every file datasets/manifest.sha256 names (real files, links followed), plus the manifest.
# Publish DIR on any static host (a release page, a bucket, a lab web server), then, on a machine
# without ../shared:  CONDENSER_DATA_MIRROR=https://host/path bash datasets/fetch.sh
#   bash datasets/mirror.sh DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -eq 1 ] || { echo "usage: bash datasets/mirror.sh DIR" >&2; exit 2; }
dir="$1"
manifest="$here/manifest.sha256"
mkdir -p "$dir"
n=0
while read -r sum rel; do
  [ -n "$rel" ] || continue
  src="$here/data/$rel"
  [ -f "$src" ] || { echo "mirror: $src is missing: run bash datasets/fetch.sh first" >&2; exit 1; }
  mkdir -p "$dir/$(dirname "$rel")"
  # copied under a temporary name and renamed: a mirror never holds a partial file
  cp -L "$src" "$dir/$rel.part" && mv "$dir/$rel.part" "$dir/$rel"
  n=$((n + 1))
done < "$manifest"
cp "$manifest" "$dir/manifest.sha256.part" && mv "$dir/manifest.sha256.part" "$dir/manifest.sha256"
# what is published must be what fetch.sh will check
(cd "$dir" && sha256sum --quiet --check manifest.sha256) ||
  { echo "mirror: files in $dir differ from $manifest (above): datasets/data is not the manifest's data" >&2; exit 1; }
echo "mirror: $n files and manifest.sha256 in $dir; publish it, then elsewhere:" \
  "CONDENSER_DATA_MIRROR=URL bash datasets/fetch.sh"
