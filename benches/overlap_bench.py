#!/usr/bin/env python3
"""Benchmark `condenser domain-overlap` against the article's Python method, in one run.

    bash datasets/fetch.sh && cargo build --release
    pip install tokenizers pyarrow && apt-get install time
    python3 benches/overlap_bench.py [--repeats 5] [--scale]

For stride 1 and 2 on stsb/train, mrpc/train, rte/train, medqp/all it runs both tools end to end
(process start to exit: reading Parquet, tokenizing, sets, Jaccard, writing the report), alternating,
and prints median wall time, the speed-up, peak RSS of each (from wait4), and checks that both give the
same sizes and Jaccard values. --scale also builds 1M- and 10M-sentence corpora from real text (Brown +
the shared pair datasets, repeated) and reports --approx 256 wall time and peak RSS on each: memory must
not grow with the corpus.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "datasets" / "data"
MODEL = ROOT / "datasets" / "model" / "all-MiniLM-L6-v2"
BIN = ROOT / "target" / "release" / "condenser"
DOMAINS = [("stsb", "stsb/train.parquet"), ("mrpc", "mrpc/train.parquet"), ("rte", "rte/train.parquet"), ("medqp", "medqp/all.parquet")]


def timed(cmd):
    """Run cmd; return (wall seconds, peak RSS MiB) of that command alone.

    Peak RSS comes from GNU time (apt-get install time), a tiny parent: Linux folds a child's
    pre-exec memory into its ru_maxrss, so measuring from this (large) Python process would charge
    our own memory to the command."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + [str(c) for c in cmd], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr}")
    return wall, int(p.stderr.strip().splitlines()[-1]) / 1024


def compare(stride, repeats):
    specs = [f"{n}={DATA / p}" for n, p in DOMAINS]
    with tempfile.TemporaryDirectory() as d:
        ours = [str(BIN), "domain-overlap", "--tokenizer", str(MODEL), "--stride", str(stride), "--out", d] + specs
        ref_out = os.path.join(d, "ref.json")
        ref = [sys.executable, str(ROOT / "benches" / "overlap_reference.py"), "--tokenizer", str(MODEL / "tokenizer.json"),
               "--stride", str(stride), "--out", ref_out] + specs
        t_ours, t_ref = [], []
        for _ in range(repeats):
            t_ours.append(timed(ours))
            t_ref.append(timed(ref))
        a = json.load(open(os.path.join(d, "overlap.json")))
        b = json.load(open(ref_out))
    same = a["sizes"] == b["sizes"] and all(abs(x - y) < 1e-12 for r, s in zip(a["jaccard"], b["jaccard"]) for x, y in zip(r, s))
    wo, wr = statistics.median(w for w, _ in t_ours), statistics.median(w for w, _ in t_ref)
    mo, mr = max(m for _, m in t_ours), max(m for _, m in t_ref)
    print(f"stride {stride}: condenser {wo:.3f} s, {mo:.0f} MiB | python {wr:.3f} s, {mr:.0f} MiB | "
          f"speed-up {wr / wo:.1f}x | same numbers: {same}")
    return same


def scale():
    import pyarrow as pa, pyarrow.parquet as pq
    texts = []
    for f in sorted((ROOT / "datasets" / "brown").glob("*.parquet")):
        texts += pq.read_table(f).column("text").to_pylist()
    for _, p in DOMAINS:
        t = pq.read_table(DATA / p)
        texts += t.column("sentence1").to_pylist() + t.column("sentence2").to_pylist()
    with tempfile.TemporaryDirectory() as d:
        for n in (1_000_000, 10_000_000):
            path = os.path.join(d, f"corpus{n}.parquet")
            w = pq.ParquetWriter(path, pa.schema([("text", pa.string())]), compression="zstd")
            done = 0
            while done < n:
                chunk = texts[: min(len(texts), n - done)]
                w.write_table(pa.table({"text": chunk}))
                done += len(chunk)
            w.close()
            cmd = [str(BIN), "domain-overlap", "--tokenizer", str(MODEL), "--approx", "256", "--out", d,
                   f"big={path}", f"stsb={DATA / 'stsb/train.parquet'}"]
            wall, rss = timed(cmd)
            print(f"--approx 256 on {n:>10,} sentences: {wall:.1f} s, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scale", action="store_true")
    a = ap.parse_args()
    ok = all([compare(s, a.repeats) for s in (1, 2)])
    if a.scale:
        scale()
    sys.exit(0 if ok else 1)
