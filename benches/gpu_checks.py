#!/usr/bin/env python3
"""Issue 7's GPU acceptance checks of condenser's numbers on a card: parity and accuracy. Meant for
the lent GPU machine (scripts/gpu-checks.sh sets the library path and calls this);
`--device cpu --quick` runs the same code paths on a CPU for a dry check. Speed is measured by
benches/train_peers.py and benches/encode_peers.py (issue 80: one clock for every side); the
speed checks this script ran before 2026-12-01 are gone with their clocks.

    python3 benches/gpu_checks.py --bin .cuda/dist/condenser --device cuda [--quick] [--out DIR]

Checks (results in OUT/gpu_checks.json and printed), each in f32 and bf16 where both exist (a GPU's
default --dtype is bf16, so every call names its dtype):
  1. fixture sentences: condenser on the device vs the sentence-transformers reference
     (f32: <= 1e-3, bf16: <= 2e-2);
  2. STSb test Spearman on the device vs 0.820325 (f32 within 1e-3; bf16 reported);
  3. the STSb cross-encoder of the training-engine issue (both orders, 1 epoch, batch 16, lr 2e-5):
     dev Spearman and wall time.
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
STSB = os.path.join(ROOT, "datasets/data/stsb")
FIXTURE = os.path.join(ROOT, "datasets/data/fixtures/reference-minilm.json")


# peak resident memory (MB) of the last command sh() ran
LAST_PEAK_MB = 0.0
LAST_GPU_MB = None
# A child forked from this (large) Python starts with Python's resident size as its maxrss (Linux
# carries the old image's high-water mark over exec), so rusage read here would report Python's
# peak. The command runs under a small Python of its own instead, which reports its child's.
WRAP = ("import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:]); _, st, ru = os.wait4(p.pid, 0); "
        "sys.stderr.write(f'\\n@peak_kb {ru.ru_maxrss}\\n'); sys.exit(os.waitstatus_to_exitcode(st) & 255)")


def sh(args, timeout=300):
    # a hung command must not eat the lent machine's minutes: each has its own limit
    global LAST_PEAK_MB
    t0 = time.perf_counter()
    # its own process group, so a timeout kills the command too, not only its wrapper
    p = subprocess.Popen([sys.executable, "-c", WRAP, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise SystemExit(f"{' '.join(args)} ran past {timeout} s")
    peak = re.findall(r"@peak_kb (\d+)", err)
    LAST_PEAK_MB = int(peak[-1]) / 1024 if peak else float("nan")
    # condenser's summary names its GPU pool's high-water marks (runtime::gpu_memory_peak_mb)
    global LAST_GPU_MB
    gpu = re.findall(r"GPU (?:memory: )?(\d+) MB in use at most[ ,(]+(\d+) MB held", out + err)
    LAST_GPU_MB = {"used": int(gpu[-1][0]), "reserved": int(gpu[-1][1])} if gpu else None
    err = re.sub(r"\n@peak_kb \d+\n", "", err)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({p.returncode}):\n{err[-3000:]}")
    return out + err, time.perf_counter() - t0


DTYPES = ("f32", "bf16")
PARITY = {"f32": 1e-3, "bf16": 2e-2}


def each_dtype(one):
    """One result per dtype; a dtype that fails (bf16 on a CPU without it) keeps the other's."""
    res = {}
    for dt in DTYPES:
        try:
            res[dt] = one(dt)
        except BaseException as e:
            res[dt] = {"error": str(e)[-2000:]}
    return res


def fixture_parity(a, d):
    fx = json.load(open(a.fixture))["embeddings"]
    src = os.path.join(d, "fixture.parquet")
    pq.write_table(pa.table({"text": fx["sentences"]}), src)
    ref = np.array(fx["vectors"], dtype=np.float64)

    def one(dt):
        dst = os.path.join(d, f"fixture-{dt}.parquet")
        sh([a.bin, "encode", "--model", MODEL, "--input", src, "--out", dst, "--device", a.device, "--dtype", dt])
        ours = np.array(pq.read_table(dst).column("embedding").to_pylist(), dtype=np.float64)
        diff = float(np.abs(ours - ref).max())
        cos = float(min((ours * ref).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(ref, axis=1)))
        return {"max_abs_diff": diff, "worst_cosine": cos, "target": PARITY[dt], "ok": diff <= PARITY[dt]}
    return each_dtype(one)


def stsb_spearman(a, d):
    import csv

    def one(dt):
        out, wall = sh([a.bin, "evaluate", "--model", MODEL, "--sts", f"stsb-test={STSB}/test.parquet",
                        "--out", os.path.join(d, f"eval-{dt}"), "--device", a.device, "--dtype", dt])
        rows = list(csv.DictReader(open(os.path.join(d, f"eval-{dt}/results.csv"))))
        s = float(next(r["value"] for r in rows if r["metric"] == "spearman_cosine"))
        return {"spearman": s, "reference": 0.820325, "ok": abs(s - 0.820325) <= 1e-3, "wall_s": wall}
    return each_dtype(one)


def cross_encoder(a, d):
    args = [a.bin, "train-cross-encoder", "--model", MODEL, "--train", f"{STSB}/train.parquet",
            "--dev", f"{STSB}/dev.parquet", "--out", os.path.join(d, "ce"), "--both-orders",
            "--batch-size", "16", "--lr", "2e-5", "--device", a.device]
    if a.quick:
        args += ["--max-steps", "5"]
    out, wall = sh(args)
    m = re.search(r"best dev (\S+) ([0-9.]+)", out)
    return {"dev": m.group(1) if m else None, "value": float(m.group(2)) if m else None,
            "condenser_peak_rss_mb": LAST_PEAK_MB, "condenser_gpu_mb": LAST_GPU_MB,
            "target": 0.85, "wall_s": wall, "log": out.strip().splitlines()[-2:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, ".cuda/dist/condenser"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--quick", action="store_true", help="a few steps each: check the script itself")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/gpu-checks"))
    ap.add_argument("--only", nargs="*", help="run these checks alone (names as printed)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = {}
    import torch
    results["machine"] = {"torch": torch.__version__,
                          "gpu": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
                          # whether condenser's training ran on its GPU engine (opt-in, docs/gpu.md)
                          "condenser_gpu_engine": os.environ.get("CONDENSER_GPU_ENGINE", "")}
    print("machine", json.dumps(results["machine"]), flush=True)
    with tempfile.TemporaryDirectory() as d:
        checks = {"fixture_parity": fixture_parity, "stsb_test": stsb_spearman, "cross_encoder": cross_encoder}
        unknown = [n for n in a.only or [] if n not in checks]
        if unknown:
            raise SystemExit(f"no check named {unknown}; the checks: {list(checks)}")
        # --only's own order, so that a lease short of time runs what matters first
        for name in a.only or checks:
            f = checks[name]
            try:
                results[name] = f(a, d)
            except BaseException as e:  # one failing check must not hide the others
                results[name] = {"error": str(e)[-2000:]}
            print(name, json.dumps(results[name]), flush=True)
    import resource
    # this script's own peak: sentence-transformers' side of every comparison (plus pandas/arrow)
    results["python_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("python_peak_rss_mb", results["python_peak_rss_mb"], flush=True)
    json.dump(results, open(os.path.join(a.out, "gpu_checks.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
