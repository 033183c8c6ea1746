#!/usr/bin/env bash
# The Python package's tests (README's test command runs this after `cargo test --release`):
# build the wheel with maturin (sharing cargo's target/ with the crate, so only the extension
# compiles), install it into a virtual environment of its own, run pytest there. The wheel test
# installs it again into a fresh venv with no Rust toolchain on PATH.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CONDENSER_PY_VENV:-$root/target/py-venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "maturin>=1.9,<2" "pytest>=7" numpy
(cd "$root/python" && "$venv/bin/maturin" build --release --quiet -i "$venv/bin/python")
wheel="$(ls -t "$root"/target/wheels/condenser-*.whl | head -1)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
cd "$root/python/tests" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
