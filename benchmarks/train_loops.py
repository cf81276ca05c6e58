"""The two training loops that benchmarks/bench_train.py times, one step at a time: t2's
train.py step path (T2Engine) and MarianMTModel in the usual PyTorch loop (MarianEngine),
fed identical batches of real text; and the timing of a round of steps."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import torch
import torch.nn.functional as F  # noqa: N812

from benchmarks.bench_decode import DATA, marian_config
from benchmarks.decode_common import PeakMemory
from t2.config import Config, DataConfig
from t2.data.batching import BatchSampler
from t2.data.encode import encode_source
from t2.data.loader import Batches, make_loader
from t2.model.flops import training_flops
from t2.model.transformer import Transformer
from t2.train.optim import lr_multiplier, peak_lr
from t2.train.setup import prepare_training
from t2.train.step import StepStats, train_step

PAD = 0


def device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def release_free_memory() -> None:
    """Give freed heap pages back (glibc), so that resident memory starts near what is live."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: measured from a higher base
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def dataset(args: argparse.Namespace, tokenizer):
    """Encoded pairs of mixed/train (<= 64 tokens a side) as t2's loader reads them."""
    import datasets

    lines = {}
    for lang in ("de", "en"):
        with open(DATA / "mixed" / f"train.{lang}", encoding="utf-8") as f:
            lines[lang] = [next(f).rstrip("\n") for _ in range(args.pairs)]
    src = encode_source(tokenizer, lines["de"], False)
    tgt = [[1, *ids, 2] for ids in tokenizer(lines["en"], add_special_tokens=False)["input_ids"]]
    keep = [i for i in range(len(src)) if 2 < len(src[i]) <= 64 and 3 < len(tgt[i]) <= 65]
    return datasets.Dataset.from_dict(
        {"src_ids": [src[i] for i in keep], "tgt_ids": [tgt[i] for i in keep]}
    )


def loader(ds, args: argparse.Namespace, seed: int = 1):
    src_lens, tgt_lens = [len(x) for x in ds["src_ids"]], [len(x) for x in ds["tgt_ids"]]
    d = DataConfig()  # the length buckets train.py batches with
    sampler = BatchSampler(
        src_lens,
        tgt_lens,
        args.max_tokens,
        0,
        seed,
        True,
        max_shapes=d.max_shapes,
        rows_multiple=d.pad_multiple,
        length_multiple=d.length_multiple,
    )
    return Batches(make_loader(ds, sampler, PAD, 0))


def batch_flops(cfg, batch: dict) -> tuple[int, int]:
    """(source+target real tokens, training FLOPs) of one batch, as the loader served it:
    on the host, so that counting it never waits for the GPU."""
    if batch["src"].device.type != "cpu":
        raise ValueError(
            "batch_flops counts the loader's batch on the host; reading a device batch waits "
            "for the device in the timed step: return the batch before its transfer"
        )
    s = batch["src"].ne(PAD).sum(1).tolist()
    t = batch["tgt_in"].ne(PAD).sum(1).tolist()
    return sum(s) + sum(t), training_flops(cfg.model, s, t)


# --modes: how t2's training pass runs (train.compile and train.compile_mode)
MODES = {
    "eager": {"compile": False},
    "compiled": {"compile": True, "compile_mode": "default"},
    "graphs": {"compile": True, "compile_mode": "graphs"},
    # FlexAttention for padded attention, against `compiled`'s SDPA (train.padded_attention)
    "flex": {"compile": True, "compile_mode": "default", "padded_attention": "flex"},
    # the same with CUDA graphs, against `graphs`: gpu.sh --quick's pair, one compile more
    "flex-graphs": {"compile": True, "compile_mode": "graphs", "padded_attention": "flex"},
}


class T2Engine:
    """train.py's step path: Accelerate, train_step, the scheduler; no validation. `mode`
    (MODES) overrides the recipe's train.compile; None keeps it (auto: compiled on CUDA)."""

    def __init__(
        self,
        cfg: Config,
        ds,
        args: argparse.Namespace,
        precision: str,
        batches=None,
        mode: str | None = None,
    ) -> None:
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState

        self.name = "t2" if mode is None else f"t2-{mode}"
        if mode is not None:
            cfg = replace(cfg, train=replace(cfg.train, **MODES[mode]))

        AcceleratorState._reset_state(True)  # another precision in the same process
        self.acc = Accelerator(
            cpu=not torch.cuda.is_available(),
            mixed_precision="bf16" if precision == "bf16" else "no",
        )
        torch.manual_seed(0)
        model = Transformer(cfg.model, pad_id=PAD)
        # what train.py applies to its model, by the same function
        self.model, self.forward, self.optimizer, self.scheduler = prepare_training(
            self.acc, model, cfg
        )
        self.cfg, self.batches = cfg, batches if batches is not None else loader(ds, args)
        self.stats = StepStats.zeros(self.acc.device)
        self.model.train()

    def step(self) -> dict:
        """One training step; returns the batch as the loader served it (train_step moves
        a copy to the device), which run_round counts on the host."""
        batch = next(self.batches)
        t = self.cfg.train
        train_step(
            self.acc,
            self.forward,
            self.optimizer,
            [batch],
            PAD,
            t.label_smoothing,
            t.clip_norm,
            self.stats,
        )
        self.scheduler.step()
        return batch


class MarianEngine:
    """MarianMTModel in the usual PyTorch loop."""

    name = "marian"

    def __init__(
        self,
        cfg: Config,
        ds,
        args: argparse.Namespace,
        precision: str,
        batches=None,
        foreach: bool | None = None,
    ) -> None:
        """foreach: Adam's multi-tensor implementation (None: PyTorch's default for the
        device, which is foreach on CUDA and a loop over parameters on a CPU)."""
        from transformers import MarianMTModel

        m = cfg.model
        shape = argparse.Namespace(
            d_model=m.d_model, layers=m.n_encoder_layers, n_heads=m.n_heads, d_ff=m.d_ff
        )
        torch.manual_seed(0)
        self.model = MarianMTModel(marian_config(shape, m.vocab_size, m.dropout)).to(device())
        t = cfg.train
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=peak_lr(t, m.d_model),
            betas=tuple(t.betas),
            eps=t.eps,
            foreach=foreach,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_multiplier(t, m.d_model)
        )
        kind = device().type
        self.autocast = torch.autocast(kind, torch.bfloat16) if precision == "bf16" else None
        self.cfg, self.batches = cfg, batches if batches is not None else loader(ds, args)
        self.model.train()

    def step(self) -> dict:
        """One training step; returns the batch as the loader served it, not its device
        copy: run_round counts it on the host, as T2Engine's (no sync t2 does not pay)."""
        served = next(self.batches)
        batch = {k: v.to(device(), non_blocking=True) for k, v in served.items()}
        with self.autocast or nullcontext():
            logits = self.model(
                input_ids=batch["src"],
                attention_mask=batch["src"].ne(PAD),
                decoder_input_ids=batch["tgt_in"],
            ).logits
            loss = F.cross_entropy(
                logits.flatten(0, 1).float(),
                batch["tgt_out"].flatten(),
                ignore_index=PAD,
                label_smoothing=self.cfg.train.label_smoothing,
            )
        loss.backward()
        if self.cfg.train.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.clip_norm)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return served


@dataclass
class Rounds:
    tokens_per_s: list[float] = field(default_factory=list)
    s_per_step: list[float] = field(default_factory=list)
    flops_per_s: list[float] = field(default_factory=list)
    host_ms_per_step: list[float] = field(default_factory=list)  # the process's CPU time
    peak_mib: float = 0.0
    warmup_s: float = 0.0  # the warm-up rounds' wall time (torch.compile's compilation, too)
    recompiles: int = 0  # graphs compiled during the timed rounds (none once warm)
    gpu_ms_per_step: float | None = None  # kernel time of a profiled step (CUDA only)
    kernels_per_step: int | None = None


def run_round(engine, n: int, cfg: Config, out: Rounds | None, measure_memory: bool) -> float:
    """Run n steps; record their figures in `out` (if given); return the wall time.

    A round that measures memory records only its peak: freed heap pages go back to the
    system before it (the peak counts from a trimmed heap) and a thread samples the resident
    set during it, neither of which a training loop does. Timed rounds keep the heap as it
    is (every trimmed page costs a page fault when it is touched again)."""
    if measure_memory:
        release_free_memory()
    with PeakMemory(str(device())) if measure_memory else nullcontext() as peak:
        sync()
        start, cpu, tokens, flops = time.perf_counter(), time.process_time(), 0, 0
        for _ in range(n):
            t, f = batch_flops(cfg, engine.step())
            tokens, flops = tokens + t, flops + f
        sync()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    if out is not None and peak is not None:
        out.peak_mib = max(out.peak_mib, peak.mib)
    elif out is not None:
        out.tokens_per_s.append(tokens / seconds)
        out.s_per_step.append(seconds / n)
        out.flops_per_s.append(flops / seconds)
        out.host_ms_per_step.append(1e3 * cpu / n)
    return seconds


def gpu_step(engine) -> tuple[int, float]:  # noqa: ANN001
    """(kernels launched, their summed time in ms) over one step, by torch.profiler: the
    GPU's busy time, against the host's CPU time per step (Rounds.host_ms_per_step)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        engine.step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(kernels), sum(e.device_time_total for e in kernels) / 1e3
