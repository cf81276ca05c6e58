"""benchmarks/gpu.sh's parts: which run, in what order, under what time limit, and what a
run short of time drops; it runs them and writes OUT/parts.tsv (the standard library
only: it runs before anything else is known to import).

    python -m benchmarks.gpu_plan OUT --python PY --since EPOCH --budget S [--quick]
        [--compile-cache DIR] [--dry-run]

The budget counts from EPOCH, gpu.sh's start: set-up is inside it. A plan (QUICK, FULL)
has a warm-up and timed parts. The warm-up's parts start together, one process each, and
all end before the first timed part starts: each compiles one mode of a timed part into
the shared compile cache exactly as that part will (bench_train --compile-only: the same
batches and shapes; the 16 cores compile side by side, the GPU is idle and nothing is
timed), and the CUDA tests run beside them (a check of correctness, not a figure; their
two-layer models are theirs alone, so warming them apart would compile them twice). The
warm-up's need is the largest of its parts' with a cold compilation, CONTENTION times
over (the parts share the cores), not their sum; parts.tsv has each one's seconds.

The timed parts then run in turn, in order of value. A part's need is estimated from
whole-model compilations: each compiled row of bench_train records its first
micro-batch's seconds (t2_compile_s). A timed part loads its compilations from the
cache: before a timed part has measured one, what the last run with this compile cache
measured, else PRIOR_CACHED_S (a cold compilation if the warm-up did not end well or there
was none: the largest the warm-up measured, else PRIOR_COMPILE_S), then the largest a
timed part measured, so that a cache that missed (a part
compiled again) shrinks what comes after; a part cut at its limit before a compiled mode
finished raises it to what that mode must have taken at least. A part runs when its first
`keep` modes fit in the time left, and the modes after them that do not fit are dropped
(named in parts.tsv, and in the summary); a part that does not fit is skipped and the
next one tried. Its limit is SLACK times its need with a cold compilation (the largest
measured, never less than PRIOR_COMPILE_S), at most the time left: a part that misses the
cache is not cut for compiling after all. A part cut at its limit keeps the modes it
finished (bench_train writes its JSON after each). --dry-run prints the command lines of
the plan, the warm-up's first, and runs nothing. benchmarks/gpu_durations.py keeps the
priors, their margin, and the seconds each run measured, which the next run reads.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks import gpu_durations
from benchmarks.gpu_durations import CONTENTION, PRIOR_COMPILE_S, Measured

SLACK = 1.5
KILL_AFTER_S = 10  # timeout(1)'s -k: a part that ignores SIGTERM is killed this much later
# whole-model compilations a bench_train mode pays (train_loops.MODES; auto: the recipe's)
COMPILES = {"eager": 0, "compiled": 1, "graphs": 1, "flex": 1, "flex-graphs": 1, "auto": 1}
CUT = {124, 137}  # timeout(1)'s exit statuses of a part cut at its limit
COLUMNS = ("part", "left_s", "need_s", "limit_s", "took_s", "status", "modes", "dropped")


@dataclass(frozen=True)
class Part:
    """A process of the run: `argv` after the interpreter ({out}, {cache}: OUT and the
    compile cache; a --set value with one is quoted as YAML: gpu_run.command_line);
    bench_train's `modes`, most valuable first, the last dropped first."""

    name: str
    argv: tuple[str, ...]
    modes: tuple[str, ...] = ()
    keep: int = 1  # leading modes without which the part is not worth running
    start_s: float = 10.0  # start-up: imports, data, tokenizer, the peer's warm-up
    mode_s: float = 3.0  # each mode's warm-up and timed rounds, besides its compilation
    compiles: float = 0.0  # compilations' worth of a part without modes (the CUDA tests)
    warmed: tuple[str, ...] = ()  # modes the warm-up compiles into the cache (warm_part)

    def need(self, modes: tuple[str, ...], compile_s: float) -> float:
        per_mode = sum(self.mode_s + COMPILES[m] * compile_s for m in modes)
        return self.start_s + self.compiles * compile_s + per_mode


def bench(name: str, recipe: str, modes: tuple[str, ...], *extra: str, **kw: float | tuple) -> Part:
    """bench_train on `recipe` at 25k-token batches, bf16, its JSON in OUT/NAME.json."""
    argv = ("-m", "benchmarks.bench_train", "--recipes", recipe, "--precisions", "bf16")
    argv += ("--max-tokens", "25000", "--set=train.compile_cache={cache}", *extra)
    return Part(name, (*argv, "--json", f"{{out}}/{name}.json"), modes, **kw)


def warm_part(part: Part, mode: str) -> Part:
    """bench_train --compile-only with `part`'s own options (the same batches, shapes and
    compilations), `mode` alone, untimed; its record in OUT/warm-PART-MODE.json."""
    name = f"warm-{part.name}-{mode}"
    argv = tuple(a.replace(f"/{part.name}.json", f"/{name}.json") for a in part.argv)
    return Part(name, (*argv, "--compile-only", "--modes", mode), compiles=COMPILES[mode])


@dataclass(frozen=True)
class Plan:
    """A run: the warm-up (the timed parts' `warmed` modes, each a process, and `beside`)
    started together, then the `timed` parts one at a time."""

    timed: tuple[Part, ...]
    beside: tuple[Part, ...] = ()

    @property
    def warm(self) -> tuple[Part, ...]:
        compiling = tuple(warm_part(p, m) for p in self.timed for m in p.warmed)
        return compiling + self.beside if compiling else ()


QUICK_ROUNDS = ("--rounds", "2", "--steps-per-round", "3")
GRAPHS = ("graphs",)
# three compilations of two-layer models, about one whole model's, and pytest's start-up
TESTS = Part(
    "tests",
    ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_cuda.py"),
    start_s=40,
    compiles=1.0,
)
QUICK = Plan(
    timed=(
        bench("train-base", "base", ("eager", *GRAPHS), *QUICK_ROUNDS, warmed=GRAPHS),
        bench("train-v2", "v2_rope_rmsnorm", ("eager", *GRAPHS), *QUICK_ROUNDS, warmed=GRAPHS),
        bench("ops", "base", (), "--rounds", "0", "--count-ops", start_s=20),
        # FlexAttention against SDPA, both with CUDA graphs on the same seeded padded
        # batches: the SDPA row is train-base's graphs row, so flex adds one compilation
        bench("train-base-flex", "base", ("flex-graphs",), *QUICK_ROUNDS, warmed=("flex-graphs",)),
        # not warmed up: each compiles cold if time is left
        bench("train-v2-compiled", "v2_rope_rmsnorm", ("compiled",), *QUICK_ROUNDS),
        bench("train-big", "big", ("eager", "graphs"), *QUICK_ROUNDS),
    ),
    beside=(TESTS,),  # the CUDA tests beside the warm-up: a check, not a figure
)
TRAIN = ("train.py", "--wandb", "disabled", "--set=train.compile_cache={cache}")
DATA = "{data}"
BEFORE = "data.max_tokens=4096,train.accumulate=6,data.max_shapes=0,data.max_tokens_per_sentence=64"
FULL_PARTS = (
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
FULL = Plan(FULL_PARTS)


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


def decide(
    part: Part,
    left: float,
    compile_s: float,
    cold_s: float = PRIOR_COMPILE_S,
    took_s: float | None = None,
) -> Outcome:
    """`part` with `left` seconds left, each compilation estimated at `compile_s` (`cold_s`
    or more when it misses the cache, for the limit), a part without modes at `took_s` if
    an earlier run measured it: the modes it runs with, or skipped."""
    for n in range(len(part.modes), part.keep - 1, -1) if part.modes else [0]:
        modes = part.modes[:n]
        need = took_s if took_s is not None and not part.modes else part.need(modes, compile_s)
        if need <= left:
            cold = SLACK * max(need, part.need(modes, max(compile_s, cold_s)))
            limit = int(min(left, math.ceil(cold)))
            return Outcome(
                part.name, int(left), math.ceil(need), limit, 0, "", modes, part.modes[n:]
            )
    need = part.need(part.modes[: part.keep], compile_s) if part.modes or took_s is None else took_s
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


Job = tuple[Part, Outcome, list[str]]
# runs jobs side by side, each under its limit: (exit status, seconds) of each
Execute = Callable[[list[Job]], list[tuple[int, float]]]
Command = Callable[[Part, tuple[str, ...]], list[str]]


def _run(jobs: list[Job], execute: Execute) -> None:
    """`jobs` started together; each one's status and seconds into its outcome, and a
    line of parts.tsv for each."""
    for part, done, argv in jobs:
        print(f"== {part.name} (at most {done.limit_s} s): {' '.join(argv)}", flush=True)
    for (_, done, _), (status, took) in zip(jobs, execute(jobs), strict=True):
        done.status, done.took_s = str(status), round(took)


def _write(out: Path, done: Outcome) -> None:
    if done.status == "skipped":
        print(f"== {done.part} skipped: {done.left_s} s left, it needs about {done.need_s}")
    with open(out / "parts.tsv", "a") as f:
        f.write(done.line())


def warm_up(
    warm: tuple[Part, ...],
    out: Path,
    left: float,
    execute: Execute,
    command: Command,
    known: Measured,
) -> list[Outcome]:
    """The warm-up's parts side by side, each with a compilation as `known` measured it
    (a cold one CONTENTION times slower than alone); those that do not fit in `left`
    skipped."""
    cold_s = PRIOR_COMPILE_S * CONTENTION  # the limits: as on a cold machine
    decided = [decide(p, left, known.warm_s, cold_s, known.parts_s.get(p.name)) for p in warm]
    jobs = [(p, d, command(p, d.modes)) for p, d in zip(warm, decided, strict=True)]
    _run([j for j in jobs if j[1].status != "skipped"], execute)
    for done in decided:
        _write(out, done)
    return decided


def run_plan(
    plan: Plan,
    out: Path,
    budget: float,
    clock: Callable[[], float],
    execute: Execute,
    command: Command,
    cache: Path | None = None,
) -> list[Outcome]:
    """The warm-up, then each timed part in turn, decided with the time `clock` says is
    left (seconds since gpu.sh began) and the seconds the last run with the compile
    `cache` measured. Writes OUT/parts.tsv, a line as each part ends, and the seconds this
    run measured into `cache` (benchmarks.gpu_durations)."""
    (out / "parts.tsv").write_text("")
    for part in [*plan.warm, *plan.timed]:  # an earlier run's figures are not this run's
        for suffix in (".json", ".txt"):
            (out / f"{part.name}{suffix}").unlink(missing_ok=True)
    warm, known = plan.warm, gpu_durations.read(cache)
    outcomes = warm_up(warm, out, budget - clock(), execute, command, known)
    ended = {o.part: o.status for o in outcomes}
    cold = [
        s for w, o in zip(warm, outcomes, strict=True) for s in measured(w, o, rows(out, w.name))
    ]
    cold_s = max(cold, default=PRIOR_COMPILE_S)  # under CONTENTION: a bound, for limits
    known.warm_compile_s = max(cold, default=known.warm_compile_s)
    gpu_durations.remember(known, outcomes, cache)
    seen: list[float] = []  # compile seconds the timed parts measured
    from_cache: list[float] = []  # those of parts whose compilations the warm-up made
    for part in plan.timed:
        # its compilations come from the cache when the warm-up compiled each of them
        cached = all(ended.get(warm_part(part, m).name) == "0" for m in part.modes if COMPILES[m])
        estimate = max(seen, default=known.cached_s) if cached else max([*seen, cold_s])
        done = decide(part, budget - clock(), estimate, cold_s, known.parts_s.get(part.name))
        if done.status != "skipped":
            _run([(part, done, command(part, done.modes))], execute)
            now = measured(part, done, rows(out, part.name))
            seen, from_cache = seen + now, from_cache + (now if cached else [])
            known.cached_compile_s = max(from_cache, default=known.cached_compile_s)
            gpu_durations.remember(known, [done], cache)
        _write(out, done)
        outcomes.append(done)
    return outcomes
