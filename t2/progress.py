"""Progress of long work, as training shows it: a tqdm bar on a terminal, and in a log file
(standard error not a terminal) a plain line every `every_s` seconds (30, or the
T2_PROGRESS_EVERY environment variable) instead of a bar's carriage returns.

Lines go to standard error, so that standard output stays data (`t2 translate` writes its
translations there). A line reads `translate: 640/3003 sentences (21%) 52.3/s left=0.8m`;
work that ends after printing any line prints a last one, `translate: 3003/3003 sentences
in 57.4 s`, and work shorter than `every_s` prints nothing.

    with Progress(len(sources), "translate", "sentences") as progress:
        for batch in batches:
            ...
            progress.update(len(batch))
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

from tqdm.auto import tqdm

from t2.errors import ConfigError

LINE_EVERY_S = 30.0  # a log file gets a progress line at most this often (T2_PROGRESS_EVERY)
T = TypeVar("T")


def line_interval() -> float:
    """Seconds between a log file's lines: T2_PROGRESS_EVERY if set, else LINE_EVERY_S."""
    value = os.environ.get("T2_PROGRESS_EVERY", "")
    try:
        return float(value) if value else LINE_EVERY_S
    except ValueError:
        raise ConfigError(
            f"T2_PROGRESS_EVERY={value!r} is not a number of seconds; set e.g. 30 or unset it"
        ) from None


def on_terminal() -> bool:
    """Whether a bar can be drawn: standard error is a terminal (training's own test)."""
    return sys.stderr.isatty()


class Progress:
    """A counter of `total` units of work: a tqdm bar on a terminal, plain periodic lines
    otherwise. bar=False: another library draws the terminal's bar (datasets.map,
    tokenizers' trainer) and this one only writes the log lines. enabled=False: silent
    (e.g. processes other than the main one)."""

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "it",
        *,
        every_s: float | None = None,
        bar: bool = True,
        enabled: bool = True,
        tty: bool | None = None,
        stream: TextIO | None = None,
    ) -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.every_s = line_interval() if every_s is None else every_s
        self.n, self.lines = 0, 0
        self.stream = stream if stream is not None else sys.stderr
        tty = on_terminal() if tty is None else tty
        self.plain = enabled and not tty  # log lines
        self.bar = None
        if enabled and tty and bar:
            self.bar = tqdm(
                total=total,
                desc=desc,
                unit=f" {unit}",
                leave=False,
                file=self.stream,
                dynamic_ncols=True,
            )
        self.start = self.last = time.perf_counter()

    def update(self, n: int = 1) -> None:
        if n <= 0:
            return
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.plain:
            now = time.perf_counter()
            if now - self.last >= self.every_s:
                self.last = now
                self._line(self._status(now))

    def _status(self, now: float) -> str:
        seconds = max(now - self.start, 1e-9)
        rate = self.n / seconds
        if not self.total:
            return f"{self.desc}: {self.n} {self.unit} {rate:.1f}/s"
        left = (self.total - self.n) / rate / 60 if rate > 0 else float("inf")
        percent = 100 * self.n / self.total
        return (
            f"{self.desc}: {self.n}/{self.total} {self.unit} ({percent:.0f}%) "
            f"{rate:.1f}/s left={left:.1f}m"
        )

    def _line(self, text: str) -> None:
        self.lines += 1
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        elif self.plain and self.lines:
            seconds = time.perf_counter() - self.start
            done = f"{self.n}/{self.total}" if self.total else f"{self.n}"
            self._line(f"{self.desc}: {done} {self.unit} in {seconds:.1f} s")
            self.plain = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def track(
    items: Iterable[T], total: int | None, desc: str, unit: str = "it", **kwargs: Any
) -> Iterator[T]:
    """`items`, counting each one on a Progress (the keyword arguments are Progress's)."""
    with Progress(total, desc, unit, **kwargs) as progress:
        for item in items:
            yield item
            progress.update(1)


@contextmanager
def datasets_bars(show: bool) -> Iterator[None]:
    """Turn datasets' own bars off for the duration unless `show` (a terminal): in a log
    file a Progress writes plain lines instead of tqdm's carriage returns. With `show`,
    datasets' setting (HF_DATASETS_DISABLE_PROGRESS_BARS) is left as it is."""
    from datasets.utils import logging as ds_logging

    if show or not ds_logging.is_progress_bar_enabled():
        yield
        return
    ds_logging.disable_progress_bar()
    try:
        yield
    finally:
        ds_logging.enable_progress_bar()
