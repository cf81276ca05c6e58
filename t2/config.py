"""Typed configuration: every default lives here once, every choice is checked at start-up.

A config has four sections; builders receive only their own. Each section lives beside
what it configures: model (t2.model.config), data (t2.data.config), decode
(t2.decoding.options); train is here, with the assembly, which the training code reads
whole. Choices are
strings checked against the registries or a fixed list when the config is made, so a typo
fails before any work with the list of valid choices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import yaml

from t2.data.config import SAVED_BEFORE, DataConfig
from t2.decoding.options import DecodeConfig
from t2.errors import ConfigError
from t2.model.config import PADDED_ATTENTION, ModelConfig
from t2.section import AUTO, Section, check_keys, choice, count_or_auto, load_yaml

__all__ = [
    "AUTO",
    "SAVED_BEFORE",
    "Config",
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "check_keys",
    "load_yaml",
]


COMPILE_CACHE_OFF = "off"  # train.compile_cache's word for no folder (t2.train.compile_cache)


def compile_cache_as_typed(value: object) -> str:
    """train.compile_cache as the user typed it, from what YAML made of it."""
    if value is False:  # YAML reads `off` and `false` as false
        return COMPILE_CACHE_OFF
    if value is None:  # empty, null or a bare `~` (YAML cannot tell them apart): the default
        return ""
    if not isinstance(value, str):
        kind = type(value).__name__
        raise ConfigError(
            f"train.compile_cache must be off, false or a folder, got {value!r} "
            f"({'an' if kind[0] in 'aeiou' else 'a'} {kind}); put a folder name that YAML "
            f"reads as another type in quotes"
        )
    return value


@dataclass(frozen=True)
class TrainConfig(Section):
    """Optimisation and the training run."""

    SECTION = "train"

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
    # torch.compile the training pass, the model with its loss as one graph
    # (t2.train.compiling); auto: on CUDA, not on a CPU
    compile: bool | str = "auto"
    # default: inductor's kernels; graphs: and CUDA graphs, one per bucket shape
    # (torch.compile's reduce-overhead); max-autotune: kernels tuned per shape, no graphs
    compile_mode: str = choice("default", "graphs", "max-autotune")
    # cudagraphs: dynamo's CUDA graphs without inductor (graphs mode's safeguards apply)
    compile_backend: str = choice("inductor", "aot_eager", "cudagraphs", "eager")
    # the compiled CUDA pass's padded (and ALiBi-biased) attention: sdpa (its
    # memory-efficient kernel) or flex (FlexAttention, block masks built once per forward;
    # t2.model.flex); sdpa until a GPU measures flex faster (docs/performance.md)
    padded_attention: str = choice(*PADDED_ATTENTION)
    # folder of compiled kernels that the runs of a sweep share (t2.train.compile_cache);
    # empty: beside the data cache (data.cache_dir or HF_DATASETS_CACHE/t2, then compile/);
    # off (or false): torch's default under /tmp only; ~/ and ~/x: the home folder (a
    # bare ~ is YAML's null, as is nothing: the default); a folder name that YAML reads
    # otherwise (" #", 0, yes) goes in quotes
    compile_cache: str = ""
    # bf16 linear weights cast from an fp32 master once per step, not by autocast at every
    # call (t2.train.precision); auto: on CUDA under bf16 when the step runs eagerly
    cast_weights: bool | str = "auto"
    log_every: int = 100
    eval_every: int = 1000
    save_every: int = 1000
    keep_last: int = 5
    valid_bleu_sentences: int = 200  # validation sentences translated greedily for BLEU
    max_nonfinite: int = 10  # consecutive non-finite losses before the run stops
    # seconds a process waits at a training step's collective for the others before it
    # stops in one line (a lost node, a stopped process: t2.train.collective); the main
    # process's solo work (validation, checkpoints, test scoring) may take longer
    collective_timeout: float = 300.0
    # whether every node sees the same --out and data cache (NFS, Lustre): one process of
    # the job writes them; false: node-local disks, one process per node writes its own
    # copy (t2.train.nodes); auto: found out at start-up with a marker file in each
    shared_filesystem: bool | str = "auto"
    best_metric: str = choice("bleu", "loss")  # which validation figure picks the best checkpoint
    loader_workers: int = 1  # background processes that build training batches
    lr_find_steps: int = 100  # --lr-find: steps of the exponential sweep
    lr_find_range: tuple[float, float] = (1e-7, 1.0)  # --lr-find: first and last learning rate
    wandb_group: str = ""  # W&B group; empty: the recipe's name
    wandb_job_type: str = ""  # W&B job type (e.g. an arm of a sweep); empty: none
    wandb_name: str = ""  # W&B run name; empty: the run directory's name
    # the hash of the sweep plan the run belongs to (t2 sweep sets it; meta.json records it)
    sweep_plan: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "compile_cache", compile_cache_as_typed(self.compile_cache))
        super().__post_init__()
        self._at_least(
            1, "max_steps", "log_every", "eval_every", "save_every", "keep_last", "max_nonfinite"
        )
        self._at_least(0, "global_batch")
        count_or_auto(self, "accumulate", 1)
        for key in ("compile", "cast_weights", "shared_filesystem"):
            if getattr(self, key) not in (True, False, AUTO):
                raise ConfigError(
                    f"train.{key} must be true, false or auto, got {getattr(self, key)!r}"
                )
        self._at_least(3, "lr_find_steps")  # the suggestion needs a slope between points
        self._at_least(
            0,
            "eps",
            "weight_decay",
            "warmup_steps",
            "max_lr",
            "min_lr",
            "clip_norm",
            "valid_bleu_sentences",
            "loader_workers",
            "max_minutes",
            "max_train_tokens",
        )
        if not 0 < self.collective_timeout < float("inf"):
            raise ConfigError(
                f"train.collective_timeout must be a number of seconds above 0, got "
                f"{self.collective_timeout}"
            )
        if not 0.0 <= self.stop_exact_match <= 1.0:
            raise ConfigError(
                f"train.stop_exact_match must be in [0, 1] (0: off), got {self.stop_exact_match}"
            )
        if self.stop_exact_match and not self.valid_bleu_sentences:
            raise ConfigError(
                "train.stop_exact_match needs validation translations: set "
                "train.valid_bleu_sentences above 0"
            )
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"train.label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        lo, hi = self.lr_find_range
        if not 0.0 < lo < hi:
            raise ConfigError(
                f"train.lr_find_range must be [low, high] with 0 < low < high, "
                f"got {list(self.lr_find_range)}"
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


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}
