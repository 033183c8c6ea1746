#!/usr/bin/env python3
"""Condenser pre-training step throughput: condenser vs the same step in PyTorch, same machine, same
run, 2 threads. Both sides: all-MiniLM-L6-v2 as the backbone, a fresh 2-layer head reading the last
layer's [CLS] and layer 3's tokens, one MLM head (transform + decoder tied to the word embeddings),
loss = head MLM + late MLM, whole-word masking (15%, 80/10/10), blocks of 128 tokens packed from
WikiText-2 valid, dropout on, AdamW with decay groups, linear warm-up/decay, clipping at 1.0.
Masking is done inside each timed step on both sides (the corpus is tokenized before timing).

    bash datasets/fetch.sh && cargo build --release && pip install torch transformers pyarrow
    python3 benches/condenser_step_bench.py [--steps 12] [--batch 16]
"""
import argparse, os, random, re, subprocess, tempfile, time

import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
CORPUS = os.path.join(ROOT, "datasets/data/wikitext2/valid.parquet")
LEN = 128


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def blocks(tok):
    """[CLS] 126 tokens [SEP] blocks of the corpus's concatenated text, as condenser packs them."""
    texts = [t for t in pq.read_table(CORPUS).column("text").to_pylist() if t and t.strip()]
    ids = []
    for t in texts:
        ids += tok(t, add_special_tokens=False)["input_ids"]
    body = LEN - 2
    return [[tok.cls_token_id] + ids[i:i + body] + [tok.sep_token_id] for i in range(0, len(ids) - body, body)]


def whole_word_mask(seq, tok, cont, special, rng):
    """BERT's whole-word masking as condenser's Masker: words in random order until 15% of the
    maskable tokens are covered (a word that would overshoot is skipped), 80% [MASK] / 10% random /
    10% kept."""
    words, cur = [], []
    for i, t in enumerate(seq):
        if special[t]:
            continue
        if cont[t] and cur:
            cur.append(i)
        else:
            if cur:
                words.append(cur)
            cur = [i]
    if cur:
        words.append(cur)
    n = sum(len(w) for w in words)
    target = max(1, round(0.15 * n))
    rng.shuffle(words)
    picked = []
    for w in words:
        if len(picked) + len(w) > target:
            continue
        picked += w
        if len(picked) >= target:
            break
    inp = list(seq)
    for p in picked:
        r = rng.random()
        if r < 0.8:
            inp[p] = tok.mask_token_id
        elif r < 0.9:
            inp[p] = rng.randrange(len(cont))
    return inp, sorted(picked)


def torch_side(steps, batch, seed=42, attn="eager"):
    import torch
    from transformers import AutoTokenizer, BertModel, get_linear_schedule_with_warmup
    from transformers.models.bert.modeling_bert import BertLayer, BertLMPredictionHead
    torch.set_num_threads(2)
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(MODEL)
    bert = BertModel.from_pretrained(MODEL, attn_implementation=attn)
    cfg = bert.config
    head = torch.nn.ModuleList([BertLayer(cfg) for _ in range(2)])
    mlm = BertLMPredictionHead(cfg)
    mlm.decoder.weight = bert.embeddings.word_embeddings.weight  # tied, as BertForMaskedLM
    modules = torch.nn.ModuleList([bert, head, mlm])
    modules.train()
    vocab = tok.convert_ids_to_tokens(list(range(cfg.vocab_size)))
    cont = [v.startswith("##") for v in vocab]
    special = [(v.startswith("[") and v.endswith("]")) or (v.startswith("<") and v.endswith(">")) for v in vocab]
    data = blocks(tok)
    random.Random(seed).shuffle(data)
    no_decay = ["bias", "LayerNorm.weight"]
    named = list(modules.named_parameters())
    groups = [{"params": [p for n, p in named if not any(x in n for x in no_decay)], "weight_decay": 0.01},
              {"params": [p for n, p in named if any(x in n for x in no_decay)], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-4)
    total = steps + 3
    sched = get_linear_schedule_with_warmup(opt, int(0.1 * total), total)
    ce = torch.nn.CrossEntropyLoss()
    rng = random.Random(seed)
    elapsed = 0.0
    for i in range(total):
        chunk = data[i * batch:(i + 1) * batch]
        t0 = time.perf_counter()
        masked = [whole_word_mask(s, tok, cont, special, rng) for s in chunk]
        width = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), width), tok.pad_token_id)
        att = torch.zeros((len(chunk), width), dtype=torch.long)
        pos, tgt = [], []
        for r, ((inp, picked), s) in enumerate(zip(masked, chunk)):
            ids[r, :len(inp)] = torch.tensor(inp)
            att[r, :len(inp)] = 1
            pos += [r * width + p for p in picked]
            tgt += [s[p] for p in picked]
        pos, tgt = torch.tensor(pos), torch.tensor(tgt)
        out = bert(input_ids=ids, attention_mask=att, output_hidden_states=True)
        states = out.hidden_states
        x = torch.cat([states[-1][:, :1], states[3][:, 1:]], 1)
        ext = (1.0 - att[:, None, None, :].float()) * torch.finfo(torch.float32).min
        for layer in head:
            y = layer(x, attention_mask=ext)
            x = y[0] if isinstance(y, tuple) else y
        h = x.shape[-1]
        head_logits = mlm(x.reshape(-1, h)[pos])
        late_logits = mlm(states[-1].reshape(-1, h)[pos])
        loss = ce(head_logits, tgt) + ce(late_logits, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(modules.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        if i >= 3:  # warm-up steps are not timed
            elapsed += time.perf_counter() - t0
    print(f"pytorch {torch.__version__}: {torch.__config__.parallel_info().splitlines()[0]}; last loss {loss.item():.3f}")
    return steps * batch / elapsed


def step_seconds(steps, batch):
    """condenser's time in training steps for a run of `steps` steps, and its summary line."""
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([os.path.join(ROOT, "target/release/condenser"), "pretrain", "--model", MODEL,
                              "--corpus", CORPUS, "--out", d, "--max-steps", str(steps), "--batch-size", str(batch),
                              "--max-seq-length", str(LEN), "--checkpoint-steps", "1000000"],
                             capture_output=True, text=True, check=True,
                             env=dict(os.environ, RAYON_NUM_THREADS="2")).stdout
    return float(re.search(r"([0-9.]+) s in training steps", out).group(1)), out


def ours(steps, batch):
    """Steady-state blocks/s: the difference of a 3-step and a (3 + steps)-step run, so the first
    steps (which fault in the process's memory) are left out, as PyTorch's 3 warm-up steps are."""
    short, _ = step_seconds(3, batch)
    full, out = step_seconds(3 + steps, batch)
    print("condenser:", re.search(r"split across [^;]*; CPU matmuls: [^)]*\)[^)]*", out).group(0))
    return steps * batch / (full - short)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--attn", choices=["sdpa", "eager"], default="eager",
                    help="PyTorch's attention: eager (measured faster here: 9.61 vs 9.02 blocks/s) or sdpa")
    ap.add_argument("--torch-only", action="store_true")
    a = ap.parse_args()
    if a.torch_only:
        print(f"pytorch blocks/s ({a.attn}): {torch_side(a.steps, a.batch, attn=a.attn):.2f}")
        raise SystemExit(0)
    print("CPU:", cpu_model())
    c = ours(a.steps, a.batch)
    p = torch_side(a.steps, a.batch, attn=a.attn)
    print(f"blocks/s: condenser {c:.2f}, pytorch {p:.2f}; ratio {c / p:.2f} (>1 is faster)")
