#!/usr/bin/env python3
"""sentence-transformers' SoftmaxLoss with the recipe of recipes/nli-softmax.toml, for comparison:
all-MiniLM-L6-v2 (its modules: mean pooling + Normalize), SNLI dev (labels 0/1/2, -1 dropped), batch 16,
lr 2e-5, AdamW (weight decay 0.01, not on bias/LayerNorm), 10% linear warm-up then linear decay, grad clip 1,
one epoch, shuffled with seed 42. Prints SNLI test accuracy of the classifier and STSb test Spearman.

    python3 benches/nli_softmax_reference.py [--threads 2]
"""
import argparse, os, random

import numpy as np
import pyarrow.parquet as pq
import torch
from scipy.stats import spearmanr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
DATA = os.path.join(ROOT, "datasets/data")


def pairs(path):
    t = pq.read_table(path).to_pydict()
    return [(a, b, int(l)) for a, b, l in zip(t["premise"] if "premise" in t else t["sentence1"],
                                              t["hypothesis"] if "hypothesis" in t else t["sentence2"],
                                              t["label"]) if l in (0, 1, 2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import SoftmaxLoss
    m = SentenceTransformer(MODEL, device="cpu")
    m.max_seq_length = 128
    loss = SoftmaxLoss(m, m.get_sentence_embedding_dimension(), 3)
    train = pairs(f"{DATA}/snli/dev.parquet")
    random.Random(42).shuffle(train)
    steps = (len(train) + 15) // 16
    decay = [p for n, p in loss.named_parameters() if not any(k in n for k in ("bias", "LayerNorm"))]
    rest = [p for n, p in loss.named_parameters() if any(k in n for k in ("bias", "LayerNorm"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": rest, "weight_decay": 0.0}], lr=2e-5)
    warm = int(np.ceil(0.1 * steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / max(1, warm) if s < warm else max(0.0, (steps - s) / max(1, steps - warm)))
    loss.train()
    for s in range(steps):
        b = train[s * 16:(s + 1) * 16]
        feats = [m.tokenize([x[0] for x in b]), m.tokenize([x[1] for x in b])]
        feats = [{k: v for k, v in f.items() if hasattr(v, "to")} for f in feats]
        l = loss(feats, torch.tensor([x[2] for x in b]))
        l.backward()
        torch.nn.utils.clip_grad_norm_(loss.parameters(), 1.0)
        opt.step(); sched.step(); opt.zero_grad()
        if s % 100 == 0:
            print(f"step {s}/{steps} loss {l.item():.4f}", flush=True)
    loss.eval()
    test = pairs(f"{DATA}/snli/test.parquet")
    with torch.no_grad():
        u = m.encode([x[0] for x in test], batch_size=64, convert_to_tensor=True)
        v = m.encode([x[1] for x in test], batch_size=64, convert_to_tensor=True)
        pred = loss.classifier(torch.cat([u, v, (u - v).abs()], 1)).argmax(1).numpy()
    acc = float((pred == np.array([x[2] for x in test])).mean())
    t = pq.read_table(f"{DATA}/stsb/test.parquet").to_pydict()
    e1 = m.encode(t["sentence1"], batch_size=64, normalize_embeddings=True)
    e2 = m.encode(t["sentence2"], batch_size=64, normalize_embeddings=True)
    sp = spearmanr((e1 * e2).sum(1), t["label"]).correlation
    print(f"sentence-transformers SoftmaxLoss: SNLI test accuracy {acc:.4f}, STSb test spearman {sp:.4f}")


if __name__ == "__main__":
    main()
