#!/usr/bin/env python3
"""Training-step speed of condenser against its strongest peers, every side on one clock
(issue 80; the training half of gpu_checks.py's successor, encode_peers.py the encode half).

    python3 benches/train_peers.py --bin target/release/condenser --device cuda      # a card
    python3 benches/train_peers.py --bin target/release/condenser --device cpu \\
        --steps 20 --warmup 3 --runs 3                                                 # a CPU

Sides, each in a fresh process of its own per configuration (GPU memory by NVML, host memory by
the kernel's peak RSS, both of that process):
  condenser  `train-biencoder --loss mnr` / `train-cross-encoder`, --no-shuffle (the file's order),
             each step's time read from train_log.csv (the trainer's clock: a step ends when its
             update is complete on the device);
  st         sentence-transformers' own trainer as its docs advise for speed: bf16=True (or fp32),
             optim="adamw_torch_fused", MultipleNegativesRankingLoss / BinaryCrossEntropyLoss, its
             batches taken in the file's order (a sequential batch sampler);
  loop       a hand-written PyTorch loop at its best: anchors and positives in one forward, fused
             AdamW, torch.compile (CUDA graphs, mode="reduce-overhead", on a card), the SDPA backend
             pinned, lengths padded to buckets (--bucket), a warm-up that covers every shape.
Every side trains on the same pre-tokenised batches in the same order: the Python sides take the
ids made here once (the tokenizer's own, truncated at the workload's length); condenser reads the
same rows in the same order and tokenises them with the same tokenizer (tests/tokenizer_parity.rs).
A check run first trains each side 4 steps without dropout in f32: its losses must agree step by
step (another batch moves a loss at the second decimal), and the Python sides' batch digests must
be equal; otherwise no ratio is printed, and the table says why.

Timing: --warmup steps untimed, then --runs windows of --steps steps in the same process; each
window's rate is its examples over the sum of its steps' times, each step timed from its start to
its results complete on the device (torch.cuda.synchronize in the peers). A configuration reports
the median window and the range. A ratio is refused where a peer's bf16 runs slower than its own
f32 on the same workload and task (that would measure the peer, not condenser).
"""
import argparse, hashlib, json, os, platform, random, shutil, signal, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.path.join(ROOT, "datasets/model/all-MiniLM-L6-v2")
DATA = os.path.join(ROOT, "datasets/data")
MAX_LEN = {"stsb": 128, "cranfield": 256}
BATCH = {"mnr": 64, "ce": 16}
LR = 2e-5
CHECK_STEPS = 4


# ---------------------------------------------------------------- the batches every side trains on

def rows(workload, task, batch):
    """The training rows in batch order (a multiple of `batch`): (text a, text b) for MNR,
    (text a, text b, label in [0, 1]) for the cross-encoder. STSb: train's pairs and labels;
    Cranfield: each judged (query, title + text) pair, and for the cross-encoder one unjudged
    document per judged pair as a 0."""
    import pyarrow.parquet as pq
    rng = random.Random(0)
    if workload == "stsb":
        t = pq.read_table(f"{DATA}/stsb/train.parquet").to_pydict()
        out = [(a, b, float(y)) for a, b, y in zip(t["sentence1"], t["sentence2"], t["label"])]
    else:
        q = dict(zip(*pq.read_table(f"{DATA}/cranfield/queries.parquet").to_pydict().values()))
        c = pq.read_table(f"{DATA}/cranfield/corpus.parquet").to_pydict()
        docs = {i: f"{ti} {tx}".strip() for i, ti, tx in zip(c["id"], c["title"], c["text"])}
        qr = pq.read_table(f"{DATA}/cranfield/qrels.parquet").to_pydict()
        judged = {}
        for qi, di, s in zip(qr["query_id"], qr["doc_id"], qr["score"]):
            if s > 0 and qi in q and di in docs:
                judged.setdefault(qi, set()).add(di)
        ids = sorted(docs)
        out = []
        for qi in sorted(judged):
            for di in sorted(judged[qi]):
                out.append((q[qi], docs[di], 1.0))
                if task == "ce":
                    neg = rng.choice([d for d in ids if d not in judged[qi]])
                    out.append((q[qi], docs[neg], 0.0))
    rng.shuffle(out)
    out = out[:len(out) // batch * batch]
    return [r[:2] for r in out] if task == "mnr" else out


def write_rows(path, rs, task):
    import pyarrow as pa, pyarrow.parquet as pq
    if task == "mnr":
        t = {"anchor": [r[0] for r in rs], "positive": [r[1] for r in rs]}
    else:
        t = {"sentence1": [r[0] for r in rs], "sentence2": [r[1] for r in rs], "label": [r[2] for r in rs]}
    pq.write_table(pa.table(t), path)


def ce_start(d):
    """The cross-encoder every side starts from: MiniLM with one seeded one-label head, saved
    once (HF BertForSequenceClassification), so the check run's losses can agree."""
    out = os.path.join(d, "ce-start")
    if not os.path.exists(out):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        torch.manual_seed(0)
        m = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=1)
        m.save_pretrained(out, safe_serialization=True)
        AutoTokenizer.from_pretrained(MODEL).save_pretrained(out)
    return out


# ---------------------------------------------------------------- measuring a process

class Peak:
    """A process's peak GPU memory by NVML (nvidia-smi's per-process used memory, polled), MB:
    the process `pid` or its child (a command under GNU time, `own_rss`)."""

    def __init__(self, pid, device):
        self.pid, self.mb, self.on = pid, None, device.startswith("cuda") and shutil.which("nvidia-smi")
        self.done = threading.Event()
        if self.on:
            threading.Thread(target=self.poll, daemon=True).start()

    def ours(self, pid):
        if pid == str(self.pid):
            return True
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[1] == str(self.pid)
        except (OSError, IndexError):
            return False

    def poll(self):
        while not self.done.wait(0.1):
            try:
                q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                    "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
            except Exception:
                continue
            for line in q.stdout.splitlines():
                pid, used = [x.strip() for x in line.split(",")]
                if self.ours(pid):
                    self.mb = max(self.mb or 0.0, float(used))

    def stop(self):
        self.done.set()
        return self.mb


GNU_TIME = "/usr/bin/time"


def own_rss(cmd):
    """`cmd` under GNU time, and the file its peak RSS (%M, KB) lands in. A child forked from this
    harness reports the harness's own RSS at the fork as its peak (Linux keeps the old image's
    high-water mark across exec): condenser's Cranfield encode read 984 MB so, 244 MB under GNU
    time. GNU time forks the command from a small process of its own."""
    if not os.access(GNU_TIME, os.X_OK):
        raise SystemExit(f"{GNU_TIME} (GNU time) is needed for each side's own peak RSS")
    f = tempfile.NamedTemporaryFile(prefix="rss-", delete=False)
    f.close()
    return [GNU_TIME, "-f", "%M", "-o", f.name] + cmd, f.name


def read_rss(path):
    """The peak RSS (MB) GNU time wrote to `path` (its last line: a failing command's status
    line comes first)."""
    with open(path) as f:
        kb = f.read().split()[-1]
    os.unlink(path)
    return int(kb) / 1024


def run(cmd, device, timeout, env=None):
    """`cmd` in a fresh process: its output, peak RSS (MB, the command's own, by GNU time) and peak
    GPU memory (MB, NVML); a failure or a timeout ends the harness with its output."""
    timed, rss_file = own_rss(cmd)
    p = subprocess.Popen(timed, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True, env=env)
    peak = Peak(p.pid, device)
    timer = threading.Timer(timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
    timer.start()
    out = p.stdout.read()
    _, status, _ = os.wait4(p.pid, 0)
    timer.cancel()
    gpu = peak.stop()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{out[-3000:]}")
    return out, read_rss(rss_file), gpu


def condenser(a, d, workload, task, precision, steps, check=False):
    """One condenser process: `steps` steps of the rows' batches in file order; each step's time
    and loss from its train_log.csv."""
    batch = BATCH[task]
    data = os.path.join(d, f"{workload}-{task}.parquet")
    n = len(rows(workload, task, batch))
    out = os.path.join(d, f"condenser-{workload}-{task}-{precision}-{'check' if check else 'timed'}")
    shutil.rmtree(out, ignore_errors=True)
    common = ["--train", data, "--batch-size", str(batch), "--lr", str(LR), "--max-seq-length",
              str(MAX_LEN[workload]), "--no-shuffle", "--epochs", str(-(-steps * batch // n)),
              "--max-steps", str(steps), "--checkpoint-steps", "1000000000", "--precision", precision,
              "--out", out, "--device", a.device, "--seed", "0"]
    if check:
        common += ["--dropout", "0"]
    if task == "mnr":
        cmd = [a.bin, "train-biencoder", "--init", MODEL, "--loss", "mnr", "--columns", "anchor,positive"]
    else:
        cmd = [a.bin, "train-cross-encoder", "--model", ce_start(d)]
    text, rss, gpu = run(cmd + common, a.device, a.timeout)
    log = open(os.path.join(out, "train_log.csv")).read().splitlines()
    assert log[0].startswith("step,loss") and log[0].endswith(",seconds"), log[0]
    cells = [r.split(",") for r in log[1:]]
    shutil.rmtree(out, ignore_errors=True)
    return {"losses": [float(c[1]) for c in cells], "seconds": [float(c[-1]) for c in cells],
            "peak_rss_mb": rss, "gpu_mb": gpu, "summary": text.strip().splitlines()[-3:]}


# ---------------------------------------------------------------- the Python sides (one process each)

def sync(device):
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def pretokenised(rs, task, max_len):
    """Each row's ids as the model's tokenizer makes them (truncated at max_len), made once."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(MODEL)
    if task == "mnr":
        a = tok([r[0] for r in rs], truncation=True, max_length=max_len)["input_ids"]
        b = tok([r[1] for r in rs], truncation=True, max_length=max_len)["input_ids"]
        return list(zip(a, b))
    e = tok([r[0] for r in rs], [r[1] for r in rs], truncation="longest_first", max_length=max_len)
    return list(zip(e["input_ids"], e["token_type_ids"]))


def padded(seqs, length, device, types=None):
    """input_ids, attention_mask and token_type_ids of `seqs` padded to `length`."""
    import torch
    ids = torch.zeros((len(seqs), length), dtype=torch.long)
    mask = torch.zeros((len(seqs), length), dtype=torch.long)
    tt = torch.zeros((len(seqs), length), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
        if types is not None:
            tt[i, :len(s)] = torch.tensor(types[i])
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "token_type_ids": tt.to(device)}


class Digest:
    """The sequences a side was handed, in order (their ids, unpadded): `of(n)` digests the first
    n, the batches of n / (sequences a step) steps. (sentence-transformers' trainer collates one
    batch past its last step and does not train on it: the losses say so.)"""

    def __init__(self):
        self.seen = []

    def add(self, seqs):
        self.seen.extend(json.dumps(list(s)) for s in seqs)

    def of(self, n):
        h = hashlib.sha256()
        for s in self.seen[:n]:
            h.update(s.encode())
        return h.hexdigest(), min(n, len(self.seen))


def schedule(total):
    """condenser's and the HF trainer's schedule: linear warm-up over ceil(10%) of the steps,
    then linear decay to 0."""
    import math
    warm = math.ceil(0.1 * total)
    return lambda s: s / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm))


def st_side(w, rs, ids, steps, device, precision, dropout):
    """sentence-transformers' trainer, its step timed from each step's start to its end with the
    device synchronised (a callback), the batches' ids looked up instead of tokenised."""
    from datasets import Dataset
    from torch.utils.data import BatchSampler, SequentialSampler
    from transformers import TrainerCallback
    batch, max_len, digest = BATCH[w.task], MAX_LEN[w.workload], Digest()
    kw = {} if dropout else {"config_kwargs": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}}
    times, losses = [], []

    class Clock(TrainerCallback):
        def on_step_begin(self, args, state, control, **k):
            sync(device)
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **k):
            sync(device)
            times.append(time.perf_counter() - self.t0)

        def on_log(self, args, state, control, logs=None, **k):
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    def in_order(dataset, batch_size, drop_last, **_):
        return BatchSampler(SequentialSampler(range(len(dataset))), batch_size, drop_last)

    common = dict(output_dir=os.path.join(w.dir, "st"), per_device_train_batch_size=batch, max_steps=steps,
                  learning_rate=LR, warmup_steps=0.1, weight_decay=0.01, max_grad_norm=1.0,
                  bf16=precision == "bf16", optim="adamw_torch_fused", save_strategy="no", report_to="none",
                  logging_steps=1 if not dropout else 10**9, dataloader_drop_last=True, seed=0,
                  batch_sampler=in_order, use_cpu=device == "cpu", disable_tqdm=True)
    if w.task == "mnr":
        from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                           SentenceTransformerTrainingArguments, losses as L)
        from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
        m = SentenceTransformer(MODEL, device=device, **kw)
        m.max_seq_length = max_len
        table = {}
        for (a, b), (ia, ib) in zip(rs, ids):
            table[a], table[b] = ia, ib

        def lookup(texts, prompt=None, task=None, **_):
            seqs = [table[t] for t in texts]
            digest.add(seqs)
            return padded(seqs, max(len(s) for s in seqs), "cpu")
        data = Dataset.from_dict({"anchor": [r[0] for r in rs], "positive": [r[1] for r in rs]})
        trainer = SentenceTransformerTrainer(
            model=m, args=SentenceTransformerTrainingArguments(**common), train_dataset=data,
            loss=L.MultipleNegativesRankingLoss(m), data_collator=SentenceTransformerDataCollator(preprocess_fn=lookup),
            callbacks=[Clock()])
    else:
        from sentence_transformers.cross_encoder import (CrossEncoder, CrossEncoderTrainer,
                                                         CrossEncoderTrainingArguments, losses as L)
        m = CrossEncoder(ce_start(w.dir), device=device, max_length=max_len, num_labels=1, **kw)
        table = {(r[0], r[1]): i for r, i in zip(rs, ids)}
        own = m.preprocess

        def lookup(pairs, prompt=None, task=None, **kw):
            if not all(isinstance(p, (list, tuple)) and tuple(p) in table for p in pairs):
                return own(pairs, prompt=prompt, task=task, **kw)  # the model card's statistics
            got = [table[tuple(p)] for p in pairs]
            digest.add([g[0] for g in got])
            return padded([g[0] for g in got], max(len(g[0]) for g in got), "cpu", [g[1] for g in got])
        m.preprocess = lookup
        data = Dataset.from_dict({"sentence1": [r[0] for r in rs], "sentence2": [r[1] for r in rs],
                                  "label": [r[2] for r in rs]})
        trainer = CrossEncoderTrainer(model=m, args=CrossEncoderTrainingArguments(**common), train_dataset=data,
                                      loss=L.BinaryCrossEntropyLoss(m), callbacks=[Clock()])
    trainer.train()
    hf = m[0].auto_model if w.task == "mnr" else getattr(m, "model", None)
    return times, losses, digest, {"attention": getattr(getattr(hf, "config", None), "_attn_implementation", None)}


def loop_side(w, rs, ids, steps, device, precision, dropout):
    """The PyTorch loop at its best: one forward for anchors and positives (MNR), fused AdamW,
    torch.compile (CUDA graphs on a card), SDPA pinned, lengths in buckets of --bucket tokens,
    every shape compiled before the clock starts."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from transformers import AutoModel, AutoModelForSequenceClassification
    batch, max_len, digest = BATCH[w.task], MAX_LEN[w.workload], Digest()
    cfg = {} if dropout else {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    if w.task == "mnr":
        m = AutoModel.from_pretrained(MODEL, attn_implementation="sdpa", **cfg).to(device)
    else:
        m = AutoModelForSequenceClassification.from_pretrained(ce_start(w.dir), attn_implementation="sdpa", **cfg).to(device)
    m.train()
    bucket = lambda n: min(max_len, -(-n // w.bucket) * w.bucket)
    batches = []
    for s in range(len(rs) // batch):
        part = ids[s * batch:(s + 1) * batch]
        if w.task == "mnr":
            seqs = [p[0] for p in part] + [p[1] for p in part]
            batches.append((seqs, None, None))
        else:
            batches.append(([p[0] for p in part], [p[1] for p in part],
                            torch.tensor([r[2] for r in rs[s * batch:(s + 1) * batch]], device=device)))

    def loss_of(ids_, mask, tt, y):
        if w.task == "mnr":
            h = m(input_ids=ids_, attention_mask=mask, token_type_ids=tt).last_hidden_state
            f = mask.unsqueeze(-1).to(h.dtype)
            e = F.normalize((h * f).sum(1) / f.sum(1).clamp(min=1e-9), dim=-1)
            a, p = e[:batch], e[batch:]
            scores = (a @ p.T).float() * 20.0
            return F.cross_entropy(scores, torch.arange(batch, device=scores.device))
        logits = m(input_ids=ids_, attention_mask=mask, token_type_ids=tt).logits.view(-1)
        return F.binary_cross_entropy_with_logits(logits.float(), y)
    compiled = torch.compile(loss_of, mode="reduce-overhead" if device.startswith("cuda") else None,
                             dynamic=False) if w.compile else loss_of
    opt = torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.01, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(steps))
    autocast = torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16,
                              enabled=precision == "bf16")
    backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
    if device.startswith("cuda") and precision == "f32":
        backends = backends[1:]  # flash attention takes no f32

    def step(s, pin):
        seqs, types, y = batches[s % len(batches)]
        digest.add(seqs)
        f = padded(seqs, bucket(max(len(x) for x in seqs)), device, types)
        with sdpa_kernel([pin]), autocast:
            loss = compiled(f["input_ids"], f["attention_mask"], f["token_type_ids"], y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss

    # the first backend that runs these shapes is pinned; the warm-up below compiles every shape
    # (and is not what the timed steps train on: the digest and the schedule start afresh)
    state = {k: v.detach().clone() for k, v in m.state_dict().items()}
    pin = None
    for b in backends:
        try:
            step(0, b)
            pin = b
            break
        except Exception as e:  # a backend that refuses the mask or the dtype
            err = e
    if pin is None:
        raise SystemExit(f"no SDPA backend ran: {err}")
    if w.compile:
        seen = set()
        for s in range(len(batches)):
            n = bucket(max(len(x) for x in batches[s][0]))
            if n not in seen:
                seen.add(n)
                step(s, pin)
    m.load_state_dict(state)
    opt = torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.01, fused=True)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule(steps))
    digest = Digest()
    times, losses = [], []
    for s in range(steps):
        sync(device)
        t0 = time.perf_counter()
        loss = step(s, pin)
        sync(device)
        times.append(time.perf_counter() - t0)
        if not dropout:
            losses.append(float(loss))
    return times, losses, digest, {"attention": str(pin), "compiled": w.compile,
                                                 "bucket": w.bucket}


def worker(w):
    """One Python side's process: its steps' times, its check losses and batch digest as JSON."""
    import torch
    torch.set_num_threads(w.threads)
    rs = rows(w.workload, w.task, BATCH[w.task])
    ids = pretokenised(rs, w.task, MAX_LEN[w.workload])
    f = st_side if w.side == "st" else loop_side
    times, losses, digest, info = f(w, rs, ids, w.steps, w.device, w.precision, dropout=not w.check)
    # the sequences of the steps trained: both texts of each pair for MNR, one pair for the cross-encoder
    value, n = digest.of(w.steps * BATCH[w.task] * (2 if w.task == "mnr" else 1))
    json.dump({"seconds": times, "losses": losses, "digest": value, "sequences": n, **info}, open(w.json, "w"))


def python_side(a, d, side, workload, task, precision, steps, check=False):
    out = os.path.join(d, f"{side}-{workload}-{task}-{precision}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", side, "--workload", workload, "--task", task,
           "--precision", precision, "--steps", str(steps), "--device", a.device, "--dir", d, "--json", out,
           "--bucket", str(a.bucket), "--threads", str(a.threads)]
    if check:
        cmd += ["--check"]
    if side == "loop" and not check and not a.no_compile:
        cmd += ["--compile"]
    text, rss, gpu = run(cmd, a.device, a.timeout)
    r = json.load(open(out))
    r.update(peak_rss_mb=rss, gpu_mb=gpu)
    return r


# ---------------------------------------------------------------- the protocol and the table

def windows(seconds, a, batch):
    """Examples/s of each timed window (after the warm-up): median, min, max."""
    import statistics
    timed = seconds[a.warmup:]
    rates = [a.steps * batch / sum(timed[i * a.steps:(i + 1) * a.steps]) for i in range(a.runs)]
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates), "windows": rates}


def check(a, d, workload, task):
    """Four steps without dropout in f32 on every side: the same batches give the same losses."""
    got = {"condenser": condenser(a, d, workload, task, "f32", CHECK_STEPS, check=True)}
    for side in ("st", "loop"):
        got[side] = python_side(a, d, side, workload, task, "f32", CHECK_STEPS, check=True)
    ref = got["loop"]["losses"]
    problems = []
    for side, r in got.items():
        ls = r["losses"]
        if len(ls) != CHECK_STEPS or any(abs(x - y) > a.loss_tolerance * max(1.0, abs(y)) for x, y in zip(ls, ref)):
            problems.append(f"{side}'s losses {ls} against the loop's {ref}")
    if got["st"]["digest"] != got["loop"]["digest"]:
        problems.append("sentence-transformers' trainer and the loop were fed different batches")
    return {"losses": {s: r["losses"] for s, r in got.items()}, "problems": problems}


def header(a):
    import torch, transformers, sentence_transformers
    cpu = {}
    for line in open("/proc/cpuinfo"):
        k, _, v = line.partition(":")
        if k.strip() in ("model name", "cpu family", "model", "flags") and k.strip() not in cpu:
            cpu[k.strip()] = v.strip()
    flags = cpu.pop("flags", "").split()
    h = {"date": time.strftime("%Y-%m-%d %H:%M"), "host_cpu": cpu, "cores": os.cpu_count(),
         "cpu_features": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags],
         "torch": torch.__version__, "transformers": transformers.__version__,
         "sentence_transformers": sentence_transformers.__version__, "cuda": torch.version.cuda,
         "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
         "condenser": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip(),
         "python": platform.python_version(), "device": a.device, "threads": a.threads,
         "protocol": f"{a.warmup} warm-up steps, then {a.runs} windows of {a.steps} steps in one process"}
    if a.device.startswith("cuda"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem",
                            "--format=csv,noheader"], capture_output=True, text=True)
        h["gpu"] = q.stdout.strip()
    return h


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/condenser"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=500, help="timed steps a window")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--runs", type=int, default=5, help="timed windows a process")
    ap.add_argument("--workloads", nargs="+", default=["stsb", "cranfield"], choices=list(MAX_LEN))
    ap.add_argument("--tasks", nargs="+", default=["mnr", "ce"], choices=list(BATCH))
    ap.add_argument("--precisions", nargs="+", default=["f32", "bf16"], choices=["f32", "bf16"])
    ap.add_argument("--sides", nargs="+", default=["condenser", "st", "loop"], choices=["condenser", "st", "loop"])
    # condenser packs a batch's tokens (no padding; a card's bf16 products pad the packed rows to
    # multiples of 64, products.rs's padded_rows); a padded batch's length in multiples of 16
    # keeps the shapes few (CUDA graphs) without the 2x padding that 64 costs ~30-token pairs
    ap.add_argument("--bucket", type=int, default=16, help="the loop pads lengths to multiples of this")
    ap.add_argument("--no-compile", action="store_true", help="the loop without torch.compile")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads of every side")
    ap.add_argument("--loss-tolerance", type=float, default=2e-3)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a process may run")
    ap.add_argument("--out", default=os.environ.get("OUT", "out/train-peers"))
    # a worker's own arguments
    ap.add_argument("--worker", choices=["st", "loop"])
    for k in ("workload", "task", "precision", "dir", "json"):
        ap.add_argument(f"--{k}")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    if a.worker:
        a.side = a.worker
        return worker(a)
    os.makedirs(a.out, exist_ok=True)
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    res = {"header": header(a), "results": []}
    print(json.dumps(res["header"]), flush=True)
    with tempfile.TemporaryDirectory() as d:
        for workload in a.workloads:
            for task in a.tasks:
                write_rows(os.path.join(d, f"{workload}-{task}.parquet"), rows(workload, task, BATCH[task]), task)
                c = check(a, d, workload, task)
                print(workload, task, "check", json.dumps(c), flush=True)
                by = {}
                for precision in a.precisions:
                    for side in a.sides:
                        n = a.warmup + a.runs * a.steps
                        r = (condenser(a, d, workload, task, precision, n) if side == "condenser"
                             else python_side(a, d, side, workload, task, precision, n))
                        r["rate"] = windows(r["seconds"], a, BATCH[task])
                        r.pop("seconds")
                        by[(side, precision)] = r
                        print(workload, task, precision, side, json.dumps(r), flush=True)
                res["results"].append({"workload": workload, "task": task, "check": c,
                                       "rows": ratios(by, c, a)})
    json.dump(res, open(os.path.join(a.out, "train_peers.json"), "w"), indent=1)
    print(table(res))
    open(f"{a.out}/train_peers.md", "w").write(table(res))


def ratios(by, c, a):
    """Per precision: each side's rate and memory, and condenser's ratio to each peer, or why none."""
    out = []
    for precision in a.precisions:
        row = {"precision": precision}
        ours = by.get(("condenser", precision))
        for side in ("condenser", "st", "loop"):
            r = by.get((side, precision))
            if r is None:
                continue
            row[side] = {"median": r["rate"]["median"], "min": r["rate"]["min"], "max": r["rate"]["max"],
                         "peak_rss_mb": r["peak_rss_mb"], "gpu_mb": r["gpu_mb"]}
            if side == "condenser" or ours is None:
                continue
            why = list(c["problems"])
            f32 = by.get((side, "f32"))
            if precision == "bf16" and f32 and r["rate"]["median"] < f32["rate"]["median"]:
                why.append(f"{side}'s bf16 ({r['rate']['median']:.1f}/s) runs slower than its own f32 "
                           f"({f32['rate']['median']:.1f}/s): a ratio would measure the peer")
            row[f"ratio_{side}"] = None if why else ours["rate"]["median"] / r["rate"]["median"]
            row[f"no_ratio_{side}"] = why
        out.append(row)
    return out


def table(res):
    h = res["header"]
    lines = [f"# train_peers: {h['date']}, {h.get('gpu') or h['host_cpu'].get('model name')}, "
             f"torch {h['torch']}, transformers {h['transformers']}, sentence-transformers "
             f"{h['sentence_transformers']}, condenser {h['condenser']}", "", h["protocol"] + ";"
             " examples/s median (min-max); memory: peak RSS / GPU (NVML) MB of each side's process", "",
             "| workload | task | precision | condenser | st trainer | compiled loop | vs st | vs loop |",
             "|---|---|---|---|---|---|---|---|"]
    cell = lambda r: (f"{r['median']:.1f} ({r['min']:.1f}-{r['max']:.1f}); {r['peak_rss_mb']:.0f}"
                      + (f" / {r['gpu_mb']:.0f}" if r.get("gpu_mb") else "") + " MB") if r else "-"
    ratio = lambda row, s: (f"{row[f'ratio_{s}']:.2f}x" if row.get(f"ratio_{s}") else
                            ("none: " + "; ".join(row.get(f"no_ratio_{s}", [])) if f"no_ratio_{s}" in row else "-"))
    for r in res["results"]:
        for row in r["rows"]:
            lines.append(f"| {r['workload']} | {r['task']} | {row['precision']} | {cell(row.get('condenser'))} | "
                         f"{cell(row.get('st'))} | {cell(row.get('loop'))} | {ratio(row, 'st')} | {ratio(row, 'loop')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
