#!/usr/bin/env python3
"""The whole encode process, condenser against sentence-transformers, both timed the same way
(issue 80; train_peers.py is the training half).

    python3 benches/encode_peers.py --bin target/release/condenser --device cpu [--runs 5]
    python3 benches/encode_peers.py --bin .cuda/dist/condenser --device cuda

Workloads: 14,256 STSb sentences (train and test, both columns) and Cranfield's 1,400 documents
("title text", 256 tokens), all-MiniLM-L6-v2, batch --batch, f32 and bf16. Each run is a fresh
process on each side, from its start to its exit, so start-up counts on both: the process start,
loading and writing for condenser (`condenser encode` to Parquet); the interpreter, the imports
and the model's load for sentence-transformers (`SentenceTransformer(...).encode(...)` to a .npy
file). Net of start-up on both: the same process on the workload's first 10 texts, subtracted
(median from median). The embeddings are on the host when either process ends. bf16 is asked for
as each side's users ask for it: `--dtype bf16`, and `model_kwargs={"torch_dtype": bfloat16}`.
Median and range of --runs runs, the sides alternating; peak RSS (the kernel's, of each process)
and peak GPU memory (NVML) beside each. A ratio is refused where sentence-transformers' bf16 runs
slower than its own f32 on the workload (it would measure the peer, not condenser).
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

from train_peers import ROOT, MODEL, DATA, Peak, header, own_rss, read_rss

PY = """
import sys, time, numpy as np, pyarrow.parquet as pq, torch
torch.set_num_threads({threads})
from sentence_transformers import SentenceTransformer
kw = {{"model_kwargs": {{"torch_dtype": torch.bfloat16}}}} if "{precision}" == "bf16" else {{}}
m = SentenceTransformer({model!r}, device={device!r}, **kw)
m.max_seq_length = {max_len}
texts = pq.read_table({src!r}).column("text").to_pylist()
e = m.encode(texts, batch_size={batch}, convert_to_numpy=True)
np.save({out!r}, e.astype(np.float32))
"""


def texts(workload):
    import pyarrow.parquet as pq
    if workload == "stsb":
        out = []
        for split in ("train", "test"):
            t = pq.read_table(f"{DATA}/stsb/{split}.parquet").to_pydict()
            out += t["sentence1"] + t["sentence2"]
        return out
    c = pq.read_table(f"{DATA}/cranfield/corpus.parquet").to_pydict()
    return [f"{ti} {tx}".strip() if ti else tx for ti, tx in zip(c["title"], c["text"])]


def one(cmd, device, env):
    """A whole process's wall time, peak RSS (its own, by GNU time: `own_rss`) and peak GPU
    memory (MB)."""
    timed, rss_file = own_rss(cmd)
    t0 = time.perf_counter()
    p = subprocess.Popen(timed, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    peak = Peak(p.pid, device)
    out = p.stdout.read()
    _, status, _ = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    gpu = peak.stop()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out[-3000:]}")
    return wall, read_rss(rss_file), gpu


def commands(a, d, workload, precision, src):
    max_len = 256 if workload == "cranfield" else 128
    out = os.path.join(d, "out")
    ours = [a.bin, "encode", "--model", MODEL, "--input", src, "--columns", "text", "--out", out + ".parquet",
            "--batch-size", str(a.batch), "--max-seq-length", str(max_len), "--dtype", precision,
            "--device", a.device]
    theirs = [sys.executable, "-c", PY.format(threads=a.threads, precision=precision, model=MODEL, device=a.device,
                                              max_len=max_len, src=src, batch=a.batch, out=out + ".npy")]
    return {"condenser": ours, "st": theirs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/condenser"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--workloads", nargs="+", default=["stsb", "cranfield"], choices=["stsb", "cranfield"])
    ap.add_argument("--precisions", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    ap.add_argument("--out", default=os.environ.get("OUT", "out/encode-peers"))
    a = ap.parse_args()
    a.warmup = a.steps = 0
    os.makedirs(a.out, exist_ok=True)
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
    h = header(a)
    h["protocol"] = f"{a.runs} whole processes a side, alternating; net = whole - whole on 10 texts (medians)"
    print(json.dumps(h), flush=True)
    import pyarrow as pa, pyarrow.parquet as pq
    results = []
    with tempfile.TemporaryDirectory() as d:
        for workload in a.workloads:
            ts = texts(workload)
            files = {}
            for name, rows in (("all", ts), ("ten", ts[:10])):
                files[name] = os.path.join(d, f"{workload}-{name}.parquet")
                pq.write_table(pa.table({"text": rows}), files[name])
            by = {}
            for precision in a.precisions:
                walls = {(s, n): [] for s in ("condenser", "st") for n in files}
                mem = {}
                for _ in range(a.runs):
                    for name, src in files.items():
                        for side, cmd in commands(a, d, workload, precision, src).items():
                            wall, rss, gpu = one(cmd, a.device, env)
                            walls[(side, name)].append(wall)
                            if name == "all":
                                m = mem.setdefault(side, {"peak_rss_mb": 0.0, "gpu_mb": None})
                                m["peak_rss_mb"] = max(m["peak_rss_mb"], rss)
                                if gpu is not None:
                                    m["gpu_mb"] = max(m["gpu_mb"] or 0.0, gpu)
                for side in ("condenser", "st"):
                    w, ten = walls[(side, "all")], walls[(side, "ten")]
                    net = [x - statistics.median(ten) for x in w]
                    by[(side, precision)] = {
                        "whole_s": {"median": statistics.median(w), "min": min(w), "max": max(w)},
                        "startup_s": statistics.median(ten),
                        "net_s": {"median": statistics.median(net), "min": min(net), "max": max(net)},
                        "texts_per_s_whole": len(ts) / statistics.median(w),
                        "texts_per_s_net": len(ts) / statistics.median(net), **mem[side]}
                    print(workload, precision, side, json.dumps(by[(side, precision)]), flush=True)
            for precision in a.precisions:
                ours, theirs = by[("condenser", precision)], by[("st", precision)]
                row = {"workload": workload, "texts": len(ts), "precision": precision, "condenser": ours, "st": theirs}
                f32 = by.get(("st", "f32"))
                if precision == "bf16" and f32 and theirs["whole_s"]["median"] > f32["whole_s"]["median"]:
                    row["no_ratio"] = (f"sentence-transformers' bf16 ({theirs['whole_s']['median']:.1f} s) runs "
                                       f"slower than its own f32 ({f32['whole_s']['median']:.1f} s) here: a "
                                       "ratio would measure the peer")
                else:
                    row["ratio_whole"] = theirs["whole_s"]["median"] / ours["whole_s"]["median"]
                    row["ratio_net"] = theirs["net_s"]["median"] / ours["net_s"]["median"]
                results.append(row)
    json.dump({"header": h, "results": results}, open(os.path.join(a.out, "encode_peers.json"), "w"), indent=1)
    lines = ["| workload | precision | condenser whole (net) s | sentence-transformers whole (net) s | "
             "ratio whole / net | peak RSS MB (GPU MB) condenser / st |", "|---|---|---|---|---|---|"]
    s = lambda r: (f"{r['whole_s']['median']:.2f} ({r['whole_s']['min']:.2f}-{r['whole_s']['max']:.2f}) / "
                   f"{r['net_s']['median']:.2f}")
    m = lambda r: f"{r['peak_rss_mb']:.0f}" + (f" ({r['gpu_mb']:.0f})" if r.get("gpu_mb") else "")
    for r in results:
        ratio = r.get("no_ratio") or f"{r['ratio_whole']:.2f}x / {r['ratio_net']:.2f}x"
        lines.append(f"| {r['workload']} ({r['texts']}) | {r['precision']} | {s(r['condenser'])} | {s(r['st'])} | "
                     f"{ratio} | {m(r['condenser'])} / {m(r['st'])} |")
    print("\n".join(lines))
    open(f"{a.out}/encode_peers.md", "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
