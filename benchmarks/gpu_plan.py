"""benchmarks/gpu.sh's parts: which run, in what order, under what time limit, and what a
run short of time drops; it runs them and writes OUT/parts.tsv (the standard library
only: it runs before anything else is known to import).

    python -m benchmarks.gpu_plan OUT --python PY --since EPOCH --budget S [--quick]
        [--compile-cache DIR]

The budget counts from EPOCH, gpu.sh's start: set-up is inside it. The parts run in order
of value (QUICK, FULL). A part's need is estimated from whole-model compilations: each
compiled row of bench_train records its first micro-batch's seconds (t2_compile_s), and
the largest measured so far in this run is the estimate; before the first, PRIOR_COMPILE_S
(the top of the 50-90 s a cold compilation was estimated at); a part cut at its limit
before a compiled mode finished raises it to what that mode must have taken at least. A
part runs when its first `keep` modes fit in the time left, and the modes after them that
do not fit are dropped (named in parts.tsv, and in the summary); a part that does not fit
is skipped and the next one tried. Its limit is SLACK times its need with a cold
compilation (never less than PRIOR_COMPILE_S), at most the time left: a part that loads
from the cache is not cut if it has to compile after all. A part cut at its limit keeps
the modes it finished (bench_train writes its JSON after each).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PRIOR_COMPILE_S = 90.0
SLACK = 1.5
KILL_AFTER_S = 10  # timeout(1)'s -k: a part that ignores SIGTERM is killed this much later
# whole-model compilations a bench_train mode pays (train_loops.MODES; auto: the recipe's)
COMPILES = {"eager": 0, "compiled": 1, "graphs": 1, "flex": 1, "auto": 1}
CUT = {124, 137}  # timeout(1)'s exit statuses of a part cut at its limit
COLUMNS = ("part", "left_s", "need_s", "limit_s", "took_s", "status", "modes", "dropped")


@dataclass(frozen=True)
class Part:
    """A process of the run: `argv` after the interpreter ({out}, {cache}: OUT and the
    compile cache); bench_train's `modes`, most valuable first, the last dropped first."""

    name: str
    argv: tuple[str, ...]
    modes: tuple[str, ...] = ()
    keep: int = 1  # leading modes without which the part is not worth running
    start_s: float = 10.0  # start-up: imports, data, tokenizer, the peer's warm-up
    mode_s: float = 3.0  # each mode's warm-up and timed rounds, besides its compilation
    compiles: float = 0.0  # compilations' worth of a part without modes (the CUDA tests)

    def need(self, modes: tuple[str, ...], compile_s: float) -> float:
        per_mode = sum(self.mode_s + COMPILES[m] * compile_s for m in modes)
        return self.start_s + self.compiles * compile_s + per_mode


def bench(name: str, recipe: str, modes: tuple[str, ...], *extra: str, **kw: float) -> Part:
    """bench_train on `recipe` at 25k-token batches, bf16, its JSON in OUT/NAME.json."""
    argv = ("-m", "benchmarks.bench_train", "--recipes", recipe, "--precisions", "bf16")
    argv += ("--max-tokens", "25000", "--set=train.compile_cache={cache}", *extra)
    return Part(name, (*argv, "--json", f"{{out}}/{name}.json"), modes, **kw)


QUICK_ROUNDS = ("--rounds", "2", "--steps-per-round", "3")
# three compilations of a two-layer model: about one whole model's
TESTS = Part(
    "tests", ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cuda.py"), compiles=1.0
)
QUICK = (
    bench("train-base", "base", ("eager", "graphs"), *QUICK_ROUNDS),
    bench("train-v2", "v2_rope_rmsnorm", ("eager", "graphs"), *QUICK_ROUNDS),
    bench("ops", "base", (), "--rounds", "0", "--count-ops", start_s=20),
    # FlexAttention against SDPA: both compiled alike, timed against the same peer
    bench("train-base-flex", "base", ("compiled", "flex"), *QUICK_ROUNDS, keep=2),
    TESTS,
    bench("train-v2-compiled", "v2_rope_rmsnorm", ("compiled",), *QUICK_ROUNDS),
    bench("train-big", "big", ("eager", "graphs"), *QUICK_ROUNDS),
)
TRAIN = ("train.py", "--wandb", "disabled", "--set=train.compile_cache={cache}")
DATA = "{data}"
BEFORE = "data.max_tokens=4096,train.accumulate=6,data.max_shapes=0,data.max_tokens_per_sentence=64"
FULL = (
    TESTS,
    Part(
        "quickstart",
        (*TRAIN, "--recipe", "quickstart", "--out", "{out}/quickstart"),
        start_s=30,
        compiles=0.3,
    ),
    Part("memory", ("-m", "benchmarks.bench_memory", "--json", "{out}/memory.json"), start_s=45),
    Part(
        "recipe_base",
        ("-m", "benchmarks.bench_recipe", "--recipe", "base", "--steps", "60", "--log-every")
        + ("10", "--rounds", "1", "--arm", "shipped=", "--json", "{out}/recipe_base.json")
        + ("--arm", "before=" + BEFORE),
        start_s=45,
        compiles=0.4,
    ),
    bench("train-base", "base", ("auto",), "--rounds", "3", "--count-ops", mode_s=15),
    bench("train-v2", "v2_rope_rmsnorm", ("auto",), "--rounds", "3", "--count-ops", mode_s=15),
    Part(
        "decode",
        ("-m", "benchmarks.bench_decode", "--device", "cuda", "--bf16", "--beams", "1,4"),
        start_s=45,
    ),
    Part(
        "mixed",
        (*TRAIN, "--recipe", "base", "--out", "{out}/mixed", "--set", "train.max_minutes=2")
        + ("--set", f"data.train=files:{DATA}/mixed/train", "--set", "decode.beam_size=1")
        + ("--set", f"data.valid=files:{DATA}/newstest/newstest2013")
        + ("--set", f"data.test=files:{DATA}/newstest/newstest2013")
        + ("--set", "train.eval_every=100000", "--set", "train.save_every=100000")
        + ("--set", "train.warmup_steps=1000"),
        start_s=150,
    ),
)


@dataclass
class Outcome:
    """A line of OUT/parts.tsv: the time left when the part came up, its estimated need,
    its limit, the seconds it took, its exit status (or `skipped`), the modes it ran
    with and those dropped for time before it started."""

    part: str
    left_s: int
    need_s: int
    limit_s: int
    took_s: int
    status: str
    modes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def line(self) -> str:
        cells = [str(getattr(self, c)) for c in COLUMNS[:6]]
        return "\t".join([*cells, ",".join(self.modes), ",".join(self.dropped)]) + "\n"


def parts(out: Path) -> list[Outcome]:
    """OUT/parts.tsv, as run_plan wrote it."""
    path, rows = out / "parts.tsv", []
    for line in path.read_text().splitlines() if path.is_file() else []:
        c = line.split("\t")
        modes, dropped = (tuple(filter(None, cell.split(","))) for cell in c[6:8])
        rows.append(Outcome(c[0], *map(int, c[1:5]), c[5], modes, dropped))
    return rows


def decide(part: Part, left: float, compile_s: float) -> Outcome:
    """`part` with `left` seconds left: the modes it runs with, or skipped (not yet run)."""
    for n in range(len(part.modes), part.keep - 1, -1) if part.modes else [0]:
        modes = part.modes[:n]
        need = part.need(modes, compile_s)
        if need <= left:
            cold = SLACK * part.need(modes, max(compile_s, PRIOR_COMPILE_S))
            limit = int(min(left, math.ceil(cold)))
            return Outcome(
                part.name, int(left), math.ceil(need), limit, 0, "", modes, part.modes[n:]
            )
    need = part.need(part.modes[: part.keep], compile_s)
    return Outcome(part.name, int(left), math.ceil(need), 0, 0, "skipped", (), part.modes)


def rows(out: Path, name: str) -> list[dict]:
    try:
        found = json.loads((out / f"{name}.json").read_text())
    except (OSError, ValueError):
        return []
    return found if isinstance(found, list) else []


def measured(part: Part, done: Outcome, found: list[dict]) -> list[float]:
    """The compile seconds `part` measured: its compiled rows', and for a part cut before
    a compiled mode finished, the least that mode must have taken."""
    seconds = [r["t2_compile_s"] for r in found if r.get("t2_compiled") and r.get("t2_compile_s")]
    finished = {r.get("engine", "").removeprefix("t2-") for r in found}
    lost = [m for m in done.modes if m not in finished and COMPILES[m]]
    if done.status.isdigit() and int(done.status) in CUT and lost:
        spent = part.start_s + sum(part.mode_s + (r.get("t2_compile_s") or 0.0) for r in found)
        seconds.append(done.took_s - spent - part.mode_s)
    return seconds


Execute = Callable[[Part, Outcome, list[str]], int]
Command = Callable[[Part, tuple[str, ...]], list[str]]


def run_plan(
    plan: tuple[Part, ...],
    out: Path,
    budget: float,
    clock: Callable[[], float],
    execute: Execute,
    command: Command,
) -> list[Outcome]:
    """Each part of `plan` in turn, decided with the time `clock` says is left (seconds
    since gpu.sh began); `execute` runs one under its limit and returns its exit status.
    Writes OUT/parts.tsv, a line as each part ends."""
    seen: list[float] = []  # compile seconds measured in this run
    outcomes = []
    (out / "parts.tsv").write_text("")
    for part in plan:
        started = clock()
        done = decide(part, budget - started, max(seen, default=PRIOR_COMPILE_S))
        if done.status == "skipped":
            print(f"== {part.name} skipped: {done.left_s} s left, it needs about {done.need_s}")
        else:
            argv = command(part, done.modes)
            print(f"== {part.name} (at most {done.limit_s} s): {' '.join(argv)}", flush=True)
            done.status = str(execute(part, done, argv))
            done.took_s = round(clock() - started)
            seen += measured(part, done, rows(out, part.name))
        with open(out / "parts.tsv", "a") as f:
            f.write(done.line())
        outcomes.append(done)
    return outcomes


def command_line(
    part: Part, modes: tuple[str, ...], python: str, fill: dict[str, str]
) -> list[str]:
    """The part's command line: the interpreter, its arguments, --modes if it has modes."""
    args = [a.format(**fill) for a in part.argv]
    return [python, *args, *(["--modes", ",".join(modes)] if modes else [])]


def timed(out: Path) -> Execute:
    """Runs a part under timeout(1) (its whole process group: compile workers too), its
    output in OUT/NAME.txt."""

    def execute(part: Part, done: Outcome, argv: list[str]) -> int:
        limit = ["timeout", "-k", str(KILL_AFTER_S), str(done.limit_s)]
        with open(out / f"{part.name}.txt", "w") as log:
            return subprocess.run([*limit, *argv], stdout=log, stderr=subprocess.STDOUT).returncode

    return execute


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--python", required=True, help="the interpreter gpu.sh chose")
    p.add_argument("--since", type=float, required=True, help="gpu.sh's start (epoch seconds)")
    p.add_argument("--budget", type=float, required=True, help="seconds, set-up included")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--compile-cache", required=True)
    p.add_argument("--data", default="../shared/data")
    args = p.parse_args(argv)
    fill = {"out": str(args.out), "cache": args.compile_cache, "data": args.data}
    run_plan(
        QUICK if args.quick else FULL,
        args.out,
        args.budget,
        lambda: time.time() - args.since,
        timed(args.out),
        lambda part, modes: command_line(part, modes, args.python, fill),
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
