#!/usr/bin/env python3
"""Corpus scale (issue 26): mining and search from stored embeddings, one process per figure,
wall time and peak RSS (GNU time %M), same machine, same run.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    python3 benches/search_bench.py [--sizes 100000 1000000] [--queries 10000] [--skip-torch]
        [--skip-mining] [--skip-exact] [--skip-ann] [--skip-1m] [--kinds ivf hnsw]
        [--faiss (pip install faiss-cpu)]

1. Mining Cranfield (225 queries' relevant pairs, 1,400 documents, all-MiniLM-L6-v2, 256 tokens):
   `condenser mine` embedding the corpus (today's way) against `encode` once and
   `mine --corpus-embeddings` (the mining step alone, the encode paid once per model); the rows
   must be equal.
2. Exact search, `condenser search --corpus-embeddings C --query-embeddings Q --top-k 10`, over
   synthetic clustered unit vectors (384 wide: 1,000 Gaussian cluster centres, points = centre +
   noise, normalised; queries drawn the same way), stated as synthetic; the reference is
   sentence-transformers' `util.semantic_search` (torch, all vectors in memory) on the same
   vectors at the sizes it fits.
3. The ANN indexes (`condenser index --kind ivf|hnsw`, then `search --index`): build time, peak
   RSS and size; recall@10 (top-10 runs) and recall@100 (top-100 runs) against exact search, and
   the speed-up per query (whole process, and the candidate search alone), at 25k, 50k and 100k
   real embeddings (10k queries and 100k corpus sentences of SNLI, MRPC, STS-B, RTE, MedQP, Brown
   and WikiText-2, all-MiniLM-L6-v2; 25k and 50k are prefixes of the shuffled 100k) and 1M
   synthetic vectors shaped like them (a Gaussian mixture fitted to the real 100k: 1,000 k-means
   centres and their pooled within-cluster covariance; stated as synthetic).
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


def write_store(path, vectors, ids_prefix, like=None):
    """`vectors` as an `encode` store, made as the store `like` says (else as synthetic)."""
    meta = {"model_fingerprint": "synthetic-clustered", "pooling": "synthetic", "normalize": True,
            "max_seq_length": 0, "dtype": "f32", "dim": vectors.shape[1], "columns": ["text"]}
    if like:
        meta = json.loads(pq.read_schema(like).metadata[b"condenser.embeddings"])
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


def sentences(tmp):
    """The real pool: distinct sentences of the local datasets, shuffled with seed 0."""
    import glob, random
    seen, pool = set(), []
    def add(t):
        t = " ".join(t.split())
        if len(t.split()) >= 4 and t.lower() not in seen:
            seen.add(t.lower()); pool.append(t)
    S = os.path.join(ROOT, "datasets/data")
    for name in ["snli/dev", "snli/test", "mrpc/train", "mrpc/test", "stsb/train", "stsb/dev",
                 "stsb/test", "rte/train", "rte/dev", "medqp/all"]:
        t = pq.read_table(f"{S}/{name}.parquet").to_pydict()
        for c in ("sentence1", "sentence2"):
            for x in t[c]: add(x)
    for f in sorted(glob.glob(os.path.join(ROOT, "datasets/brown/*.parquet"))):
        for x in pq.read_table(f).column("text").to_pylist(): add(x)
    for name in ["wikitext2/valid", "wikitext2/test"]:
        for para in pq.read_table(f"{S}/{name}.parquet").column("text").to_pylist():
            for x in re.split(r"(?<= \.) ", para): add(x)
    random.Random(0).shuffle(pool)
    return pool


def real_embeddings(cache):
    """(corpus store, query store) of the real pool, encoded once into `cache`."""
    c, q = os.path.join(cache, "c100k-emb.parquet"), os.path.join(cache, "q-emb.parquet")
    if not (os.path.exists(c) and os.path.exists(q)):
        os.makedirs(cache, exist_ok=True)
        pool = sentences(cache)
        for name, rows in (("q", pool[:10_000]), ("c100k", pool[10_000:110_000])):
            src = os.path.join(cache, f"{name}.parquet")
            ids = [f"s{i}" for i in range(len(rows))] if name == "q" else [f"s{i}" for i in range(10_000, 110_000)]
            pq.write_table(pa.table({"id": ids, "text": rows}), src)
            w, r, _ = timed([BIN, "encode", "--model", MODEL, "--input", src, "--out",
                             os.path.join(cache, f"{name}-emb.parquet")])
            print(f"  encoded {len(rows):,} sentences in {w:.0f} s")
    return c, q


def vectors(path):
    col = pq.read_table(path, columns=["embedding"]).column("embedding").combine_chunks()
    return col.values.to_numpy().reshape(len(col), -1)


def shaped_like(real, n, seed):
    """n unit vectors from a Gaussian mixture fitted to `real` (k-means centres, pooled
    within-cluster covariance)."""
    rng = np.random.default_rng(0)
    k = 1000
    cent = real[rng.choice(len(real), k, replace=False)].copy()
    for _ in range(8):
        a = np.concatenate([np.argmax(real[s:s + 20000] @ cent.T, 1) for s in range(0, len(real), 20000)])
        for j in range(k):
            m = real[a == j]
            if len(m): cent[j] = m.mean(0)
    res = real - cent[a]
    L = np.linalg.cholesky(res.T @ res / len(res) + 1e-8 * np.eye(real.shape[1])).astype(np.float32)
    p = np.bincount(a, minlength=k) / len(a)
    r = np.random.default_rng(seed)
    j = r.choice(k, n, p=p)
    x = np.empty((n, real.shape[1]), np.float32)
    for s in range(0, n, 100_000):
        z = r.standard_normal((min(100_000, n - s), real.shape[1]), dtype=np.float32)
        x[s:s + len(z)] = cent[j[s:s + len(z)]] + z @ L.T
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def lists(path):
    t = pq.read_table(path, columns=["query_id", "doc_id"]).to_pydict()
    out = {}
    for q, d in zip(t["query_id"], t["doc_id"]):
        out.setdefault(q, []).append(d)
    return out


def ann(tmp, skip_1m, kinds):
    print("\n## ANN indexes (IVF: 4 sqrt(n) lists, --probes calibrated at build to recall@10 0.98 on "
          "1,000 of the corpus's own vectors; HNSW: usearch, M 32, ef_construction 256, i8, "
          "--ef-search 128; candidates 2k scored exactly)")
    cache = os.path.join(ROOT, "out/ann")
    c100, q100 = real_embeddings(cache)
    real = vectors(c100)
    sets = []
    for n in (25_000, 50_000):
        c = os.path.join(tmp, f"r{n}.parquet")
        write_store(c, real[:n], "d", like=c100)
        sets.append((f"{n // 1000}k real (a subset)", c, q100))
    sets.append(("100k real (all-MiniLM-L6-v2 sentences)", c100, q100))
    if not skip_1m:
        c1m, q1m = os.path.join(tmp, "g1m.parquet"), os.path.join(tmp, "gq.parquet")
        write_store(c1m, shaped_like(real, 1_000_000, 1), "d")
        write_store(q1m, shaped_like(real, 10_000, 2), "q")
        sets.append(("1M synthetic, shaped like the real", c1m, q1m))
    print("| corpus | index | build s | build peak RSS MB | index MB | default breadth (recall@10 on own vectors) "
          "| k | exact s | exact RSS MB | search s | candidates s | RSS MB | recall@k | speed-up (process) "
          "| speed-up (candidates vs exact) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    exact = {}
    for name, c, q in sets:
        for kind in kinds:
            ix = os.path.join(tmp, f"ix.{kind}")
            wb, rb, log = timed([BIN, "index", "--kind", kind, "--corpus-embeddings", c, "--out", ix])
            size = os.path.getsize(ix) / 1e6
            cal = json.load(open(ix + ".json")).get("calibration")
            breadth = (f"--probes {cal['breadth']} ({cal['recall']:.4f})" if cal else "--ef-search 128")
            for k in (10, 100):
                run = lambda out, extra: timed([BIN, "search", "--corpus-embeddings", c, "--query-embeddings", q,
                                               "--top-k", str(k), "--out", out] + extra)
                ex, ax = os.path.join(tmp, f"exact-{name}-{k}.parquet"), os.path.join(tmp, "ann.parquet")
                if (name, k) not in exact:
                    exact[(name, k)] = run(ex, [])[:2]
                we, re_ = exact[(name, k)]
                wa, ra, log = run(ax, ["--index", ix])
                cand = float(re.search(r"\) in ([0-9.]+) s, scored exactly", log).group(1))
                e, a = lists(ex), lists(ax)
                rec = sum(len(set(e[x]) & set(a.get(x, []))) for x in e) / sum(len(v) for v in e.values())
                print(f"| {name} | {kind} | {wb:.1f} | {rb:.0f} | {size:.0f} | {breadth} | {k} | {we:.1f} | {re_:.0f} "
                      f"| {wa:.1f} | {cand:.2f} | {ra:.0f} | {rec:.4f} | {we / wa:.1f}x | {we / cand:.1f}x |", flush=True)
            os.remove(ix)


def faiss_ref(tmp, skip_1m):
    """faiss's IndexIVFFlat (pip faiss-cpu; what sentence-transformers' mine_hard_negatives uses
    with use_faiss) on the same vectors, lists and probes as `condenser index`'s IVF: build time,
    per-query search time (2 threads), recall@10 against exact search, peak RSS of the process."""
    import faiss, resource
    faiss.omp_set_num_threads(2)
    cache = os.path.join(ROOT, "out/ann")
    c100, q100 = real_embeddings(cache)
    real = vectors(c100)
    sets = [("100k real", real, vectors(q100), 1265, [64, 128, 192, 256])]
    if not skip_1m:
        sets.append(("1M synthetic", shaped_like(real, 1_000_000, 1), shaped_like(real, 10_000, 2), 4000, [8, 16, 24, 32]))
    print(f"\n## faiss {faiss.__version__} IndexIVFFlat (inner product), same vectors, lists and probes")
    print("| corpus | lists | build s | probes | search s (10k queries) | us/query | recall@10 |")
    print("|---|---|---|---|---|---|---|")
    for name, c, q, nlist, probes in sets:
        exact = np.concatenate([np.argpartition(-(q[s:s + 250] @ c.T), 10, axis=1)[:, :10].copy() for s in range(0, len(q), 250)])
        t = time.time()
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(c.shape[1]), c.shape[1], nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        index.train(c[rng.choice(len(c), min(len(c), 64 * nlist), replace=False)])
        index.add(c)
        build = time.time() - t
        for p in probes:
            index.nprobe = p
            t = time.time()
            _, found = index.search(q, 10)
            w = time.time() - t
            rec = np.mean([len(set(found[i]) & set(exact[i])) / 10 for i in range(len(q))])
            print(f"| {name} | {nlist} | {build:.1f} | {p} | {w:.2f} | {w / len(q) * 1e6:.0f} | {rec:.4f} |", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB (the whole bench process)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--skip-mining", action="store_true")
    ap.add_argument("--skip-exact", action="store_true", help="skip part 2 (exact search vs sentence-transformers)")
    ap.add_argument("--skip-ann", action="store_true")
    ap.add_argument("--skip-1m", action="store_true", help="the ANN index at 100k only")
    ap.add_argument("--kinds", nargs="+", choices=["ivf", "hnsw"], default=["ivf", "hnsw"],
                    help="the index kinds part 3 builds")
    ap.add_argument("--faiss", action="store_true", help="also faiss's IVF on the same vectors (pip faiss-cpu)")
    a = ap.parse_args()
    print(f"CPU: {cpu()}")
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "out")) as tmp:
        if not a.skip_mining:
            mining(tmp)
        if not a.skip_exact:
            search(tmp, a.sizes, a.queries, a.skip_torch)
        if not a.skip_ann:
            ann(tmp, a.skip_1m, a.kinds)
        if a.faiss:
            faiss_ref(tmp, a.skip_1m)


if __name__ == "__main__":
    main()
