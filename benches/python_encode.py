#!/usr/bin/env python3
"""Encode from Python (issue 81, item 7): condenser.SentenceTransformer against
sentence-transformers' SentenceTransformer, each warm in a process of its own, the same texts,
threads and batch size.

    bash python/test.sh -k nothing     # builds and installs the wheel into target/py-venv
    target/py-venv/bin/pip install sentence-transformers   # or any env with both packages
    python3 benches/python_encode.py [--runs 3] [--threads 2] [--batch 32]

Workloads: 14,256 STSb sentences (train and test, both columns) and Cranfield's 1,400 documents
("title text") at 256 tokens; f32 and bf16 (model_kwargs={"torch_dtype": "bfloat16"} on both
sides, as sentence-transformers' users ask for it). Each process loads its model, encodes the
first 256 texts once (warm-up), then times --runs whole calls of `encode(texts, batch_size=...)`
(the embeddings in a numpy array when the call returns): median and range, never the best; its
peak RSS is the kernel's for that process. condenser's side also reports how much of a call its
rows took to become the numpy array (`Encoder.encode`'s own timings). A ratio against a sentence-
transformers bf16 that runs slower than its own f32 is not printed: condenser's bf16 is then
set against sentence-transformers' faster f32, and the table says so.
"""
import argparse, json, os, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "datasets/data")
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")


def texts(workload):
    import condenser
    if workload == "stsb":
        out = []
        for split in ("train", "test"):
            t = condenser.read_table(f"{DATA}/stsb/{split}.parquet", ["sentence1", "sentence2"])
            out += t["sentence1"] + t["sentence2"]
        return out
    c = condenser.read_table(f"{DATA}/cranfield/corpus.parquet", ["title", "text"])
    return [f"{ti} {tx}".strip() if ti else tx for ti, tx in zip(c["title"], c["text"])]


def worker(a):
    """One side's process: load, warm up, time the calls; JSON on stdout."""
    xs = texts(a.workload)
    kw = {"model_kwargs": {"torch_dtype": "bfloat16"}} if a.precision == "bf16" else {}
    handover = []
    if a.side == "condenser":
        import condenser
        condenser.set_num_threads(a.threads)
        m = condenser.SentenceTransformer(MODEL, **kw)
    else:
        import torch
        torch.set_num_threads(a.threads)
        from sentence_transformers import SentenceTransformer
        m = SentenceTransformer(MODEL, device="cpu", **kw)
    m.max_seq_length = 256 if a.workload == "cranfield" else m.max_seq_length
    m.encode(xs[:256], batch_size=a.batch, show_progress_bar=False)
    times = []
    for _ in range(a.runs):
        t0 = time.perf_counter()
        e = m.encode(xs, batch_size=a.batch, show_progress_bar=False)
        times.append(time.perf_counter() - t0)
        assert e.shape[0] == len(xs)
    if a.side == "condenser":
        # the hand-over's share of a call, measured inside the extension
        for _ in range(2):
            t0 = time.perf_counter()
            _, lib, move = m._enc.encode(xs, a.batch, False, None, False)
            handover.append((move, time.perf_counter() - t0))
    import resource
    print(json.dumps({"seconds": times, "texts": len(xs), "handover": handover,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def side(a, name, workload, precision):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--workload", workload, "--precision",
           precision, "--runs", str(a.runs), "--threads", str(a.threads), "--batch", str(a.batch)]
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    s = r["seconds"]
    r.update(median=statistics.median(s), min=min(s), max=max(s), per_s=r["texts"] / statistics.median(s))
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workloads", nargs="+", default=["stsb", "cranfield"])
    ap.add_argument("--precisions", nargs="+", default=["f32", "bf16"])
    ap.add_argument("--worker")
    ap.add_argument("--workload")
    ap.add_argument("--precision")
    a = ap.parse_args()
    if a.worker:
        a.side = a.worker
        return worker(a)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    fam = {k: next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.split(":")[0].strip() == k), "?")
           for k in ("cpu family", "model")}
    print(f"# python_encode: {time.strftime('%Y-%m-%d')}, {cpu} (family {fam['cpu family']} model {fam['model']}), "
          f"{a.threads} threads, batch {a.batch}, median of {a.runs} calls after a warm-up (min-max); peak RSS")
    print("| workload | precision | condenser texts/s | sentence-transformers texts/s | ratio | hand-over |")
    print("|---|---|---|---|---|---|")
    rows = []
    for w in a.workloads:
        res = {}
        for p in a.precisions:
            res[p] = {"condenser": side(a, "condenser", w, p), "st": side(a, "st", w, p)}
        for p in a.precisions:
            ours, theirs = res[p]["condenser"], res[p]["st"]
            note = ""
            if p == "bf16" and "f32" in res and theirs["median"] > res["f32"]["st"]["median"]:
                theirs = res["f32"]["st"]
                note = " (against its f32: its bf16 ran slower)"
            ratio = theirs["median"] / ours["median"]
            share = max(m / c for m, c in ours["handover"]) if ours["handover"] else float("nan")
            cell = lambda r: (f"{r['per_s']:.1f} ({r['texts'] / r['max']:.1f}-{r['texts'] / r['min']:.1f}), "
                              f"{r['peak_rss_mb']:.0f} MB")
            print(f"| {w} ({ours['texts']}) | {p} | {cell(ours)} | {cell(res[p]['st'])} | "
                  f"{ratio:.2f}x{note} | {100 * share:.3f}% |", flush=True)
            rows.append({"workload": w, "precision": p, "condenser": ours, "st": res[p]["st"], "ratio": ratio,
                         "against": note.strip() or p, "handover_share": share})
    json.dump(rows, open(os.environ.get("OUT", "/tmp") + "/python_encode.json", "w"), indent=1)


if __name__ == "__main__":
    main()
