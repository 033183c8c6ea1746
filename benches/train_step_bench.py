#!/usr/bin/env python3
"""Cross-encoder training-step throughput: condenser vs PyTorch (transformers), same machine, same
run, same model (all-MiniLM-L6-v2 + a 1-label head), same data (STSb train, both orders, shuffled),
batch 16, max 128 tokens, BCE with logits, AdamW (decay groups), linear schedule, clipping at 1.0,
dropout on, 2 threads.

    bash datasets/fetch.sh && cargo build --release && pip install sentence-transformers
    python3 benches/train_step_bench.py [--steps 40] [--batch 16] [--precision f32|bf16]
    python3 benches/train_step_bench.py --full [--seed 42]   # PyTorch alone, the whole epoch, dev Spearman

--precision bf16: PyTorch under torch.autocast("cpu", torch.bfloat16) (its Linears and matmuls in
bf16 through oneDNN, f32 master weights), condenser with --precision bf16 (its Linears' products,
forward and backward, on the AVX512-BF16 kernel; f32 masters and AdamW).
"""
import argparse, contextlib, os, random, re, subprocess, tempfile, time

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
TRAIN = os.path.join(ROOT, "datasets/data/stsb/train.parquet")


def dev_spearman(model, tok):
    import torch
    from scipy.stats import spearmanr
    t = pq.read_table(os.path.join(ROOT, "datasets/data/stsb/dev.parquet")).to_pydict()
    model.eval()
    scores = []
    with torch.no_grad():
        for i in range(0, len(t["label"]), 64):
            enc = tok(t["sentence1"][i:i + 64], t["sentence2"][i:i + 64], padding=True, truncation="longest_first",
                      max_length=128, return_tensors="pt")
            scores += torch.sigmoid(model(**enc).logits.squeeze(-1)).tolist()
    model.train()
    return spearmanr(scores, t["label"])[0]


def torch_side(steps, batch, full=False, seed=42, precision="f32"):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=1)
    model.train()
    t = pq.read_table(TRAIN).to_pydict()
    pairs = [(a, b, l) for a, b, l in zip(t["sentence1"], t["sentence2"], t["label"])]
    pairs += [(b, a, l) for a, b, l in pairs]
    random.Random(seed).shuffle(pairs)
    if full:  # the whole epoch, as the cross-encoder acceptance run
        steps = (len(pairs) + batch - 1) // batch - 3
    no_decay = ["bias", "LayerNorm.weight"]
    groups = [{"params": [p for n, p in model.named_parameters() if not any(x in n for x in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(x in n for x in no_decay)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=2e-5)
    total = steps + 3
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * total), total)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    elapsed = 0.0
    for i in range(total):
        chunk = pairs[i * batch:(i + 1) * batch]
        t0 = time.perf_counter()
        enc = tok([c[0] for c in chunk], [c[1] for c in chunk], padding=True, truncation="longest_first",
                  max_length=128, return_tensors="pt")
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        with cast:
            logits = model(**enc).logits.squeeze(-1)
        loss = loss_fn(logits.float(), torch.tensor([c[2] for c in chunk], dtype=torch.float32))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if i >= 3:  # warm-up steps are not timed
            elapsed += time.perf_counter() - t0
    if full:
        print(f"pytorch full epoch: {total} steps, {elapsed:.0f} s in steps, dev spearman {dev_spearman(model, tok):.4f}")
    return steps * batch / elapsed


def ours(steps, batch, precision="f32"):
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([os.path.join(ROOT, "target/release/condenser"), "train-cross-encoder", "--model", MODEL,
                              "--train", TRAIN, "--out", d, "--both-orders", "--max-steps", str(steps),
                              "--batch-size", str(batch), "--checkpoint-steps", "1000000", "--precision", precision],
                             capture_output=True, text=True, check=True, env=dict(os.environ, RAYON_NUM_THREADS="2")).stdout
    print("condenser:", re.search(r"CPU matmuls: [^)]*\)", out).group(0))
    return float(re.search(r"([0-9.]+) examples/s", out).group(1))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--full", action="store_true", help="PyTorch only: train the whole epoch and report dev Spearman")
    ap.add_argument("--seed", type=int, default=42, help="--full: the shuffle and torch seed")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    a = ap.parse_args()
    if a.full:
        torch_side(a.steps, a.batch, full=True, seed=a.seed, precision=a.precision)
        raise SystemExit(0)
    c = ours(a.steps, a.batch, a.precision)
    p = torch_side(a.steps, a.batch, precision=a.precision)
    print(f"{a.precision} examples/s: condenser {c:.1f}, pytorch {p:.1f}; ratio {c / p:.2f} (>1 is faster)")
