"""condenser.SentenceTransformer against sentence-transformers' stored embeddings, its keywords
and its errors."""
import json
import os
import shutil

import numpy as np
import pytest

import condenser
from conftest import MODEL, data, max_abs_diff


@pytest.fixture(scope="module")
def minilm():
    return condenser.SentenceTransformer("all-MiniLM-L6-v2")


def test_embeddings_equal_the_reference(minilm, fixture):
    e = fixture["embeddings"]
    got = minilm.encode(e["sentences"])
    assert got.dtype == np.float32 and got.flags["C_CONTIGUOUS"] and got.shape == (64, 384)
    assert max_abs_diff(got, e["vectors"]) <= 3e-7
    # one string: a 1-D array, as sentence-transformers returns it
    one = minilm.encode(e["sentences"][0])
    assert one.shape == (384,) and max_abs_diff(one, e["vectors"][0]) <= 3e-7


def prompted_folder(tmp_path, include_prompt):
    """MiniLM with a "query: " default prompt, its Pooling's include_prompt as given."""
    d = tmp_path / f"prompted-{include_prompt}"
    shutil.copytree(os.path.realpath(MODEL), d)
    json.dump({"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query",
               "similarity_fn_name": "cosine"}, open(d / "config_sentence_transformers.json", "w"))
    cfg = d / "1_Pooling" / "config.json"
    c = json.load(open(cfg))
    c["include_prompt"] = include_prompt
    json.dump(c, open(cfg, "w"))
    return str(d)


def test_prompts_as_sentence_transformers_applies_them(minilm, prompt_reference, tmp_path):
    ref = prompt_reference
    s = ref["sentences"]
    # a prompt given
    assert max_abs_diff(minilm.encode(s, prompt=ref["prompt"]), ref["include_prompt"]) <= 3e-7
    # the folder's default prompt, and its include_prompt false (the prompt left out of the pooling)
    with_default = condenser.SentenceTransformer(prompted_folder(tmp_path, True))
    assert with_default.default_prompt_name == "query"
    assert max_abs_diff(with_default.encode(s), ref["include_prompt"]) <= 3e-7
    excluded = condenser.SentenceTransformer(prompted_folder(tmp_path, False))
    assert max_abs_diff(excluded.encode(s), ref["exclude_prompt"]) <= 3e-7
    assert max_abs_diff(excluded.encode_query(s), ref["exclude_prompt"]) <= 3e-7
    # encode_document: the "document" prompt (empty here), not the default
    assert max_abs_diff(with_default.encode_document(s), minilm.encode(s)) == 0.0
    with pytest.raises(ValueError, match="Prompt name 'qeury' not found"):
        with_default.encode(s, prompt_name="qeury")


def test_the_api_a_user_relies_on(minilm):
    assert minilm.get_sentence_embedding_dimension() == 384
    assert minilm.max_seq_length == 256
    a = minilm.encode(["A plane is taking off.", "An air plane is taking off.", "A man plays a flute."],
                      normalize_embeddings=True)
    assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    sim = minilm.similarity(a, a)
    assert sim.shape == (3, 3) and sim[0, 1] > 0.9 > sim[0, 2]
    long = "word " * 400
    minilm.max_seq_length = 16
    try:
        short = minilm.encode(long)
    finally:
        minilm.max_seq_length = 256
    assert not np.allclose(short, minilm.encode(long))
    # bf16 as sentence-transformers asks for it: model_kwargs={"torch_dtype": ...}, name or dtype
    if "AVX512-BF16" in condenser.engine_info()[1] or "AMX" in condenser.engine_info()[1]:
        bf = condenser.SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2",
                                           model_kwargs={"torch_dtype": "bfloat16"})
        e = bf.encode(["A plane is taking off."])
        cos = float((e @ minilm.encode(["A plane is taking off."]).T)[0, 0])
        assert cos > 0.999


def test_keywords_are_never_silently_ignored(minilm):
    with pytest.raises(TypeError, match="did you mean 'normalize_embeddings'"):
        minilm.encode("x", normalise_embeddings=True)
    with pytest.raises(TypeError, match="output_value='token_embeddings' is not supported"):
        minilm.encode("x", output_value="token_embeddings")
    # a keyword of sentence-transformers at its default changes nothing and is taken
    assert minilm.encode("x", output_value="sentence_embedding").shape == (384,)
    with pytest.raises(ValueError, match="precision='int8'"):
        minilm.encode("x", precision="int8")
    with pytest.raises(TypeError, match="did you mean 'device'"):
        condenser.SentenceTransformer("all-MiniLM-L6-v2", devcie="cpu")
    with pytest.raises(TypeError, match="trust_remote_code=True is not supported"):
        condenser.SentenceTransformer("all-MiniLM-L6-v2", trust_remote_code=True)


def test_errors_are_python_exceptions_with_the_clis_message(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such model folder"):
        condenser.SentenceTransformer(str(tmp_path / "no-model"))
    bad = tmp_path / "bad.parquet"
    with pytest.raises(ValueError, match=r"train\.parquet: column 'nope': missing column"):
        condenser.encode(model="all-MiniLM-L6-v2", input=data("stsb/train.parquet"), columns="nope", out=str(bad),
                         show_progress_bar=False)
    with pytest.raises(FileNotFoundError):
        condenser.encode(model="all-MiniLM-L6-v2", input=str(tmp_path / "missing.parquet"), out=str(bad))
    assert not bad.exists()


def test_the_librarys_notes_go_to_logging(caplog):
    """A folder without a Pooling module is pooled by a default, and the note that says which
    reaches logging's `condenser` logger (where a program can route or silence it), not stderr
    alone."""
    import logging

    tiny = os.path.join(os.path.dirname(MODEL), "bert-tiny-mlm")
    with caplog.at_level(logging.WARNING, logger="condenser"):
        condenser.SentenceTransformer(tiny)
    notes = [r.getMessage() for r in caplog.records if r.name == "condenser"]
    assert any("no Pooling module" in n and n.startswith("note:") for n in notes), notes
