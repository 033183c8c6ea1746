"""What a Python user relies on: the GIL released while condenser works (two threads encode at
once), Ctrl-C (KeyboardInterrupt) within one batch or step, leaving what a killed command leaves,
and set_num_threads."""
import _thread
import json
import threading
import time

import numpy as np
import pytest

import condenser
from conftest import data

TEXTS = None


def texts(n):
    global TEXTS
    if TEXTS is None:
        t = condenser.read_table(data("stsb/train.parquet"), ["sentence1", "sentence2"])
        TEXTS = t["sentence1"] + t["sentence2"]
    return (TEXTS * (1 + n // len(TEXTS)))[:n]


def test_two_threads_encode_at_once(small_model):
    m = condenser.SentenceTransformer(small_model)
    xs = texts(3000)
    want = m.encode(xs, show_progress_bar=False)
    spans, out = {}, {}

    def work(k):
        t0 = time.perf_counter()
        out[k] = m.encode(xs, show_progress_bar=False)
        spans[k] = (t0, time.perf_counter())
    ticks = 0
    ts = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in ts:
        t.start()
    while any(t.is_alive() for t in ts):
        ticks += 1  # Python runs on beside both calls: neither holds the GIL
        time.sleep(0.001)
    for t in ts:
        t.join()
    (a0, a1), (b0, b1) = spans[0], spans[1]
    assert a0 < b1 and b0 < a1, "the two calls ran one after the other"
    assert ticks > 50
    for k in (0, 1):
        assert np.array_equal(out[k], want)


def interrupt_after(seconds):
    t = threading.Timer(seconds, _thread.interrupt_main)
    t.start()
    return t


def test_ctrl_c_stops_an_encode_within_a_batch(small_model):
    m = condenser.SentenceTransformer(small_model)
    xs = texts(100_000)
    interrupt_after(1.0)
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        m.encode(xs, show_progress_bar=False)
    took = time.perf_counter() - t0
    assert took < 5.0, f"KeyboardInterrupt came {took:.1f} s after the call started (1 s after: the signal)"
    # the model works on after it
    assert m.encode("still here").shape == (384,)


def test_ctrl_c_stops_a_training_that_then_resumes_to_the_bit(small_model, tmp_path):
    kw = dict(init=small_model, train=data("stsb/dev.parquet"), loss="mnr", columns="sentence1,sentence2",
              batch_size=16, max_seq_length=32, max_steps=40, checkpoint_steps=5, seed=1, threads=2,
              show_progress_bar=False)
    whole = tmp_path / "whole"
    condenser.train_biencoder(out=str(whole), **kw)
    cut = tmp_path / "cut"
    # Ctrl-C once the run has written its first checkpoint (step 5 of 40)
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            if (cut / "checkpoint" / "state.json").exists():
                _thread.interrupt_main()
                return
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        condenser.train_biencoder(out=str(cut), **kw)
    stop.set()
    assert (cut / "checkpoint").is_dir(), "no checkpoint left for a resume"
    assert not (cut / "model.safetensors").exists(), "a model written by an interrupted run"
    resumed_from = json.load(open(cut / "checkpoint" / "state.json"))["state"]["step"]
    condenser.train_biencoder(out=str(cut), resume=True, **kw)
    got, want = safetensors(cut / "model.safetensors"), safetensors(whole / "model.safetensors")
    # compared tensor by tensor: a failure names what differs and the step the run resumed
    # from, not ten thousand lines of bytes
    differ = [k for k in want if got.get(k) != want[k]]
    assert got.keys() == want.keys() and not differ, \
        f"resumed from step {resumed_from}: {len(differ)} of {len(want)} tensors differ: {differ[:5]}"


def safetensors(path):
    """A safetensors file's tensors by name, each as its dtype, shape and raw bytes."""
    raw = open(path, "rb").read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    return {k: (v["dtype"], tuple(v["shape"]), body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def test_set_num_threads():
    before = condenser.get_num_threads()
    try:
        condenser.set_num_threads(1)
        assert condenser.get_num_threads() == 1
        with pytest.raises(ValueError):
            condenser.set_num_threads(0)
    finally:
        condenser.set_num_threads(before)


def test_a_misspelt_setting_is_a_value_error_at_import():
    """CONDENSER_* are read once, at import: a bad value is a ValueError with the CLI's message."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, CONDENSER_ISA="bogus")
    probe = ("import condenser\n"
             "print('imported')\n")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "imported" not in r.stdout
    assert "ValueError: CONDENSER_ISA=\"bogus\" is not a value it takes: baseline, avx2, avx512" \
        in r.stderr, r.stderr
    assert "panicked" not in r.stderr


def test_numpy_first_leaves_the_blas_as_the_binary_sets_it():
    """numpy, imported first, starts its own OpenBLAS's threads; condenser still sets the kernel
    its BLAS loads with, as the binary does (else Debian's OpenBLAS took another kernel on a Zen 4,
    and train_biencoder from Python and the CLI gave other bits)."""
    import subprocess
    import sys
    probe = ("import numpy, threading\n"
             "numpy.ones((256, 256)) @ numpy.ones((256, 256))\n"
             "import condenser\n"
             "print(condenser.engine_info()[2])\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "loaded after threads started" not in r.stdout, r.stdout
