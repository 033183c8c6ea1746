#!/usr/bin/env python3
"""Issue 7's GPU acceptance checks in one run, side by side with sentence-transformers on the same
card. Meant for the lent GPU machine (scripts/gpu-checks.sh sets the library path and calls this);
`--device cpu --quick` runs the same code paths on a CPU for a dry check.

    python3 benches/gpu_checks.py --bin .cuda/dist/condenser --device cuda [--quick] [--out DIR]

Checks (results in OUT/gpu_checks.json and printed), each in f32 and bf16 where both exist (a GPU's
default --dtype is bf16, so every call names its dtype):
  1. fixture sentences: condenser on the device vs the sentence-transformers reference
     (f32: <= 1e-3, bf16: <= 2e-2);
  2. STSb test Spearman on the device vs 0.820325 (f32 within 1e-3; bf16 reported);
  3. encode throughput, every STSb sentence (all splits, both columns), batch 128: condenser vs
     sentence-transformers in the same dtype, with the GFLOP/s of the real (unpadded) tokens;
  4. bi-encoder training throughput, MNR loss, batch 64, seq 128: condenser vs sentence-transformers,
     f32 and bf16 (condenser --precision bf16, which a GPU runs on the GPU engine only:
     CONDENSER_GPU_ENGINE=1; sentence-transformers under torch.autocast), peak GPU memory each;
  5. the cross-encoder's training step (STSb train, both orders, batch 16): condenser vs the same
     step in PyTorch, f32 and bf16 as in 4;
  6. the STSb cross-encoder of the training-engine issue (both orders, 1 epoch, batch 16, lr 2e-5):
     dev Spearman and wall time.
"""
import argparse, json, os, re, signal, subprocess, sys, tempfile, time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
STSB = os.path.join(ROOT, "datasets/data/stsb")
FIXTURE = os.path.join(ROOT, "../shared/fixtures/reference-minilm.json")


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
# all-MiniLM-L6-v2: 6 layers, hidden 384, FFN 1536
LAYERS, HIDDEN, FFN = 6, 384, 1536


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


def flops(texts):
    """Forward FLOPs of the real tokens (no padding): Linear products plus attention's two products."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    tok.no_padding()
    lens = np.array([len(e.ids) for e in tok.encode_batch(texts)], dtype=np.float64)
    linear = 2 * (4 * HIDDEN * HIDDEN + 2 * HIDDEN * FFN) * lens.sum()
    attention = 2 * 2 * HIDDEN * (lens ** 2).sum()
    return LAYERS * (linear + attention), float(lens.mean())


def encode_throughput(a, d):
    texts = []
    for split in ("train", "dev", "test"):
        t = pq.read_table(f"{STSB}/{split}.parquet").to_pydict()
        texts += t["sentence1"] + t["sentence2"]
    if a.quick:
        texts = texts[:512]
    src, small = os.path.join(d, "texts.parquet"), os.path.join(d, "ten.parquet")
    pq.write_table(pa.table({"text": texts}), src)
    pq.write_table(pa.table({"text": texts[:10]}), small)
    work, mean_len = flops(texts)
    import torch
    from sentence_transformers import SentenceTransformer

    def one(dt):
        def best_of(path):
            best = float("inf")
            for _ in range(2 if a.quick else 3):
                _, wall = sh([a.bin, "encode", "--model", MODEL, "--input", path, "--out",
                              os.path.join(d, "e.parquet"), "--batch-size", "128", "--device", a.device,
                              "--dtype", dt])
                best = min(best, wall)
            return best
        whole = best_of(src)
        peak, gpu = LAST_PEAK_MB, LAST_GPU_MB
        start = best_of(small)
        torch_peak_reset(a.device)
        m = SentenceTransformer(MODEL, device=a.device)
        if dt == "bf16":
            m = m.to(torch.bfloat16)
        m.encode(texts[:256], batch_size=128)
        st = float("inf")
        for _ in range(2 if a.quick else 3):
            t0 = time.perf_counter()
            m.encode(texts, batch_size=128)
            sync(a.device)
            st = min(st, time.perf_counter() - t0)
        st_gpu = torch_peak(a.device)
        # condenser's whole process includes model load and CUDA start; net = whole - a 10-text run's
        net = max(whole - start, 1e-9)
        del m
        return {"condenser_process_s": whole, "condenser_start_s": start,
                "condenser_texts_per_s_process": len(texts) / whole,
                "condenser_texts_per_s_net": len(texts) / net,
                "st_texts_per_s": len(texts) / st,
                "ratio_process": st / whole, "ratio_net": st / net,
                "condenser_gflops_net": work / net / 1e9, "st_gflops": work / st / 1e9,
                "condenser_peak_rss_mb": peak, "condenser_gpu_mb": gpu, "st_gpu_mb": st_gpu}
    return {"texts": len(texts), "mean_tokens": mean_len, "gflop": work / 1e9, **each_dtype(one)}


def sync(device):
    if device.startswith("cuda"):
        import torch
        torch.cuda.synchronize()


def torch_peak_reset(device):
    if device.startswith("cuda"):
        import torch
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def torch_peak(device):
    """PyTorch's GPU high-water marks since torch_peak_reset, in MB: the counterpart of condenser's
    pool marks (live buffers, and what the caching allocator held)."""
    if not device.startswith("cuda"):
        return None
    import torch
    return {"used": torch.cuda.max_memory_allocated() / 2**20, "reserved": torch.cuda.max_memory_reserved() / 2**20}


def amp(device, dt):
    """sentence-transformers' mixed precision for `dt`: torch.autocast in bf16 (its AMP: bf16
    products, f32 master weights), nothing in f32."""
    import contextlib
    import torch
    if dt != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)


def condenser_rate(args, steps, batch):
    """condenser's training examples/s from `args(n)` (a command training n steps of `batch`):
    the first steps load and compile kernels, so the rate is taken between a 2-step and a
    (2 + steps)-step run (sentence-transformers' side leaves its first two steps untimed too),
    each run's time in its steps read back from its examples/s (four digits, where the seconds
    it prints have one decimal); with the long run's own rate and its peaks (RSS, GPU pool)."""
    def seconds(n):
        out, _ = sh(args(n))
        rate = float(re.search(r"s in training steps: ([0-9.]+) examples/s", out).group(1))
        return n * batch / rate, rate
    short, _ = seconds(2)
    # the 2-step run's warm-up moves by a few tenths of a second between processes: where the
    # long run's steps take not much more than that (the cross-encoder's 50 steps on an H200,
    # ~0.15 s), the difference can come out near 0 or below (one run read 8e11 examples/s), so
    # the long run is lengthened until its steps clearly outlast the short run, else no rate
    # (the callers pass enough --epochs that --max-steps, not the data, ends every run)
    for n in (steps, 4 * steps, 16 * steps):
        long, whole = seconds(2 + n)
        if long - short > 0.5 * long:
            return n * batch / (long - short), whole, LAST_PEAK_MB, LAST_GPU_MB
    print(f"condenser_rate: {16 * steps} steps took {long:.2f} s against the 2-step run's {short:.2f} s: "
          "no rate by difference", flush=True)
    return float("nan"), whole, LAST_PEAK_MB, LAST_GPU_MB


def reference_rate(device, steps, batch, model, opt, loss_of):
    """The reference's training examples/s and GPU peak: a step is `loss_of(s)` (batch s's loss,
    under autocast where asked), its backward, clipping at 1.0 and the optimizer's step; steps
    0..steps + 2, the first two untimed (condenser's side drops its first steps too)."""
    import torch
    elapsed = 0.0
    for s in range(steps + 2):
        sync(device)
        t0 = time.perf_counter()
        loss_of(s).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        sync(device)
        if s >= 2:
            elapsed += time.perf_counter() - t0
    return steps * batch / elapsed, torch_peak(device)


def train_throughput(a, d):
    """Issue 57 item 2: MNR at batch 64, 128 tokens, in f32 and bf16 (condenser --precision bf16
    against sentence-transformers under autocast), examples/s and peak GPU memory each. The GPU
    engine trains condenser's side where CONDENSER_GPU_ENGINE=1 is set (recorded in the
    results' machine line)."""
    steps = 5 if a.quick else 50
    t = pq.read_table(f"{STSB}/train.parquet").to_pydict()
    src = os.path.join(d, "mnr.parquet")
    pq.write_table(pa.table({"anchor": t["sentence1"], "positive": t["sentence2"]}), src)
    pairs = list(zip(t["sentence1"], t["sentence2"]))

    def one(dt):
        ours, whole, peak, gpu = condenser_rate(lambda n: [
            a.bin, "train-biencoder", "--init", MODEL, "--train", src, "--loss", "mnr", "--batch-size", "64",
            "--max-seq-length", "128", "--epochs", "20", "--max-steps", str(n), "--checkpoint-steps", "1000000", "--precision", dt,
            "--out", os.path.join(d, f"bi-{dt}-{n}"), "--device", a.device], steps, 64)
        import torch
        from sentence_transformers import SentenceTransformer, losses
        torch_peak_reset(a.device)
        m = SentenceTransformer(MODEL, device=a.device)
        m.max_seq_length = 128
        loss = losses.MultipleNegativesRankingLoss(m)
        opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
        m.train()

        def loss_of(s):
            batch = pairs[s * 64:(s + 1) * 64]
            feats = [m.tokenize([p[0] for p in batch]), m.tokenize([p[1] for p in batch])]
            feats = [{k: v.to(m.device) for k, v in f.items() if hasattr(v, "to")} for f in feats]
            with amp(a.device, dt):
                return loss(feats, None)
        st, st_gpu = reference_rate(a.device, steps, 64, m, opt, loss_of)
        del m, opt
        return {"steps": steps, "condenser_examples_per_s": ours, "condenser_examples_per_s_with_warmup": whole,
                "st_examples_per_s": st, "ratio": ours / st, "target": 1.5, "condenser_peak_rss_mb": peak,
                "condenser_gpu_mb": gpu, "st_gpu_mb": st_gpu}
    return each_dtype(one)


def cross_encoder_step(a, d):
    """Issue 57 item 2: the cross-encoder's training step (MiniLM with a fresh one-label head,
    STSb train's pairs in both orders, batch 16, 128 tokens, BCE, AdamW, clipping at 1.0) in f32
    and bf16: condenser train-cross-encoder against the same step in PyTorch (sentence-
    transformers' CrossEncoder is this model; its fit loop is the step below), examples/s and
    peak GPU memory."""
    steps = 5 if a.quick else 50
    t = pq.read_table(f"{STSB}/train.parquet").to_pydict()
    rows = list(zip(t["sentence1"], t["sentence2"], t["label"]))
    rows += [(b, a_, y) for a_, b, y in rows]
    import random
    random.Random(42).shuffle(rows)

    def one(dt):
        ours, whole, peak, gpu = condenser_rate(lambda n: [
            a.bin, "train-cross-encoder", "--model", MODEL, "--train", f"{STSB}/train.parquet",
            "--both-orders", "--batch-size", "16", "--lr", "2e-5", "--epochs", "2", "--max-steps", str(n),
            "--checkpoint-steps", "1000000", "--precision", dt, "--out", os.path.join(d, f"ce-{dt}-{n}"),
            "--device", a.device], steps, 16)
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        torch_peak_reset(a.device)
        torch.manual_seed(0)
        m = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=1).to(a.device)
        tok = AutoTokenizer.from_pretrained(MODEL)
        opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
        bce = torch.nn.BCEWithLogitsLoss()
        m.train()

        def loss_of(s):
            batch = rows[s * 16:(s + 1) * 16]
            enc = tok([r[0] for r in batch], [r[1] for r in batch], padding=True, truncation="longest_first",
                      max_length=128, return_tensors="pt").to(a.device)
            y = torch.tensor([float(r[2]) for r in batch], device=a.device)
            with amp(a.device, dt):
                logits = m(**enc).logits.squeeze(-1)
            return bce(logits.float(), y)
        st, st_gpu = reference_rate(a.device, steps, 16, m, opt, loss_of)
        del m, opt
        return {"steps": steps, "condenser_examples_per_s": ours, "condenser_examples_per_s_with_warmup": whole,
                "torch_examples_per_s": st, "ratio": ours / st, "target": 1.5, "condenser_peak_rss_mb": peak,
                "condenser_gpu_mb": gpu, "torch_gpu_mb": st_gpu}
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
        checks = {"fixture_parity": fixture_parity, "stsb_test": stsb_spearman,
                  "encode_throughput": encode_throughput, "train_throughput": train_throughput,
                  "cross_encoder_step": cross_encoder_step, "cross_encoder": cross_encoder}
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
    if a.device.startswith("cuda"):
        results["st_peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    print("python_peak_rss_mb", results["python_peak_rss_mb"], flush=True)
    json.dump(results, open(os.path.join(a.out, "gpu_checks.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
