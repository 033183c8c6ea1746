#!/usr/bin/env python3
"""The article's domain-overlap method (Pinecone, "Domain Transfer with BERT"), as the reference for
`condenser domain-overlap`: HF tokenizers WordPiece tokens per sentence, Python sets of bigrams,
set Jaccard for every pair of datasets.

    pip install tokenizers pyarrow
    python3 benches/overlap_reference.py --tokenizer datasets/model/all-MiniLM-L6-v2/tokenizer.json \
        --stride 1 --out /tmp/ref.json stsb=datasets/data/stsb/train.parquet ...

Prints wall time and peak RSS (the benchmark in benches/overlap_bench.py compares both with condenser's).
"""
import argparse, json, resource, sys, time

import pyarrow.parquet as pq
from tokenizers import Tokenizer


def bigrams(tokens, n, stride):
    if stride == 1:
        return [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    # the article's loop: range(0, len(tokens), stride) keeps a trailing shorter n-gram
    return [" ".join(tokens[i:i + n]) for i in range(0, len(tokens), stride)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--ngram", type=int, default=2)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--columns", default="sentence1,sentence2")
    ap.add_argument("--out")
    ap.add_argument("datasets", nargs="+")
    a = ap.parse_args()
    t0 = time.time()
    tok = Tokenizer.from_file(a.tokenizer)
    tok.no_padding()
    tok.no_truncation()
    names, sets = [], []
    for spec in a.datasets:
        name, path = spec.split("=", 1)
        table = pq.read_table(path, columns=a.columns.split(","))
        s = set()
        for col in a.columns.split(","):
            for text in table.column(col).to_pylist():
                s.update(bigrams(tok.encode(text, add_special_tokens=False).tokens, a.ngram, a.stride))
        names.append(name)
        sets.append(s)
    jac = [[len(x & y) / len(x | y) for y in sets] for x in sets]
    wall = time.time() - t0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    res = {"names": names, "sizes": dict(zip(names, map(len, sets))), "ngram": a.ngram,
           "stride": a.stride, "jaccard": jac, "wall_s": wall, "peak_rss_mb": rss_mb}
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1)
    print(json.dumps({k: res[k] for k in ("sizes", "wall_s", "peak_rss_mb")}), file=sys.stderr)


if __name__ == "__main__":
    main()
