"""Sweep files, `t2 sweep --report-only` and `t2 compare` on run directories written by
hand (so the numbers, and which arm is better, are known exactly), and the seed reports'
studies in sweeps/ as sweep files."""

from __future__ import annotations

import csv
import json
import shlex
import statistics
from pathlib import Path

import pytest

from t2.cli import Parser, _describe, main
from t2.commands import train as train_verb
from t2.errors import ConfigError
from t2.experiments.reports.report import write_report
from t2.experiments.sweeps.runs import read_run
from t2.experiments.sweeps.sweep import arms_scored_on_validation, dry_run, plan
from t2.experiments.sweeps.sweepfile import load_sweep
from t2.recipes import load_config

ROOT = Path(__file__).resolve().parent.parent
SWEEP = """name: hand
base: quickstart
seeds: [1, 2, 3]
budget: {max_steps: 100}
compare_at: time
baseline: a
arms:
  a: {}
  same: {}
  better: {set: {train.max_lr: 3.0e-3}}
  short: {set: {model.dropout: 0.2}}
"""
# final validation losses per arm and seed: `same` is drawn like `a`, `better` is far lower;
# `short` has one finished seed only
LOSSES = {
    "a": [3.41, 3.38, 3.45],
    "same": [3.40, 3.47, 3.39],
    "better": [2.91, 2.95, 2.88],
    "short": [3.60],
}


def t2(capsys, *args: str) -> tuple[int, str, str]:
    """`t2 ARGS` in this process (a child process costs seconds of imports): status, out, err."""
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return done.value.code, out, err


def fake_run(path: Path, recipe: str, sets: list[str], final_loss: float, new: bool = True):
    """A finished run directory as t2 train writes it, with made-up figures; `new=False`
    leaves out what older runs lack (train_tokens, elapsed_s, stopped_by)."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(load_config(recipe, sets).to_yaml())
    (path / "meta.json").write_text(json.dumps({"format": 2, "t2": "0.2.0", "recipe": recipe}))
    records = []
    for step in (50, 100):
        extra = {"train_tokens": 40 * step, "elapsed_s": 0.5 * step} if new else {}
        loss = final_loss + (0.5 if step == 50 else 0.0)
        records.append({"step": step, "loss": loss + 0.2, "lr": 1e-3, **extra})
        records.append(
            {
                "step": step,
                "valid_loss": loss,
                "valid_bleu": 30 - loss,
                "valid_chrf": 50 - loss,
                "valid_exact_match": 0.0,
                **extra,
            }
        )
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    results = {"recipe": recipe, "bleu": 31 - final_loss, "chrf": 51 - final_loss}
    if new:
        results.update(stopped_by="max_steps", steps=100, train_tokens=4000, elapsed_s=50.0)
    (path / "results.json").write_text(json.dumps(results))


@pytest.fixture
def hand_sweep(tmp_path):
    spec = tmp_path / "hand.yaml"
    spec.write_text(SWEEP)
    sweep, out = load_sweep(spec), tmp_path / "out"
    for arm in sweep.arms:
        for seed, loss in zip(sweep.seeds, LOSSES[arm.name], strict=False):
            fake_run(sweep.run_dir(out, arm, seed), arm.recipe, sweep.overrides(arm, seed), loss)
    return sweep, out


def table_rows(report: str, title: str) -> dict[str, list[str]]:
    """The rows of the Markdown table under `### title`, by arm."""
    section = report.split(f"### {title}\n")[1].strip().split("\n\n")[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines()[2:]]
    return {r[0].strip(): [c.strip() for c in r[1:]] for r in rows}


def test_report_only_numbers_intervals_and_verdicts(hand_sweep):
    sweep, out = hand_sweep
    report = write_report(sweep, out, "cpu").read_text()
    rows = table_rows(report, "validation loss")
    for arm, values in LOSSES.items():
        spread = f" ± {statistics.stdev(values):.4f}" if len(values) > 1 else ""
        assert rows[arm][:2] == [str(len(values)), f"{statistics.fmean(values):.4f}{spread}"]
    planned = len(sweep.arms) * len(sweep.seeds)
    assert f"Not finished (2 of {planned}), left out: short seeds 2, 3. The verdicts" in report
    assert rows["a"][5] == "baseline" and rows["better"][5] == "excludes 0"
    assert "**" not in report.split("## Results")[1].split("## Runs")[0]  # no verdict at all
    sweep.path.write_text(SWEEP.replace("  short: {set: {model.dropout: 0.2}}\n", ""))
    report = write_report(load_sweep(sweep.path), out, "cpu").read_text()  # every run in
    rows = table_rows(report, "validation loss")
    assert rows["a"][5] == "baseline"
    assert rows["same"][5] == "contains 0" and "**" not in " ".join(rows["same"])
    # no plan recorded: the table describes the interval and calls no arm better (issue 52)
    assert rows["better"][5] == "excludes 0" and rows["better"][3].endswith(" (paired t, n=3)")
    assert rows["better"][4] == "-"  # no test outputs: no bootstrap over sentences
    low, high = (float(x) for x in rows["better"][3].split(" (")[0].strip("[]").split(", "))
    assert high < 0 and low < statistics.fmean(LOSSES["better"]) - 3.41 < high
    bleu = table_rows(report, "validation BLEU")  # higher is better: the same arm wins
    assert bleu["better"][5] == "excludes 0" and bleu["same"][5] == "contains 0"
    assert "**better**" not in report and "No plan was recorded" in report
    assert "better: ahead in 3 of 3 seeds" in report
    assert "last validation record" in report  # the header says which numbers are used
    assert "test = validation" not in report  # quickstart's task: splits are generated apart
    for line in report.splitlines():  # never a bold word on a table row
        assert not (line.startswith("|") and "**" in line)
    assert (out / "plots" / "curves_by_step.png").stat().st_size > 10_000
    curves = report.split("## Curves")[1]  # the compare_at axis leads, in the arms table too
    assert curves.index("curves_by_time.png") < curves.index("curves_by_step.png")
    assert "| parameters | wall time | steps | train tokens | stopped by |" in report
    assert "| a | quickstart | - | - | 50.0s | 100 | 4,000 | max_steps |" in report
    assert "| better | quickstart | train.max_lr=0.003 | - | 50.0s |" in report


def test_report_only_command_and_a_changed_sweep_file(hand_sweep, capsys):
    sweep, out = hand_sweep
    code, stdout, err = t2(capsys, "sweep", sweep.path, "--out", out, "--report-only")
    assert code == 0, err
    assert (out / "report.md").is_file() and stdout == f"report: {out / 'report.md'}\n"
    assert dry_run(sweep, out, "disabled") == [  # only the two unfinished runs
        sweep.shell_command(sweep.arm("short"), s, out, "disabled") for s in (2, 3)
    ]
    sweep.path.write_text(SWEEP.replace("model.dropout: 0.2", "model.dropout: 0.3"))
    code, _, err = t2(capsys, "sweep", sweep.path, "--out", out, "--report-only")
    assert code == 2 and err.count("\n") == 1 and "model.dropout=0.2 (sweep file: 0.3)" in err
    code, _, err = t2(capsys, "sweep", sweep.path, "--out", out / "nowhere", "--report-only")
    assert code == 2 and "--report-only" in err and "not found" in err


def test_compare_table_numbers_and_older_runs(tmp_path, capsys):
    new, old = tmp_path / "new", tmp_path / "old"
    fake_run(new, "quickstart", ["train.seed=1"], 3.2)
    fake_run(old, "base_rope", ["train.seed=2", "data.max_tokens=1024"], 3.5, new=False)
    meta = json.loads((new / "meta.json").read_text())
    (new / "meta.json").write_text(json.dumps({**meta, "machine": "Some CPU, 2 threads"}))
    out = tmp_path / "cmp"
    code, stdout, err = t2(capsys, "compare", new, old, "--out", out)
    assert code == 0, err
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert [r["recipe"] for r in rows] == ["quickstart", "base_rope"]
    assert rows[0]["best valid loss"] == "3.2" and rows[1]["best valid loss"] == "3.5"
    assert float(rows[0]["best valid BLEU"]) == 30 - 3.2
    assert rows[0]["train tokens"] == "4000" and rows[0]["tokens/s"] == "80.0"
    assert rows[1]["train tokens"] == rows[1]["wall time"] == rows[1]["stopped by"] == ""
    assert rows[0]["model.positional"] == "sinusoidal" and rows[1]["model.positional"] == "rope"
    assert "data.max_tokens" in rows[0] and "model.d_model" in rows[0]  # quickstart vs base
    assert "train.seed" not in rows[0] and rows[1]["seed"] == "2"
    md = (out / "compare.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith(f"| {old} "))
    assert "| 3.5000 | 26.50 | 27.50 | 47.50 | - |" in line and "| - | - | - | - |" in line
    assert rows[0]["machine"] == "Some CPU, 2 threads" and rows[1]["machine"] == ""
    assert md.splitlines()[2] == stdout.splitlines()[0]  # printed = written
    assert "test = validation" not in md  # task: and hf: sources: their splits differ
    assert sorted(p.name for p in out.glob("*.png")) == [
        "curves_by_step.png",
        "curves_by_time.png",
        "curves_by_tokens.png",
    ]


def test_compare_without_a_plan_prints_intervals_and_no_verdict(tmp_path):
    """`t2 compare` has no plan recorded before its runs: intervals labelled "no plan: no
    verdict", never better or worse (issue 52: it printed "t2's default rule: **better**")."""
    from t2.experiments.reports.compare import compare

    for seed, (a, b) in enumerate([(3.0, 2.0), (3.1, 2.05), (2.9, 1.9)], start=1):
        fake_run(tmp_path / f"a{seed}", "quickstart", [f"train.seed={seed}"], a)
        fake_run(
            tmp_path / f"b{seed}", "quickstart", [f"train.seed={seed}", "model.norm=rmsnorm"], b
        )
    runs = [read_run(tmp_path / f"{n}{s}") for s in (1, 2, 3) for n in "ab"]
    text = compare(runs, tmp_path / "out")
    assert "no plan: no verdict" in text and "validation loss: -" in text
    assert "**better**" not in text and "**worse**" not in text


def test_compare_groups_seeds_and_names_what_differs(tmp_path):
    from t2.experiments.reports.compare import group_runs

    for seed in (1, 2):
        fake_run(tmp_path / f"a{seed}", "quickstart", [f"train.seed={seed}"], 3.0)
        fake_run(
            tmp_path / f"b{seed}", "quickstart", [f"train.seed={seed}", "model.norm=rmsnorm"], 3.0
        )
    runs = [read_run(tmp_path / n) for n in ("a1", "b1", "a2", "b2")]
    assert group_runs(runs) == {
        "quickstart model.norm=layernorm": [tmp_path / "a1", tmp_path / "a2"],
        "quickstart model.norm=rmsnorm": [tmp_path / "b1", tmp_path / "b2"],
    }


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    code, _, err = t2(capsys, "compare", tmp_path, "--out", tmp_path / "cmp")
    want = f"error: {tmp_path} is not a run directory (no config.yaml); pass folders written by"
    assert code == 2 and err == want + " t2 train\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("seed: [1]\narms: {a: {}}", "unknown key in sweep file"),
        (
            "seeds: [1]\nbase: quickstart\narms: {a: {set: {model.positionl: rope}}}",
            "arm 'a': unknown key in section 'model' 'positionl'; valid keys:",
        ),
        ("seeds: [1]\nbase: quickstart\narms: {a: {reicpe: base}}", "valid keys: recipe, set"),
        (
            "seeds: [1]\nbase: quickstart\nbudget: {max_step: 5}\narms: {a: {}}",
            "valid keys: max_minutes, max_steps, max_train_tokens",
        ),
        ("seeds: [1]\nbase: quickstart\nbaseline: b\narms: {a: {}}", "valid arms: a"),
        ("seeds: 1\nbase: quickstart\narms: {a: {}}", "seeds must be a list"),
        (
            "seeds: [1]\nbase: quickstart\ncompare_at: wall\narms: {a: {}}",
            "valid choices: steps, tokens, time",
        ),
        ("seeds: [1]\narms: {a: {}}", "arm 'a' names no recipe"),
        (
            "seeds: [1]\nbase: quickstart\narms: {a: {set: {model.norm: batchnorm}}}",
            "valid choices: layernorm, rmsnorm",
        ),
    ],
)
def test_sweep_file_errors_are_one_line_with_the_valid_choices(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=None) as err:
        load_sweep(path)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_budget_sets_the_comparison_axis(tmp_path):
    path = tmp_path / "s.yaml"
    for budget, axis in (
        ("{max_minutes: 10}", "time"),
        ("{max_train_tokens: 1000}", "tokens"),
        ("{max_steps: 5, max_minutes: 1}", "steps"),
        ("{}", "steps"),
    ):
        path.write_text(f"seeds: [1]\nbase: quickstart\nbudget: {budget}\narms: {{a: {{}}}}")
        assert load_sweep(path).compare_at == axis


EXPERIMENTS = sorted((ROOT / "sweeps").glob("*.yaml"))


@pytest.mark.parametrize("path", EXPERIMENTS, ids=[p.stem for p in EXPERIMENTS])
def test_experiments_load_on_multi30k_and_on_wmt_and_their_commands_round_trip(path, tmp_path):
    sweep = load_sweep(path)
    assert sweep.arms[0].recipe == "multi30k" and len(sweep.seeds) >= 3
    parser = _describe(Parser(), train_verb)
    commands = dry_run(sweep, tmp_path, "offline")
    assert len(commands) == len(sweep.arms) * len(sweep.seeds)
    for line, (arm, seed, _) in zip(commands, plan(sweep, tmp_path), strict=True):
        args = parser.parse_args(shlex.split(line)[2:])  # what train.py would run
        assert load_config(args.recipe, args.overrides) == load_config(
            arm.recipe, sweep.overrides(arm, seed)
        )
        assert args.out == sweep.run_dir(tmp_path, arm, seed) and args.resume
    wmt = tmp_path / path.name  # "on WMT at full size by changing the base recipe"
    wmt.write_text(path.read_text().replace("base: multi30k", "base: base"))
    assert {a.recipe for a in load_sweep(wmt).arms} == {"base"}


def test_the_seed_reports_studies_are_all_there():
    arms = {p.stem: [a.name for a in load_sweep(p).arms] for p in EXPERIMENTS}
    assert arms["report004_variants"] == ["base", "rope", "rmsnorm", "swiglu", "all_three"]
    assert arms["report000_peak_lr"] == ["peak_1e-4", "peak_7e-4", "peak_1e-3"]
    assert arms["report003_robustness"] == ["sinusoidal", "learned", "rope"]
    assert load_sweep(ROOT / "sweeps" / "report003_robustness.yaml").robustness
    assert {"src_bos", "untied", "tie_qk", "zero_output", "unit_embeddings"} <= {
        a for names in arms.values() for a in names
    }


def test_arm_overrides_in_both_spellings_and_the_wandb_grouping(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: study\nbase: quickstart\nseeds: [7]\nset: {train.max_lr: 1.0e-3}\n"
        "arms:\n  flat: {set: {train.betas: [0.9, 0.99], model.norm: rmsnorm}}\n"
        "  nested: {set: {model: {norm: rmsnorm}}, recipe: base_rope}\n"
    )
    sweep = load_sweep(path)
    flat, nested = sweep.arms
    assert flat.own == ("train.betas=[0.9, 0.99]", "model.norm=rmsnorm")
    assert nested.own == ("model.norm=rmsnorm",) and nested.recipe == "base_rope"
    cfg = load_config(flat.recipe, sweep.overrides(flat, 7))
    assert cfg.train.betas == (0.9, 0.99) and cfg.train.max_lr == 1e-3
    assert (
        cfg.train.seed,
        cfg.train.wandb_group,
        cfg.train.wandb_job_type,
        cfg.train.wandb_name,
    ) == (7, "study", "flat", "flat-seed7")
    assert sweep.run_dir(tmp_path, nested, 7) == tmp_path / "nested" / "seed-7"


def test_a_format_1_run_reads_with_dashes():
    from t2.experiments.reports.compare import markdown, table

    run = read_run(ROOT / "tests" / "fixtures" / "run_format1")  # t2 0.1: no meta, no metrics
    assert (run.recipe, run.parameters, run.final("steps"), run.finished) == (
        "-",
        6512,
        None,
        False,
    )
    row = markdown(*table([run])).splitlines()[2]
    assert row.endswith("| 1 | 6,512 | - | - | - | - | - | - | - | - | - | - |")


def test_unfinished_runs_are_named_by_arm_with_seed_ranges():
    from t2.experiments.reports.report import _by_arm

    missing = [("base", s) for s in (3, 4, 5, 6, 9)] + [("v2", 7), ("v2", 8), ("x", 2)]
    assert _by_arm(missing) == "base seeds 3 to 6, 9; v2 seeds 7, 8; x seed 2"


def test_a_test_split_that_is_the_validation_split_is_said_everywhere(tmp_path, capsys):
    same = [
        "data.valid=files:../shared/data/multi30k/val",
        "data.test=files:../shared/data/multi30k/val",
    ]
    warning = load_config("multi30k").data.test_warning()  # at training's start-up
    assert warning.startswith("warning: test = validation (data.test = data.valid = files:")
    assert load_config("quickstart").data.test_warning() is None
    assert not load_config("quickstart").data.test_is_valid  # task: splits differ
    assert arms_scored_on_validation(load_sweep(ROOT / "sweeps" / "report004_base_v2.yaml")) == [
        "base",
        "v2",
    ]
    for seed in (1, 2):
        fake_run(tmp_path / f"s{seed}", "quickstart", [f"train.seed={seed}", *same], 3.2)
    code, _, err = t2(capsys, "compare", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "c")
    assert code == 0, err
    md = (tmp_path / "c" / "compare.md").read_text()
    assert "**test = validation** in 2 of 2 runs (data.test = data.valid = files:" in md
    assert "not on held-out ones" in md
