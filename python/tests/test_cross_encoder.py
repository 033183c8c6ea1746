"""condenser.CrossEncoder: augment's labels, sentence-transformers' predict and rank."""
import numpy as np
import pytest

import condenser
from conftest import data


@pytest.fixture(scope="module")
def cross_encoder(small_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("ce") / "ce"
    condenser.train_cross_encoder(model=small_model, train=data("stsb/dev.parquet"), out=str(out), max_steps=3,
                                  show_progress_bar=False)
    return str(out)


def test_predict_gives_augments_labels(cross_encoder, tmp_path):
    out = tmp_path / "silver.parquet"
    condenser.augment(cross_encoder=cross_encoder, input=data("stsb/test.parquet"), columns="sentence1,sentence2",
                      sample="random", top_k=1, out=str(out), show_progress_bar=False)
    t = condenser.read_table(str(out))
    assert len(t["sentence1"]) > 1379
    ce = condenser.CrossEncoder(cross_encoder)
    got = ce.predict(list(zip(t["sentence1"], t["sentence2"])), show_progress_bar=False)
    assert got.shape == (len(t["sentence1"]),) and got.dtype == np.float32
    assert np.abs(got - t["label"]).max() <= 1e-7
    one = ce.predict((t["sentence1"][0], t["sentence2"][0]))
    assert abs(float(one) - t["label"][0]) <= 1e-7


def test_rank_as_sentence_transformers(cross_encoder):
    ce = condenser.CrossEncoder(cross_encoder)
    docs = ["A man is playing a flute.", "A plane is taking off.", "An air plane is taking off."]
    r = ce.rank("A plane is taking off.", docs, top_k=2, return_documents=True)
    scores = ce.predict([("A plane is taking off.", d) for d in docs])
    best = list(np.argsort(-scores)[:2])
    assert [x["corpus_id"] for x in r] == best
    assert set(r[0]) == {"corpus_id", "score", "text"} and r[0]["text"] == docs[best[0]]
    with pytest.raises(TypeError, match="did you mean 'batch_size'"):
        ce.predict([("a", "b")], batchsize=4)
