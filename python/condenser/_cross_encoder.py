"""`condenser.CrossEncoder`: sentence-transformers' class of that name over condenser's engine,
for a trained cross-encoder folder (HF BertForSequenceClassification, as train_cross_encoder
writes it)."""
import numpy as np

from . import _condenser
from ._keywords import check, device_name, dtype_of, show

_INIT_THEIRS = {"modules": None, "prompts": None, "default_prompt_name": None, "cache_folder": None,
                "trust_remote_code": False, "revision": None, "local_files_only": False, "token": None,
                "processor_kwargs": None, "tokenizer_kwargs": None, "config_kwargs": None, "model_card_data": None,
                "backend": "torch", "activation_fn": None, "keep_in_fp32_modules": None}
_PREDICT_THEIRS = {"prompt_name": None, "prompt": None, "activation_fn": None, "convert_to_tensor": False,
                   "device": None, "pool": None, "chunk_size": None}


class CrossEncoder:
    """Scores of (text, text) pairs from a trained cross-encoder folder or installed name."""

    def __init__(self, model_name_or_path=None, *, device=None, num_labels=None, max_length=None,
                 model_kwargs=None, **kwargs):
        check("CrossEncoder", kwargs, ("model_name_or_path", "device", "num_labels", "max_length",
                                       "model_kwargs"), _INIT_THEIRS)
        if model_name_or_path is None:
            raise TypeError("CrossEncoder(): model_name_or_path is required (a trained cross-encoder folder)")
        dtype = dtype_of("CrossEncoder", model_kwargs)
        self._model = _condenser.Scorer(str(model_name_or_path), device_name(device), dtype)
        if num_labels is not None and num_labels != self._model.num_labels:
            raise ValueError(f"num_labels={num_labels}: the folder's head has {self._model.num_labels} "
                             "(condenser scores with a trained head as it is)")
        if max_length is not None:
            self._model.max_length = int(max_length)
        self.device = device_name(device)

    @property
    def num_labels(self):
        return self._model.num_labels

    @property
    def max_length(self):
        return self._model.max_length

    @max_length.setter
    def max_length(self, n):
        self._model.max_length = int(n)

    def __repr__(self):
        return f"condenser.CrossEncoder({str(self._model.path)!r}, num_labels={self.num_labels})"

    def predict(self, sentences=None, batch_size=32, show_progress_bar=None, apply_softmax=False,
                convert_to_numpy=True, *, inputs=None, **kwargs):
        """Scores of `sentences` (a pair or a list of pairs): a sigmoid for a one-label model, as
        sentence-transformers' default; class probabilities for more labels with apply_softmax."""
        check("predict", kwargs, ("sentences", "batch_size", "show_progress_bar", "apply_softmax",
                                  "convert_to_numpy", "inputs"), _PREDICT_THEIRS)
        if inputs is not None:
            if sentences is not None:
                raise TypeError("predict(): give sentences or inputs, not both")
            sentences = inputs
        if sentences is None:
            raise TypeError("predict() missing required argument: 'sentences'")
        if not convert_to_numpy:
            raise TypeError("predict(): convert_to_numpy=False returns torch tensors in sentence-transformers; "
                            "condenser returns numpy arrays only")
        if self.num_labels > 1 and not apply_softmax:
            raise TypeError("predict(): a model of several labels gives raw logits in sentence-transformers "
                            "unless apply_softmax=True; condenser gives the probabilities only: pass "
                            "apply_softmax=True")
        single = len(sentences) == 2 and all(isinstance(s, str) for s in sentences)
        pairs = [tuple(sentences)] if single else [tuple(p) for p in sentences]
        for i, p in enumerate(pairs):
            if len(p) != 2 or not all(isinstance(s, str) for s in p):
                raise TypeError(f"predict(): item {i} is not a pair of strings")
        scores = self._model.predict(pairs, int(batch_size), show(show_progress_bar))
        if self.num_labels == 1:
            scores = np.ascontiguousarray(scores[:, 0])
        return scores[0] if single else scores

    def rank(self, query, documents, top_k=None, return_documents=False, batch_size=32, show_progress_bar=None,
             **kwargs):
        """The documents by score against `query`, as sentence-transformers' rank: a list of
        {"corpus_id", "score"(, "text")} dicts, best first."""
        check("rank", kwargs, ("query", "documents", "top_k", "return_documents", "batch_size",
                               "show_progress_bar"), _PREDICT_THEIRS)
        if self.num_labels != 1:
            raise ValueError("rank(): needs a one-label cross-encoder")
        docs = list(documents)
        scores = self.predict([(query, d) for d in docs], batch_size=batch_size,
                              show_progress_bar=show_progress_bar)
        order = sorted(range(len(docs)), key=lambda i: -float(scores[i]))
        out = []
        for i in order[:top_k] if top_k is not None else order:
            r = {"corpus_id": i, "score": float(scores[i])}
            if return_documents:
                r["text"] = docs[i]
            out.append(r)
        return out
