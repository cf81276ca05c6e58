"""`t2 sweep` end to end on tiny runs (two arms x two seeds, six steps each): the report's
and `t2 compare`'s numbers are those of the runs' own metrics.jsonl and results.json, a
clearly better arm is called better, an arm may set a plugin's component (the DyT example),
an interrupted sweep continues without retraining finished runs, and a failing run stops
the sweep in one line."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import statistics
from pathlib import Path

import pytest
import yaml
from test_train_runs import TINY

from t2.atomic import sha256
from t2.cli import main
from t2.experiments.decisions.planbook import read_book
from t2.experiments.reports.compare import duration
from t2.machine import describe
from t2.plugins import isolated
from t2.rundir import RunDir, read_records

pytestmark = pytest.mark.slow
SEEDS = (1, 2)
DYT = Path(__file__).resolve().parent.parent / "examples" / "plugins" / "dyt.py"


def t2(*args) -> tuple[int, str]:
    """`t2 ARGS` in this process (its runs are child processes): exit status and stdout."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    return done.value.code, out.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The sweep file, its output folder and the first sweep's stdout. `slow` peaks at
    1e-4, `fast` at quickstart's 2e-3: after six steps its loss is far lower. `fast` sets
    the norm of a plugin (DyT), forgotten when the module's tests end."""
    with pytest.MonkeyPatch.context() as mp, isolated():
        mp.setenv("OMP_NUM_THREADS", "1")  # the runs are child processes: they inherit it
        mp.setenv("TOKENIZERS_PARALLELISM", "false")
        root = tmp_path_factory.mktemp("sweep")
        common = {kv.split("=")[0]: yaml.safe_load(kv.split("=")[1]) for kv in TINY}
        common.pop("train.max_steps")
        spec = {
            "name": "tiny",
            "base": "quickstart",
            "seeds": list(SEEDS),
            "budget": {"max_steps": 6},
            "set": common,
            "robustness": True,
            "baseline": "slow",
            "plugins": [str(DYT)],
            "arms": {
                "slow": {"set": {"train.max_lr": 1.0e-4}},
                "fast": {"set": {"model.norm": "dyt"}},
            },
        }
        path = root / "tiny.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        # two runs at a time, each bound to one core: the real --jobs path
        code, stdout = t2(
            "sweep",
            path,
            "--out",
            root / "out",
            "--wandb",
            "disabled",
            "--jobs",
            "2",
            "--records",
            root / "records",
            "--trust-plugins",  # the sweep file's plugins: (t2.plugins.load_listed)
        )
        assert code == 0, stdout
        yield path, root / "out", stdout


def runs(out):
    return {(arm, seed): out / arm / f"seed-{seed}" for arm in ("slow", "fast") for seed in SEEDS}


def last_valid(run) -> dict:
    return [r for r in read_records(RunDir(run).metrics) if "valid_loss" in r][-1]


def test_the_report_holds_the_runs_own_numbers(tiny):
    _, out, stdout = tiny
    assert "4 runs (2 arms x 2 seeds), 0 finished, 4 to train" in stdout
    report = (out / "report.md").read_text()
    for (arm, seed), run in runs(out).items():
        v, res = last_valid(run), json.loads(RunDir(run).results.read_text())
        cells = [
            arm,
            str(seed),
            "6",
            duration(res["elapsed_s"]),
            f"{v['valid_loss']:.4f}",
            f"{v['valid_bleu']:.2f}",
            f"{v['valid_chrf']:.2f}",
            f"{res['bleu']:.2f}",
            f"{res['chrf']:.2f}",
        ]
        assert "| " + " | ".join(cells) + " |" in report
    for arm in ("slow", "fast"):
        losses = [last_valid(out / arm / f"seed-{s}")["valid_loss"] for s in SEEDS]
        cell = f"{statistics.fmean(losses):.4f} ± {statistics.stdev(losses):.4f}"
        assert f"| {arm} | 2 | {cell} |" in report
    loss_rows = report.split("### validation loss")[1].split("###")[0]
    fast = next(line for line in loss_rows.splitlines() if line.startswith("| fast |"))
    assert fast.endswith("| excludes 0 |")  # ~1.2 lower with a spread of ~0.05: no word
    assert "## Robustness (report 003)" in report
    for run in runs(out).values():
        suite = json.loads(RunDir(run).file("robustness.json").read_text())
        control = suite["results"][0]
        assert [r["condition"] for r in suite["results"]] == [
            "control",
            "shuffle_middle",
            "drop",
            "repeat",
        ]
        # the suite's clean control is the run's last validation: same pairs, same weights
        assert control["loss"] == pytest.approx(last_valid(run)["valid_loss"], rel=1e-4)


def test_an_arm_sets_a_plugin_s_component_and_its_runs_keep_the_plugin(tiny):
    path, out, _ = tiny
    for (arm, _), run in runs(out).items():
        config = yaml.safe_load(RunDir(run).config.read_text())
        assert config["model"]["norm"] == ("dyt" if arm == "fast" else "layernorm")
        manifest = json.loads((RunDir(run).plugins / "manifest.json").read_text())
        assert [(p["file"], p["sha256"], p["registers"]) for p in manifest["plugins"]] == [
            ("dyt.py", sha256(DYT), ["norm dyt"])
        ]
        assert f"--plugin {DYT}" in RunDir(run).file("sweep.log").read_text()


def test_records_carry_a_sweep_to_a_machine_without_its_weights(tiny, tmp_path):
    """--records kept each run as it finished (its records only, no weights), and a sweep
    on a new --out given those records counts them finished and reports the same numbers."""
    path, out, stdout = tiny
    records = out.parent / "records"
    assert "records: 0 finished runs taken from" in stdout
    assert f"records: 4 finished runs and {records / 'report.md'}" in stdout
    for run in runs(out).values():
        kept = records / run.relative_to(out)
        assert sorted(p.name for p in kept.iterdir()) == [
            "config.yaml",
            "meta.json",
            "metrics.jsonl",
            "results.json",
            "robustness.json",
            "sweep.log",
            "test.hyps.txt",
        ]
        meta = json.loads(RunDir(kept).meta.read_text())
        assert len(meta["references"]["test"]) == 64  # no copy of the test set: its SHA-256
        assert meta["machine"] == describe(cuda=False, threads=1)  # --jobs 2: a core each
        assert meta["sweep_plan"] == read_book(records).planned.digest  # trained under it
    code, stdout = t2(
        "sweep",
        path,
        "--out",
        tmp_path / "new",
        "--records",
        records,
        "--wandb",
        "disabled",
        "--trust-plugins",
    )
    assert code == 0 and "records: 4 finished runs taken from" in stdout, stdout[-3000:]
    assert "4 runs (2 arms x 2 seeds), 4 finished, 0 to train" in stdout
    tables = [(f / "report.md").read_text().split("## Arms")[1] for f in (out, tmp_path / "new")]
    assert tables[0] == tables[1]  # parameters and robustness too, read from the records
    assert f"Trained on: {describe(cuda=False, threads=1)} (4 runs)." in tables[0]


def test_compare_numbers_equal_the_metrics(tiny, tmp_path):
    _, out, _ = tiny
    keys, paths = list(runs(out)), list(runs(out).values())
    code, stdout = t2("compare", *paths, "--out", tmp_path)
    assert code == 0
    rows = list(csv.DictReader((tmp_path / "compare.csv").open()))
    assert [r["run"] for r in rows] == [str(p) for p in paths]
    for row, path, (arm, seed) in zip(rows, paths, keys, strict=True):
        records = read_records(RunDir(path).metrics)
        res = json.loads(RunDir(path).results.read_text())
        assert float(row["best valid loss"]) == min(
            r["valid_loss"] for r in records if "valid_loss" in r
        )
        assert float(row["best valid BLEU"]) == max(r.get("valid_bleu", 0) for r in records)
        assert int(row["steps"]) == res["steps"] == 6 and row["stopped by"] == "max_steps"
        assert int(row["train tokens"]) == res["train_tokens"] == records[-1]["train_tokens"]
        assert float(row["wall time"]) == res["elapsed_s"]
        assert float(row["test BLEU"]) == res["bleu"] and float(row["test chrF"]) == res["chrf"]
        assert (row["seed"], row["train.wandb_job_type"]) == (str(seed), arm)
        line = next(x for x in stdout.splitlines() if x.startswith(f"| {path} |"))
        assert f"| {float(row['best valid loss']):.4f} |" in line
    assert {r["train.max_lr"] for r in rows} == {"0.0001", "0.002"}
    assert (tmp_path / "curves_by_time.png").stat().st_size > 10_000


def test_an_interrupted_sweep_continues_without_retraining(tiny):
    path, out, _ = tiny
    cut = out / "slow" / "seed-2"
    before = last_valid(cut)
    done = {
        p: (RunDir(p).results.stat().st_mtime_ns, RunDir(p).metrics.read_text())
        for p in runs(out).values()
        if p != cut
    }
    RunDir(cut).results.unlink()  # as if killed after step 3's checkpoint
    for f in RunDir(cut).checkpoint(6).iterdir():
        f.unlink()
    RunDir(cut).checkpoint(6).rmdir()
    code, stdout = t2("sweep", path, "--out", out, "--wandb", "disabled", "--trust-plugins")
    assert code == 0
    assert "3 finished, 1 to train" in stdout and "[1/1] slow seed 2 (resuming)" in stdout
    for p, (mtime, metrics) in done.items():
        assert RunDir(p).results.stat().st_mtime_ns == mtime
        assert RunDir(p).metrics.read_text() == metrics
    steps = [r["step"] for r in read_records(RunDir(cut).metrics) if "loss" in r]
    assert steps == [1, 2, 3, 4, 5, 6] and RunDir(cut).results.is_file()
    assert last_valid(cut)["valid_loss"] == pytest.approx(before["valid_loss"], abs=1e-5)
    assert RunDir(cut).file("sweep.log").read_text().count("$ python train.py") == 2
    code, stdout = t2("sweep", path, "--out", out, "--dry-run", "--trust-plugins")
    assert code == 0 and stdout == ""  # nothing left to run


def test_a_failing_run_stops_the_sweep_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    path = tmp_path / "bad.yaml"
    path.write_text(
        "base: quickstart\nseeds: [1, 2]\nbudget: {max_steps: 2}\n"
        "arms: {broken: {set: {data.train: 'files:/no/such/corpus'}}}\n"
    )
    code, stdout = t2("sweep", path, "--out", tmp_path / "out", "--wandb", "disabled")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: sweep run broken/seed-1 failed (exit 2): error: ")
    assert "/no/such/corpus" in err and "sweep.log" in err
    assert "[1/2]" in stdout and "[2/2]" not in stdout  # the sweep stopped there
