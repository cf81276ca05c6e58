"""What the decoding benchmarks share: t2's side of a forced-length decode (its model
config, the EOS mask, the search over length batches), the peak-memory measurement and the
alternating timing of engines. bench_decode.py (t2 against generate()) and
decode_cache.py (key/value head counts) both build on it; it imports neither.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field

import psutil
import torch

from t2.config import ModelConfig
from t2.decoding.options import DecodeConfig
from t2.decoding.search import search
from t2.model.transformer import Transformer
from t2.progress import Progress
from t2.serve.engine import length_batches, pad_batch
from t2.specials import EOS


def t2_config(args: argparse.Namespace, vocab: int, dropout: float = 0.0) -> ModelConfig:
    return ModelConfig(
        vocab_size=vocab,
        d_model=args.d_model,
        n_heads=args.n_heads,
        d_ff=args.d_ff,
        n_encoder_layers=args.layers,
        n_decoder_layers=args.layers,
        dropout=dropout,
    )


def eos_masked(model: Transformer) -> Transformer:
    """`model`, changed in place so that it never emits EOS (the forced length ends the
    search); load weights and change the dtype first."""
    original_project = model.project
    eos = torch.tensor([EOS], device=next(model.parameters()).device)
    model.project = lambda h: original_project(h).index_fill(-1, eos, float("-inf"))
    return model


def run_t2(
    model: Transformer, src_ids: list[list[int]], lengths: list[int], beam: int, args
) -> int:
    tokens = 0
    for batch in length_batches([len(r) for r in src_ids], args.batch_size):
        src = pad_batch([src_ids[i] for i in batch], args.device)
        limit = torch.tensor([lengths[i] for i in batch], device=args.device)
        hyps = search(model, src, DecodeConfig(beam_size=beam, lenpen=0.6), lengths=limit)
        tokens += sum(len(h[0].tokens) + 1 for h in hyps)  # + the final EOS
    return tokens


class PeakMemory:
    """Peak CUDA memory allocated, or peak resident memory sampled every 5 ms on a CPU,
    above what was in use when the measurement started."""

    def __init__(self, device: str, others: Sequence[int] = ()) -> None:
        """`others`: ids of processes whose resident memory counts too (worker processes)."""
        self.cuda = device.startswith("cuda")
        self.processes = [psutil.Process(), *map(psutil.Process, others)]
        self.peak = 0

    def _rss(self) -> int:
        return sum(p.memory_info().rss for p in self.processes)

    def __enter__(self) -> PeakMemory:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
        else:
            self.base = self.peak = self._rss()
            self.running = True
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def _sample(self) -> None:
        while self.running:
            self.peak = max(self.peak, self._rss())
            time.sleep(0.005)

    def __exit__(self, *exc) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            self.peak = torch.cuda.max_memory_allocated()
        else:
            self.running = False
            self.thread.join()

    @property
    def mib(self) -> float:
        return (self.peak - self.base) / 2**20


@dataclass
class Timing:
    """The best of the timed runs of one engine and setting."""

    wall: float = float("inf")  # seconds
    cpu: float = float("inf")  # process CPU seconds (all threads): less sensitive to load
    tokens: int = 0
    peak_mib: float = 0.0
    walls: list[float] = field(default_factory=list)  # every timed run's


def timed(fn, model, work: tuple, beam: int, args, timing: Timing) -> None:
    """One run of `fn`, folded into `timing` (best times, highest peak memory)."""
    with PeakMemory(args.device) as peak:
        wall, cpu = time.perf_counter(), time.process_time()
        timing.tokens = fn(model, *work, beam, args)
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    timing.wall, timing.cpu = min(timing.wall, wall), min(timing.cpu, cpu)
    timing.walls.append(wall)
    timing.peak_mib = max(timing.peak_mib, peak.mib)


def compare(engines: dict, work: tuple, beam: int, args) -> dict[str, Timing]:
    """Warm up each engine, then time them alternately --repeats times (t2, hf, t2, hf...)
    so that a change in the machine's load affects both alike."""
    kind = args.device.split(":")[0]
    autocast = torch.autocast(kind, torch.bfloat16) if args.bf16 else nullcontext()
    timings = {name: Timing() for name in engines}
    with autocast:
        for fn, model in engines.values():
            fn(model, *(w[: max(args.batch_size // 4, 1)] for w in work), beam, args)
        with Progress(args.repeats * len(engines), f"beam {beam}", "runs") as progress:
            for _ in range(args.repeats):
                for name, (fn, model) in engines.items():
                    timed(fn, model, work, beam, args, timings[name])
                    progress.update(1)  # between timed runs, outside the clock
    return timings
