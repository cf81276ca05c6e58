"""The sanity suite (t2 sanity): which combinations it picks, how it names them, how a row
passes, and a fast subset trained for real: two combinations learn `copy` to the pass mark."""

from __future__ import annotations

import csv
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from toy_task import t2_here

from t2.cli import main
from t2.data.pipeline import load_pairs
from t2.data.tasks import generate
from t2.errors import ConfigError
from t2.registry import FFN, NORM, POSITIONAL, RESIDUAL
from t2.sanity.combos import (
    AXES,
    PASS_MARKS,
    Combination,
    base,
    cross_product,
    default_set,
    parse_spec,
    parse_tasks,
)
from t2.sanity.suite import Outcome, task_config

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
BASE = Combination("sinusoidal", "layernorm", "relu", "post", "plain")


def test_base_and_v2_come_from_their_recipes():
    assert base() == BASE
    assert parse_spec("v2") == Combination("rope", "rmsnorm", "swiglu", "post", "plain")


# every registered value of each axis; key/value heads: all, 1 (multi-query) and 2 of the
# sanity model's 4 heads
REGISTERED = [
    POSITIONAL.names(),
    NORM.names(),
    FFN.names(),
    ["post", "pre"],
    RESIDUAL.names(),
    ["0", "1", "2"],
    ["false", "true"],
]


def test_default_set_is_base_every_one_swap_and_v2():
    combos = default_set()
    assert combos[0] == BASE and combos[-1] == parse_spec("v2")
    swaps = combos[1:-1]
    for combo in swaps:  # exactly one axis differs from base
        assert sum(a != b for a, b in zip(combo.values(), BASE.values(), strict=True)) == 1
    assert len(swaps) == sum(len(names) - 1 for names in REGISTERED) == 18
    assert len(set(combos)) == len(combos) == 20


def test_cross_product_is_every_registered_combination():
    combos = cross_product()
    product = {Combination(*v) for v in itertools.product(*REGISTERED)}
    # deepnorm is defined for post-norm only
    assert set(combos) == {
        c for c in product if (c.residual, c.norm_position) != ("deepnorm", "pre")
    }
    assert len(combos) == len(set(combos)) == 7 * 3 * 4 * (4 + 3) * 3 * 2
    assert len({c.folder for c in combos}) == len(combos)  # every run directory distinct
    assert BASE.folder == "sinusoidal-layernorm-relu-post"  # defaults: the folders of before
    assert parse_spec("rezero").folder == "sinusoidal-layernorm-relu-post-rezero"


@pytest.mark.parametrize(
    "spec, want, label",
    [
        ("base", BASE, "base"),
        (
            "positional=rope,norm=rmsnorm",
            Combination("rope", "rmsnorm", "relu", "post", "plain"),
            "rope+rmsnorm",
        ),
        (
            "rmsnorm,swiglu,pre",
            Combination("sinusoidal", "rmsnorm", "swiglu", "pre", "plain"),
            "rmsnorm+swiglu+pre",
        ),
        ("model.ffn=gelu", Combination("sinusoidal", "layernorm", "gelu", "post", "plain"), "gelu"),
        ("rope+rmsnorm+swiglu", Combination("rope", "rmsnorm", "swiglu", "post", "plain"), "v2"),
        (
            "t5,n_kv_heads=1,qk_norm=true",
            Combination("t5", "layernorm", "relu", "post", "plain", "1", "true"),
            "t5+n_kv_heads=1+qk_norm=true",
        ),
        ("2", Combination("sinusoidal", "layernorm", "relu", "post", "plain", "2"), "n_kv_heads=2"),
    ],
)
def test_specs_name_combinations(spec, want, label):
    assert parse_spec(spec) == want
    assert want.label == label
    assert parse_spec(want.label) == want  # a label is a spec of itself
    assert want.overrides() == [f"model.{a}={v}" for a, v in zip(AXES, want.values(), strict=True)]


@pytest.mark.parametrize(
    "spec, words",
    [
        (
            "bogus",
            [
                "'bogus'",
                "base, v2",
                "positional: alibi, learned, none, relative, rope, sinusoidal, t5",
                "n_kv_heads: 0, 1, 2; qk_norm: false, true",
            ],
        ),
        ("norm=rope", ["'norm=rope'", "norm: layernorm, rmsnorm, scalenorm"]),
        ("rope,learned", ["positional twice"]),
        ("", ["names no combination"]),
        ("deepnorm,pre", ["'deepnorm,pre' is no model: residual deepnorm is defined for post"]),
    ],
)
def test_bad_specs_fail_in_one_line(spec, words):
    with pytest.raises(ConfigError) as err:
        parse_spec(spec)
    assert "\n" not in str(err.value)
    for word in words:
        assert word in str(err.value)
    with pytest.raises(ConfigError, match="valid tasks: copy, reverse, sort, sum, fake_dates"):
        parse_tasks("copy,nope")


@pytest.mark.parametrize(
    "argv, want",
    [
        (["--only", "nope"], "error: unknown combination part 'nope' in --only 'nope'; valid: "),
        (["--tasks", "copy,sorting"], "error: unknown sanity task 'sorting'; valid tasks: "),
        (["--only", "base", "--cross"], "error: --only and --cross both pick combinations"),
        (["--no-such-flag"], "error: t2 sanity: unrecognized arguments: --no-such-flag"),
    ],
)
def test_the_command_rejects_unknown_names_in_one_line(capsys, argv, want):
    with pytest.raises(SystemExit) as exit_:
        main(["sanity", *argv, "--list"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(want) and err.count("\n") == 1


def test_list_shows_what_the_options_select(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sanity", "--list", "--only", "base", "rope,pre", "v2", "--tasks", "copy,sum"])
    out = capsys.readouterr().out.splitlines()
    assert exit_.value.code == 0
    assert [line.split()[0] for line in out[:-1]] == ["base", "rope+pre", "v2"]
    assert out[-1] == "6 trainings into runs/sanity/COMBINATION/TASK"


def outcome(combo: str, task: str, exact: float, stopped: str = "stop_exact_match", n=1000):
    return Outcome(parse_spec(combo), task, 0.99, exact, 700, stopped, 30.0, n)


def test_a_row_passes_when_validation_reached_the_mark_and_the_test_split_agrees():
    assert outcome("base", "copy", 1.0).status == "pass"
    # the test figure may sit within 3 standard errors under the mark: 0.99 - 3 * 0.00315
    assert outcome("base", "copy", 0.981).floor == pytest.approx(0.98056, abs=1e-5)
    assert outcome("base", "copy", 0.981).status == "pass"
    assert outcome("base", "copy", 0.980).status == "FAIL"  # validation and test disagree
    assert outcome("base", "copy", 0.981, n=300).status == "pass"  # floor 0.9728 on 300
    assert outcome("base", "copy", 1.0, stopped="max_steps").status == "FAIL"  # not in time
    assert Outcome(BASE, "copy", 0.99, error="boom").status == "ERROR"


def test_no_positions_is_expected_to_fail_order_tasks_only_and_must_not_pass_them():
    # with no positions the encoder sees a bag of tokens: copy, reverse and sum need order
    for task in ("copy", "reverse", "sum"):
        failed = outcome("none", task, 0.04, stopped="max_steps")
        assert failed.status == "expected to fail" and failed.ok
        leaked = outcome("none", task, 1.0)  # a pass would mean position leaks in: a bug
        assert leaked.status == "UNEXPECTED PASS" and not leaked.ok
    # sort depends on the bag alone, so it must pass like any other combination
    assert not outcome("none", "sort", 0.5, stopped="max_steps").ok
    assert not outcome("rope", "copy", 0.5, stopped="max_steps").ok


def test_each_task_of_the_suite_trains_on_its_own_pairs_from_one_data_cache(tmp_path):
    """The suite's tasks share the train seed, the sizes and the data cache: each must
    still read the pairs its own generator makes (one cache key once served them all)."""
    sets = ["data.task_train_size=30", "data.task_eval_size=5", f"data.cache_dir={tmp_path}"]
    for task in PASS_MARKS:
        data = task_config(BASE, task, sets).data
        pairs = load_pairs(data, "train", 1)
        assert (pairs["src"], pairs["tgt"]) == generate(task, "train", 30, 1), task


def sanity(out: Path, *extra: str, here: bool = False) -> subprocess.CompletedProcess:
    """`t2 sanity` on one combination and copy, in a process, or `here` in this one
    (toy_task.t2_here: the trainings are the suite's own, in its process either way)."""
    # smaller data (the pass mark is the real one): 4,000 training pairs, 300 to score
    sets = [
        "data.task_train_size=4000",
        "data.task_eval_size=300",
        "train.valid_bleu_sentences=300",
    ]
    args = [
        "--only",
        "rmsnorm,swiglu,pre",
        "--tasks",
        "copy",
        "--out",
        str(out),
        *(a for s in sets for a in ("--set", s)),
        *extra,
    ]
    if here:
        return t2_here("sanity", *args)
    cmd = [sys.executable, "-m", "t2", "sanity", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600)


@pytest.mark.slow
def test_a_combination_learns_copy_to_the_pass_mark_and_a_rerun_reads_it(tmp_path):
    """One combination away from base on three axes (base itself trains in every recipe
    test; docs/results/sanity.md has every one-swap combination on every toy task)."""
    first = sanity(tmp_path, here=True)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    with open(tmp_path / "sanity.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(r["combination"], r["task"], r["status"]) for r in rows] == [
        ("rmsnorm+swiglu+pre", "copy", "pass")
    ]
    for row in rows:
        assert row["stopped_by"] == "stop_exact_match"  # validation reached 99% ...
        assert 0 < int(row["steps"]) < 4000  # ... within the step budget
        assert float(row["test_exact_match"]) >= 0.97  # and the test split agrees
        assert int(row["test_sentences"]) == 300
    table = (tmp_path / "sanity.md").read_text(encoding="utf-8")
    assert table in first.stdout
    assert "| rmsnorm+swiglu+pre | sinusoidal rmsnorm swiglu pre |" in table
    # a finished run is read, not trained again: the same table, no training output
    again = sanity(tmp_path, here=True)
    assert again.returncode == 0 and again.stdout.count("; read)") == 1
    assert (tmp_path / "sanity.md").read_text(encoding="utf-8") == table
    # results of another config are not passed off as this one's (the whole output: a process)
    other = sanity(tmp_path, "--set", "train.max_lr=1.0e-3")
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert "train.max_lr" in other.stderr
