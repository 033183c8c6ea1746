#!/usr/bin/env python3
"""Corpus scale (issue 26): mining and search from stored embeddings, one process per figure,
wall time and peak RSS (GNU time %M), same machine, same run.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    python3 benches/search_bench.py [--sizes 100000 1000000] [--queries 10000] [--skip-torch]

1. Mining Cranfield (225 queries' relevant pairs, 1,400 documents, all-MiniLM-L6-v2, 256 tokens):
   `condenser mine` embedding the corpus (today's way) against `encode` once and
   `mine --corpus-embeddings` (the mining step alone, the encode paid once per model); the rows
   must be equal.
2. Exact search, `condenser search --corpus-embeddings C --query-embeddings Q --top-k 10`, over
   synthetic clustered unit vectors (384 wide: 1,000 Gaussian cluster centres, points = centre +
   noise, normalised; queries drawn the same way), stated as synthetic; the reference is
   sentence-transformers' `util.semantic_search` (torch, all vectors in memory) on the same
   vectors at the sizes it fits.
The CPU, its class and the matmul library are printed first.
"""
import argparse, json, os, re, subprocess, sys, tempfile, time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
CRAN = os.path.join(ROOT, "datasets/data/cranfield")
BIN = os.path.join(ROOT, "target/release/condenser")
ENV = dict(os.environ, RAYON_NUM_THREADS="2", OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")


def timed(cmd):
    """(wall s, peak RSS MB, stdout) of one process."""
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, env=ENV)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} failed:\n{p.stderr[-3000:]}")
    rss = int(p.stderr.strip().splitlines()[-1]) / 1024
    return wall, rss, p.stdout + p.stderr


def cpu():
    model = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read()).group(1)
    flags = open("/proc/cpuinfo").read()
    cls = ("AMX + AVX512-BF16" if "amx_bf16" in flags else
           "AVX-512 + AVX512-BF16" if "avx512_bf16" in flags else
           "AVX-512" if "avx512f" in flags else "AVX2 + FMA")
    return f"{model} ({os.cpu_count()} cores; class {cls})"


def table(path, cols):
    t = pq.read_table(path, columns=cols).to_pydict()
    return list(zip(*[t[c] for c in cols]))


def mining(tmp):
    print("\n## Mining Cranfield: embedding the corpus vs stored embeddings")
    args = ["--model", MODEL, "--retrieval", CRAN, "--max-seq-length", "256", "--num-negatives", "3"]
    fly = os.path.join(tmp, "fly.parquet")
    w_fly, r_fly, out = timed([BIN, "mine"] + args + ["--out", fly])
    emb = os.path.join(tmp, "cran-emb.parquet")
    w_enc, r_enc, _ = timed([BIN, "encode", "--model", MODEL, "--input", CRAN,
                             "--max-seq-length", "256", "--out", emb])
    st = os.path.join(tmp, "stored.parquet")
    w_st, r_st, _ = timed([BIN, "mine"] + args + ["--corpus-embeddings", emb, "--out", st])
    cols = ["anchor", "positive", "negative_1", "negative_2", "negative_3"]
    same = table(fly, cols) == table(st, cols)
    print(next(l for l in out.splitlines() if " anchors, " in l))
    print("| run | wall s | peak RSS MB |\n|---|---|---|")
    print(f"| mine, embedding the corpus | {w_fly:.1f} | {r_fly:.0f} |")
    print(f"| encode the corpus once | {w_enc:.1f} | {r_enc:.0f} |")
    print(f"| mine --corpus-embeddings | {w_st:.1f} | {r_st:.0f} |")
    print(f"speed-up of mining from stored embeddings: {w_fly / w_st:.1f}x; same negatives row for row: {same}")


def clustered(n, dim, seed, centres):
    rng = np.random.default_rng(seed)
    x = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, dim), dtype=np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def write_store(path, vectors, ids_prefix):
    meta = {"model_fingerprint": "synthetic-clustered", "pooling": "synthetic", "normalize": True,
            "max_seq_length": 0, "dtype": "f32", "dim": vectors.shape[1], "columns": ["text"]}
    n, dim = vectors.shape
    writer = None
    for s in range(0, n, 65536):
        v = vectors[s:s + 65536]
        arr = pa.FixedSizeListArray.from_arrays(pa.array(v.reshape(-1), pa.float32()), dim)
        ids = pa.array([f"{ids_prefix}{i}" for i in range(s, s + len(v))])
        t = pa.table({"id": ids, "text": ids, "embedding": arr})
        t = t.replace_schema_metadata({"condenser.embeddings": json.dumps(meta)})
        if writer is None:
            writer = pq.ParquetWriter(path, t.schema, compression="zstd")
        writer.write_table(t)
    writer.close()


def search(tmp, sizes, nq, skip_torch):
    print(f"\n## Exact search, {nq:,} queries, top 10, synthetic clustered unit vectors (384 wide)")
    dim = 384
    centres = np.random.default_rng(0).standard_normal((1000, dim)).astype(np.float32)
    q = clustered(nq, dim, 1, centres)
    qpath = os.path.join(tmp, "q.parquet")
    write_store(qpath, q, "q")
    print("| corpus | condenser search s | peak RSS MB | sentence-transformers semantic_search s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for n in sizes:
        c = clustered(n, dim, 2, centres)
        cpath = os.path.join(tmp, f"c{n}.parquet")
        write_store(cpath, c, "d")
        np.save(os.path.join(tmp, f"c{n}.npy"), c)
        del c
        out = os.path.join(tmp, f"run{n}.parquet")
        w, r, log = timed([BIN, "search", "--corpus-embeddings", cpath, "--query-embeddings", qpath,
                         "--top-k", "10", "--out", out])
        ref = ("skipped", "")
        if not skip_torch:
            code = (
                "import numpy as np, torch, sys\n"
                "from sentence_transformers import util\n"
                "torch.set_num_threads(2)\n"
                f"c = torch.from_numpy(np.load('{tmp}/c{n}.npy')); q = torch.from_numpy(np.load('{tmp}/q.npy'))\n"
                "util.semantic_search(q, c, top_k=10)\n")
            np.save(os.path.join(tmp, "q.npy"), q)
            wt, rt, _ = timed([sys.executable, "-c", code])
            ref = (f"{wt:.1f}", f"{rt:.0f}")
        print(f"| {n:,} | {w:.1f} | {r:.0f} | {ref[0]} | {ref[1]} |")
        if n == sizes[0]:
            print("  " + next(l for l in log.splitlines() if l.startswith("CPU matmuls")))
        os.remove(os.path.join(tmp, f"c{n}.npy"))
        os.remove(cpath)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-mining", action="store_true")
    a = ap.parse_args()
    print(f"CPU: {cpu()}")
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "out")) as tmp:
        if not a.skip_mining:
            mining(tmp)
        search(tmp, a.sizes, a.queries, a.skip_torch)


if __name__ == "__main__":
    main()
