"""How long gpu.sh's parts take: the priors for a machine that has never run them, and the
seconds a run measured, kept in the shared compile cache's folder (outside OUT, so that
the next run into another OUT reads them, and a cache deleted takes them with it).

The priors are the issue 54 review's estimates for a cold machine with MARGIN on top: a
whole-model compilation 50-90 s (so 90 x 1.2 = 108 s), one loaded from the compile cache
about 20 s (25 s), the CUDA tests 60-130 s (pytest's 40 s start-up and one compilation's
worth: 148 s alone). A run replaces each by what it measured: the warm-up's compile
seconds (beside one another, so CONTENTION is in them), the timed parts' compile seconds,
and each part without modes that ended well (the CUDA tests) whole. The limits stay
cold: a part's limit is SLACK times its need with at least PRIOR_COMPILE_S a compilation,
so a cache that misses does not cut a part the figures said would be quick. A figure that
is not seconds (NaN, a string, under MIN_S, over MAX_S) is never read nor kept.
(The standard library only: the plan runs before anything else is known to import.)"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

MARGIN = 1.2  # over the review's top estimates, for a machine slower than it guessed
PRIOR_COMPILE_S = 90.0 * MARGIN  # a whole model's cold compilation, alone
PRIOR_CACHED_S = 25.0  # a whole model's compilation loaded from the warm-up's cache
CONTENTION = 1.3  # a compilation beside the warm-up's others: this much slower than alone
MAX_S = 3600.0  # no part of a 10-minute session takes longer: a larger figure is corrupt
MIN_S = 1.0  # no whole-model compilation or part takes less: a smaller figure is corrupt
FILE = "gpu-durations.json"  # in the compile cache's folder


@dataclass
class Measured:
    """Seconds measured by the last run that used this compile cache (None: not yet)."""

    warm_compile_s: float | None = None  # the warm-up's largest, beside the others
    cached_compile_s: float | None = None  # the timed parts' largest
    parts_s: dict[str, float] = field(default_factory=dict)  # a part without modes, whole

    @property
    def warm_s(self) -> float:
        """A warm-up compilation's estimate."""
        return self.warm_compile_s or PRIOR_COMPILE_S * CONTENTION

    @property
    def cached_s(self) -> float:
        """A timed part's compilation from the cache, until this run measures one."""
        return self.cached_compile_s or PRIOR_CACHED_S


def seconds(value: object) -> float | None:
    """`value` as a duration gpu.sh can plan with (finite, MIN_S to MAX_S), else None."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and MIN_S <= value <= MAX_S else None  # NaN fails both


def read(cache: Path | None) -> Measured:
    """The durations kept in `cache` (a compile cache folder), or none measured yet. A
    field that is not seconds (NaN, a string, a list, under MIN_S, over MAX_S) is the
    prior's, with a note on stderr: a corrupt file never plans a run, nor is kept."""
    try:
        found = json.loads((cache / FILE).read_text()) if cache else {}
    except (OSError, ValueError, RecursionError):  # none yet, not JSON or nested past
        return Measured()  # what the parser takes: the priors
    if not isinstance(found, dict):
        return _noted(Measured(), cache, f"a {type(found).__name__}, not a mapping of seconds")
    known, bad = Measured(), []
    for name in ("warm_compile_s", "cached_compile_s"):
        value = found.get(name)
        setattr(known, name, seconds(value))
        if value is not None and known.__dict__[name] is None:
            bad.append(f"{name}={value!r}")
    parts = found.get("parts_s", {})
    if not isinstance(parts, dict):
        bad.append(f"parts_s={parts!r}")
        parts = {}
    for part, value in parts.items():
        if seconds(value) is None:
            bad.append(f"parts_s[{part!r}]={value!r}")
        else:
            known.parts_s[str(part)] = seconds(value)
    why = f"{', '.join(bad)}: not seconds ({MIN_S:.0f} <= s <= {MAX_S:.0f})"
    return _noted(known, cache, why) if bad else known


def _noted(known: Measured, cache: Path | None, why: str) -> Measured:
    print(
        f"note: {cache}/{FILE}: {why}; the priors for it instead",
        file=sys.stderr,
    )
    return known


def remember(known: Measured, ended: list, cache: Path | None) -> None:
    """The seconds of each part without modes that ended well (gpu_plan's Outcomes) into
    `known`, and `known` kept in `cache` whole (written, then renamed) for the next run."""
    took = {o.part: seconds(o.took_s) for o in ended if not o.modes and o.status == "0"}
    known.parts_s.update({part: s for part, s in took.items() if s is not None})
    for name in ("warm_compile_s", "cached_compile_s"):  # a corrupt row's: never kept
        setattr(known, name, seconds(getattr(known, name)))
    if cache is None or known == Measured():  # nothing measured: no folder made for it
        return
    cache.mkdir(parents=True, exist_ok=True)
    tmp = cache / f".{FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(asdict(known), indent=1) + "\n")
    tmp.replace(cache / FILE)
