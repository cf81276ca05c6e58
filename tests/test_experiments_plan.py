"""A sweep's plan (t2.experiments.decisions.plan, planbook, disclosure): recorded before the first
run with its hash, carried by the runs' commands, never changed without notice (a
changed sweep file trains nothing and its report gives no verdict until --plan-changed,
which the report then discloses at its top), a reconstructed plan labelled as such, and
planned looks that may stop a sweep. Run directories are written by hand (no training)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import sacrebleu
import scipy
from test_experiments_report import fake_run, t2

import t2.experiments.sweeps.sweep as sweep_module
from t2.errors import ConfigError, DataError
from t2.experiments.decisions.plan import (
    DECISION_MODULES,
    decision_code,
    differences,
    plan_from_dict,
    plan_of,
)
from t2.experiments.decisions.planbook import FILE, Book, Entry, read_book, write_book
from t2.experiments.sweeps.sweepfile import load_sweep

ROOT = Path(__file__).resolve().parent.parent
SIX = """name: study
base: quickstart
seeds: [1, 2, 3, 4, 5, 6]
budget: {max_steps: 100}
rule: {metric: valid_loss, detect: 0.2}
arms:
  a: {}
  b: {set: {train.max_lr: 3.0e-3}}
"""
LOSS = {"a": 3.4, "b": 2.9}


def load_sweep_text(text: str):
    """A sweep file's text, loaded (written to a temporary folder)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        spec = Path(folder) / "study.yaml"
        spec.write_text(text)
        return load_sweep(spec)  # b is far better: lower validation loss


def _finish(sweep, out: Path, arm, seed: int) -> None:
    """A finished run as `t2 train` leaves it under the sweep's plan (meta.json's hash)."""
    path = sweep.run_dir(out, arm, seed)
    fake_run(path, arm.recipe, sweep.overrides(arm, seed), LOSS[arm.name] + 0.01 * (seed % 3))
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "sweep_plan": sweep.plan}))


def test_the_plan_is_recorded_before_the_first_run_and_carried_by_every_run(tmp_path, capsys):
    spec, out = tmp_path / "study.yaml", tmp_path / "out"
    spec.write_text(SIX)
    code, stdout, err = t2(capsys, "sweep", spec, "--out", out, "--dry-run")
    assert code == 0, err
    book = read_book(out)
    entry = book.planned
    assert (entry.started, entry.finished, entry.reconstructed) == (0, 0, False)
    assert entry.when().startswith("recorded by t2 sweep before the first run, on ")
    plan = entry.plan.to_dict()
    assert plan["seeds"] == [1, 2, 3, 4, 5, 6] and plan["baseline"] == "a"
    assert plan["arms"]["b"]["overrides"] == ["train.max_lr=0.003"]
    assert plan["arms"]["a"]["test"] == "task:fake_dates" and plan["budget"] == [
        "train.max_steps=100"
    ]
    assert plan["rule"]["decide"] == "interval" and plan["decision_code"] == decision_code()
    lines = stdout.splitlines()
    assert len(lines) == 12 and all(f"--set train.sweep_plan={entry.digest} " in x for x in lines)
    raw = json.loads((out / FILE).read_text())
    assert raw["plans"][0]["hash"] == entry.digest
    raw["plans"][0]["plan"]["seeds"] = [1, 2, 3]  # edited by hand: the hash gives it away
    (out / FILE).write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="a plan's hash does not match its fields"):
        read_book(out)


def test_the_decision_codes_version_is_a_hash_of_its_modules():
    digest = hashlib.sha256()
    for name in DECISION_MODULES:
        full = name if name.startswith("t2.") else f"t2.experiments.{name}"
        text = (ROOT / f"{full.replace('.', '/')}.py").read_bytes()
        digest.update(name.encode() + b"\0" + text + b"\0")
    assert decision_code() == digest.hexdigest()[:12]
    parts = {"decisions.rule", "decisions.verdict", "statistics.bootstrap", "statistics.twoway"}
    assert parts | {"reports.tables", "reports.paired", "reports.disclosure"} <= set(
        DECISION_MODULES
    )


def test_every_module_a_verdict_imports_is_in_the_decision_code():
    """What decisions.verdict and reports.paired import from t2.experiments, transitively,
    is hashed: a module left out could change a verdict unseen."""
    import ast

    base = ROOT / "t2" / "experiments"
    todo, seen = ["decisions.verdict", "decisions.readings", "reports.paired"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((base / f"{name.replace('.', '/')}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "t2.experiments."
            ):
                todo.append(node.module.removeprefix("t2.experiments."))
    missing = {n for n in seen if (base / f"{n.replace('.', '/')}.py").is_file()}
    assert missing - set(DECISION_MODULES) <= {"sweeps.sweepfile"}, missing - set(DECISION_MODULES)
    # the reader of a run's test outputs and the check of their references (issue 52 review)
    assert {"sweeps.runs", "t2.data.references"} <= set(DECISION_MODULES)


def test_the_plan_pins_its_references_and_libraries(tmp_path):
    """Issue 52: the plan names each arm's test and validation references by SHA-256, and
    the scipy and sacreBLEU versions; the same path with other content is another plan."""
    spec, data = tmp_path / "study.yaml", tmp_path / "data"
    data.mkdir()
    for lang in ("de", "en"):
        (data / f"test.{lang}").write_text("".join(f"{lang} {i}\n" for i in range(20)))
    test = f"set: {{data.test: 'files:{data}/test', data.src_lang: de, data.tgt_lang: en}}\n"
    spec.write_text(SIX.replace("base: quickstart\n", f"base: quickstart\n{test}"))
    sweep = load_sweep(spec)
    planned = plan_of(sweep)
    refs = planned.arms["a"].references
    want = hashlib.sha256((data / "test.en").read_bytes()).hexdigest()
    assert refs is not None and refs["test"] == want
    assert sorted(refs) == ["test", "test_source", "valid", "valid_source"]
    assert planned.to_dict()["versions"] == {
        "scipy": scipy.__version__,
        "sacrebleu": sacrebleu.__version__,
    }
    assert f"(SHA-256 {want[:12]})" in planned.describe()
    (data / "test.en").write_text("".join(f"en {i}\n" for i in range(19)) + "en edited\n")
    again = plan_of(sweep)
    assert again.digest() != planned.digest()
    assert f"test references of arm a: SHA-256 {want[:12]} -> SHA-256 " in "; ".join(
        differences(planned, again)
    )
    (data / "test.de").write_text("".join(f"de {i}\n" for i in range(19)) + "de edited\n")
    told = differences(again, plan_of(sweep))  # the source side edited: another test set
    assert [line.split(":")[0] for line in told] == [
        "test sources of arm a",
        "test sources of arm b",
    ]
    old = json.loads(json.dumps(planned.to_dict()))  # a plan recorded before references
    del old["versions"]
    for arm in old["arms"].values():
        del arm["references"]
    assert plan_from_dict(old).to_dict() == old  # its hash is the one it was recorded with
    told = differences(plan_from_dict(old), planned)
    assert "test references of arm a: not recorded -> SHA-256 " in "; ".join(told)
    assert f"scipy: not recorded -> {scipy.__version__}" in told


def test_a_generated_tasks_references_are_pinned_at_each_seed():
    """A task's test set is drawn with the seed: the plan names each seed's references,
    and a change is told at the seeds both plans hold, not as a change of seeds."""
    sweep = load_sweep_text(SIX.replace("[1, 2, 3, 4, 5, 6]", "[1, 2, 3]"))
    planned = plan_of(sweep)
    test = planned.arms["a"].references["test"]
    assert set(test) == {"1", "2", "3"} and len(set(test.values())) == 3
    assert planned.arms["a"].references == planned.arms["b"].references
    assert "task:fake_dates (references per seed)" in planned.describe()
    raw = planned.to_dict()
    raw["arms"]["b"]["references"]["test"]["2"] = "0" * 64
    del raw["arms"]["b"]["references"]["test"]["3"]  # a plan with fewer seeds: not a change
    assert differences(plan_from_dict(raw), planned) == [
        "test references of arm b: other sentences at seeds 2"
    ]


def test_a_changed_plan_trains_nothing_and_gives_no_verdict_until_disclosed(tmp_path, capsys):
    """Issue 49's scratch test: the seeds cut from 6 to 3 after 3 seeds' runs had finished.
    Read under the plan, that is an unplanned look (no verdict); under the new seeds, all
    runs are in and b is better. Without --plan-changed: no verdict at all; with it, the
    change is disclosed at the top and each plan's verdict shown."""
    spec, out = tmp_path / "study.yaml", tmp_path / "out"
    spec.write_text(SIX)
    assert t2(capsys, "sweep", spec, "--out", out, "--dry-run")[0] == 0
    sweep = load_sweep(spec)
    sweep = sweep_module.replace(sweep, plan=read_book(out).planned.digest)
    for seed in (1, 2, 3):
        for arm in sweep.arms:
            _finish(sweep, out, arm, seed)
    spec.write_text(SIX.replace("[1, 2, 3, 4, 5, 6]", "[1, 2, 3]"))
    code, _, err = t2(capsys, "sweep", spec, "--out", out, "--wandb", "disabled")
    assert code == 2 and err.count("\n") == 1 and "states another plan" in err
    assert "(seeds dropped: 4 to 6); restore the file, or pass --plan-changed" in err
    code, stdout, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    report = (out / "report.md").read_text()
    top = report.split("## Arms")[0]
    assert code == 0 and "**The sweep file states another plan**" in top
    assert "seeds dropped: 4 to 6" in top and "**No verdict**" in top
    assert "### b vs a: no verdict (the plan changed: see Plan)" in report
    code, _, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only", "--plan-changed")
    report = (out / "report.md").read_text()
    assert "**Plan changed after 6 runs had started** (hash `" in report
    assert "- planned: no verdict: not a planned look (planned: 6 seeds)." in report
    assert "- change 1: **better" in report  # the plan leads; the change is labelled
    assert "### b vs a: no verdict (planned; change 1, chosen after the data: better" in report
    assert len(read_book(out).entries) == 2


def test_runs_without_the_plans_hash_are_disclosed(tmp_path, capsys):
    spec, out = tmp_path / "study.yaml", tmp_path / "out"
    spec.write_text(SIX.replace("[1, 2, 3, 4, 5, 6]", "[1, 2]"))
    sweep = load_sweep(spec)
    for seed in (1, 2):
        for arm in sweep.arms:
            fake_run(sweep.run_dir(out, arm, seed), arm.recipe, sweep.overrides(arm, seed), 3.0)
    code, _, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    report = (out / "report.md").read_text()
    assert (
        code == 0 and "recorded on " in report and "after 4 runs had started (4 finished)" in report
    )
    assert "**not before the first run**" in report
    assert "Runs (meta.json): 4 record no plan (trained before t2 recorded plans" in report
    assert "**No verdict**" in report


def test_a_reconstructed_plan_is_never_called_recorded_before_the_first_run(tmp_path, capsys):
    spec, out = tmp_path / "study.yaml", tmp_path / "out"
    spec.write_text(SIX)
    sweep = load_sweep(spec)
    planned = plan_of(sweep)
    old = sweep_module.replace(planned, code="t2 at 6d2dd9e")
    write_book(out, Book((Entry(old, "2026-11-27T04:00:00Z", None, None, True, "from git"),)))
    code, _, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    report = (out / "report.md").read_text()
    assert code == 0 and "**reconstructed after the fact** on 2026-11-27 04:00 UTC" in report
    assert "before the first run" not in report.split("## Arms")[0]
    assert f"decision code: t2 at 6d2dd9e -> {decision_code()}" in report
    assert differences(old, planned) == [f"decision code: t2 at 6d2dd9e -> {decision_code()}"]
    (out / FILE).unlink()
    (out / "rule.json").write_text("{}")
    code, _, err = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    assert code == 2 and "records a decision rule in the form before plans" in err


def test_a_sweep_with_looks_stops_at_a_look_that_decides(tmp_path, monkeypatch, capsys):
    """Looks at 2 and 6 seeds: after seeds 1 and 2, b's repeated interval at look 1 lies
    beyond -0.2 (lower loss is better): the sweep stops, seeds 3 to 6 untrained."""
    spec, out = tmp_path / "study.yaml", tmp_path / "out"
    spec.write_text(SIX.replace("detect: 0.2}", "detect: 0.2, looks: [2, 6]}"))
    trained = []

    def fake_train(sweep, arm, seed, out, wandb, slot=None):
        trained.append((arm.name, seed))
        _finish(sweep, out, arm, seed)

    monkeypatch.setattr(sweep_module, "train_one", fake_train)
    code, stdout, err = t2(capsys, "sweep", spec, "--out", out, "--wandb", "disabled")
    assert code == 0, err
    assert sorted(trained) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    assert "every arm has a verdict at this look (b: better by at least 0.2 (look 1 of 2" in stdout
    report = (out / "report.md").read_text()
    assert "- planned: look 1 of 2 (2 seeds): O'Brien-Fleming-type boundary" in report
    assert "repeated interval at look 1 of 2" in report


def test_report_004s_plan_is_said_to_be_reconstructed():
    """Issue 49: report 004's rule was written after its 30 runs; its record and report say
    the plan was reconstructed after the fact, and never that it came before the first run."""
    records = ROOT / "docs" / "results" / "report004" / "records"
    book = read_book(records)
    assert book.planned.reconstructed and book.planned.plan.rule.decide == "same_sign"
    assert all(e.started != 0 for e in book.entries)  # nothing was recorded before a run
    top = (records / "report.md").read_text().split("## Arms")[0]
    assert f"The plan (hash `{book.planned.digest}`), **reconstructed after the fact**" in top
    assert "before the first run" not in top.replace("not recorded before the runs", "")
    assert "30 record no plan" in top  # its runs trained before plans were recorded


@pytest.mark.parametrize("name", ["report004", "dyt", "dyt_pre"])
def test_the_committed_reports_newest_plan_is_todays_decision_code(name):
    """Issue 52 review: a committed report is reproduced by the command its page documents
    only when its newest plan is today's decision code; a change to the code that decides
    asks for the reports to be rendered again (`t2 sweep FILE --records
    docs/results/NAME/records --report-only --plan-changed`, docs/results/report004.md)."""
    book = json.loads((ROOT / "docs" / "results" / name / "records" / FILE).read_text())
    newest = book["plans"][-1]["plan"]
    assert newest["decision_code"] == decision_code(), (
        f"docs/results/{name}/records was rendered by other decision code: render it again"
    )


def test_a_plan_hash_that_reads_as_a_number_reaches_the_run_as_text():
    """A hex digest such as 1234e5678901 is a float to --set's YAML (1e5 reads as a
    number): the sweep's --set quotes it, so the run carries the hash, not inf."""
    from t2.experiments.sweeps.sweepfile import as_string
    from t2.recipes import load_config

    for digest in ("1234e5678901", "123456789012", "0e12"):
        cfg = load_config("quickstart", [f"train.sweep_plan={as_string(digest)}"])
        assert cfg.train.sweep_plan == digest


def test_a_plan_whose_test_set_is_not_here_says_where_it_was_read_from(tmp_path, monkeypatch):
    """Issue 52 review: a sweep file read from another folder (its data.test relative to the
    folder it was planned in) stops in one line naming the arm, the split and the folder."""
    spec = tmp_path / "study.yaml"
    spec.write_text(
        SIX.replace("base: quickstart\n", "base: quickstart\nset: {data.test: 'files:../gone/t'}\n")
    )
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as err:
        plan_of(load_sweep(spec))
    text = str(err.value)
    assert text.startswith("arm a: its data.test=files:../gone/t cannot be read from ")
    assert str(tmp_path) in text and "\n" not in text
