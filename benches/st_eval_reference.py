#!/usr/bin/env python3
"""sentence-transformers' own evaluators on the shared data, to cross-check `condenser evaluate`.

    pip install sentence-transformers
    python3 benches/st_eval_reference.py [--model datasets/model/all-MiniLM-L6-v2] > /tmp/st_eval.json
"""
import argparse, json, os
import pyarrow.parquet as pq
import torch
from sentence_transformers import SentenceTransformer
from sentence_transformers.sentence_transformer.evaluation import (BinaryClassificationEvaluator, EmbeddingSimilarityEvaluator,
                                              InformationRetrievalEvaluator)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
D = os.path.join(ROOT, "datasets", "data")


def pairs(path):
    t = pq.read_table(path).to_pydict()
    return t["sentence1"], t["sentence2"], t["label"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2"))
    a = ap.parse_args()
    torch.set_num_threads(2)
    m = SentenceTransformer(a.model, device="cpu")
    out = {}
    s1, s2, l = pairs(f"{D}/stsb/test.parquet")
    out["stsb-test"] = EmbeddingSimilarityEvaluator(s1, s2, l, similarity_fn_names=["cosine", "dot", "euclidean", "manhattan"])(m)
    for name, f in [("mrpc", "mrpc/test.parquet"), ("medqp", "medqp/all.parquet")]:
        s1, s2, l = pairs(f"{D}/{f}")
        out[name] = BinaryClassificationEvaluator(s1, s2, [int(x) for x in l])(m)
    q = pq.read_table(f"{D}/cranfield/queries.parquet").to_pydict()
    c = pq.read_table(f"{D}/cranfield/corpus.parquet").to_pydict()
    r = pq.read_table(f"{D}/cranfield/qrels.parquet").to_pydict()
    queries = dict(zip(q["id"], q["text"]))
    corpus = {i: (t + " " + x).strip() for i, t, x in zip(c["id"], c["title"], c["text"])}
    rel = {}
    for qi, di, s in zip(r["query_id"], r["doc_id"], r["score"]):
        if s > 0:
            rel.setdefault(qi, set()).add(di)
    out["cranfield"] = InformationRetrievalEvaluator(queries, corpus, rel, precision_recall_at_k=[1, 3, 5, 10, 100])(m)
    print(json.dumps({k: {kk: float(vv) for kk, vv in v.items()} for k, v in out.items()}, indent=1))


if __name__ == "__main__":
    main()
