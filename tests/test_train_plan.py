"""The batch plan: the global batch split into processes x accumulate x micro-batch, the
micro-batch sized by the memory model against a device's memory; explicit values win; the
dry run plans for hardware that is not there; a resumed run keeps its plan."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
import yaml
from test_train_runs import ENV, ROOT

from t2.config import Config
from t2.errors import ConfigError, T2Error
from t2.recipes import load_config
from t2.train.memory import out_of_memory
from t2.train.plan import (
    CPU_MICRO_BATCH,
    RESERVED,
    USABLE,
    Device,
    fit_tokens,
    parameters,
    parse_size,
    planned,
)

GIB = 2**30


def gpu(gib: float) -> Device:
    return Device("cuda", int(gib * GIB), f"a {gib} GiB GPU")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("80GiB", 80 * GIB),
        ("16GB", 16 * 10**9),
        ("24000 MiB", 24000 * 2**20),
        ("1024", 1024),
        ("1.5gib", int(1.5 * GIB)),
    ],
)
def test_memory_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["80 parsecs", "", "-3GiB", "GiB"])
def test_a_bad_memory_size_fails_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a memory size; write e.g. 80GiB"):
        parse_size(text)


@pytest.mark.parametrize(
    ("gib", "processes"), [(80, 1), (80, 8), (40, 2), (16, 1), (16, 8), (24, 4), (12, 1)]
)
@pytest.mark.parametrize("recipe", ["base", "v2_rope_rmsnorm", "big"])
def test_a_plan_covers_the_global_batch_within_what_fits(recipe, gib, processes) -> None:
    cfg, plan = planned(load_config(recipe), processes, gpu(gib))
    assert plan.step_tokens >= 25_000 and plan.max_tokens <= plan.fits
    # no smaller accumulation would do: one fewer micro-batch cannot cover the step
    assert (plan.accumulate - 1) * processes * plan.fits < 25_000
    assert plan.estimate.total <= gib * GIB * USABLE - RESERVED
    assert (cfg.data.max_tokens, cfg.train.accumulate) == (plan.max_tokens, plan.accumulate)


def test_the_issue_s_three_machines_for_base() -> None:
    base = load_config("base")
    _, one_80 = planned(base, 1, gpu(80))
    assert (one_80.accumulate, one_80.max_tokens) == (1, 25_000)
    _, eight_16 = planned(base, 8, gpu(16))
    assert (eight_16.accumulate, eight_16.max_tokens) == (1, 3125)
    _, one_16 = planned(base, 1, gpu(16))
    assert one_16.step_tokens >= 25_000 and one_16.max_tokens <= one_16.fits
    _, big_16 = planned(load_config("big"), 1, gpu(16))  # short of memory: it accumulates
    assert big_16.accumulate >= 2 and big_16.max_tokens < 25_000


def test_the_fitted_micro_batch_is_the_largest_the_model_allows() -> None:
    cfg, device = load_config("base"), gpu(16)
    n = parameters(cfg)
    from t2.train.plan import _estimate

    fits = fit_tokens(cfg, n, device)
    room = device.memory * USABLE - RESERVED
    assert (
        _estimate(cfg, n, fits, device).total <= room < _estimate(cfg, n, fits + 16, device).total
    )


def test_explicit_values_win_and_the_line_says_so() -> None:
    cfg = load_config("base", ["data.max_tokens=4096", "train.accumulate=6"])
    resolved, plan = planned(cfg, 1, gpu(80))
    assert (resolved.data.max_tokens, resolved.train.accumulate) == (4096, 6)
    assert "unused: both keys are set" in plan.line() and "as set" in plan.line()
    _, plan = planned(load_config("base", ["data.max_tokens=5000"]), 2, gpu(80))
    assert (plan.max_tokens, plan.accumulate) == (5000, 3)  # 2 x 3 x 5,000 >= 25,000


def test_on_a_cpu_the_micro_batch_stays_at_most_the_cpu_size() -> None:
    _, plan = planned(load_config("base"), 1, Device("cpu", None, "CPU"))
    assert plan.max_tokens <= CPU_MICRO_BATCH and plan.step_tokens >= 25_000
    _, plan = planned(load_config("quickstart"), 1, Device("cpu", None, "CPU"))
    assert (plan.max_tokens, plan.accumulate) == (2048, 1)  # as the recipe sets


def test_a_device_too_small_for_one_pair_fails_in_one_line() -> None:
    with pytest.raises(ConfigError, match="one pair of 258 tokens needs"):
        planned(load_config("big"), 1, gpu(2))


def test_out_of_memory_in_a_step_is_one_line_naming_the_micro_batch() -> None:
    cfg = load_config("base", ["data.max_tokens=25000", "train.accumulate=1"])
    expected = r"out of memory at step 1 .*data.max_tokens=25000 .*; lower"
    with pytest.raises(T2Error, match=expected) as err, out_of_memory(cfg, 0):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB")
    assert "\n" not in str(err.value) and "no checkpoint was saved yet" in str(err.value)


def test_out_of_memory_names_the_planned_and_free_memory_and_the_intact_checkpoint(tmp_path):
    from t2.rundir import RunDir

    cfg = load_config("base", ["data.max_tokens=25000", "train.accumulate=1"])
    run = RunDir(tmp_path)
    ckpt = run.checkpoint(200)
    ckpt.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunDir, "latest", lambda self: ckpt)
        with pytest.raises(T2Error) as err, out_of_memory(cfg, 7, 8 * 2**30, run):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB")
    line = str(err.value)
    assert "out of memory at step 8" in line and "8.0 GiB planned by the memory model" in line
    assert "GiB free now" in line and "--set data.max_tokens=12500 --set train.accumulate=2" in line
    assert f"checkpoint {ckpt} is intact: --resume continues from it" in line


def test_the_dry_run_plans_for_a_device_and_prints_a_recipe_of_plain_numbers(tmp_path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "t2",
        "train",
        "--recipe",
        "base",
        "--dry-run",
        "--device-memory",
        "16GiB",
        "--processes",
        "8",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=ROOT, check=True)
    raw = yaml.safe_load(out.stdout)
    assert (raw["data"]["max_tokens"], raw["train"]["accumulate"]) == (3125, 1)
    assert "# batch plan: 8 processes x 1 micro-batch x 3,125 tokens" in out.stdout
    saved = tmp_path / "planned.yaml"
    saved.write_text(out.stdout)
    assert Config.from_dict(yaml.safe_load(saved.read_text())).data.max_tokens == 3125
    bad = subprocess.run(
        [*cmd[:-4], "--device-memory", "lots"], capture_output=True, text=True, env=ENV, cwd=ROOT
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "80GiB" in bad.stderr
    alone = subprocess.run(
        [*cmd[:6], "--processes", "8"], capture_output=True, text=True, env=ENV, cwd=ROOT
    )
    assert alone.returncode == 2 and "plan a --dry-run" in alone.stderr


def test_a_run_saved_before_buckets_resumes_with_its_batching_named(tmp_path) -> None:
    """A config.yaml without the bucket keys ran the greedy layout: resuming it with the
    new defaults is refused naming the keys and values to pass; with them it goes on."""
    from t2.rundir import RunDir, new_meta, write_json
    from t2.train.setup import check_run_dir, saved_config

    run = RunDir(tmp_path / "old")
    run.path.mkdir()
    cfg = load_config("quickstart")
    raw = cfg.to_dict()
    for key in ("max_shapes", "pad_multiple", "length_multiple"):
        del raw["data"][key]
    run.config.write_text(yaml.safe_dump(raw))
    write_json(run.meta, new_meta(1, recipe="quickstart"))
    assert saved_config(run).data.max_shapes == 0  # what it ran, not today's default
    with pytest.raises(ConfigError, match=r"data.max_shapes=0 \(now 64\)"):
        check_run_dir(run, cfg, resume=True)
    old = load_config("quickstart", ["data.max_shapes=0", "data.pad_multiple=1"])
    check_run_dir(run, old, resume=True)


def test_a_run_resumes_whatever_its_data_preparation_settings(tmp_path) -> None:
    """A run saved before tokenizer samples learnt from every pair (its config.yaml says so)
    and prepared its data with one process: it resumes with today's defaults, which do not
    change what it trains on (it reuses its own tokenizer)."""
    from t2.rundir import RunDir, new_meta, write_json
    from t2.train.setup import check_run_dir, saved_config

    run = RunDir(tmp_path / "old")
    run.path.mkdir()
    cfg = load_config("quickstart")
    raw = cfg.to_dict()
    del raw["data"]["tokenizer_sample"]
    raw["data"]["num_proc"] = 1
    run.config.write_text(yaml.safe_dump(raw))
    write_json(run.meta, new_meta(1, recipe="quickstart"))
    assert saved_config(run).data.tokenizer_sample == 0
    check_run_dir(run, cfg, resume=True)
    with pytest.raises(ConfigError, match=r"data.vocab_size=128 \(now 100\)"):
        check_run_dir(run, load_config("quickstart", ["data.vocab_size=100"]), resume=True)
