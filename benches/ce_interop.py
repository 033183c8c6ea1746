#!/usr/bin/env python3
"""A cross-encoder saved by `condenser train-cross-encoder` loads in transformers'
AutoModelForSequenceClassification and gives condenser's scores (sigmoid of the logit).

    pip install sentence-transformers   # brings torch and transformers
    python3 benches/ce_interop.py out/ce-stsb
"""
import json, subprocess, sys, tempfile, os

import pyarrow as pa, pyarrow.parquet as pq
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ce = sys.argv[1]
pairs = [("A man is playing a guitar.", "A man plays the guitar."), ("A woman slices an onion.", "The stock market fell."),
         ("Two dogs run in the snow.", "Dogs are running through snow."), ("A cat sleeps.", "A kitten is sleeping on a sofa.")]
model = AutoModelForSequenceClassification.from_pretrained(ce).eval()
tok = AutoTokenizer.from_pretrained(ce)
with torch.no_grad():
    enc = tok([p[0] for p in pairs], [p[1] for p in pairs], padding=True, truncation=True, max_length=128, return_tensors="pt")
    theirs = torch.sigmoid(model(**enc).logits.squeeze(-1)).tolist()
with tempfile.TemporaryDirectory() as d:
    pq.write_table(pa.table({"sentence1": [p[0] for p in pairs], "sentence2": [p[1] for p in pairs]}), f"{d}/in.parquet")
    subprocess.run([f"{ROOT}/target/release/condenser", "augment", "--cross-encoder", ce, "--input", f"{d}/in.parquet",
                    "--sample", "none", "--out", f"{d}/out.parquet"], check=True, capture_output=True)
    ours = pq.read_table(f"{d}/out.parquet").column("label").to_pylist()
diff = max(abs(a - b) for a, b in zip(ours, theirs))
print(json.dumps({"transformers": theirs, "condenser": ours, "max_abs_diff": diff}, indent=1))
sys.exit(0 if diff < 1e-4 else 1)
