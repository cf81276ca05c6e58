"""The batch plan: one optimizer step's tokens (train.global_batch) split into processes x
train.accumulate x data.max_tokens, the micro-batch sized by the memory model against the
device's memory (Marian's --mini-batch-fit; fairseq's --max-tokens and --update-freq).

`auto` keys are resolved here, once, before anything is built: the run's config.yaml then
holds plain numbers, a resumed run keeps its micro-batch (and re-derives its accumulation
for its number of processes), and `t2 train --dry-run --device-memory 80GiB --processes 8`
prints the plan for hardware the user does not have. On a CPU the micro-batch is at most
CPU_MICRO_BATCH: memory is rarely what bounds it there, and larger batches are no faster.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import torch

from t2.config import AUTO, Config
from t2.data.tokenizer import load_tokenizer
from t2.errors import ConfigError
from t2.model.summary import MemoryEstimate, count_parameters, estimate_memory
from t2.model.transformer import Transformer
from t2.train.compiling import wanted
from t2.train.precision import wanted as cast_wanted

CPU_MICRO_BATCH = 4096  # tokens: what the CPU recipes always used (docs/performance.md)
USABLE = 0.85  # share of a GPU's memory a plan fills: the caching allocator's fragmentation
RESERVED = 2**30  # and, off the top, the CUDA context and the cuBLAS/cuDNN workspaces
_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu" or "cuda"
    memory: int | None  # bytes a plan may size against; None: not planned by memory (a CPU)
    name: str


def parse_size(text: str) -> int:
    """Bytes from '80GiB', '16GB', '24000MiB' or a plain number of bytes."""
    found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not found or found.group(2).lower() not in _UNITS or float(found.group(1)) <= 0:
        raise ConfigError(
            f"--device-memory {text!r} is not a memory size; write e.g. 80GiB, 16GB or 24000MiB"
        )
    return int(float(found.group(1)) * _UNITS[found.group(2).lower()])


def local_device(memory: int | None = None) -> Device:
    """This process's training device; `memory` (--device-memory) plans for a GPU of that
    size instead, present or not."""
    if memory is not None:
        return Device("cuda", memory, f"a GPU of {memory / 2**30:.1f} GiB (--device-memory)")
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return Device("cuda", props.total_memory, props.name)
    return Device("cpu", None, "CPU")


@dataclass(frozen=True)
class BatchPlan:
    max_tokens: int  # per micro-batch and process
    accumulate: int
    processes: int
    global_batch: int  # the step the recipe asked for (0: none)
    fits: int | None  # the largest micro-batch the memory model fits (None: a CPU)
    estimate: MemoryEstimate  # at max_tokens
    device: Device
    planned: tuple[str, ...]  # the keys that were `auto`

    @property
    def step_tokens(self) -> int:
        return self.processes * self.accumulate * self.max_tokens

    def line(self) -> str:
        """The plan in one line, as training prints it at start-up."""
        asked = f" (train.global_batch {self.global_batch:,})" if self.global_batch else ""
        if (
            self.global_batch
            and "train.accumulate" not in self.planned
            and ("data.max_tokens" not in self.planned)
        ):
            asked = f" (train.global_batch {self.global_batch:,} unused: both keys are set)"
        room = (
            f"at most {self.fits:,} tokens fit {self.device.memory / 2**30:.1f} GiB by the "
            f"memory model"
            if self.fits and self.device.memory
            else f"at most {CPU_MICRO_BATCH:,} tokens on a CPU"
        )
        how = f"{', '.join(self.planned)} planned: {room}" if self.planned else "as set"
        return (
            f"batch plan: {self.processes} process{'es' * (self.processes > 1)} x "
            f"{self.accumulate} micro-batch{'es' * (self.accumulate > 1)} x "
            f"{self.max_tokens:,} tokens = {self.step_tokens:,} tokens a step{asked}; "
            f"{how}; {self.estimate.total / 2**30:.1f} GiB by the model on "
            f"{self.device.name}"
        )


def mixed_precision(choice: str, cuda: bool | None = None, quiet: bool = False) -> str:
    """`auto` is bf16 on a GPU that supports it and fp32 on the CPU: bf16's speed there
    depends on the CPU (1.8x fp32 at base size on an AVX-512-bf16 EPYC with torch 2.13,
    docs/performance.md; slower where bf16 is emulated), and a default whose numerics
    change from machine to machine would make one recipe's runs differ. fp16
    needs a loss scaler, which exists on CUDA only: elsewhere it falls back to bf16, said
    once, instead of running unscaled (Accelerate would accept it and skip nothing)."""
    present = torch.cuda.is_available()
    cuda = present if cuda is None else cuda
    if choice == "auto":  # a GPU planned for but absent (--device-memory): a current one
        return "bf16" if cuda and (not present or torch.cuda.is_bf16_supported()) else "no"
    if choice == "fp16" and not cuda:
        if quiet:
            return "bf16"
        print(
            "train.mixed_precision=fp16 needs CUDA's loss scaler; using bf16 on this CPU "
            "(set train.mixed_precision=bf16 or no to silence this)",
            flush=True,
        )
        return "bf16"
    return choice


def mixed(cfg: Config, device: Device) -> bool:
    """Whether a run of `cfg` on `device` keeps 16-bit activations (train.mixed_precision,
    `auto` resolved for that device)."""
    return mixed_precision(cfg.train.mixed_precision, device.kind == "cuda", quiet=True) != "no"


def _estimate(cfg: Config, n_params: int, tokens: int, device: Device) -> MemoryEstimate:
    longest = cfg.data.max_tokens_per_sentence + 2  # the planner assumes the longest pairs
    return estimate_memory(cfg.model, n_params, tokens, longest, mixed(cfg, device), device.kind)


def fit_tokens(cfg: Config, n_params: int, device: Device) -> int:
    """The largest micro-batch (tokens, a multiple of 8) the memory model fits on `device`."""
    assert device.memory is not None
    room = device.memory * USABLE - RESERVED
    low, high = 0, 1 << 24
    while high - low > 8:  # the estimate grows with the tokens
        mid = (low + high) // 2 // 8 * 8
        low, high = (
            (mid, high) if _estimate(cfg, n_params, mid, device).total <= room else (low, mid)
        )
    return low


def plan_batches(cfg: Config, processes: int, device: Device, n_params: int) -> BatchPlan:
    """Resolve `auto` in data.max_tokens and train.accumulate for `processes` on `device`;
    explicit values are kept. See the module's docstring."""
    data, train, g = cfg.data, cfg.train, cfg.train.global_batch
    keys = (("data.max_tokens", data.max_tokens), ("train.accumulate", train.accumulate))
    planned = tuple(k for k, v in keys if v == AUTO)
    longest = data.max_tokens_per_sentence + 2  # a pair's ids: BOS and EOS besides its tokens
    fits = fit_tokens(cfg, n_params, device) if device.memory is not None else None
    if fits is not None and data.max_tokens == AUTO and fits < longest:
        need = _estimate(cfg, n_params, longest, device).total
        raise ConfigError(
            f"one pair of {longest} tokens needs ~{need / 2**30:.1f} GiB by the memory model, "
            f"more than {device.name} offers; lower data.max_tokens_per_sentence or the model"
        )
    cap = max(longest, fits if fits is not None else CPU_MICRO_BATCH)
    micro = cap if data.max_tokens == AUTO else data.max_tokens
    if data.max_tokens == 0:  # batches of data.batch_size sentences: nothing to plan
        accumulate = 1 if train.accumulate == AUTO else train.accumulate
        est = _estimate(cfg, n_params, data.batch_size * longest, device)
        return BatchPlan(0, accumulate, processes, g, fits, est, device, planned)
    if train.accumulate == AUTO:
        accumulate = max(1, math.ceil(g / (processes * micro))) if g else 1
    else:
        accumulate = train.accumulate
    if data.max_tokens == AUTO and g:  # the step's share, within what fits
        micro = max(longest, min(cap, math.ceil(g / (processes * accumulate))))
    est = _estimate(cfg, n_params, micro, device)
    return BatchPlan(micro, accumulate, processes, g, fits, est, device, planned)


def vocabulary(cfg: Config) -> tuple[int, str]:
    """The vocabulary a run of `cfg` will have: its data.tokenizer's, else data.vocab_size
    (the size of the BPE it trains; model.vocab_size is set from the tokenizer)."""
    if cfg.data.tokenizer:
        return len(load_tokenizer(cfg.data.tokenizer)), f"data.tokenizer={cfg.data.tokenizer}"
    return cfg.data.vocab_size, "data.vocab_size, the BPE it trains"


def parameters(cfg: Config) -> int:
    """The parameter count of `cfg`'s model at the vocabulary it will have (no memory)."""
    model_cfg = dataclasses.replace(cfg.model, vocab_size=vocabulary(cfg)[0])
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        return count_parameters(Transformer(model_cfg))["total"]


def planned(cfg: Config, processes: int, device: Device | None = None) -> tuple[Config, BatchPlan]:
    """`cfg` with its batches planned for `processes` on `device` (default: this one)."""
    plan = plan_batches(cfg, processes, device or local_device(), parameters(cfg))
    return resolved(cfg, plan), plan


def resolved(cfg: Config, plan: BatchPlan) -> Config:
    """`cfg` with the plan's plain values in place of `auto`: numbers for the batches, and
    whether the training pass compiles on the plan's device (t2.train.compiling)."""
    max_tokens = plan.max_tokens if cfg.data.max_tokens == AUTO else cfg.data.max_tokens
    kind = plan.device.kind
    compiled = wanted(cfg.train.compile, kind)
    precision = mixed_precision(cfg.train.mixed_precision, kind == "cuda", quiet=True)
    cast = cast_wanted(cfg.train.cast_weights, kind, precision, compiled)
    train = dataclasses.replace(
        cfg.train, accumulate=plan.accumulate, compile=compiled, cast_weights=cast
    )
    return dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, max_tokens=max_tokens), train=train
    )


def keep_saved(cfg: Config, saved: Config) -> Config:
    """For a resumed run: an `auto` micro-batch is the saved run's (its batches go on), and
    an `auto` accumulation is re-planned for this run's processes from it."""
    if cfg.data.max_tokens != AUTO:
        return cfg
    return dataclasses.replace(
        cfg, data=dataclasses.replace(cfg.data, max_tokens=saved.data.max_tokens)
    )
