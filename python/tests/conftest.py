"""What the Python tests share: the repository's data (datasets/fetch.sh), the stored references
and small models made from all-MiniLM-L6-v2."""
import json
import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "datasets", "data")
MODEL = os.path.join(ROOT, "datasets", "model", "all-MiniLM-L6-v2")
FIXTURE = os.path.join(DATA, "fixtures", "reference-minilm.json")
PROMPTS = os.path.join(os.path.dirname(__file__), "data", "prompt_reference.json")


def need(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: run `bash datasets/fetch.sh` first")
    return path


def data(rel):
    return need(os.path.join(DATA, rel))


@pytest.fixture(scope="session")
def fixture():
    return json.load(open(need(FIXTURE)))


@pytest.fixture(scope="session")
def prompt_reference():
    return json.load(open(need(PROMPTS)))


def minilm_layers(parent, layers):
    """all-MiniLM-L6-v2 cut to its first `layers` layers (the rest of its weights unused)."""
    dest = os.path.join(parent, f"minilm-{layers}")
    shutil.copytree(os.path.realpath(need(MODEL)), dest)
    cfg = os.path.join(dest, "config.json")
    c = json.load(open(cfg))
    c["num_hidden_layers"] = layers
    json.dump(c, open(cfg, "w"))
    return dest


@pytest.fixture(scope="session")
def small_model(tmp_path_factory):
    return minilm_layers(str(tmp_path_factory.mktemp("models")), 2)


def max_abs_diff(a, b):
    import numpy as np
    return float(np.abs(np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)).max())
