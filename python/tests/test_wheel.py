"""The built wheel in a fresh virtual environment with no Rust toolchain on PATH: the `condenser`
command (and `python -m condenser`) and an encode run there."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, data


def wheel():
    found = sorted(glob.glob(os.path.join(ROOT, "target", "wheels", "condenser-*.whl")), key=os.path.getmtime)
    if not found:
        pytest.fail("no wheel in target/wheels: python/test.sh builds one (maturin build --release)")
    return found[-1]


def test_the_wheel_runs_in_a_fresh_venv_without_cargo(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # numpy from this environment's own wheel cache or index, the wheel itself offline
    subprocess.run(pip + ["numpy"], check=True)
    subprocess.run(pip + ["--no-index", "--no-deps", wheel()], check=True)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    if os.environ.get("CONDENSER_HOME"):
        env["CONDENSER_HOME"] = os.environ["CONDENSER_HOME"]
    assert shutil.which("cargo", path=env["PATH"]) is None and shutil.which("rustc", path=env["PATH"]) is None
    run = lambda *a: subprocess.run(list(a), env=env, cwd=tmp_path, capture_output=True, text=True)
    h = run(str(venv / "bin" / "condenser"), "--help")
    assert h.returncode == 0 and "train-biencoder" in h.stdout, h.stderr
    m = run(str(venv / "bin" / "python"), "-m", "condenser", "--version")
    assert m.returncode == 0 and "condenser" in m.stdout, m.stderr
    out = tmp_path / "e.parquet"
    e = run(str(venv / "bin" / "condenser"), "encode", "--model", "all-MiniLM-L6-v2", "--input",
            data("stsb/test.parquet"), "--columns", "sentence1", "--out", str(out))
    assert e.returncode == 0 and "wrote 1379 rows" in e.stdout, e.stderr
    py = run(str(venv / "bin" / "python"), "-c",
             "import condenser; m = condenser.SentenceTransformer('all-MiniLM-L6-v2'); "
             "print(m.encode(['A plane is taking off.']).shape)")
    assert py.returncode == 0 and "(1, 384)" in py.stdout, py.stderr
    bad = run(str(venv / "bin" / "condenser"), "encode", "--model", "no-such-model", "--input", "x", "--out", "y.parquet")
    assert bad.returncode == 1 and "error:" in bad.stderr
