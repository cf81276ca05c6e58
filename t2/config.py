"""Typed configuration: every default lives here once, every choice is checked at start-up.

A config has four sections (model, data, train, decode); builders receive only their
own section. Choices are strings checked against the registries or a fixed list when the
config is made, so a typo fails before any work with the list of valid choices.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

import yaml

import t2.model.attention
import t2.model.ffn
import t2.model.norm
import t2.model.positional  # noqa: F401  (registers the components)
from t2.errors import ConfigError
from t2.registry import ATTENTION, FFN, NORM, POSITIONAL, Registry


class _Loader(yaml.SafeLoader):
    """YAML with 1e-3 read as a float: PyYAML follows YAML 1.1, where a float needs a dot
    (1.0e-3), so `--set train.max_lr=1e-3` would arrive as the string '1e-3'."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
    list("-+.0123456789"),
)


def load_yaml(text: str) -> Any:
    """Parse recipe, override and saved-config YAML (safe: plain data only)."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: plain data only


def choice(default: str, *choices: str) -> Any:
    return field(default=default, metadata={"choices": (default, *choices)})


def component(default: str, registry: Registry) -> Any:
    return field(default=default, metadata={"registry": registry})


class Section:
    """Validation shared by all sections: choices, registries and value types."""

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            where = f"{SECTION_NAMES[type(self)]}.{f.name}"
            object.__setattr__(self, f.name, _coerce(value, hints[f.name], where))
            if "registry" in f.metadata:
                f.metadata["registry"].get(value)
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                valid = ", ".join(sorted(set(f.metadata["choices"])))
                raise ConfigError(f"invalid {where} {value!r}; valid choices: {valid}")

    def _at_least(self, low: float, *names: str) -> None:
        """Each named number must be at least `low`: a bad count fails here, not mid-run."""
        for name in names:
            if getattr(self, name) < low:
                where = f"{SECTION_NAMES[type(self)]}.{name}"
                raise ConfigError(f"{where} must be at least {low}, got {getattr(self, name)}")


AUTO = "auto"


def _count_or_auto(section: Section, name: str, low: int) -> None:
    """A key that is a whole number >= low, or `auto` (resolved by t2.train.plan)."""
    value = getattr(section, name)
    if value == AUTO:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        where = f"{SECTION_NAMES[type(section)]}.{name}"
        raise ConfigError(f"{where} must be a whole number >= {low} or auto, got {value!r}")


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Accept a YAML value for a field of type `hint`, or fail with a one-line reason."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(typing.get_args(hint)):
            raise ConfigError(f"{where} must be a list of {len(typing.get_args(hint))} numbers")
        return tuple(
            _coerce(v, t, where) for v, t in zip(value, typing.get_args(hint), strict=True)
        )
    if origin in (typing.Union, types.UnionType):
        return value
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) != (hint is bool) or not isinstance(value, hint):
        raise ConfigError(
            f"{where} must be {hint.__name__}, got {value!r} ({type(value).__name__})"
        )
    return value


@dataclass(frozen=True)
class ModelConfig(Section):
    """Architecture: the paper's base model unless a recipe says otherwise."""

    vocab_size: int = 37000  # shared source/target BPE vocabulary; set from the tokenizer
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048  # gated FFNs use 2/3 of this (see d_hidden) to keep the parameter count
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1  # residual and embedding dropout
    attention_dropout: float = 0.0  # dropout on attention weights (the paper uses none)
    ffn_dropout: float = 0.0  # dropout on the FFN's hidden activations
    positional: str = component("sinusoidal", POSITIONAL)
    norm: str = component("layernorm", NORM)
    ffn: str = component("relu", FFN)
    attention: str = component("sdpa", ATTENTION)
    norm_position: str = choice("post", "pre")
    tie_embeddings: str = choice("all", "decoder", "none")  # all: src, tgt and output share
    bias: bool = True  # biases in linear layers
    norm_eps: float = 1e-5
    max_positions: int = 1024  # learned positions' table size; tables grow for others
    rope_base: float = 10000.0
    # xavier: the paper's Glorot uniform; small: N(0, 0.02) (Marian, BART, BERT in transformers)
    init: str = choice("xavier", "default", "small")
    # normal: N(0, 1/d_model); unit: N(0, 1); small: N(0, 0.02) (transformers' Marian)
    embedding_init: str = choice("normal", "unit", "small")
    tie_qk_init: bool = False  # W_Q = W_K at initialisation (report 002)
    zero_init_output: bool = False  # zero output projections of attention and FFN (Fixup)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_positions"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model.{name} must be positive, got {getattr(self, name)}")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) < 0:
                raise ConfigError(f"model.{name} must be 0 or more, got {getattr(self, name)}")
        for name in ("dropout", "attention_dropout", "ffn_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"model.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"model.d_model={self.d_model} is not divisible by model.n_heads="
                f"{self.n_heads}; choose n_heads that divides d_model"
            )

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def d_hidden(self) -> int:
        """The FFN's hidden size: d_ff, or 2/3 of it for gated variants (Shazeer 2020)."""
        builder = FFN.get(self.ffn)
        return t2.model.ffn.gated_hidden_size(self.d_ff) if builder.gated else self.d_ff


@dataclass(frozen=True)
class DataConfig(Section):
    """Where pairs come from, how they are cleaned, tokenized and batched."""

    train: str = "task:fake_dates"  # hf:NAME/CONFIG | files:PREFIX | task:NAME
    valid: str = "task:fake_dates"
    test: str = "task:fake_dates"
    src_lang: str = "de"
    tgt_lang: str = "en"
    tokenizer: str = ""  # a trained tokenizer folder to reuse; empty: train one for the run
    vocab_size: int = 37000  # BPE vocabulary to train (model.vocab_size follows the tokenizer)
    min_frequency: int = 2
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
    num_proc: int = 1  # processes for datasets.map
    task_train_size: int = 20000  # pairs generated for a task:NAME train split
    task_eval_size: int = 500  # pairs generated for task:NAME valid and test splits
    max_train_pairs: int = 0  # keep only the first N training pairs (0: all)
    cache_dir: str = ""  # cleaned and tokenized data caches; empty: HF_DATASETS_CACHE/t2

    def __post_init__(self) -> None:
        super().__post_init__()
        for split in ("train", "valid", "test"):  # task names are checked when data loads
            scheme, sep, rest = getattr(self, split).partition(":")
            if not sep or scheme not in ("hf", "files", "task") or not rest:
                raise ConfigError(
                    f"data.{split}={getattr(self, split)!r} is not a data source; "
                    f"valid forms: hf:NAME/CONFIG, files:PREFIX, task:NAME"
                )
        self._at_least(1, "max_tokens_per_sentence", "num_proc", "task_train_size",
                       "task_eval_size")  # fmt: skip
        self._at_least(0, "min_frequency", "max_length_ratio", "batch_size", "max_train_pairs",
                       "max_shapes")  # fmt: skip
        self._at_least(1, "pad_multiple", "length_multiple")
        _count_or_auto(self, "max_tokens", 0)
        if self.max_tokens == 0 and self.batch_size == 0:
            raise ConfigError("set data.max_tokens (tokens per batch) or data.batch_size")
        if self.max_tokens == AUTO and self.batch_size:
            raise ConfigError(
                "data.max_tokens=auto plans token batches: set data.batch_size=0, "
                "or data.max_tokens=0 for batches of data.batch_size sentences"
            )


@dataclass(frozen=True)
class TrainConfig(Section):
    """Optimisation and the training run."""

    seed: int = 1
    optimizer: str = choice("adam", "adamw")
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0  # not applied to norms, biases and embeddings
    schedule: str = choice("inverse_sqrt", "cosine")
    warmup_steps: int = 4000
    max_lr: float = 0.0  # peak learning rate; 0: the paper's d_model^-0.5 * warmup^-0.5
    min_lr: float = 0.0  # floor of the cosine schedule
    label_smoothing: float = 0.1
    max_steps: int = 100000  # optimizer steps
    # budgets beside max_steps; the first rule that holds ends the run (final validation,
    # checkpoint and test scoring at that step), and results.json names it in stopped_by
    max_minutes: float = 0.0  # training wall time, cumulative over resumes; 0: no limit
    max_train_tokens: int = 0  # target tokens trained on, all processes together; 0: no limit
    stop_exact_match: float = 0.0  # stop at a validation with exact match >= this; 0: off
    # target tokens per optimizer step, all processes together (the paper: 25,000); the
    # planner splits it into processes x accumulate x data.max_tokens; 0: no global batch
    global_batch: int = 0
    accumulate: int | str = "auto"  # micro-batches per optimizer step; auto: planned
    clip_norm: float = 0.0  # 0: no clipping (the paper)
    mixed_precision: str = choice("auto", "bf16", "fp16", "no")  # auto: bf16 where supported
    # torch.compile each layer for training, static shapes per bucket (t2.train.compiling)
    compile: bool = False
    compile_backend: str = choice("inductor", "aot_eager", "cudagraphs", "eager")
    log_every: int = 100
    eval_every: int = 1000
    save_every: int = 1000
    keep_last: int = 5
    valid_bleu_sentences: int = 200  # validation sentences translated greedily for BLEU
    max_nonfinite: int = 10  # consecutive non-finite losses before the run stops
    best_metric: str = choice("bleu", "loss")  # which validation figure picks the best checkpoint
    loader_workers: int = 1  # background processes that build training batches
    lr_find_steps: int = 100  # --lr-find: steps of the exponential sweep
    lr_find_range: tuple[float, float] = (1e-7, 1.0)  # --lr-find: first and last learning rate
    wandb_group: str = ""  # W&B group; empty: the recipe's name
    wandb_job_type: str = ""  # W&B job type (e.g. an arm of a sweep); empty: none
    wandb_name: str = ""  # W&B run name; empty: the run directory's name

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "max_steps", "log_every", "eval_every", "save_every", "keep_last",
                       "max_nonfinite")  # fmt: skip
        self._at_least(0, "global_batch")
        _count_or_auto(self, "accumulate", 1)
        self._at_least(3, "lr_find_steps")  # the suggestion needs a slope between points
        self._at_least(0, "eps", "weight_decay", "warmup_steps", "max_lr", "min_lr",
                       "clip_norm", "valid_bleu_sentences", "loader_workers", "max_minutes",
                       "max_train_tokens")  # fmt: skip
        if not 0.0 <= self.stop_exact_match <= 1.0:
            raise ConfigError(
                f"train.stop_exact_match must be in [0, 1] (0: off), got {self.stop_exact_match}"
            )
        if self.stop_exact_match and not self.valid_bleu_sentences:
            raise ConfigError("train.stop_exact_match needs validation translations: set "
                              "train.valid_bleu_sentences above 0")  # fmt: skip
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"train.label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        lo, hi = self.lr_find_range
        if not 0.0 < lo < hi:
            raise ConfigError(f"train.lr_find_range must be [low, high] with 0 < low < high, "
                              f"got {list(self.lr_find_range)}")  # fmt: skip


@dataclass(frozen=True)
class DecodeConfig(Section):
    """Search settings for validation, evaluation and translation."""

    beam_size: int = 4
    lenpen: float = 0.6  # length penalty alpha (the paper's 0.6)
    # how a hypothesis' summed log-probability is normalised by its length n (EOS included):
    #   length: / n^lenpen (fairseq's --lenpen, transformers' length_penalty); gnmt:
    #   / ((5 + n) / 6)^lenpen (Wu et al. 2016, which the paper cites), a weaker reward for
    #   length. On Multi30k at alpha 0.6, length gave 33.95 BLEU and gnmt 33.59 (README)
    length_norm: str = choice("length", "gnmt")
    max_len_a: float = 1.0  # maximum output length = a * source length + b
    max_len_b: int = 50
    batch_size: int = 64  # sentences per decoding batch
    nbest: int = 1  # hypotheses returned per sentence, at most beam_size
    # when a sentence's beam search ends, once beam_size hypotheses have ended and ...
    # heuristic: its best running beam, ended at the next step, would not beat the worst of
    #   them (transformers' early_stopping=False); exact: nor at the maximum length, a true
    #   bound (early_stopping="never"; slower); first_k: at once (fairseq's rule)
    stopping: str = choice("heuristic", "exact", "first_k")

    def __post_init__(self) -> None:
        super().__post_init__()
        self._at_least(1, "beam_size", "batch_size", "nbest")
        self._at_least(0, "lenpen", "max_len_a", "max_len_b")
        if self.nbest > self.beam_size:
            raise ConfigError(
                f"decode.nbest={self.nbest} is more than decode.beam_size={self.beam_size}; "
                f"raise the beam size (--beam-size) or lower nbest"
            )


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("betas", "lr_find_range"):
            out["train"][key] = list(out["train"][key])
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Config:
        if not isinstance(raw, dict):
            raise ConfigError(f"a config must be a mapping of sections, got {type(raw).__name__}")
        check_keys(raw, SECTIONS, "config")
        sections = {}
        for name, section in SECTIONS.items():
            values = raw.get(name) or {}
            if not isinstance(values, dict):
                raise ConfigError(f"config section {name!r} must be a mapping of keys")
            valid = {f.name for f in dataclasses.fields(section)}
            check_keys(values, valid, f"key in section {name!r}")
            sections[name] = section(**values)
        return cls(**sections)

    @classmethod
    def from_yaml(cls, text: str, source: str = "config", saved: bool = False) -> Config:
        """A config from YAML text; `source` names the file in a one-line error. `saved`:
        a run's config.yaml, whose missing keys take SAVED_BEFORE's values, not defaults."""
        try:
            raw = load_yaml(text) or {}
        except yaml.YAMLError as err:
            reason = str(err).strip().splitlines()[0]
            raise ConfigError(f"{source} is not valid YAML ({reason}); fix or replace it") from None
        if saved and isinstance(raw, dict):
            for key, value in SAVED_BEFORE.items():
                section, name = key.split(".")
                if isinstance(raw.get(section), dict):
                    raw[section].setdefault(name, value)
        return cls.from_dict(raw)


# what a run's config.yaml written before a key existed ran with, where the key's default
# now means something else: runs saved before length buckets batched greedily
SAVED_BEFORE = {"data.max_shapes": 0, "data.pad_multiple": 1, "data.length_multiple": 1}

SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}
SECTION_NAMES = {v: k for k, v in SECTIONS.items()}


def check_keys(raw: dict[str, Any], valid: Any, what: str) -> None:
    for key in raw:
        if key not in valid:
            raise ConfigError(f"unknown {what} {key!r}; valid keys: {', '.join(sorted(valid))}")
