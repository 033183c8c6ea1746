"""condenser from Python: sentence-transformers' names (SentenceTransformer, CrossEncoder) over
condenser's Rust engine, every command as a function, numpy arrays in and out.

    import condenser
    model = condenser.SentenceTransformer("all-MiniLM-L6-v2")
    embeddings = model.encode(["A plane is taking off.", "A man is playing a flute."])
    condenser.train_biencoder(init="all-MiniLM-L6-v2", train="pairs.parquet", loss="mnr", out="out/bi")

docs/python.md has the API and what is not supported yet."""
from ._condenser import __version__, engine_info, get_num_threads, read_table, set_num_threads
from ._cross_encoder import CrossEncoder
from ._overlap import domain_overlap
from ._sentence_transformer import SentenceTransformer
from . import _commands
from ._commands import *  # noqa: F401,F403  (every command as a function)

__all__ = ["SentenceTransformer", "CrossEncoder", "domain_overlap", "set_num_threads", "get_num_threads",
           "engine_info", "read_table", "__version__"] + _commands.__all__
