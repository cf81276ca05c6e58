"""How fast `t2 --help` and `t2 VERB --help` answer, as whole processes.

python -m benchmarks.bench_cli [--rounds 5] [--verbs train,translate,...] [--json FILE]
Each round runs every command once, in turn (interleaved, so a busy machine slows all of
them alike): `python -c pass` (the interpreter's own start), `python -c "import torch"` (what
any command that loads torch at start pays, as t2's did before its config floor), then
`t2 --help` and each verb's `--help`. It prints each command's minimum, median and maximum
wall time, the ratio of its median to torch's import, and whether it meets the target: an
answer in under 0.5 s on 2 cores (tests/test_architecture.py checks that no torch is
loaded; this measures the time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from t2.cli import run_main
from t2.commands import VERBS
from t2.errors import ConfigError

TARGET_S = 0.5
REFERENCES = {"python -c pass": "pass", "python -c 'import torch'": "import torch"}


def commands(verbs: list[str]) -> dict[str, list[str]]:
    """Label -> argv: the references, then t2's help screens (through the interpreter running
    this script, as the `t2` entry point does)."""
    out = {label: [sys.executable, "-c", code] for label, code in REFERENCES.items()}
    t2 = [sys.executable, "-c", "from t2.cli import main; main()"]
    out["t2 --help"] = [*t2, "--help"]
    out.update({f"t2 {verb} --help": [*t2, verb, "--help"] for verb in verbs})
    return out


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(argvs: dict[str, list[str]], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {label: [] for label in argvs}
    for _ in range(rounds):
        for label, argv in argvs.items():
            times[label].append(timed(argv))
    return times


def rows(times: dict[str, list[float]]) -> list[dict]:
    torch_import = statistics.median(times["python -c 'import torch'"])
    out = []
    for label, seconds in times.items():
        median = statistics.median(seconds)
        row = {"command": label, "min_s": min(seconds), "median_s": median, "max_s": max(seconds)}
        row["vs_import_torch"] = median / torch_import
        if label.startswith("t2"):
            row["meets_target"] = median < TARGET_S
        out.append(row)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--verbs", default=",".join(VERBS), help="verbs, commas")
    parser.add_argument("--json", type=Path, help="write the rows to this file")
    args = parser.parse_args(argv)
    args.verbs = [v for v in args.verbs.split(",") if v]
    unknown = sorted(set(args.verbs) - set(VERBS))
    if unknown or args.rounds < 1:
        raise ConfigError(
            f"--verbs {','.join(unknown)} unknown or --rounds {args.rounds} < 1; "
            f"verbs: {', '.join(VERBS)}"
        )
    return args


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    found = rows(measure(commands(args.verbs), args.rounds))
    print(f"{'command':<32} {'min':>7} {'median':>7} {'max':>7}  vs import torch  target")
    for r in found:
        verdict = {True: "< 0.5 s: met", False: "NOT met"}.get(r.get("meets_target"), "")
        print(
            f"{r['command']:<32} {r['min_s']:7.3f} {r['median_s']:7.3f} {r['max_s']:7.3f}"
            f"  {r['vs_import_torch']:15.2f}  {verdict}"
        )
    print(f"({args.rounds} rounds, interleaved; seconds of wall time per process)")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2))
    return found


if __name__ == "__main__":
    run_main(lambda: main() and None)
