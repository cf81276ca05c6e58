"""The decision rule (t2.experiments.rule, t2.experiments.rulebook): parsed from a sweep
file with one-line errors, hashed stably, applied as each named rule says, recorded with
the first run, and a verdict under a changed rule only when asked, disclosed as "decision
rule changed after N runs"."""

from __future__ import annotations

import json

import pytest
from test_experiments_report import SWEEP, fake_run, t2

from t2.errors import ConfigError
from t2.experiments.rule import Rule, decide, parse_rule
from t2.experiments.rulebook import read_rulebook, rule_section, rules_to_render, settle
from t2.experiments.seeds import over_seeds
from t2.experiments.significance import Paired, pool, signs
from t2.experiments.stats import welch
from t2.experiments.sweepfile import load_sweep


def test_the_rule_is_parsed_checked_and_hashed():
    rule = parse_rule({"metric": "test_chrf", "detect": 0.5, "alpha": 0.01}, None, "f.yaml")
    assert rule == Rule("test_chrf", 0.5, 0.01, 0.8, "paired_t")
    assert parse_rule(None, 1.0, "f.yaml") == Rule(detect=1.0)  # the older top-level detect
    assert Rule().digest() == Rule().digest() != Rule(alpha=0.01).digest()
    assert len(Rule().digest()) == 12 and "hash " + Rule().digest() in Rule().describe()
    bad = {
        "invalid rule decide 'vote'; valid: paired_t, welch_pooled, same_sign": {"decide": "vote"},
        "invalid rule metric 'bleu'; valid: valid_loss": {"metric": "bleu"},
        "rule alpha must be a number between 0.0 and 0.5": {"alpha": 0.7},
        "reads test BLEU; set metric: test_bleu": {"decide": "same_sign", "metric": "test_chrf"},
        "detect is given twice": {"detect": 1.0},
    }
    for message, raw in bad.items():
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            parse_rule(raw, 1.0 if "twice" in message else None, "f.yaml")


def _paired(seed: int, delta: float, p: float) -> Paired:
    return Paired(seed, 30.0, 30.0 + delta, 0.8, 0.8, p, p, 500)


def test_each_rule_decides_as_it_says():
    base = {1: 30.0, 2: 30.4, 3: 29.7, 4: 30.2, 5: 29.9, 6: 30.1}
    deltas = {1: 1.2, 2: 0.9, 3: 1.1, 4: -0.3, 5: 1.4, 6: 0.8}  # one seed the other way
    arm = {s: base[s] + d for s, d in deltas.items()}
    tests = [_paired(s, d, 0.001 if d > 0 else 0.3) for s, d in deltas.items()]
    over, apart = over_seeds(arm, base), welch(list(arm.values()), list(base.values()))
    pooled, moved = pool(tests), signs(tests)
    word, why = decide(Rule(), over, apart, pooled, moved)
    assert word == "better" and "(paired t, 6 seeds, p = 0.0" in why and "excludes 0" in why
    assert decide(Rule(decide="welch_pooled"), over, apart, pooled, moved)[0] == "better"
    word, why = decide(Rule(decide="same_sign"), over, apart, pooled, moved)
    assert word == "not distinguishable at this budget" and "disagree in sign" in why
    loss = Rule(metric="valid_loss")  # lower is better: a lower arm is better
    lower = over_seeds({s: -v for s, v in arm.items()}, {s: -v for s, v in base.items()})
    assert decide(loss, lower, apart, None, [])[0] == "better"
    noisy = over_seeds({1: 31.0, 2: 29.0, 3: 31.5}, {1: 30.0, 2: 30.5, 3: 30.0})
    word, why = decide(Rule(), noisy, apart, None, [])
    assert word == "not distinguishable at this budget" and "holds 0" in why
    word, why = decide(Rule(decide="same_sign"), over, apart, None, [])
    assert word == "not distinguishable at this budget" and "needs two seeds" in why


def test_the_rule_is_recorded_first_and_a_change_is_disclosed(tmp_path):
    planned, later = Rule(detect=1.0, decide="same_sign"), Rule(detect=1.0)
    book = settle(tmp_path, planned, 0, accept=False)
    assert read_rulebook(tmp_path) == book and book.planned == planned and book.runs == 0
    assert settle(tmp_path, later, 8, accept=False) == book  # not asked: nothing recorded
    assert rules_to_render(book, later, accept=False) == [("planned rule", planned)]
    text = rule_section(book, later, accept=False)
    assert "no verdict under it; `t2 sweep --rule-changed`" in text
    book = settle(tmp_path, later, 8, accept=True)
    assert read_rulebook(tmp_path) == book and book.changes[0].after_runs == 8
    assert settle(tmp_path, later, 30, accept=True) == book  # recorded once
    assert rules_to_render(book, later, True)[-1] == ("rule changed after 8 runs", later)
    assert "**Decision rule changed after 8 runs**: now `paired_t`" in rule_section(
        book, later, True
    )
    raw = json.loads((tmp_path / "rule.json").read_text())
    raw["planned"]["rule"]["alpha"] = 0.1  # edited by hand: its hash no longer matches
    (tmp_path / "rule.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="hash does not match"):
        read_rulebook(tmp_path)


def test_the_sweep_command_refuses_a_verdict_under_a_changed_rule(tmp_path, capsys):
    spec = tmp_path / "hand.yaml"
    spec.write_text(SWEEP.replace("  short: {set: {model.dropout: 0.2}}\n", ""))
    sweep, out = load_sweep(spec), tmp_path / "out"
    for arm in sweep.arms:
        for seed, loss in zip(sweep.seeds, (3.41, 3.38, 3.45), strict=True):
            fake_run(sweep.run_dir(out, arm, seed), arm.recipe, sweep.overrides(arm, seed), loss)
    code, _, err = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    assert code == 0, err
    book = read_rulebook(out)
    assert book.planned == sweep.rule and book.runs == 9  # recorded after 9 runs: said so
    assert "Planned, recorded after 9 runs had finished" in (out / "report.md").read_text()
    spec.write_text(spec.read_text() + "rule: {decide: paired_t, alpha: 0.01}\n")
    code, stdout, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only")
    report = (out / "report.md").read_text()
    assert code == 0 and "states another decision rule" in stdout
    assert "no verdict under it" in report and "changed after" not in report
    code, _, _ = t2(capsys, "sweep", spec, "--out", out, "--report-only", "--rule-changed")
    report = (out / "report.md").read_text()
    assert code == 0 and "**Decision rule changed after 9 runs**" in report
    assert "- rule changed after 9 runs: **" in report and "- planned rule: **" in report
