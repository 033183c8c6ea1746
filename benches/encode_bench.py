#!/usr/bin/env python3
"""Inference throughput: condenser vs sentence-transformers, same machine, same run, same texts.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers pyarrow
    python3 benches/encode_bench.py [--threads 2] [--batch 32] [--dtype f32|bf16|both]
                                    [--workloads stsb,cranfield,ce] [--process] [--class avx2]

Workloads (benches/encode.rs is condenser's side, run as `cargo bench --bench encode`):
- stsb: STSb test sentences (both columns, 2,758), SentenceTransformer.encode;
- cranfield: Cranfield's 1,400 abstracts as "title text", max_seq_length 256;
- ce: STSb test pairs (1,379) through CrossEncoder.predict, on a cross-encoder made here from
  all-MiniLM-L6-v2's weights with a fresh one-label head (out/bench/ce-minilm; the scores do not
  matter for speed, both sides load the same folder).
Each side reports the median (and range) of 3 timed passes after a warm-up, in-process, with the same thread
count. bf16: sentence-transformers' model cast to torch.bfloat16 (oneDNN: AMX on Intel, AVX512-BF16
on AMD Zen 4+), condenser with DTYPE=bf16 (its Linears' products in bf16, f32 elsewhere).
--class avx2 holds both sides to the AVX2+FMA class (AMD Zen 2/3, Intel client) on a wider CPU, as
benches/train_memory_bench.py does (its CLASS_ENV): condenser with CONDENSER_ISA=avx2 and OpenBLAS's
Haswell kernel, PyTorch with ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2 and
ONEDNN_MAX_CPU_ISA=AVX2 (f32 only: neither side has a bf16 path on that class).
--process also times whole processes on a 10-sentence file: `condenser encode` (load, tokenizer,
forward, Parquet write) against a Python process that imports sentence-transformers and encodes.
"""
import argparse, json, os, subprocess, sys, tempfile, time

import pyarrow as pa
import pyarrow.parquet as pq

from train_memory_bench import CLASS_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
CE = os.path.join(ROOT, "out/bench/ce-minilm")


def stsb():
    t = pq.read_table(os.path.join(ROOT, "datasets/data/stsb/test.parquet")).to_pydict()
    return t["sentence1"], t["sentence2"]


def cranfield():
    rows = pq.read_table(os.path.join(ROOT, "datasets/data/cranfield/corpus.parquet")).to_pylist()
    out = []
    for r in rows:
        title, text = (r.get("title") or "").strip(), r["text"].strip()
        out.append(f"{title} {text}" if title else text)
    return out


def make_cross_encoder():
    """MiniLM's BERT with a fresh one-label head (seed 0), saved where both sides load it."""
    if os.path.exists(os.path.join(CE, "config.json")):
        return
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    torch.manual_seed(0)
    m = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=1)
    m.save_pretrained(CE)
    AutoTokenizer.from_pretrained(MODEL).save_pretrained(CE)


def median_of_3(f):
    """The median of 3 timed passes after a warm-up (never the best: issue 80), and their range."""
    f()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return sorted(times)[1], (min(times), max(times))


def reference(workload, threads, batch, dtype):
    import torch
    torch.set_num_threads(threads)
    if workload == "ce":
        from sentence_transformers import CrossEncoder
        m = CrossEncoder(CE, device="cpu")
        if dtype == "bf16":
            m = m.to(torch.bfloat16)
        a, b = stsb()
        pairs = list(zip(a, b))
        s, span = median_of_3(lambda: m.predict(pairs, batch_size=batch))
        return {"items": len(pairs), "seconds": s, "range_s": span, "items_per_s": len(pairs) / s}
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(MODEL, device="cpu")
    if dtype == "bf16":
        m = m.to(torch.bfloat16)
    if workload == "cranfield":
        m.max_seq_length = 256
        texts = cranfield()
    else:
        a, b = stsb()
        texts = a + b
    s, span = median_of_3(lambda: m.encode(texts, batch_size=batch))
    return {"items": len(texts), "seconds": s, "range_s": span, "items_per_s": len(texts) / s}


def ours(workload, threads, batch, dtype, cls="native"):
    env = dict(os.environ, **CLASS_ENV[cls][0], RAYON_NUM_THREADS=str(threads), BATCH=str(batch),
               DTYPE=dtype, WORKLOAD=workload, CE_MODEL=CE)
    out = subprocess.run(["cargo", "bench", "--quiet", "--bench", "encode"], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def timed(cmd, env=None):
    """The median of 5 wall times of a whole process, and its peak RSS (GNU time, MB)."""
    times, rss = [], 0
    for _ in range(5):
        with tempfile.NamedTemporaryFile(suffix=".time") as tf:
            t0 = time.perf_counter()
            subprocess.run(["/usr/bin/time", "-f", "%M", "-o", tf.name] + cmd, env=env,
                           check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
            rss = max(rss, int(open(tf.name).read().split()[-1]) / 1024)
    return sorted(times)[2], rss


def process_overhead(threads):
    a, _ = stsb()
    d = tempfile.mkdtemp()
    src = os.path.join(d, "ten.parquet")
    pq.write_table(pa.table({"text": a[:10]}), src)
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    c = timed([os.path.join(ROOT, "target/release/condenser"), "encode", "--model", MODEL,
               "--input", src, "--out", os.path.join(d, "out.parquet")], env)
    py = ("import torch, pyarrow.parquet as pq; torch.set_num_threads(%d); "
          "from sentence_transformers import SentenceTransformer; "
          "m = SentenceTransformer(%r, device='cpu'); "
          "m.encode(pq.read_table(%r).column('text').to_pylist())" % (threads, MODEL, src))
    p = timed([sys.executable, "-c", py], env)
    return {"condenser_encode_10_rows_s": c[0], "condenser_peak_rss_mb": c[1],
            "python_process_s": p[0], "python_peak_rss_mb": p[1]}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dtype", choices=["f32", "bf16", "both"], default="both")
    ap.add_argument("--workloads", default="stsb,cranfield,ce")
    ap.add_argument("--process", action="store_true")
    ap.add_argument("--class", dest="cls", choices=sorted(CLASS_ENV), default="native")
    a = ap.parse_args()
    if a.cls != "native" and a.dtype != "f32":
        ap.error(f"--class {a.cls} measures f32 only: pass --dtype f32")
    # before torch is imported: its kernels are chosen at import
    os.environ.update(CLASS_ENV[a.cls][1])
    make_cross_encoder()
    for dtype in (["f32", "bf16"] if a.dtype == "both" else [a.dtype]):
        for w in a.workloads.split(","):
            c = ours(w, a.threads, a.batch, dtype, a.cls)
            s = reference(w, a.threads, a.batch, dtype)
            print(json.dumps({"workload": w, "dtype": dtype, "class": a.cls, "condenser": c,
                              "sentence_transformers": s,
                              "ratio": c["items_per_s"] / s["items_per_s"],
                              # beside the ratio, the whole encode's share of the vector units'
                              # rate measured on this CPU in this precision (issue 57)
                              "of_measured_peak": c.get("of_measured_peak")}), flush=True)
    if a.process:
        print(json.dumps(process_overhead(a.threads)), flush=True)
