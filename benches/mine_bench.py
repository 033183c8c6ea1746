#!/usr/bin/env python3
"""Hard-negative mining: `condenser mine` vs sentence-transformers' `mine_hard_negatives`, same
machine, same run, same model, pairs, corpus and settings, CPU with 2 threads; wall time of each
and whether they chose the same negatives.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    python3 benches/mine_bench.py [--pairs DIR] [--cross-encoder CE_DIR] [--num-negatives 3]

The pairs are the (query, relevant document) pairs of a retrieval folder's train split
(default: Cranfield split by `condenser split --train-queries 100`), in the order condenser reads
them; the corpus is the folder's corpus. Both sides embed anchors and corpus, search exactly and
take the top `num_negatives` non-positive candidates (n-tuple output); with --cross-encoder both
rescore the candidates and drop those within --absolute-margin of the hardest positive.
"""
import argparse, os, subprocess, tempfile, time

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
BIN = os.path.join(ROOT, "target/release/condenser")


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, check=True,
                          env=dict(os.environ, RAYON_NUM_THREADS="2")).stdout


def negatives(path):
    t = pq.read_table(path).to_pydict()
    keys = sorted(k for k in t if k.startswith("negative"))
    return [(a, p, tuple(t[k][i] for k in keys)) for i, (a, p) in enumerate(zip(t["anchor"], t["positive"]))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", help="retrieval folder with qrels/train (default: Cranfield split here)")
    ap.add_argument("--cross-encoder")
    ap.add_argument("--absolute-margin", type=float, default=0.0)
    ap.add_argument("--num-negatives", type=int, default=3)
    ap.add_argument("--snli", action="store_true",
                    help="short texts instead: SNLI dev entailment pairs (premise, hypothesis), corpus = the hypotheses")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    if a.snli:
        import pyarrow as pa
        t = pq.read_table(os.path.join(ROOT, "datasets/data/snli/dev.parquet")).to_pydict()
        keep = [i for i, l in enumerate(t["label"]) if l == 0]
        pairs = {"anchor": [t["sentence1"][i] for i in keep], "positive": [t["sentence2"][i] for i in keep]}
        src = os.path.join(tmp, "snli-pairs.parquet")
        pq.write_table(pa.table(pairs), src)
        return compare(a, tmp, ["--input", src], pairs, None)
    folder = a.pairs
    if folder is None:
        folder = os.path.join(tmp, "cranfield")
        run(["split", "--retrieval", os.path.join(ROOT, "datasets/data/cranfield"), "--train-queries", "100",
             "--out", folder])
    return compare(a, tmp, ["--retrieval", folder, "--split", "train"], *read_folder(folder))


def compare(a, tmp, source, pairs, corpus):
    """Mine with condenser (`source` flags) and with sentence-transformers (`pairs`, `corpus`)."""
    common = ["--num-negatives", str(a.num_negatives), "--format", "n-tuple"]
    if a.cross_encoder:
        common += ["--cross-encoder", a.cross_encoder, "--absolute-margin", str(a.absolute_margin)]
    ours_out = os.path.join(tmp, "ours.parquet")
    t0 = time.perf_counter()
    log = run(["mine", "--model", MODEL, "--out", ours_out] + source + common)
    ours_s = time.perf_counter() - t0
    print("condenser:", log.strip().splitlines()[0])

    # sentence-transformers on the same pairs and corpus, read as condenser reads the folder
    import torch
    from datasets import Dataset
    from sentence_transformers import CrossEncoder, SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    model = SentenceTransformer(MODEL, device="cpu")
    kw = dict(num_negatives=a.num_negatives, sampling_strategy="top", output_format="n-tuple", batch_size=32,
              verbose=False)
    if a.cross_encoder:
        kw.update(cross_encoder=CrossEncoder(a.cross_encoder, device="cpu"), absolute_margin=a.absolute_margin)
    ds = mine_hard_negatives(Dataset.from_dict(pairs), model, anchor_column_name="anchor",
                             positive_column_name="positive", corpus=corpus, **kw)
    st_s = time.perf_counter() - t0
    st_out = os.path.join(tmp, "st.parquet")
    ds.to_parquet(st_out)

    ours_rows, st_rows = negatives(ours_out), negatives(st_out)
    same = sum(1 for r in ours_rows if r in set(st_rows))
    print(f"rows: condenser {len(ours_rows)}, sentence-transformers {len(st_rows)}; identical rows {same}")
    diff = [(x, y) for x, y in zip(sorted(ours_rows), sorted(st_rows)) if x != y]
    for x, y in diff[:3]:
        print("differs:", x[0][:60], "|", [n[:40] for n in x[2]], "vs", [n[:40] for n in y[2]])
    print(f"wall: condenser {ours_s:.1f} s, sentence-transformers {st_s:.1f} s (model load included); "
          f"ratio {st_s / ours_s:.2f}x (>1: condenser faster)")


def read_folder(folder):
    """(anchor, positive) pairs: queries in file order, each relevant document in id order; the
    corpus as "title text" (condenser's and BEIR's join)."""
    def joined(row):
        title, text = (row.get("title") or "").strip(), row["text"].strip()
        return f"{title} {text}" if title else text
    docs = {r["id"]: joined(r) for r in pq.read_table(os.path.join(folder, "corpus.parquet")).to_pylist()}
    rel = {}
    for r in pq.read_table(os.path.join(folder, "qrels/train.parquet")).to_pylist():
        if r["score"] > 0:
            rel.setdefault(r["query_id"], set()).add(r["doc_id"])
    pairs = {"anchor": [], "positive": []}
    for q in pq.read_table(os.path.join(folder, "queries.parquet")).to_pylist():
        for d in sorted(rel.get(q["id"], ())):
            pairs["anchor"].append(q["text"].strip())
            pairs["positive"].append(docs[d])
    return pairs, list(docs.values())


if __name__ == "__main__":
    main()
