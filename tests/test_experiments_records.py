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


def _scored_run(tmp_path, refs: list[str], named: bool):
    """A finished run scored on files:DATA/test (its hyps: the references), whose meta.json
    names the references by SHA-256 (`named`) or which keeps a copy of them (older)."""
    from test_experiments_report import fake_run

    from t2.data.references import lines_sha256
    from t2.rundir.layout import write_lines

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_lines(data / "test.de", [f"de {i}" for i in range(len(refs))])
    write_lines(data / "test.en", refs)
    sets = [f"data.test=files:{data}/test", "data.src_lang=de", "data.tgt_lang=en"]
    run = tmp_path / "run"
    fake_run(run, "quickstart", sets, 3.0)
    write_lines(RunDir(run).test_hyps, refs)
    if named:
        meta = json.loads((run / "meta.json").read_text())
        sources = [f"de {i}" for i in range(len(refs))]
        meta["references"] = {"test": lines_sha256(refs), "test_source": lines_sha256(sources)}
        (run / "meta.json").write_text(json.dumps(meta))
    else:
        write_lines(RunDir(run).test_refs, refs)
    return run, data


def test_references_are_read_from_the_test_set_and_checked(tmp_path):
    """Issue 52: a record keeps the references' SHA-256, not a copy; the report reads
    them from data.test and refuses, in one line, a test set that is not the one scored."""
    import re

    import pytest

    from t2.errors import DataError
    from t2.experiments.sweeps.runs import read_run, test_references
    from t2.rundir.layout import write_lines

    refs = [f"a sentence {i}" for i in range(30)]
    run, data = _scored_run(tmp_path, refs, named=True)
    assert "test.refs.txt" not in RECORDS and not (run / "test.refs.txt").exists()
    assert read_run(run).test_outputs() == (refs, refs)
    (data / "test.en").write_text("".join(f"{r}\n" for r in refs[:-1]) + "edited\n")
    with pytest.raises(DataError, match=r"holds other references than the run was scored on") as e:
        test_references(run, read_run(run).config, read_run(run).references)
    edited = read_run(run)  # a report leaves it out, in words, rather than read or stop
    assert edited.test_outputs() is None
    assert edited.outputs_problem().startswith("data.test=files:")
    assert "\n" not in str(e.value) and "restore the test set" in str(e.value)
    write_lines(data / "test.en", refs)
    write_lines(data / "test.de", ["de 0 edited", *[f"de {i}" for i in range(1, len(refs))]])
    assert "holds other source sentences than the run was scored" in read_run(run).outputs_problem()
    for name in ("test.de", "test.en"):
        (data / name).unlink()
    assert re.match(
        r"its test set data.test=files:.* cannot be read from ", read_run(run).outputs_problem()
    )


def test_an_older_runs_copy_is_read_and_converted_when_its_records_are_kept(tmp_path):
    """A run from before meta.json named its references reads its copy as before; kept as
    records, it names their SHA-256 instead when data.test holds the same sentences, and
    keeps its copy when data.test holds others (or is not there)."""
    from t2.data.references import lines_sha256
    from t2.experiments.sweeps.runs import read_run

    refs = [f"a sentence {i}" for i in range(30)]
    run, data = _scored_run(tmp_path, refs, named=False)
    assert read_run(run).test_outputs() == (refs, refs)  # read from its copy, as before
    copy_records(run, tmp_path / "kept")
    meta = json.loads((tmp_path / "kept" / "meta.json").read_text())
    assert meta["references"] == {"test": lines_sha256(refs)}
    assert not (tmp_path / "kept" / "test.refs.txt").exists()
    assert read_run(tmp_path / "kept").test_outputs() == (refs, refs)
    (data / "test.en").write_text("".join(f"{r}\n" for r in refs[:-1]) + "edited\n")
    copy_records(run, tmp_path / "other")  # other sentences today: the copy travels
    assert (tmp_path / "other" / "test.refs.txt").is_file()
    assert "references" not in json.loads((tmp_path / "other" / "meta.json").read_text())
    assert read_run(tmp_path / "other").test_outputs() == (refs, refs)
    for name in ("test.de", "test.en"):
        (data / name).unlink()
    copy_records(run, tmp_path / "gone")  # no test set here: the copy travels
    assert (tmp_path / "gone" / "test.refs.txt").is_file()


def test_the_committed_records_hold_no_copy_of_shared_data():
    """docs/results keep the SHA-256 of the test set, and it is the shared data's."""
    from pathlib import Path

    import pytest

    from t2.data.references import lines_sha256
    from t2.rundir.layout import read_written_lines

    root = Path(__file__).resolve().parent.parent
    assert not list((root / "docs" / "results").glob("**/test.refs.txt"))
    metas = list((root / "docs" / "results").glob("**/seed-*/meta.json"))
    assert metas and all("test" in json.loads(m.read_text())["references"] for m in metas)
    shared = root.parent / "shared" / "data" / "multi30k" / "val.en"
    if not shared.is_file():
        pytest.skip(f"{shared} is not here to check the hashes against")
    digest = lines_sha256(read_written_lines(shared))
    assert {json.loads(m.read_text())["references"]["test"] for m in metas} == {digest}
