"""Data: sources, cleaning, a joint BPE tokenizer, token-budget batches (see docs/data.md)."""

from t2.data.batching import BatchSampler
from t2.data.loader import collate, make_loader
from t2.data.pipeline import encode_pairs, encode_source, load_pairs
from t2.data.sources import SPLITS
from t2.data.tasks import TASKS
from t2.data.tokenizer import SPECIALS, load_tokenizer, prepare_tokenizer, train_tokenizer

__all__ = [
    "SPECIALS",
    "SPLITS",
    "TASKS",
    "BatchSampler",
    "collate",
    "encode_pairs",
    "encode_source",
    "load_pairs",
    "load_tokenizer",
    "make_loader",
    "prepare_tokenizer",
    "train_tokenizer",
]
