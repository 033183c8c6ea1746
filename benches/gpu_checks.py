#!/usr/bin/env python3
"""Issue 7's GPU acceptance checks in one run, side by side with sentence-transformers on the same
card. Meant for the lent GPU machine (scripts/gpu-checks.sh sets the library path and calls this);
`--device cpu --quick` runs the same code paths on a CPU for a dry check.

    python3 benches/gpu_checks.py --bin .cuda/dist/condenser --device cuda [--quick] [--out DIR]

Checks (results in OUT/gpu_checks.json and printed):
  1. fixture sentences: condenser on the device vs the sentence-transformers reference (f32: <= 1e-3);
  2. STSb test Spearman on the device vs 0.820325 (within 1e-3);
  3. encode throughput, STSb test (sentence1 + sentence2), batch 128: condenser vs sentence-transformers;
  4. bi-encoder training throughput, MNR loss, batch 64, seq 128: condenser vs sentence-transformers;
  5. the STSb cross-encoder of the training-engine issue (both orders, 1 epoch, batch 16, lr 2e-5):
     dev Spearman and wall time.
"""
import argparse, json, os, re, subprocess, tempfile, time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
STSB = os.path.join(ROOT, "datasets/data/stsb")
FIXTURE = os.path.join(ROOT, "../shared/fixtures/reference-minilm.json")


def sh(args):
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{r.stderr[-3000:]}")
    return r.stdout + r.stderr, time.perf_counter() - t0


def fixture_parity(a, d):
    fx = json.load(open(a.fixture))["embeddings"]
    src = os.path.join(d, "fixture.parquet")
    pq.write_table(pa.table({"text": fx["sentences"]}), src)
    dst = os.path.join(d, "fixture-emb.parquet")
    sh([a.bin, "encode", "--model", MODEL, "--input", src, "--out", dst, "--device", a.device])
    ours = np.array(pq.read_table(dst).column("embedding").to_pylist(), dtype=np.float64)
    ref = np.array(fx["vectors"], dtype=np.float64)
    diff = float(np.abs(ours - ref).max())
    return {"max_abs_diff": diff, "target": 1e-3, "ok": diff <= 1e-3}


def stsb_spearman(a, d):
    out, wall = sh([a.bin, "evaluate", "--model", MODEL, "--sts", f"stsb-test={STSB}/test.parquet",
                    "--out", os.path.join(d, "eval"), "--device", a.device])
    import csv
    rows = list(csv.DictReader(open(os.path.join(d, "eval/results.csv"))))
    s = float(next(r["value"] for r in rows if r["metric"] == "spearman_cosine"))
    return {"spearman": s, "reference": 0.820325, "ok": abs(s - 0.820325) <= 1e-3, "wall_s": wall}


def encode_throughput(a, d):
    t = pq.read_table(f"{STSB}/test.parquet").to_pydict()
    texts = t["sentence1"] + t["sentence2"]
    src = os.path.join(d, "texts.parquet")
    pq.write_table(pa.table({"text": texts}), src)
    best = float("inf")
    for _ in range(2 if a.quick else 3):
        _, wall = sh([a.bin, "encode", "--model", MODEL, "--input", src, "--out", os.path.join(d, "e.parquet"),
                      "--batch-size", "128", "--device", a.device])
        best = min(best, wall)
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(MODEL, device=a.device)
    m.encode(texts[:256], batch_size=128)
    st = float("inf")
    for _ in range(2 if a.quick else 3):
        t0 = time.perf_counter()
        m.encode(texts, batch_size=128)
        sync(a.device)
        st = min(st, time.perf_counter() - t0)
    # condenser's time is the whole process (model load included); sentence-transformers' is encode alone
    return {"texts": len(texts), "condenser_texts_per_s": len(texts) / best,
            "st_texts_per_s": len(texts) / st, "ratio": st / best}


def sync(device):
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def train_throughput(a, d):
    steps = 5 if a.quick else 50
    t = pq.read_table(f"{STSB}/train.parquet").to_pydict()
    src = os.path.join(d, "mnr.parquet")
    pq.write_table(pa.table({"anchor": t["sentence1"], "positive": t["sentence2"]}), src)
    out, _ = sh([a.bin, "train-biencoder", "--init", MODEL, "--train", src, "--loss", "mnr", "--batch-size", "64",
                 "--max-seq-length", "128", "--max-steps", str(steps), "--checkpoint-steps", "1000000",
                 "--out", os.path.join(d, "bi"), "--device", a.device])
    ours = float(re.search(r"([0-9.]+) examples/s", out).group(1))
    import torch
    from sentence_transformers import SentenceTransformer, losses
    m = SentenceTransformer(MODEL, device=a.device)
    m.max_seq_length = 128
    loss = losses.MultipleNegativesRankingLoss(m)
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    m.train()
    pairs = list(zip(t["sentence1"], t["sentence2"]))
    done, elapsed = 0, 0.0
    for s in range(steps + 2):
        batch = pairs[s * 64:(s + 1) * 64]
        feats = [m.tokenize([p[0] for p in batch]), m.tokenize([p[1] for p in batch])]
        feats = [{k: v.to(m.device) for k, v in f.items() if hasattr(v, "to")} for f in feats]
        sync(a.device)
        t0 = time.perf_counter()
        l = loss(feats, None)
        l.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sync(a.device)
        if s >= 2:  # warm-up steps not timed
            elapsed += time.perf_counter() - t0
            done += len(batch)
    st = done / elapsed
    return {"steps": steps, "condenser_examples_per_s": ours, "st_examples_per_s": st, "ratio": ours / st}


def cross_encoder(a, d):
    args = [a.bin, "train-cross-encoder", "--model", MODEL, "--train", f"{STSB}/train.parquet",
            "--dev", f"{STSB}/dev.parquet", "--out", os.path.join(d, "ce"), "--both-orders",
            "--batch-size", "16", "--lr", "2e-5", "--device", a.device]
    if a.quick:
        args += ["--max-steps", "5"]
    out, wall = sh(args)
    m = re.search(r"best dev (\S+) ([0-9.]+)", out)
    return {"dev": m.group(1) if m else None, "value": float(m.group(2)) if m else None,
            "target": 0.85, "wall_s": wall, "log": out.strip().splitlines()[-2:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, ".cuda/dist/condenser"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--quick", action="store_true", help="a few steps each: check the script itself")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/gpu-checks"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    with tempfile.TemporaryDirectory() as d:
        for name, f in [("fixture_parity", fixture_parity), ("stsb_test", stsb_spearman),
                        ("encode_throughput", encode_throughput), ("train_throughput", train_throughput),
                        ("cross_encoder", cross_encoder)]:
            try:
                results[name] = f(a, d)
            except BaseException as e:  # one failing check must not hide the others
                results[name] = {"error": str(e)[-2000:]}
            print(name, json.dumps(results[name]), flush=True)
    json.dump(results, open(os.path.join(a.out, "gpu_checks.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
