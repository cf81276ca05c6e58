"""gpu.sh's plan replayed on a CPU with given durations instead of a GPU: which parts
and modes a run would bring back within its budget (benchmarks/gpu_plan.py decides, as
it does on the GPU; only the clock and the parts are stand-ins).

    python -m benchmarks.gpu_replay [--full] [--budget 355] [--setup 25] [--compile 70]
        [--tests 95] [--cached 20] [--contention 1.3] [--start 10] [--mode 3] [--ops 20]
        [--other 60] [--cache-broken]

A stand-in part takes --start seconds, then for each of its modes --mode seconds plus
a compilation for each whole-model compilation the mode pays (--compile cold, --cached
when the warm-up compiled it into the cache, --compile again with --cache-broken), and
writes bench_train's row (engine, t2_compiled, t2_compile_s) as it finishes the mode; the
CUDA tests take --tests, `ops` --ops and any other part --other. The warm-up's parts run
side by side, each --contention times slower than alone (--compile cold; the tests
--tests), and the clock moves on by the slowest. A part that overruns its limit is cut
there, keeping the modes it finished, as timeout(1) cuts one on the GPU.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gpu_plan import (
    COMPILES,
    FULL,
    QUICK,
    TESTS,
    Job,
    Outcome,
    Part,
    Plan,
    rows,
    run_plan,
)


@dataclass(frozen=True)
class Durations:
    """Seconds each stand-in takes (the issue's middle estimates by default)."""

    setup_s: float = 25.0  # before the first part: choosing Python, wheels, device.txt
    compile_s: float = 70.0  # one whole-model compilation, cold
    tests_s: float = 95.0
    cached_s: float = 20.0  # one loaded from the warm-up's compile cache
    contention: float = 1.3  # the warm-up's parts side by side: each this much slower
    start_s: float = 10.0  # a bench_train part's start-up
    mode_s: float = 3.0  # a mode's warm-up and timed rounds, besides its compilation
    ops_s: float = 20.0
    other_s: float = 60.0


def replay(
    plan: Plan,
    d: Durations,
    budget: float,
    out: Path,
    cache_broken: bool = False,
    cache: Path | None = None,
) -> list[Outcome]:
    """run_plan over stand-in parts on a simulated clock; rows written under `out`.
    `cache_broken`: the warm-up ends well, but every timed part compiles cold again.
    `cache`: the compile cache's folder, whose measured seconds the plan reads and keeps."""
    now = [d.setup_s]
    warmed = {w.name for w in plan.warm}

    def one(part: Part, done: Outcome) -> tuple[int, float]:
        fixed = {"tests": d.tests_s, "ops": d.ops_s}.get(part.name, d.other_s)
        if part.name in warmed:  # beside the others: slower
            took = (d.tests_s if part is TESTS else d.start_s + d.compile_s) * d.contention
            if part is not TESTS and took <= done.limit_s:
                row = {"engine": f"t2-{part.argv[-1]}", "t2_compiled": True}
                (out / f"{part.name}.json").write_text(
                    json.dumps([{**row, "t2_compile_s": took - d.start_s}])
                )
            return (124 if took > done.limit_s else 0), min(took, done.limit_s)
        took, written = (d.start_s, []) if part.modes else (fixed, [])
        for mode in done.modes:
            cached = mode in part.warmed and not cache_broken
            compile_s = d.cached_s if cached else d.compile_s
            took += d.mode_s + COMPILES[mode] * compile_s
            if took > done.limit_s:
                break
            compiled = COMPILES[mode] > 0
            row = {"engine": f"t2-{mode}", "t2_compiled": compiled}
            written.append({**row, "t2_compile_s": compile_s if compiled else None})
            (out / f"{part.name}.json").write_text(json.dumps(written))
        return (124 if took > done.limit_s else 0), min(took, done.limit_s)

    def execute(jobs: list[Job]) -> list[tuple[int, float]]:
        ended = [one(part, done) for part, done, _ in jobs]
        now[0] += max((took for _, took in ended), default=0.0)  # none: every part skipped
        return ended

    command = lambda p, m: [p.name, *m]  # noqa: E731
    return run_plan(plan, out, budget, lambda: now[0], execute, command, cache)


def returned(outcomes: list[Outcome], out: Path) -> set[str]:
    """What came back: `part` for a part without modes that ended well, `part:mode` for
    each mode whose row was written."""
    got = {o.part for o in outcomes if not o.modes and o.status == "0"}
    for o in outcomes:
        got |= {f"{o.part}:{r['engine'].removeprefix('t2-')}" for r in rows(out, o.part)}
    return got


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full run's plan, not --quick's")
    p.add_argument("--budget", type=float, default=355.0)
    for name, default in vars(Durations()).items():
        p.add_argument(f"--{name.removesuffix('_s')}", type=float, default=default)
    p.add_argument("--cache-broken", action="store_true", help="the timed parts compile again")
    args = p.parse_args(argv)
    d = Durations(**{k: getattr(args, k.removesuffix("_s")) for k in vars(Durations())})
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = replay(
            FULL if args.full else QUICK, d, args.budget, Path(tmp), args.cache_broken
        )
        print("\n".join(sorted(returned(outcomes, Path(tmp)))))


if __name__ == "__main__":
    main()
