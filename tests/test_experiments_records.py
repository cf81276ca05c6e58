"""A sweep's records (t2.experiments.sweeps.records, `t2 sweep --records`) on run directories
written by hand: only the records travel (no weights), an old copy is replaced whole, a
sweep given the records back counts those runs finished and reports the same numbers,
and the report says which machine trained which runs."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from test_experiments_report import hand_sweep, t2  # noqa: F401 (a fixture)

from t2.experiments.decisions.planbook import read_book
from t2.experiments.sweeps.records import copy_records, restore
from t2.rundir import RunDir
from t2.rundir.layout import RECORDS


def test_only_the_records_are_copied_and_an_old_copy_is_replaced_whole(hand_sweep, tmp_path):  # noqa: F811
    sweep, out = hand_sweep
    run = sweep.run_dir(out, sweep.arm("a"), 1)
    (run / "checkpoints" / "step-0000100").mkdir(parents=True)
    (run / "checkpoints" / "step-0000100" / "model.safetensors").write_bytes(b"w" * 100)
    (run / "tokenizer").mkdir()
    (run / "sweep.log").write_text("$ python train.py ...\n")
    os.utime(run / "results.json", ns=(1_000_000_000, 1_000_000_000))
    kept = tmp_path / "copies" / "kept"
    kept.mkdir(parents=True)
    (kept / "stale.txt").write_text("from an older copy")
    copy_records(run, kept)
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        n for n in RECORDS if (run / n).is_file()
    )
    assert "sweep.log" in RECORDS and (kept / "sweep.log").is_file()
    assert (kept / "results.json").stat().st_mtime_ns == 1_000_000_000  # cached scores stay valid
    assert [p.name for p in kept.parent.iterdir()] == ["kept"]  # no temporary folder left


def test_a_sweep_given_its_records_back_reports_the_same_numbers(hand_sweep, tmp_path, capsys):  # noqa: F811
    sweep, out = hand_sweep
    meta = RunDir(sweep.run_dir(out, sweep.arm("a"), 1)).meta
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "machine": "Some CPU, 1 thread"}))
    records = tmp_path / "records"
    code, stdout, err = t2(
        capsys, "sweep", sweep.path, "--out", out, "--records", records, "--report-only"
    )
    assert code == 0, err
    assert stdout.splitlines() == [
        f"records: 0 finished runs taken from {records}",
        f"report: {out / 'report.md'}",
        f"records: 10 finished runs and {records / 'report.md'}",
    ]
    report = (records / "report.md").read_text()
    assert report.split("## Arms")[1] == (out / "report.md").read_text().split("## Arms")[1]
    assert f"runs in `{records}`" in report
    assert (
        "Trained on: Some CPU, 1 thread (1 run); not recorded (trained before t2 wrote it) "
        "(9 runs)."
    ) in report
    fresh = tmp_path / "fresh"
    code, stdout, err = t2(
        capsys, "sweep", sweep.path, "--out", fresh, "--records", records, "--dry-run"
    )
    assert code == 0, err
    planned = replace(sweep, plan=read_book(records).planned.digest)  # recorded with records
    assert stdout.splitlines() == [f"records: 10 finished runs taken from {records}"] + [
        planned.shell_command(sweep.arm("short"), s, fresh, "offline") for s in (2, 3)
    ]
    assert f"--set train.sweep_plan={planned.plan} " in stdout
    assert restore(sweep, fresh, records) == 0  # nothing more to take
    code, _, err = t2(capsys, "sweep", sweep.path, "--out", out, "--records", out, "--report-only")
    assert code == 2 and err.count("\n") == 1 and "is the --out folder" in err
    text = sweep.path.read_text()
    sweep.path.write_text(text.replace("model.dropout: 0.2", "model.dropout: 0.3"))
    code, _, err = t2(
        capsys, "sweep", sweep.path, "--out", tmp_path / "other", "--records", records, "--dry-run"
    )
    assert code == 2 and err.count("\n") == 1  # a kept run trained otherwise: named, not copied
    assert f"{records / 'short' / 'seed-1'} was trained with model.dropout=0.2" in err
    assert not (tmp_path / "other").exists()


def test_a_finished_run_replaces_an_unfinished_folder(hand_sweep, tmp_path):  # noqa: F811
    sweep, out = hand_sweep
    short = sweep.arm("short")
    records = tmp_path / "records"
    copy_records(sweep.run_dir(out, short, 1), sweep.run_dir(records, short, 2))
    partial = sweep.run_dir(out, short, 2)
    (partial / "checkpoints").mkdir(parents=True)
    assert restore(sweep, out, records) == 1
    assert RunDir(partial).results.is_file() and not (partial / "checkpoints").exists()
