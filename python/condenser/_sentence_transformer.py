"""`condenser.SentenceTransformer`: sentence-transformers' class of that name, its keywords and
defaults, over condenser's engine (the same embeddings as sentence-transformers to 3e-7)."""
import warnings

import numpy as np

from . import _condenser
from ._keywords import check, device_name, dtype_of, show

_INIT_THEIRS = {"modules": None, "cache_folder": None, "trust_remote_code": False, "revision": None,
                "local_files_only": False, "token": None, "use_auth_token": None, "processor_kwargs": None,
                "tokenizer_kwargs": None, "config_kwargs": None, "model_card_data": None, "backend": "torch",
                "truncate_dim": None}
_ENCODE_THEIRS = {"output_value": "sentence_embedding", "convert_to_tensor": False, "device": None,
                  "truncate_dim": None, "pool": None, "chunk_size": None}
_PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")
_SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")


def _similarity(name, a, b):
    a = np.atleast_2d(np.asarray(a, dtype=np.float32))
    b = np.atleast_2d(np.asarray(b, dtype=np.float32))
    if name == "cosine":
        na = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        nb = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        return na @ nb.T
    if name == "dot":
        return a @ b.T
    diff = a[:, None, :] - b[None, :, :]
    if name == "euclidean":
        return -np.sqrt((diff ** 2).sum(-1))
    return -np.abs(diff).sum(-1)


class SentenceTransformer:
    """A sentence encoder from a sentence-transformers or Hugging Face BERT folder, or an
    installed model's name (CONDENSER_HOME; `sentence-transformers/all-MiniLM-L6-v2` names the
    installed `all-MiniLM-L6-v2`). bf16 as sentence-transformers asks for it:
    `model_kwargs={"torch_dtype": "bfloat16"}` (or torch.bfloat16)."""

    def __init__(self, model_name_or_path=None, *, device=None, prompts=None, default_prompt_name=None,
                 similarity_fn_name=None, model_kwargs=None, **kwargs):
        check("SentenceTransformer", kwargs, ("model_name_or_path", "device", "prompts", "default_prompt_name",
                                              "similarity_fn_name", "model_kwargs"), _INIT_THEIRS)
        if model_name_or_path is None:
            raise TypeError("SentenceTransformer(): condenser loads a model folder or an installed "
                            "model's name; model_name_or_path is required")
        dtype = dtype_of("SentenceTransformer", model_kwargs)
        self._enc = _condenser.Encoder(str(model_name_or_path), device_name(device), dtype)
        self.device = device_name(device)
        self.prompts = dict(self._enc.prompts)
        if prompts is not None:
            self.prompts.update(prompts)
        self.default_prompt_name = default_prompt_name or self._enc.default_prompt_name
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise ValueError(f"default_prompt_name {self.default_prompt_name!r} is not one of the prompts "
                             f"{sorted(self.prompts)}")
        name = similarity_fn_name or self._enc.similarity_fn_name or "cosine"
        if name not in _SIMILARITIES:
            raise ValueError(f"similarity_fn_name {name!r}: one of {', '.join(_SIMILARITIES)}")
        self.similarity_fn_name = name

    @property
    def max_seq_length(self):
        return self._enc.max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, n):
        self._enc.max_seq_length = int(n)

    def get_sentence_embedding_dimension(self):
        return self._enc.dim

    def get_max_seq_length(self):
        return self._enc.max_seq_length

    def __repr__(self):
        return (f"condenser.SentenceTransformer({str(self._enc.path)!r}, dim={self._enc.dim}, "
                f"max_seq_length={self._enc.max_seq_length})")

    def _prompt(self, prompt_name, prompt):
        if prompt is not None:
            if prompt_name is not None:
                warnings.warn("Encode with either a `prompt`, a `prompt_name`, or neither, but not both. "
                              "Ignoring the `prompt_name` in favor of `prompt`.", stacklevel=3)
            return prompt
        if prompt_name is not None:
            if prompt_name not in self.prompts:
                raise ValueError(f"Prompt name '{prompt_name}' not found in the configured prompts dictionary "
                                 f"with keys {list(self.prompts)!r}.")
            return self.prompts[prompt_name]
        if self.default_prompt_name is not None:
            return self.prompts.get(self.default_prompt_name)
        return None

    def encode(self, sentences=None, prompt_name=None, prompt=None, batch_size=32, show_progress_bar=None,
               normalize_embeddings=False, convert_to_numpy=True, precision="float32", *, inputs=None,
               **kwargs):
        """Embeddings of `sentences` (a string or a list of strings) as a C-contiguous float32
        array (n, dim), or (dim,) for one string, as sentence-transformers' encode returns them."""
        check("encode", kwargs, ("sentences", "prompt_name", "prompt", "batch_size", "show_progress_bar",
                                 "normalize_embeddings", "convert_to_numpy", "precision", "inputs"),
              _ENCODE_THEIRS)
        if inputs is not None:
            if sentences is not None:
                raise TypeError("encode(): give sentences or inputs, not both")
            sentences = inputs
        if sentences is None:
            raise TypeError("encode() missing required argument: 'sentences'")
        if precision not in _PRECISIONS:
            raise ValueError(f"precision {precision!r}: one of {', '.join(_PRECISIONS)}")
        if precision != "float32":
            raise ValueError(f"precision={precision!r} (quantized embeddings) is not supported by condenser "
                             "yet: only 'float32'")
        if not convert_to_numpy:
            raise TypeError("encode(): convert_to_numpy=False returns torch tensors in sentence-transformers; "
                            "condenser returns numpy arrays only")
        single = isinstance(sentences, str)
        texts = [sentences] if single else list(sentences)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"encode(): sentence {i} is {type(t).__name__}, not str")
        text = self._prompt(prompt_name, prompt)
        out, _, _ = self._enc.encode(texts, int(batch_size), show(show_progress_bar), text,
                                     bool(normalize_embeddings))
        return out[0] if single else out

    def encode_query(self, sentences=None, prompt_name=None, prompt=None, **kwargs):
        """`encode` with the "query" prompt where the model has one (and no other is named)."""
        if prompt_name is None and prompt is None and "query" in self.prompts:
            prompt_name = "query"
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def encode_document(self, sentences=None, prompt_name=None, prompt=None, **kwargs):
        """`encode` with the "document" (or "passage", "corpus") prompt where the model has one."""
        if prompt_name is None and prompt is None:
            prompt_name = next((n for n in ("document", "passage", "corpus") if n in self.prompts), None)
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def similarity(self, embeddings1, embeddings2):
        """The (n, m) similarity matrix by the model's similarity_fn_name (cosine by default)."""
        return _similarity(self.similarity_fn_name, embeddings1, embeddings2)

    def similarity_pairwise(self, embeddings1, embeddings2):
        a = np.atleast_2d(np.asarray(embeddings1, dtype=np.float32))
        b = np.atleast_2d(np.asarray(embeddings2, dtype=np.float32))
        return np.array([_similarity(self.similarity_fn_name, x, y)[0, 0] for x, y in zip(a, b)], dtype=np.float32)
