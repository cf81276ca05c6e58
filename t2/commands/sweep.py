"""Run a sweep file: t2 sweep SWEEP.yaml [--out DIR] [--jobs N] [--records DIR] [--plan |
--dry-run | --report-only] [--plan-changed].

A sweep file names a base recipe, arms (a recipe and/or --set overrides each), seeds, a
budget and a decision rule (sweeps/ has the seed reports' studies). Before the first run
the sweep records its plan (arms, seeds, budget, test sets, rule and the decision code's
version) and its hash in DIR/plan.json, and every run's meta.json carries the hash. Every
arm x seed without a finished run is trained in turn into DIR/ARM/seed-S (an interrupted
run resumes, so the sweep continues where it stopped), then DIR/report.md compares the
arms: mean ± sd over seeds, the difference to the baseline arm with intervals paired by
seed (for test figures, Student's t over seeds and sentences), sacreBLEU's paired tests
per seed pooled with their direction (conditional on these seeds), and the verdict under
the plan's rule, at its planned looks or with every run in. A sweep file that states
another plan than the recorded one trains nothing, and its report gives no verdict,
unless --plan-changed records the change; the report then discloses it at the top and
gives the verdict under every plan. --jobs N trains N runs at once, each on its own GPU
(--runs-per-gpu K: K per GPU) or its share of the CPU cores. --plan says, from the
finished runs (or a pilot of the baseline's first two seeds), how many seeds the rule in
force needs to detect its `detect:` difference at its power; the sweep warns before it
starts when it has fewer. --dry-run prints one train.py command per run instead, for any
scheduler (a SLURM array, a shell loop over machines); --report-only then summarises.
--records DIR keeps each finished run's records without its weights (and the report) in
DIR, and takes the runs finished there back: a study goes on across machines that do not
share a disk, or is committed and reported again from its own files.
Runs reach W&B grouped by sweep (group), arm (job type) and seed (name)."""

from __future__ import annotations

import argparse
from pathlib import Path

from t2.commands.options import add_trust_argument, check_out_folder, default_device
from t2.errors import ConfigError

HELP = "train a sweep of arms x seeds (resumable) and report differences with intervals"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", help="a sweep file (YAML), e.g. sweeps/report004_variants.yaml")
    parser.add_argument("--out", help="folder of the runs and report (default runs/sweeps/NAME)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run", action="store_true", help="print each unfinished run's train.py command"
    )
    mode.add_argument(
        "--report-only", action="store_true", help="train nothing; report the finished runs"
    )
    mode.add_argument(
        "--plan",
        action="store_true",
        help="the seeds per arm that detect the sweep file's detect: difference at 80%% power "
        "(from finished runs, else after a pilot of the baseline's first two seeds)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="runs at once, each pinned to its share (default 1)",
    )
    parser.add_argument(
        "--runs-per-gpu",
        type=int,
        default=1,
        metavar="K",
        help="with GPUs: runs sharing one GPU (default 1)",
    )
    parser.add_argument(
        "--wandb",
        choices=["online", "offline", "disabled"],
        default="offline",
        help="W&B mode of every run (default offline: no account needed)",
    )
    parser.add_argument(
        "--records",
        metavar="DIR",
        help="keep each finished run's records (config, metrics, results, test outputs; no "
        "weights) in DIR with the report, and take finished runs back from it: a folder to "
        "commit, or to carry to the next machine",
    )
    parser.add_argument(
        "--plan-changed",
        "--rule-changed",
        action="store_true",
        help="record the sweep file's plan as a change of the one recorded before the first "
        "run (seeds, arms, rule, test set or decision code), train under it, and render the "
        "verdict under every plan; the report discloses the change at its top",
    )
    parser.add_argument("--device", default=None, help="robustness suite: cpu or cuda")
    add_trust_argument(parser)


def run(args: argparse.Namespace) -> None:
    from t2.experiments.decisions.planning import make_plan
    from t2.experiments.reports.report import write_report
    from t2.experiments.sweeps.jobs import machine, slots
    from t2.experiments.sweeps.records import keep, restore
    from t2.experiments.sweeps.sweep import dry_run, plan, plan_sweep, record_plan, run_sweep
    from t2.experiments.sweeps.sweepfile import load_sweep

    sweep = load_sweep(args.sweep, args.plugin, args.trust_plugins)  # its runs get both
    out = check_out_folder(args.out or Path("runs") / "sweeps" / sweep.name)
    records = check_out_folder(args.records, "--records") if args.records else None
    if records is not None:
        if records.resolve() == out.resolve():
            raise ConfigError(f"--records {records} is the --out folder; pass another folder")
        plan(sweep, records)  # its finished runs must match the sweep file (one line if not)
        print(f"records: {restore(sweep, out, records)} finished runs taken from {records}")
    if args.report_only and not out.is_dir():
        raise ConfigError(f"--report-only: {out} not found; pass the sweep's --out folder")
    home = records or out  # the plan is recorded before the first run, beside the records
    sweep, book = record_plan(sweep, out, home, args.plan_changed, not args.report_only)
    if args.dry_run:
        for line in dry_run(sweep, out, args.wandb):
            print(line)
        return
    places = slots(args.jobs, *machine(), args.runs_per_gpu) if args.jobs > 1 else None
    if args.plan:
        print(plan_sweep(sweep, out, args.wandb, places, records))
        if records is not None:
            print(f"records: {keep(sweep, out, records)} finished runs kept in {records}")
        return
    if not args.report_only:
        run_sweep(sweep, out, args.wandb, places, records=records)
    else:
        plan(sweep, out)  # finished runs must match the sweep file (one line if not)
    at_once = len(places) if places else 1
    power = None if sweep.detect is None else make_plan(sweep, out, at_once).text()
    if power is not None and not args.report_only:
        print(power)  # the plan again, now from every finished run
    device = default_device(args.device)
    print(f"report: {write_report(sweep, out, device, power, book, args.plan_changed)}")
    if records is not None:  # every finished run, those from before --records too
        kept = keep(sweep, out, records)
        report = write_report(sweep, records, device, power, book, args.plan_changed)
        print(f"records: {kept} finished runs and {report}")
