"""The engines a serving benchmark names (--engines), and how their runs compare: shared
by bench_serve (equal forced work) and serve_trained (trained models decoding freely)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

ENGINES = (
    "hf",
    "t2",
    "hf_bf16",
    "t2_bf16",
    "ct2_float32",
    "ct2_int8",
    "ct2_peer_float32",
    "ct2_peer_int8",
)
DEFAULT_ENGINES = ENGINES[:6]
# *_bf16: every weight in bfloat16 (MarianMTModel.to(torch.bfloat16), t2 --precision bfloat16),
# compared with HF in float32 and with HF in bfloat16; CTranslate2 has no bfloat16 on a CPU.
# ct2_peer_*: the HF peer converted by CTranslate2's own converter, not by t2's export


def engine_spec(spec: str) -> tuple[str, int]:
    """'ct2_int8@2' -> ('ct2_int8', 2): an engine and its number of workers (1 without @)."""
    name, _, workers = spec.partition("@")
    return name, int(workers) if workers else 1


def ordered(engines: str) -> list[str]:
    """The comma-separated --engines once each, in ENGINES order, then by workers."""
    specs = dict.fromkeys(engines.split(","))
    return sorted(specs, key=lambda s: (ENGINES.index(engine_spec(s)[0]), engine_spec(s)[1]))


def bad_engine(spec: str) -> str | None:
    """Why an --engines entry is not valid, or None."""
    name, _, workers = spec.partition("@")
    if name not in ENGINES:
        return f"unknown engine {name!r}; valid: {', '.join(ENGINES)}"
    if "@" in spec and not (workers.isdigit() and int(workers) >= 1):
        return f"{spec!r}: the number of workers after @ must be a whole number of at least 1"
    return None


@dataclass
class Runs:
    """Every timed run of one engine."""

    walls: list[float] = field(default_factory=list)
    tokens: int = 0
    peak_mib: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.walls)


def peer_of(spec: str, runs: dict) -> str | None:
    """The HF run an engine is compared with at its own precision (bf16 with bf16)."""
    peer = "hf_bf16" if engine_spec(spec)[0].endswith("_bf16") else "hf"
    return peer if peer in runs else None


def ratios(name: str, runs: dict[str, Runs], speed) -> tuple[float | None, float | None]:  # noqa: ANN001
    """An engine's speed over HF float32's and over HF's at the engine's own precision;
    `speed(runs)` is what is compared (1 / median wall time, or tokens/s)."""
    hf = speed(runs["hf"]) if "hf" in runs else None
    peer = peer_of(name, runs)
    own = speed(runs[name])
    return (own / hf if hf else None), (own / speed(runs[peer]) if peer else None)


def fmt_ratio(ratio: float | None) -> str:
    return "" if ratio is None else f"{ratio:6.2f}x"
