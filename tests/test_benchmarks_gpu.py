"""The GPU session's tooling, checked on a CPU: benchmarks/gpu.sh's failure exits, its
interpreter, paths and dry run, and what --prepare carries (benchmarks/gpu_prepare.py). The
plan: test_benchmarks_gpu_plan.py; the summary: test_benchmarks_gpu_summary.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from test_benchmarks import ROOT, SHARED, load

GPU_SH = ROOT / "benchmarks" / "gpu.sh"


def gpu_sh(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(GPU_SH), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_gpu_script_without_cuda_fails_in_one_line():
    """No CUDA device must not read as success: one line, a non-zero exit."""
    done = gpu_sh("--quick")
    assert done.returncode == 4 and done.stdout == "", done.stderr
    assert done.stderr.count("\n") == 1 and "error: no CUDA device visible to torch" in done.stderr


def test_gpu_script_fails_in_one_line_without_python_or_a_torch_that_imports(tmp_path):
    (tmp_path / "torch.py").write_text("raise ImportError('this torch is broken')\n")
    broken = gpu_sh(PYTHONPATH=str(tmp_path))
    assert broken.returncode == 3 and broken.stdout == ""
    assert broken.stderr.count("\n") == 1 and "torch does not import" in broken.stderr
    assert "this torch is broken" in broken.stderr
    none = gpu_sh(PYTHON=str(tmp_path / "no-python"))
    assert none.returncode == 2 and "error: no Python found at" in none.stderr
    bad_calls = (
        (["--frobnicate"], "unknown option --frobnicate"),
        (["--budget", "1m"], ""),
        (["--budget"], "error: --budget takes a value"),  # was: "$2: unbound variable", 1
        (["--data", "--quick"], "error: --data takes a value"),
    )
    for bad, why in bad_calls:
        done = gpu_sh(*bad)
        assert done.returncode == 2 and why in done.stderr and done.stderr.count("\n") == 1


def stand_in_python(folder, name: str, torch_source: str):
    """An interpreter named `name` in `folder`: this Python with `torch_source` as torch."""
    (folder / name).mkdir(parents=True)
    (folder / name / "torch.py").write_text(torch_source)
    script = folder / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        f'#!/bin/sh\nPYTHONPATH={folder / name}:$PYTHONPATH exec {sys.executable} "$@"\n'
    )
    script.chmod(0o755)


CUDA_TORCH = """import types
__version__ = "2.11.0+cu130"
version = types.SimpleNamespace(cuda="13.0")
cuda = types.SimpleNamespace(is_available=lambda: True)
"""


@pytest.mark.parametrize("with_torch", ["python3", "python"])
def test_gpu_script_picks_the_interpreter_whose_torch_sees_cuda_and_names_it(tmp_path, with_torch):
    """python and python3 both on PATH, one without torch: gpu.sh runs with the other, says
    so with its torch and CUDA in device.txt, and starts the budget's clock before its
    set-up (with --budget 0 every part is skipped, and the summary says so)."""
    other = "python" if with_torch == "python3" else "python3"
    stand_in_python(tmp_path, with_torch, CUDA_TORCH)
    stand_in_python(tmp_path, other, "raise ImportError('No module named torch')\n")
    out = tmp_path / "out"
    path = f"{tmp_path / 'bin'}:{os.environ['PATH']}"
    done = gpu_sh(str(out), "--quick", "--budget", "0", PATH=path)
    assert done.returncode == 0, done.stderr
    chosen = f"python {tmp_path / 'bin' / with_torch} (Python {sys.version.split()[0]}): "
    chosen += "torch 2.11.0+cu130, CUDA 13.0"
    assert done.stdout.splitlines()[0] == chosen
    assert chosen in (out / "device.txt").read_text()
    summary = (out / "summary.md").read_text()
    assert "| part: train-base | skipped: " in summary and "| part: tests | skipped: " in summary


def test_relative_paths_are_relative_to_where_gpu_sh_was_run_from(tmp_path):
    """gpu.sh works in the checkout, but a relative OUT_DIR, --wheels, --data and
    --compile-cache are the user's: they name folders under the folder gpu.sh was run
    from (--dry-run prints the install and the parts' command lines, and runs none)."""
    stand_in_python(tmp_path, "python3", CUDA_TORCH)
    caller = tmp_path / "caller"
    caller.mkdir()
    argv = ["out", "--dry-run", "--wheels", "w", "--data", "d"]  # the full plan reads --data
    done = subprocess.run(
        ["bash", str(GPU_SH), *argv, "--compile-cache", "c"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=caller,
        env={**os.environ, "PYTHON": str(tmp_path / "bin" / "python3")},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"--wheels {caller / 'w'} --site gpu-site" in lines[1], lines[1]
    parts = [line for line in lines if ": need " in line]
    assert any(f"{caller / 'out'}/" in line for line in parts), parts
    assert any(f'train.compile_cache="{caller / "c"}"' in line for line in parts), parts
    assert any(f"{caller / 'd'}" in line for line in parts), parts
    # the CUDA tests' line runs with the shared cache, as the real run's does
    wanted = f"environment: TORCHINDUCTOR_CACHE_DIR={caller / 'c' / 'inductor'} "
    assert any(line.startswith(wanted) for line in lines), lines
    assert not (caller / "out").exists() and not (ROOT / "out").exists()  # nothing run


def test_an_empty_out_dir_is_the_default_and_two_are_refused(tmp_path):
    """`gpu.sh "" --dry-run` (an unset variable quoted) writes under runs/gpu-DATE in the
    checkout, never into the caller's own folder; two OUT_DIRs are an error naming both."""
    stand_in_python(tmp_path, "python3", CUDA_TORCH)
    caller = tmp_path / "caller"
    caller.mkdir()

    def run(*argv: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHON": str(tmp_path / "bin" / "python3")}
        return subprocess.run(
            ["bash", str(GPU_SH), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=caller,
            env=env,
        )

    done = run("", "--quick", "--dry-run")
    assert done.returncode == 0, done.stderr
    parts = [line for line in done.stdout.splitlines() if "--json" in line]
    assert parts and all(f"--json {ROOT}/runs/gpu-" in line for line in parts), parts
    for two in (("a", "b"), ("", "b"), ("a", "")):
        refused = run(*two, "--dry-run")
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout
        assert f"two OUT_DIRs, '{two[0]}' and '{two[1]}'" in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1


def test_set_values_with_folders_reach_the_config_whole():
    """The compile cache's and the data's folders go into --set values: a folder named with
    ` #` or `: ` is quoted as YAML, so load_config reads it whole, not cut at a comment."""
    from t2.recipes import load_config

    run, plan = load("gpu_run"), load("gpu_plan")
    fill = {"out": "/o", "cache": "/c #x: y", "data": "/d #z: w"}
    by_name = {p.name: p for p in (*plan.QUICK.timed, *plan.FULL.timed, *plan.FULL.beside)}
    for name in ("train-base", "mixed"):
        argv = run.command_line(by_name[name], (), "py", fill)
        sets = [a.removeprefix("--set=") for a in argv if a.startswith("--set=")]
        sets += [b for a, b in zip(argv, argv[1:], strict=False) if a == "--set"]
        cfg = load_config("base", sets)
        assert cfg.train.compile_cache == "/c #x: y", (name, sets)
        if name == "mixed":
            assert cfg.data.train == "files:/d #z: w/mixed/train", sets
            assert cfg.train.max_minutes == 2  # a value without a folder stays as it was


def test_dry_run_plans_with_the_kept_durations_and_quotes_its_command_lines(tmp_path, capsys):
    """gpu_run --dry-run reads gpu-durations.json as the real run does (a part measured
    before needs what it took) and prints each command line as the shell reads it back."""
    import shlex

    run, durations = load("gpu_run"), load("gpu_durations")
    cache = tmp_path / "my cache"
    cache.mkdir()
    (cache / durations.FILE).write_text(json.dumps({"parts_s": {"tests": 77.0}}))
    argv = [str(tmp_path / "o"), "--python", "py", "--since", "0", "--budget", "355"]
    run.main([*argv, "--quick", "--compile-cache", str(cache), "--dry-run"])
    lines = capsys.readouterr().out.splitlines()
    assert next(line for line in lines if line.startswith("tests:")).startswith("tests: need 77 s")
    part = next(p for p in load("gpu_plan").QUICK.timed if p.name == "train-base")
    line = next(line for line in lines if line.startswith("train-base:"))
    fill = {"out": str(tmp_path / "o"), "cache": str(cache), "data": "../shared/data"}
    assert shlex.split(line.partition(" alone: ")[2]) == run.command_line(
        part, part.modes, "py", fill
    )


def test_prepare_carries_only_the_pinned_wheels_the_gpu_image_lacks(tmp_path):
    prepare = load("gpu_prepare")
    specs = prepare.pins()
    assert [s.split("==")[0] for s in specs] == ["datasets", "dill", "multiprocess", "xxhash"]
    assert all(s.split("==")[1] for s in specs)  # each pinned by constraints.txt
    commands = prepare.download_commands(specs, ["3.11", "3.12"], tmp_path)
    assert len(commands) == 2
    for command, version in zip(commands, ("3.11", "3.12"), strict=True):
        assert "--no-deps" in command and "--only-binary=:all:" in command
        assert command[command.index("--python-version") + 1] == version
        assert command[-len(specs) :] == specs  # nothing else: numpy, pyarrow, pandas stay
    bad = tmp_path / "constraints.txt"
    bad.write_text("dill==0.4.1\n")
    with pytest.raises(prepare.T2Error, match="pins no datasets, multiprocess, xxhash"):
        prepare.pins(bad)


def test_prepare_installs_into_a_folder_of_its_own_and_only_what_is_missing(tmp_path, monkeypatch):
    prepare = load("gpu_prepare")
    command = prepare.install_command(tmp_path / "wheels", tmp_path / "site", ["xxhash"])
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert {"--no-index", "--no-deps"} <= set(command) and command[-1] == "xxhash"
    assert command[command.index("--target") + 1] == str(tmp_path / "site")
    assert prepare.install(tmp_path / "no-wheels", tmp_path / "site") == []  # all import here
    monkeypatch.setattr(prepare, "missing", lambda: ["datasets"])
    with pytest.raises(prepare.T2Error, match="datasets not installed and no wheel folder"):
        prepare.install(tmp_path / "no-wheels", tmp_path / "site")


@pytest.mark.skipif(not (SHARED / "mixed" / "train.de").is_file(), reason="no shared data")
def test_prepared_data_and_wheels_fit_the_limit_and_an_excess_is_refused(tmp_path):
    prepare = load("gpu_prepare")
    data, wheels = tmp_path / "gpu-data", tmp_path / "gpu-wheels"
    prepare.copy_data(SHARED, data)
    assert sorted(str(p.relative_to(data)) for p in data.rglob("*.*")) == sorted(prepare.DATA_FILES)
    wheels.mkdir()
    with open(wheels / "wheels.whl", "wb") as f:  # the wheels of four Pythons: ~3.1 MiB
        f.truncate(4 << 20)
    assert prepare.check_size(wheels, data) < prepare.LIMIT
    with open(wheels / "wheels.whl", "wb") as f:
        f.truncate(prepare.LIMIT)
    with pytest.raises(prepare.T2Error, match="over the 40 MiB that may travel"):
        prepare.check_size(wheels, data)
