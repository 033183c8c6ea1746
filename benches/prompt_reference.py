#!/usr/bin/env python3
"""The stored sentence-transformers reference for prompts (python/tests/data/prompt_reference.json):
all-MiniLM-L6-v2 on 16 STSb test sentences with the prompt "query: " before each, once as
sentence-transformers pools it by default (include_prompt true) and once with its Pooling's
include_prompt false (the prompt's tokens, [CLS] included, left out of the mean).

    pip install sentence-transformers pyarrow && python3 benches/prompt_reference.py
"""
import json, os, shutil, tempfile

import pyarrow.parquet as pq
import sentence_transformers
from sentence_transformers import SentenceTransformer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
OUT = os.path.join(ROOT, "python/tests/data/prompt_reference.json")

t = pq.read_table(os.path.join(ROOT, "datasets/data/stsb/test.parquet")).to_pydict()
sentences = t["sentence1"][:16]
out = {"model": "all-MiniLM-L6-v2", "sentence_transformers": sentence_transformers.__version__,
       "prompt": "query: ", "sentences": sentences}
m = SentenceTransformer(MODEL, device="cpu")
out["include_prompt"] = m.encode(sentences, prompt="query: ").tolist()
with tempfile.TemporaryDirectory() as d:
    folder = os.path.join(d, "m")
    shutil.copytree(os.path.realpath(MODEL), folder)
    cfg = os.path.join(folder, "1_Pooling/config.json")
    c = json.load(open(cfg))
    c["include_prompt"] = False
    json.dump(c, open(cfg, "w"))
    m = SentenceTransformer(folder, device="cpu")
    out["exclude_prompt"] = m.encode(sentences, prompt="query: ").tolist()
json.dump(out, open(OUT, "w"))
print("wrote", OUT)
