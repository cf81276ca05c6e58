"""The stages of preparing data (read and clean, sample, learn the BPE, encode, plan the
batches): each one's seconds are kept for the run's record (meta.json's `data.stages_s`),
and each one shows its progress: a bar on a terminal, a line every 10 s in a log file.

    with stage("data train: encode", total=len(pairs), unit="pairs") as progress:
        for chunk in chunks:
            ...
            progress.update(len(chunk))
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from t2.progress import Progress, line_interval, on_terminal

EVERY_S = 10.0  # a log file's progress lines for the data stages (T2_PROGRESS_EVERY wins)
BEAT_AT_LEAST_S = 1.0  # a heartbeat's lines at most this often, whatever T2_PROGRESS_EVERY
_seconds: dict[str, float] = {}
_facts: dict[str, object] = {}
_spans: list[tuple[str, float, float]] = []  # (stage, start, end) on time.perf_counter


def every_s() -> float | None:
    """Seconds between a log file's lines: T2_PROGRESS_EVERY when set, else EVERY_S."""
    return None if os.environ.get("T2_PROGRESS_EVERY") else EVERY_S


@contextmanager
def stage(
    name: str, total: int | None = None, unit: str = "pairs", bar: bool = True
) -> Iterator[Progress]:
    """Time the block as stage `name` (seconds added up if it runs again), counting its work
    on a Progress of `total` units (bar=False: a library draws the terminal's bar)."""
    start = time.perf_counter()
    with Progress(total, name, unit, every_s=every_s(), bar=bar) as progress:
        yield progress
    add(name, start)


class Heartbeat:
    """Stage `name`, work that counts no progress of its own (planning the batches; the
    BPE's merges, in Rust): a line at least every EVERY_S seconds that it is still going,
    and for how long; not on a terminal where a library draws a bar (`bar_drawn`). A
    context manager, or start() and stop() from different places (the merges begin when
    the texts run out)."""

    def __init__(self, name: str, bar_drawn: bool = False) -> None:
        self.name, self.done, self.start_s = name, threading.Event(), 0.0
        self.quiet = bar_drawn and on_terminal()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> Heartbeat:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.start_s = time.perf_counter()
        if not self.quiet:
            self.thread = threading.Thread(target=self._beat, daemon=True)
            self.thread.start()

    def _beat(self) -> None:
        interval = max(every_s() or line_interval(), BEAT_AT_LEAST_S)
        while not self.done.wait(interval):
            seconds = time.perf_counter() - self.start_s
            print(f"{self.name}: {seconds:.0f} s so far", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if not self.start_s:
            return
        self.done.set()
        if self.thread is not None:
            self.thread.join()
        add(self.name, self.start_s)
        self.start_s = 0.0


def add(name: str, start: float) -> None:
    """Stage `name` ran from `start` (time.perf_counter) to now."""
    end = time.perf_counter()
    _seconds[name] = round(_seconds.get(name, 0.0) + end - start, 3)
    _spans.append((name, start, end))


def note(key: str, value: object) -> None:
    """A fact of the data preparation for the run's record (e.g. the tokenizer's sample)."""
    _facts[key] = value


def begin() -> None:
    """Forget what an earlier run in this process recorded."""
    _seconds.clear()
    _facts.clear()
    _spans.clear()


def spans() -> list[tuple[str, float, float]]:
    """When each stage ran (time.perf_counter), in the order they ended."""
    return list(_spans)


def record() -> dict[str, object]:
    """What the run records of its data preparation: each stage's seconds and the facts."""
    return {"stages_s": dict(_seconds), **_facts}
