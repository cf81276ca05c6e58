"""The data section of the config (data.*): where pairs come from, how they are cleaned,
tokenized and batched."""

from __future__ import annotations

from dataclasses import dataclass

from t2.errors import ConfigError
from t2.section import AUTO, Section, count_or_auto

# what a test split that is the validation split means, said wherever its figures are shown
TEST_IS_VALID = (
    "its test figures are scored on the sentences it validates on and picks its best "
    "checkpoint by, not on held-out ones"
)


def same_split(valid: str, test: str) -> bool:
    """Whether two data sources are the same sentences: the same files. An hf: or task:
    source names a dataset whose valid and test splits differ (t2.data.sources)."""
    return test == valid and test.startswith("files:")


# what a run's config.yaml written before a key existed ran with, where the key's default
# now means something else: runs saved before length buckets batched greedily, and before
# tokenizer samples learnt their BPE from every pair
BEFORE_BUCKETS = {"data.max_shapes": 0, "data.pad_multiple": 1, "data.length_multiple": 1}
SAVED_BEFORE = {**BEFORE_BUCKETS, "data.tokenizer_sample": 0}
# keys a resumed run may change: how the data are prepared, not what they are (a resumed
# run reuses its own tokenizer, whatever sample it was learnt from)
RESUMABLE_DATA = ("num_proc", "tokenizer_sample")


@dataclass(frozen=True)
class DataConfig(Section):
    """Where pairs come from, how they are cleaned, tokenized and batched."""

    SECTION = "data"

    train: str = "task:fake_dates"  # hf:NAME/CONFIG | files:PREFIX | task:NAME
    valid: str = "task:fake_dates"
    test: str = "task:fake_dates"
    src_lang: str = "de"
    tgt_lang: str = "en"
    tokenizer: str = ""  # a trained tokenizer folder to reuse; empty: train one for the run
    vocab_size: int = 37000  # BPE vocabulary to train (model.vocab_size follows the tokenizer)
    min_frequency: int = 2
    # pairs the BPE learns from, drawn with a seed of its own (not train.seed: every seed and
    # arm on the same data shares one vocabulary), like SentencePiece's input_sentence_size
    # and Marian's 2M lines; 0: every pair
    tokenizer_sample: int = 1_000_000
    split_digits: bool = False
    max_tokens_per_sentence: int = 64
    max_length_ratio: float = 3.0  # drop pairs whose token lengths differ more than this
    dedup: bool = False
    src_bos: bool = False  # prepend BOS to the source (ablation of report 000)
    # token budget per micro-batch and process (fairseq --max-tokens); 0: use batch_size;
    # auto: planned (t2.train.plan): the step's share (train.global_batch) within what the
    # memory model fits on a GPU, at most 4,096 on a CPU; written to the run's config.yaml
    max_tokens: int | str = "auto"
    batch_size: int = 0  # sentences per batch, used when max_tokens is 0
    # at most this many distinct (rows, source length, target length) batch shapes an epoch:
    # length buckets chosen from the data (t2.data.buckets); 0: a batch padded to its longest
    max_shapes: int = 64
    pad_multiple: int = 8  # rows of a bucketed batch: a multiple of this (tensor cores)
    # bucket lengths a multiple of this; 8 pads ~20% of a corpus of short sentences (the
    # shared mixed corpus: 14 tokens on average), the data-chosen boundaries ~7%
    length_multiple: int = 1
    num_proc: int | str = "auto"  # threads that tokenize (t2.data.encode); auto: every core
    task_train_size: int = 20000  # pairs generated for a task:NAME train split
    task_eval_size: int = 500  # pairs generated for task:NAME valid and test splits
    max_train_pairs: int = 0  # keep only the first N training pairs (0: all)
    cache_dir: str = ""  # cleaned and tokenized data caches; empty: HF_DATASETS_CACHE/t2

    @property
    def test_is_valid(self) -> bool:
        """The test split is the validation split: its figures are not held out."""
        return same_split(self.valid, self.test)

    def test_warning(self) -> str | None:
        """The start-up warning of a run whose test split is its validation split."""
        if not self.test_is_valid:
            return None
        return f"warning: test = validation (data.test = data.valid = {self.test}): {TEST_IS_VALID}"

    def __post_init__(self) -> None:
        super().__post_init__()
        for split in ("train", "valid", "test"):  # task names are checked when data loads
            scheme, sep, rest = getattr(self, split).partition(":")
            if not sep or scheme not in ("hf", "files", "task") or not rest:
                raise ConfigError(
                    f"data.{split}={getattr(self, split)!r} is not a data source; "
                    f"valid forms: hf:NAME/CONFIG, files:PREFIX, task:NAME"
                )
        self._at_least(1, "max_tokens_per_sentence", "task_train_size", "task_eval_size")
        self._at_least(
            0, "min_frequency", "max_length_ratio", "batch_size", "max_train_pairs", "max_shapes"
        )
        self._at_least(0, "tokenizer_sample")
        count_or_auto(self, "num_proc", 1)
        self._at_least(1, "pad_multiple", "length_multiple")
        count_or_auto(self, "max_tokens", 0)
        if self.max_tokens == 0 and self.batch_size == 0:
            raise ConfigError("set data.max_tokens (tokens per batch) or data.batch_size")
        if self.max_tokens == AUTO and self.batch_size:
            raise ConfigError(
                "data.max_tokens=auto plans token batches: set data.batch_size=0, "
                "or data.max_tokens=0 for batches of data.batch_size sentences"
            )
