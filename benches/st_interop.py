#!/usr/bin/env python3
"""sentence-transformers interop of a model folder condenser wrote (train-biencoder, train-nli):
sentence-transformers loads the folder unchanged and its embeddings of STSb test (both columns)
must match `condenser encode` of the same folder within 1e-5 (max absolute difference).

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    python3 benches/st_interop.py MODEL_DIR [--limit 500]

Exit status 1 when the difference is above the tolerance. CI does not install torch; run by hand.
"""
import argparse, os, subprocess, sys, tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets/data/stsb/test.parquet"))
    ap.add_argument("--limit", type=int, default=500)
    ap.add_argument("--tol", type=float, default=1e-5)
    a = ap.parse_args()
    t = pq.read_table(a.data).to_pydict()
    texts = (t["sentence1"] + t["sentence2"])[: a.limit]
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.parquet"), os.path.join(d, "out.parquet")
        pq.write_table(pa.table({"text": texts}), src)
        subprocess.run([os.path.join(ROOT, "target/release/condenser"), "encode", "--model", a.model,
                        "--input", src, "--out", dst], check=True, capture_output=True)
        ours = np.array(pq.read_table(dst)["embedding"].to_pylist(), dtype=np.float32)
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(a.model, device="cpu")
    theirs = st.encode(texts, batch_size=32, convert_to_numpy=True)
    diff = float(np.abs(ours - theirs).max())
    print(f"{len(texts)} sentences, dim {ours.shape[1]}, modules {[type(m).__name__ for m in st]}, "
          f"max_seq_length {st.max_seq_length}: max |condenser - sentence-transformers| = {diff:.2e} (tol {a.tol:g})")
    sys.exit(0 if diff <= a.tol else 1)


if __name__ == "__main__":
    main()
