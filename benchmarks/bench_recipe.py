"""A recipe's training speed as a user runs it: `train.py --recipe NAME` in arms that differ
by --set overrides, interleaved round by round, target tokens/s from each run's
metrics.jsonl (docs/performance.md).

python -m benchmarks.bench_recipe --recipe base --steps 200 --rounds 2 \\
    --arm shipped= --arm before=data.max_tokens=4096,train.accumulate=6,data.max_shapes=0 \\
    [--data mixed] [--json FILE] [--set KEY=VALUE ...]

Each run trains on ../shared/data/DATA (valid and test: its validation file), logs every
--log-every steps, validates only at its end, and is timed by its own logged tokens/s: the
median over its logged intervals after the first (compilation, cuDNN plans and the
allocator's growth fall in the first). An arm's figure is the median over rounds, with the
range; the ratio is each arm against the first, paired round by round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("T2_SHARED_DATA", ROOT.parent / "shared" / "data"))
DATA = {"mixed": ("mixed/train", "mixed/valid"), "multi30k": ("multi30k/train", "multi30k/val")}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="base")
    parser.add_argument(
        "--arm",
        action="append",
        required=True,
        metavar="NAME=K=V,K=V",
        help="an arm: a name and its overrides (none: the recipe as shipped)",
    )
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps a run")
    parser.add_argument("--log-every", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", choices=sorted(DATA), default="mixed")
    parser.add_argument("--set", action="append", default=[], help="overrides for every arm")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not (SHARED / f"{DATA[args.data][0]}.de").is_file():
        parser.error(f"{SHARED / DATA[args.data][0]}.de not found: set T2_SHARED_DATA")
    return args


def arms(args: argparse.Namespace) -> dict[str, list[str]]:
    out = {}
    for spec in args.arm:
        name, _, sets = spec.partition("=")
        out[name] = [s for s in sets.split(",") if s]
    return out


def run_once(args: argparse.Namespace, sets: list[str], out: Path) -> tuple[float, str]:
    """One training run: its median target tokens/s after the first interval, and its plan."""
    train, valid = (f"files:{SHARED / p}" for p in DATA[args.data])
    keys = [
        f"data.train={train}",
        f"data.valid={valid}",
        f"data.test={valid}",
        "data.src_lang=de",
        "data.tgt_lang=en",
        f"train.max_steps={args.steps}",
        f"train.log_every={args.log_every}",
        f"train.eval_every={args.steps}",
        f"train.save_every={args.steps}",
        "train.valid_bleu_sentences=0",
        "train.keep_last=1",
        "decode.beam_size=1",
        "decode.batch_size=256",
        *args.set,
        *sets,
    ]
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        "--recipe",
        args.recipe,
        "--out",
        str(out),
        "--wandb",
        "disabled",
        *(a for k in keys for a in ("--set", k)),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: {args.recipe} with {sets} failed: {tail}")
    plan = next((line for line in done.stdout.splitlines() if "batch plan" in line), "")
    lines = (out / "metrics.jsonl").read_text().splitlines()
    rates = [r["tokens_per_s"] for r in map(json.loads, lines) if "tokens_per_s" in r]
    return statistics.median(rates[1:] or rates), plan


def main(argv: list[str] | None = None) -> None:
    run(argv)


def run(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    named = arms(args)
    rates: dict[str, list[float]] = {name: [] for name in named}
    plans: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, sets in named.items():
                rate, plans[name] = run_once(args, sets, Path(tmp) / f"{name}-{r}")
                rates[name].append(rate)
                print(f"round {r + 1} {name}: {rate:,.0f} target tokens/s", flush=True)
    first = next(iter(named))
    rows = []
    for name in named:
        paired = [a / b for a, b in zip(rates[name], rates[first], strict=True)]
        row = {
            "recipe": args.recipe,
            "arm": name,
            "sets": named[name],
            "plan": plans[name],
            "tokens_per_s": statistics.median(rates[name]),
            "rounds": rates[name],
            "ratio": statistics.median(paired),
            "ratio_range": [min(paired), max(paired)],
        }
        rows.append(row)
        print(
            f"{name:12} {row['tokens_per_s']:10,.0f} target tokens/s "
            f"(rounds {min(rates[name]):,.0f}-{max(rates[name]):,.0f}); x{row['ratio']:.2f} "
            f"{first} ({min(paired):.2f}-{max(paired):.2f}); {plans[name]}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return rows


if __name__ == "__main__":
    main()
