"""`condenser.domain_overlap`: the domain-overlap command's numbers (Jaccard of WordPiece n-gram
sets) for datasets given as files or as lists of texts."""
import os

import numpy as np

from . import _condenser
from ._keywords import check, show


def domain_overlap(datasets, n=2, *, stride=1, tokenizer="all-MiniLM-L6-v2", approx=None, seed=42,
                   show_progress_bar=None, **kwargs):
    """Jaccard similarity of the datasets' WordPiece n-gram sets, as `condenser domain-overlap`
    counts it.

    datasets: {name: list of texts, or a dataset file (its sentence1/sentence2 or text columns)}.
    n: n-gram length; stride: 1 for every adjacent n-gram, s > 1 for the article's
    range(0, len, s); approx: MinHash permutations (an estimate in bounded memory).
    Returns (names, jaccard) with jaccard a float64 (k, k) array, names in the dict's order."""
    check("domain_overlap", kwargs, ("datasets", "n", "stride", "tokenizer", "approx", "seed",
                                     "show_progress_bar"), {})
    if not isinstance(datasets, dict) or not datasets:
        raise TypeError("domain_overlap(): datasets is a non-empty {name: texts or file} dict")
    names, values = [], []
    for name, v in datasets.items():
        names.append(str(name))
        if isinstance(v, (str, os.PathLike)):
            values.append(os.fspath(v))
        else:
            texts = list(v)
            if not all(isinstance(t, str) for t in texts):
                raise TypeError(f"domain_overlap(): dataset {name!r} holds something other than strings")
            values.append(texts)
    if int(n) < 1 or int(stride) < 1:
        raise ValueError("domain_overlap(): n and stride are at least 1")
    got, jaccard, _, _ = _condenser.overlap_matrix(names, values, os.fspath(tokenizer), int(n), int(stride),
                                                   approx, int(seed), show(show_progress_bar))
    return got, np.asarray(jaccard, dtype=np.float64)
