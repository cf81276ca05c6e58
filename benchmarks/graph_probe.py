"""What a compiled training row really ran, for benchmarks/bench_train.py and the CUDA tests.

torch's CUDA-graph trees (torch._inductor.cudagraph_trees) run a function eagerly as a
warm-up the first time they see it (one function per symbolic-shape key: per batch shape),
record it into a CUDA graph the second time and replay the graph from the third; a graph
they cannot capture (an input mutated outside the graph, a CPU tensor, too many
re-recordings) is skipped with a warning and runs without graphs ever after, counted in
`counters["inductor"]["cudagraph_skips"]`. A row that never replayed, or skipped, looks
like a fast compiled row unless these are counted, so `GraphProbe` counts, while it is
open, the trees' eager runs (`CUDAGraphTreeManager.run_eager`), recordings
(`record_function`) and replays (`CUDAGraphNode.run_graph`), and the skips with the
reasons torch logged. The counters are torch internals: one that a torch version lacks
reads as None (unknown), never as 0.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from typing import Any

# (what is counted, the class in torch._inductor.cudagraph_trees, its method)
PROBED = (
    ("warmups", "CUDAGraphTreeManager", "run_eager"),
    ("recordings", "CUDAGraphTreeManager", "record_function"),
    ("replays", "CUDAGraphNode", "run_graph"),
)
SKIP_LOGGERS = "torch._inductor.cudagraph_utils"  # and its artifact loggers (.__cudagraphs)


@dataclass
class GraphCounts:
    """CUDA-graph events: eager warm-up runs, recordings, replays (None: not countable
    with this torch) and skips with their reasons."""

    warmups: int | None = 0
    recordings: int | None = 0
    replays: int | None = 0
    skips: int = 0
    reasons: list[str] = field(default_factory=list)

    def __sub__(self, other: GraphCounts) -> GraphCounts:
        def minus(a: int | None, b: int | None) -> int | None:
            return None if a is None or b is None else a - b

        return GraphCounts(
            minus(self.warmups, other.warmups),
            minus(self.recordings, other.recordings),
            minus(self.replays, other.replays),
            self.skips - other.skips,
            self.reasons[len(other.reasons) :],
        )


class _Reasons(logging.Handler):
    """Collects torch's "skipping cudagraphs due to ..." warnings, first line each."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.reasons: list[str] = []
        self.last: logging.LogRecord | None = None  # a record propagates to a parent

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "skipping cudagraph" in message and record is not self.last:
            self.reasons.append(message.strip().splitlines()[0].split(". Found from")[0][:300])
        self.last = record


class GraphProbe:
    """Within `with GraphProbe() as probe:`, `probe.counts()` is what the CUDA-graph
    trees did since the block began; the methods and loggers are restored on exit."""

    def __init__(self) -> None:
        self.calls: dict[str, int | None] = {name: None for name, _, _ in PROBED}
        self.restore: list[tuple[Any, str, Any]] = []
        self.handler = _Reasons()
        self.loggers: list[logging.Logger] = []

    def __enter__(self) -> GraphProbe:
        import torch._inductor.cudagraph_trees as trees
        import torch._inductor.cudagraph_utils  # noqa: F401 - its loggers exist from here
        from torch._dynamo.utils import counters

        self.skips_before = counters["inductor"]["cudagraph_skips"]
        for name, owner, method in PROBED:
            cls = getattr(trees, owner, None)
            original = getattr(cls, method, None)
            if original is None:
                continue
            self.calls[name] = 0
            self.restore.append((cls, method, original))
            setattr(cls, method, self._counting(name, original))
        manager = logging.root.manager
        names = [n for n in manager.loggerDict if n.startswith(SKIP_LOGGERS)]
        self.loggers = [logging.getLogger(n) for n in names]
        for logger in self.loggers:
            logger.addHandler(self.handler)
        return self

    def _counting(self, name: str, original: Any) -> Any:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = (self.calls[name] or 0) + 1
            return original(*args, **kwargs)

        return counted

    def counts(self) -> GraphCounts:
        from torch._dynamo.utils import counters

        skips = counters["inductor"]["cudagraph_skips"] - self.skips_before
        return GraphCounts(
            self.calls["warmups"],
            self.calls["recordings"],
            self.calls["replays"],
            skips,
            list(self.handler.reasons),
        )

    def __exit__(self, *exc: object) -> None:
        for cls, method, original in reversed(self.restore):
            setattr(cls, method, original)
        for logger in self.loggers:
            logger.removeHandler(self.handler)
