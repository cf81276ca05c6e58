"""The sanity suite of report 002: t2 sanity [--only SPEC ...] [--cross] [--tasks copy,sum]
[--all] [--out DIR] [--set section.key=value ...].

Trains a tiny model (recipes/sanity.yaml) of each component combination on copy, reverse,
sort and sum (--all adds fake_dates and polynomial), each stopping as soon as validation
reaches the pass mark, and prints a table of test exact match and steps. By default: the
base combination, each combination one swap away from it, and v2; --cross: every
positional x norm x feed-forward x placement x residual x key/value heads x QK-norm
combination. A finished run is read, not trained again, so an interrupted suite continues.
Exit status 1 if a training fails.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from t2.commands.options import check_out_folder

HELP = "train every component combination on report 002's toy tasks; a table of exact match"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="SPEC",
        help="combinations: base, v2, positional=rope,norm=rmsnorm or rope,pre (axes not "
        "named keep base's value)",
    )
    parser.add_argument(
        "--cross",
        action="store_true",
        help="every positional x norm x ffn x norm_position x residual x n_kv_heads x qk_norm",
    )
    parser.add_argument("--tasks", help="comma-separated tasks (default: copy,reverse,sort,sum)")
    parser.add_argument("--all", action="store_true", help="add fake_dates and polynomial")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("runs/sanity"),
        help="folder of the runs and the table (default: runs/sanity)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key of every run, e.g. --set data.task_train_size=5000",
    )
    parser.add_argument(
        "--wandb",
        choices=["online", "offline", "disabled"],
        default="disabled",
        help="W&B logging mode of each run (default disabled)",
    )
    parser.add_argument(
        "--list", action="store_true", help="print the trainings the options select, and stop"
    )


def plan(args: argparse.Namespace) -> tuple[list, list[str]]:
    """The combinations and tasks the options select; a bad name fails in one line."""
    from t2.errors import ConfigError
    from t2.sanity import combos as c

    if args.only and args.cross:
        raise ConfigError("--only and --cross both pick combinations; give one of them")
    if args.tasks and args.all:
        raise ConfigError("--tasks and --all both pick tasks; give one of them")
    if args.cross:
        combos = c.cross_product()
    elif args.only:
        combos = list(dict.fromkeys(c.parse_spec(spec) for spec in args.only))
    else:
        combos = c.default_set()
    tasks = (
        c.parse_tasks(args.tasks) if args.tasks else list(c.ALL_TASKS if args.all else c.TOY_TASKS)
    )
    return combos, tasks


def run(args: argparse.Namespace) -> int:
    combos, tasks = plan(args)
    out = check_out_folder(args.out)
    if args.list:
        for combo in combos:
            print(f"{combo.label:24} {' '.join(combo.shown()):44} {','.join(tasks)}")
        print(f"{len(combos) * len(tasks)} trainings into {out}/COMBINATION/TASK")
        return 0
    from t2.sanity.report import markdown, write_reports
    from t2.sanity.suite import run_sanity_suite, task_config

    for task in tasks:  # a bad --set fails here, in one line, before any training
        task_config(combos[0], task, args.overrides)
    print(f"sanity: {len(combos)} combinations x {len(tasks)} tasks into {out}", flush=True)
    outcomes = run_sanity_suite(combos, tasks, out, args.overrides, args.wandb)
    print()
    print(markdown(outcomes), end="")
    md, csv = write_reports(outcomes, out)
    print(f"table: {md} and {csv}")
    return 0 if all(o.ok for o in outcomes) else 1
