"""Every command as a function: the CLI's flags as keywords, the CLI's results, its summary as
a dict."""
import os
import subprocess

import numpy as np
import pytest

import condenser
from conftest import ROOT, data


def cli_binary():
    """The Rust binary `cargo build --release` made, else the wheel's `condenser` command."""
    b = os.environ.get("CONDENSER_BIN") or os.path.join(ROOT, "target", "release", "condenser")
    return [b] if os.path.exists(b) else ["condenser"]


TRAIN = dict(loss="mnr", columns="sentence1,sentence2", batch_size=16, max_seq_length=32, max_steps=6, seed=3)


def flags(kw):
    out = []
    for k, v in kw.items():
        out += [f"--{k.replace('_', '-')}", str(v)]
    return out


def test_train_biencoder_gives_the_clis_weights_bit_for_bit(small_model, tmp_path):
    train = data("stsb/dev.parquet")
    py = tmp_path / "py"
    s = condenser.train_biencoder(init=small_model, train=train, out=str(py), threads=2, show_progress_bar=False,
                                  **TRAIN)
    assert s["command"] == "train-biencoder"
    assert s["training"]["steps"] == 6 and s["training"]["examples_per_s"] > 0
    assert s["outputs"]["out"] == str(py) and s["model"] == str(py)
    assert "trained 6 steps" in s["printed"]
    cli = tmp_path / "cli"
    subprocess.run(cli_binary() + ["train-biencoder", "--init", small_model, "--train", train, "--out", str(cli),
                                   "--threads", "2"] + flags(TRAIN), check=True, capture_output=True)
    a = open(py / "model.safetensors", "rb").read()
    b = open(cli / "model.safetensors", "rb").read()
    assert a == b


def test_misspelt_and_missing_keywords_are_refused():
    with pytest.raises(TypeError, match=r"train_biencoder\(\) got an unexpected keyword argument 'trian'; did you mean 'train'"):
        condenser.train_biencoder(init="all-MiniLM-L6-v2", trian="x.parquet", loss="mnr", out="o")
    with pytest.raises(TypeError, match=r"missing required keyword argument.*'out'"):
        condenser.encode(model="all-MiniLM-L6-v2", input="x.parquet")
    with pytest.raises(ValueError, match="invalid value 'nope' for '--loss"):
        condenser.train_biencoder(init="all-MiniLM-L6-v2", train="x.parquet", loss="nope", out="o")
    assert "--max-steps" not in condenser.train_biencoder.__doc__ and "max_steps" in condenser.train_biencoder.__doc__


def test_encode_evaluate_and_read_back(small_model, tmp_path):
    out = tmp_path / "e.parquet"
    s = condenser.encode(model=small_model, input=data("stsb/test.parquet"), columns="sentence1", out=str(out),
                         show_progress_bar=False)
    assert s["rows"] == 1379 and s["dim"] == 384
    t = condenser.read_table(str(out), ["sentence1", "embedding"])
    m = condenser.SentenceTransformer(small_model)
    want = m.encode(t["sentence1"][:50], show_progress_bar=False)
    assert t["embedding"].shape == (1379, 384)
    assert np.abs(t["embedding"][:50] - want).max() <= 1e-6
    r = condenser.evaluate(model=[small_model], sts=[f"stsb-test={data('stsb/test.parquet')}"], out=str(tmp_path / "ev"),
                           show_progress_bar=False)
    assert r["results"], r
    # the recipe runner's dry run lists the steps, running nothing
    d = condenser.run_recipe(os.path.join(ROOT, "recipes", "augsbert-indomain.toml"), dry_run=True)
    assert d["command"] == "run" and "train-cross-encoder" in d["printed"]


def test_domain_overlap_gives_the_commands_numbers(tmp_path):
    import json
    files = {"stsb": data("stsb/train.parquet"), "mrpc": data("mrpc/train.parquet")}
    names, j = condenser.domain_overlap(files)
    assert names == ["stsb", "mrpc"] and j.shape == (2, 2) and np.allclose(np.diag(j), 1.0)
    out = tmp_path / "ov"
    subprocess.run(cli_binary() + ["domain-overlap", "--out", str(out)] + [f"{k}={v}" for k, v in files.items()],
                   check=True, capture_output=True)
    assert np.array_equal(j, np.array(json.load(open(out / "overlap.json"))["jaccard"]))
    # texts in memory count as the file's rows do
    t = condenser.read_table(files["stsb"], ["sentence1", "sentence2"])
    names2, j2 = condenser.domain_overlap({"stsb": t["sentence1"] + t["sentence2"], "mrpc": files["mrpc"]})
    assert names2 == names and np.array_equal(j2, j)
