"""When a training run stops, and the counters its rules read.

Besides `train.max_steps`, a run stops at a wall-clock budget (`train.max_minutes`), a
number of target tokens (`train.max_train_tokens`) or a validation exact match
(`train.stop_exact_match`), whichever holds first; the counters (`train_tokens`,
`elapsed_s`) are saved in every checkpoint, so a resumed run continues its budget.

No rule reads the device. Tokens are counted on the host from the sampler's global list
of batches (TargetTokens); the clock is the host's. With several processes, whose clocks
differ, the main process's clock decides, read where the processes already synchronise
(every `train.log_every` steps), so that all of them stop at the same step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from t2.config import TrainConfig
from t2.data.batching import BatchSampler


class TargetTokens:
    """Target tokens of the batches consumed by all processes, counted on the host.

    Every process builds the same global list of an epoch's batches (BatchSampler), and the
    sampler's position counts the batches that all of them consumed; so each process knows
    the others' batches, and with each pair's target length the tokens of a whole step,
    with no communication and no read of the device."""

    def __init__(self, sampler: BatchSampler, target_lengths: Sequence[int]) -> None:
        # a row of tgt_out is the target ids shifted by one: its length minus one are tokens
        # (subtracted where they are summed: no copy of a corpus-long array is kept)
        self.sampler, self.lengths = sampler, np.asarray(target_lengths)
        self._prefix: dict[int, np.ndarray] = {}
        self.mark = (sampler.epoch, sampler.position)

    def _consumed(self, epoch: int, position: int | None = None) -> int:
        """Tokens of the epoch's first `position` global batches (None: all of them)."""
        if epoch not in self._prefix:
            batches = self.sampler._global(epoch)  # the list every process builds
            sizes = np.array([len(b) for b in batches], dtype=np.int64)
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
            lengths = self.lengths[np.concatenate(batches)] if batches else self.lengths[:0]
            per_batch = np.add.reduceat(lengths, starts, dtype=np.int64) if batches else sizes
            self._prefix = {e: p for e, p in self._prefix.items() if e >= epoch - 1}
            self._prefix[epoch] = np.concatenate([[0], np.cumsum(per_batch - sizes)])
        prefix = self._prefix[epoch]
        return int(prefix[-1 if position is None else position])

    def take(self) -> int:
        """Tokens consumed since the last call (or since construction)."""
        (e0, p0), (e1, p1) = self.mark, (self.sampler.epoch, self.sampler.position)
        self.mark = (e1, p1)
        tokens = self._consumed(e1, p1) - self._consumed(e0, p0)
        return tokens + sum(self._consumed(e) for e in range(e0, e1))


def _same(value: float) -> float:
    return value


@dataclass
class Budget:
    """The stop rules of `cfg` and the counters they read."""

    cfg: TrainConfig
    tokens: TargetTokens
    first_step: int = 0  # where this session started: every process checks the clock there
    train_tokens: int = 0  # cumulative over resumes
    saved_s: float = 0.0  # elapsed_s when this session started
    exact_match: float | None = None  # the last validation's (main process), saved too
    processes: int = 1
    agree: Callable[[float], float] = _same  # several processes: the main process's value
    start: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        self.first_tokens = self.train_tokens

    @property
    def elapsed_s(self) -> float:
        return self.saved_s + time.perf_counter() - self.start

    def counters(self) -> dict[str, Any]:
        """What metrics.jsonl records carry and a checkpoint saves."""
        return {"train_tokens": self.train_tokens, "elapsed_s": round(self.elapsed_s, 3)}

    def state(self) -> dict[str, Any]:
        """What a checkpoint saves, so that a resumed run goes on with its budget."""
        return {**self.counters(), "valid_exact_match": self.exact_match}

    def count_step(self) -> None:
        self.train_tokens += self.tokens.take()

    def stop_reason(self, step: int) -> str | None:
        """The first rule that holds after `step` steps, or None to go on."""
        cfg = self.cfg
        if step >= cfg.max_steps:
            return "max_steps"
        if cfg.max_train_tokens and self.train_tokens >= cfg.max_train_tokens:
            return "max_train_tokens"
        clock = self.processes == 1 or step % cfg.log_every == 0 or step == self.first_step
        if cfg.max_minutes and clock and self.agree(self.elapsed_s) >= 60 * cfg.max_minutes:
            return "max_minutes"
        met = self.exact_match is not None and self.exact_match >= cfg.stop_exact_match
        if step == self.first_step and cfg.stop_exact_match and met:  # resumed, already met
            return "stop_exact_match"
        return None

    def exact_match_reached(self, record: dict[str, Any] | None) -> bool:
        """Whether a validation record (the main process's; None elsewhere) meets the target.
        Called by every process at each validation step, so that they all stop together."""
        target = self.cfg.stop_exact_match
        if record is not None and "valid_exact_match" in record:
            self.exact_match = record["valid_exact_match"]
        if not target:
            return False
        hit = record is not None and record.get("valid_exact_match", -1.0) >= target
        return self.agree(float(hit)) > 0.5

    def seconds_left(self, step: int) -> float:
        """For the progress line: the nearest of the limits that are set, at this session's
        pace so far (validation and checkpoints included)."""
        cfg, spent = self.cfg, max(time.perf_counter() - self.start, 1e-9)
        done = step - self.first_step  # steps of this session: none yet, no pace
        left = [(cfg.max_steps - step) * spent / done] if done > 0 else []
        if cfg.max_minutes:
            left.append(60 * cfg.max_minutes - self.elapsed_s)
        new_tokens = self.train_tokens - self.first_tokens
        if cfg.max_train_tokens and new_tokens > 0:
            left.append((cfg.max_train_tokens - self.train_tokens) * spent / new_tokens)
        return max(min(left, default=0.0), 0.0)

    def outcome(self, stopped_by: str, step: int) -> dict[str, Any]:
        """What results.json records about the end of training."""
        return {"stopped_by": stopped_by, "steps": step, **self.counters()}


def budget_for(run: Any, state: dict[str, Any], step: int) -> Budget:
    """The budget of a run (t2.train.setup.Training) at `step`, its counters restored from a
    checkpoint's training state (empty for a new run; zero for one saved before them)."""
    acc = run.accelerator
    agree = _same
    if acc.num_processes > 1:
        from accelerate.utils import broadcast

        def agree(value: float) -> float:
            tensor = torch.tensor(value, dtype=torch.float64, device=acc.device)
            return broadcast(tensor, from_process=0).item()

    tokens = TargetTokens(run.sampler, run.target_lengths)
    return Budget(
        run.cfg.train,
        tokens,
        step,
        int(state.get("train_tokens", 0)),
        float(state.get("elapsed_s", 0.0)),
        state.get("valid_exact_match"),
        acc.num_processes,
        agree,
    )
