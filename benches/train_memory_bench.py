#!/usr/bin/env python3
"""Training step time and peak memory: condenser against sentence-transformers / PyTorch, same
machine, same run, same model (all-MiniLM-L6-v2), same data, one process per measurement so that
each peak RSS (GNU time's %M) belongs to one configuration.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    apt-get install -y time                      # GNU time
    python3 benches/train_memory_bench.py        # every mode below
    python3 benches/train_memory_bench.py --only mnr:32 cached-mnr:64:8 ce:16
    python3 benches/train_memory_bench.py --class avx2   # both sides held to AVX2+FMA
    python3 benches/train_memory_bench.py --against OLD/condenser   # this build against another

--class avx2 measures the AVX2+FMA class (AMD Zen 2/3, Intel client) on a wider CPU: condenser with
CONDENSER_ISA=avx2 and OpenBLAS's Haswell kernel (CONDENSER_BLAS=haswell), PyTorch with
ATEN_CPU_CAPABILITY=avx2, MKL_ENABLE_INSTRUCTIONS=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2.

Modes (all f32, dropout on, AdamW with decay groups, lr 2e-5, clipping at 1.0, 2 threads):
- mnr:B            MultipleNegativesRankingLoss, batch B, 256 tokens
- cached-mnr:B:M   CachedMultipleNegativesRankingLoss (GradCache), batch B, mini-batch M, 256 tokens
- ce:B             cross-encoder (BertForSequenceClassification, 1 label, BCE), STSb both orders,
                   batch B, 128 tokens (benches/train_step_bench.py's step)
- pretrain:B       Condenser pre-training, blocks of 128 tokens from WikiText-2, 2 head layers on
                   layer 3, head + late MLM (benches/condenser_step_bench.py's step, its PyTorch code)
Pairs for the bi-encoder modes: Cranfield's 1,398 (title, text) documents (titles against their
abstracts: 1,398 distinct pairs, so batches up to 512 have no repeated text; abstracts average
~190 tokens, many past 256). Step time: PyTorch times steps 2..S+1 after a warm-up step; condenser
runs 1 and 1+S steps in two processes and takes the difference (its first step faults memory in).
"""
import argparse, os, re, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
BIN = os.path.join(ROOT, "target/release/condenser")
STSB = os.path.join(ROOT, "datasets/data/stsb/train.parquet")
CORPUS = os.path.join(ROOT, "datasets/data/wikitext2/valid.parquet")
DEFAULT = ["ce:16", "pretrain:16", "mnr:32", "mnr:64", "mnr:128", "cached-mnr:32:8", "cached-mnr:64:8",
           "cached-mnr:128:8", "cached-mnr:512:8", "cached-mnr:64:16", "cached-mnr:512:16"]


def cpu():
    flags, model = set(), "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
    cls = "AVX-512" if "avx512f" in flags else "AVX2+FMA" if "avx2" in flags and "fma" in flags else "baseline"
    if "avx512_bf16" in flags:
        cls += " + AVX512-BF16"
    if "amx_tile" in flags:
        cls += " + AMX"
    return model, cls


def pairs_file(d):
    import pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
    t = pq.read_table(os.path.join(ROOT, "datasets/data/cranfield/corpus.parquet"))
    t = t.filter(pc.greater(pc.utf8_length(t["title"]), 0)).select(["title", "text"])
    path = os.path.join(d, "pairs.parquet")
    pq.write_table(t, path)
    return path


def timed(cmd, env=None):
    """Run cmd under GNU time: (stdout, peak RSS in MB)."""
    r = subprocess.run(["/usr/bin/time", "-f", "PEAK_RSS_KB %M"] + cmd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    kb = int(re.search(r"PEAK_RSS_KB (\d+)", r.stderr).group(1))
    return r.stdout, kb / 1024


CLASS_ENV = {
    "native": ({}, {}),
    "avx2": ({"CONDENSER_ISA": "avx2", "CONDENSER_BLAS": "haswell"},
             {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}),
}
ENV = CLASS_ENV["native"]


def condenser(mode, steps, pairs, binary=BIN):
    kind, b, m = mode
    BIN = binary
    runs = []
    for n in (1, 1 + steps):
        with tempfile.TemporaryDirectory() as out:
            if kind == "ce":
                cmd = [BIN, "train-cross-encoder", "--model", MODEL, "--train", STSB, "--both-orders",
                       "--batch-size", str(b)]
            elif kind == "pretrain":
                cmd = [BIN, "pretrain", "--model", MODEL, "--corpus", CORPUS, "--batch-size", str(b),
                       "--max-seq-length", "128"]
            else:
                cmd = [BIN, "train-biencoder", "--init", MODEL, "--train", pairs, "--columns", "title,text",
                       "--loss", kind, "--batch-size", str(b), "--max-seq-length", "256"]
                if m:
                    cmd += ["--mini-batch-size", str(m)]
            cmd += ["--max-steps", str(n), "--checkpoint-steps", "1000000", "--out", out]
            text, rss = timed(cmd, dict(ENV[0], RAYON_NUM_THREADS="2"))
            secs = float(re.search(r"\(([0-9.]+) s in training steps", text).group(1))
            lib = re.search(r"CPU matmuls: ([^;)]*\))", text).group(1)
            runs.append((secs, rss, lib))
    (s1, _, lib), (s2, rss, _) = runs
    return (s2 - s1) / steps, rss, lib


def torch_child(kind, b, m, steps, pairs):
    import torch
    torch.set_num_threads(2)
    torch.manual_seed(42)
    import pyarrow.parquet as pq
    if kind == "pretrain":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import condenser_step_bench
        print(f"STEP {b / condenser_step_bench.torch_side(steps, b)}")
        return
    if kind == "ce":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        tok = AutoTokenizer.from_pretrained(MODEL)
        model = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=1)
        t = pq.read_table(STSB).to_pydict()
        data = [(a, c, l) for a, c, l in zip(t["sentence1"], t["sentence2"], t["label"])]
        data += [(c, a, l) for a, c, l in data]
        bce = torch.nn.BCEWithLogitsLoss()

        def step(chunk):
            enc = tok([x[0] for x in chunk], [x[1] for x in chunk], padding=True, truncation="longest_first",
                      max_length=128, return_tensors="pt")
            logits = model(**enc).logits.squeeze(-1)
            return bce(logits, torch.tensor([x[2] for x in chunk], dtype=torch.float32))
    else:
        from sentence_transformers import SentenceTransformer, losses
        model = SentenceTransformer(MODEL, device="cpu")
        model.max_seq_length = 256
        loss = (losses.CachedMultipleNegativesRankingLoss(model, mini_batch_size=m) if kind == "cached-mnr"
                else losses.MultipleNegativesRankingLoss(model))
        t = pq.read_table(pairs).to_pydict()
        data = list(zip(t["title"], t["text"]))

        def step(chunk):
            fa = model.tokenize([x[0] for x in chunk])
            fb = model.tokenize([x[1] for x in chunk])
            return loss([fa, fb], None)
    model.train()
    no_decay = ["bias", "LayerNorm.weight"]
    named = list(model.named_parameters())
    opt = torch.optim.AdamW([
        {"params": [p for n, p in named if not any(x in n for x in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in named if any(x in n for x in no_decay)], "weight_decay": 0.0}], lr=2e-5)
    elapsed = 0.0
    for i in range(steps + 1):
        chunk = [data[(i * b + j) % len(data)] for j in range(b)]
        t0 = time.perf_counter()
        step(chunk).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        if i > 0:
            elapsed += time.perf_counter() - t0
    print(f"STEP {elapsed / steps}")


def reference(mode, steps, pairs):
    kind, b, m = mode
    text, rss = timed([sys.executable, os.path.abspath(__file__), "--child", kind, str(b), str(m or 0),
                       str(steps), pairs], dict(ENV[1], OMP_NUM_THREADS="2", MKL_NUM_THREADS="2"))
    return float(re.search(r"STEP ([0-9.]+)", text).group(1)), rss


def parse(s):
    p = s.split(":")
    return p[0], int(p[1]), int(p[2]) if len(p) > 2 else None


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        k, b, m, steps, pairs = sys.argv[2:7]
        torch_child(k, int(b), int(m) or None, int(steps), pairs)
        raise SystemExit(0)
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=DEFAULT)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--class", dest="cls", choices=sorted(CLASS_ENV), default="native")
    ap.add_argument("--no-reference", action="store_true",
                    help="condenser alone (e.g. CONDENSER_ENGINE=off against the engine)")
    ap.add_argument("--against", metavar="BIN",
                    help="another condenser binary as the reference (a build before a change)")
    a = ap.parse_args()
    ENV = CLASS_ENV[a.cls]
    model, cls = cpu()
    held = "" if a.cls == "native" else f"; both sides held to {a.cls.upper()}"
    if a.against or a.no_reference:
        print(f"CPU: {model} ({cls}{held}); reference: {a.against or 'none'}")
    else:
        import torch
        print(f"CPU: {model} ({cls}{held}); torch {torch.__version__}, "
              f"{re.search(r'Math Kernel Library Version [0-9.]+', torch.__config__.show()).group(0)}")
    with tempfile.TemporaryDirectory() as d:
        pairs = pairs_file(d)
        print("| mode | condenser s/step | peak RSS | reference s/step | peak RSS | speed | memory |")
        print("|---|---|---|---|---|---|---|")
        lib = None
        for spec in a.only:
            mode = parse(spec)
            # a cross-encoder step is short: enough of them to measure; batch 512 steps are long
            steps = {"ce": 40, "pretrain": 8}.get(mode[0], a.steps if mode[1] <= 128 else 1)
            c, crss, lib = condenser(mode, steps, pairs)
            if a.no_reference:
                print(f"| {spec} | {c:.2f} | {crss:.0f} MB | | | | |", flush=True)
                continue
            if a.against:
                r, rrss, _ = condenser(mode, steps, pairs, a.against)
            else:
                r, rrss = reference(mode, steps, pairs)
            print(f"| {spec} | {c:.2f} | {crss:.0f} MB | {r:.2f} | {rrss:.0f} MB | {r / c:.2f}x | {crss / rrss:.2f}x |",
                  flush=True)
        print(f"condenser matmuls: {lib}")
