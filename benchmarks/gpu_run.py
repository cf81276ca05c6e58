"""benchmarks/gpu.sh's parts run for real (benchmarks/gpu_plan.py decides which, in what
order and under what limits): each under timeout(1), the warm-up's side by side.

    python -m benchmarks.gpu_run OUT --python PY --since EPOCH --budget S [--quick]
        [--compile-cache DIR] [--data DIR] [--dry-run]

--dry-run prints every part's command line (shell-quoted), the warm-up's first (those start
together), with its need and limit at the full budget and the seconds the last run kept in
the compile cache's gpu-durations.json (else the priors), and runs nothing.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import gpu_durations
from benchmarks.gpu_durations import CONTENTION, PRIOR_COMPILE_S, Measured
from benchmarks.gpu_plan import (
    FULL,
    KILL_AFTER_S,
    QUICK,
    Execute,
    Job,
    Part,
    Plan,
    decide,
    run_plan,
)


def command_line(
    part: Part, modes: tuple[str, ...], python: str, fill: dict[str, str]
) -> list[str]:
    """The part's command line: the interpreter, its arguments, --modes if it has modes. A
    --set value with a placeholder is quoted as YAML (JSON is YAML), so that a folder named
    with ` #` or `: ` reaches t2's config whole."""
    args, after_set = [], False
    for a in part.argv:
        filled = a.format(**fill)
        if filled != a and (after_set or a.startswith("--set=")):
            key, _, value = filled.partition("=")
            if a.startswith("--set="):
                key, _, value = value.partition("=")
                filled = f"--set={key}={json.dumps(value)}"
            else:
                filled = f"{key}={json.dumps(value)}"
        args.append(filled)
        after_set = a == "--set"
    return [python, *args, *(["--modes", ",".join(modes)] if modes else [])]


def timed(out: Path, poll_s: float = 0.2) -> Execute:
    """Runs parts side by side, each under timeout(1) (its whole process group: compile
    workers too), its output in OUT/NAME.txt; each one's seconds from the common start to
    its own end."""

    def execute(jobs: list[Job]) -> list[tuple[int, float]]:
        started, running = time.monotonic(), []
        for part, done, argv in jobs:
            limit = ["timeout", "-k", str(KILL_AFTER_S), str(done.limit_s)]
            with open(out / f"{part.name}.txt", "w") as log:
                running.append(subprocess.Popen([*limit, *argv], stdout=log, stderr=log))
        ended: list[tuple[int, float] | None] = [None] * len(running)
        while None in ended:
            for i, process in enumerate(running):
                if ended[i] is None and process.poll() is not None:
                    ended[i] = (process.returncode, time.monotonic() - started)
            time.sleep(poll_s)
        return [e for e in ended if e is not None]

    return execute


def dry_run(
    plan: Plan, budget: float, python: str, fill: dict[str, str], known: Measured
) -> list[str]:
    """The plan's lines, as the run would start them with the whole budget left and the
    seconds `known` (gpu-durations.json, else the priors), each command line shell-quoted."""
    warm_s = known.warm_s
    lines = [f"# warm-up, side by side (a compilation {warm_s:.0f} s beside the others):"]
    for part in plan.warm:
        d = decide(part, budget, warm_s, PRIOR_COMPILE_S * CONTENTION, known.parts_s.get(part.name))
        argv = command_line(part, d.modes, python, fill)
        lines.append(f"{part.name}: need {d.need_s} s, limit {d.limit_s} s: {shlex.join(argv)}")
    # as gpu_plan.run_plan: cold is what the warm-up measures (the last run's, here)
    cached_s, cold_s = known.cached_s, known.warm_compile_s or PRIOR_COMPILE_S
    lines.append(f"# timed, in turn (a compilation from the cache {cached_s:.0f} s, else cold):")
    for part in plan.timed:
        took = known.parts_s.get(part.name)
        d = decide(part, budget, cached_s if part.warmed else cold_s, cold_s, took)
        argv = command_line(part, part.modes, python, fill)
        lines.append(f"{part.name}: need {d.need_s} s alone: {shlex.join(argv)}")
    return lines


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--python", required=True, help="the interpreter gpu.sh chose")
    p.add_argument("--since", type=float, required=True, help="gpu.sh's start (epoch seconds)")
    p.add_argument("--budget", type=float, required=True, help="seconds, set-up included")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--compile-cache", required=True)
    p.add_argument("--data", default="../shared/data")
    p.add_argument("--dry-run", action="store_true", help="print the command lines, run none")
    args = p.parse_args(argv)
    fill = {"out": str(args.out), "cache": args.compile_cache, "data": args.data}
    plan = QUICK if args.quick else FULL
    if args.dry_run:
        known = gpu_durations.read(Path(args.compile_cache))
        print("\n".join(dry_run(plan, args.budget, args.python, fill, known)))
        return
    run_plan(
        plan,
        args.out,
        args.budget,
        lambda: time.time() - args.since,
        timed(args.out),
        lambda part, modes: command_line(part, modes, args.python, fill),
        Path(args.compile_cache),  # its gpu-durations.json: this run's seconds, for the next
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
