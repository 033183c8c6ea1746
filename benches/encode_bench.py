#!/usr/bin/env python3
"""Encode throughput: condenser vs sentence-transformers, same machine, same run, same sentences.

    bash datasets/fetch.sh && pip install sentence-transformers
    python3 benches/encode_bench.py [--threads 2] [--batch 32] [--dtype f32|bf16|both]

Both encode STSb test (sentence1 + sentence2, 2,758 sentences) with all-MiniLM-L6-v2 on CPU with the
same thread count; each reports its best of 3 timed passes after a warm-up. condenser's side is
`cargo bench --bench encode` (benches/encode.rs). bf16: sentence-transformers' model cast to
torch.bfloat16 (oneDNN's bf16 kernels: AMX on Intel, AVX512-BF16 on AMD Zen 4+), condenser with
DTYPE=bf16 (its Linears' products on the AVX512-BF16 kernel, f32 elsewhere).
"""
import argparse, json, os, subprocess, time

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def st_throughput(threads, batch, dtype):
    import torch
    from sentence_transformers import SentenceTransformer
    torch.set_num_threads(threads)
    m = SentenceTransformer(os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2"), device="cpu")
    if dtype == "bf16":
        m = m.to(torch.bfloat16)
    t = pq.read_table(os.path.join(ROOT, "datasets/data/stsb/test.parquet")).to_pydict()
    texts = t["sentence1"] + t["sentence2"]
    m.encode(texts[:64], batch_size=batch)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        m.encode(texts, batch_size=batch)
        best = min(best, time.perf_counter() - t0)
    return {"sentences": len(texts), "seconds": best, "sentences_per_s": len(texts) / best}


def ours(threads, batch, dtype):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), BATCH=str(batch), DTYPE=dtype)
    out = subprocess.run(["cargo", "bench", "--quiet", "--bench", "encode"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    a = ap.parse_args()
    for dtype in (["f32", "bf16"] if a.dtype == "both" else [a.dtype]):
        c = ours(a.threads, a.batch, dtype)
        s = st_throughput(a.threads, a.batch, dtype)
        print(json.dumps({"dtype": dtype, "condenser": c, "sentence_transformers": s,
                          "ratio": c["sentences_per_s"] / s["sentences_per_s"]}, indent=1), flush=True)
