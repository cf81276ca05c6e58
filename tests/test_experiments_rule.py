"""The decision rule (t2.experiments.decisions.rule): parsed from a sweep file with one-line errors
that name the fix, its looks planned as seed counts that end with the sweep."""

from __future__ import annotations

import pytest

from t2.errors import ConfigError
from t2.experiments.decisions.rule import Rule, parse_rule, rule_from_dict


def test_the_rule_is_parsed_and_checked():
    rule = parse_rule({"metric": "test_chrf", "detect": 0.5, "alpha": 0.01}, None, "f.yaml", 3)
    assert rule == Rule("test_chrf", 0.5, 0.01, 0.8, "interval")  # the default decide
    assert parse_rule(None, 1.0, "f.yaml", 3) == Rule(detect=1.0)  # the older top-level detect
    assert rule_from_dict(rule.to_dict()) == rule
    assert "smallest difference that matters 0.5" in rule.describe()
    bad = {
        "invalid rule decide 'vote'; valid: interval, paired_t, welch_pooled": {"decide": "vote"},
        "invalid rule metric 'bleu'; valid: valid_loss": {"metric": "bleu"},
        "rule alpha must be a number between 0.0 and 0.5": {"alpha": 0.7},
        "reads test BLEU; set metric: test_bleu": {"decide": "same_sign", "metric": "test_chrf"},
        "detect is given twice": {"detect": 1.0},
    }
    for message, raw in bad.items():
        with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
            parse_rule(raw, 1.0 if "twice" in message else None, "f.yaml", 3)


def test_looks_are_planned_seed_counts_ending_with_the_sweep():
    assert parse_rule({"looks": [5, 10, 15]}, None, "f", 15).looks == (5, 10, 15)
    assert parse_rule({"looks": 3}, None, "f", 15).looks == (5, 10, 15)  # equally spaced
    assert parse_rule({"looks": 1}, None, "f", 15).looks == ()  # one look: a fixed design
    assert "looks at 5, 10, 15 seeds" in parse_rule({"looks": 3}, None, "f", 15).describe()
    bad = {
        "rule looks end at 12 seeds but the sweep has 15": {"looks": [6, 12]},
        "increasing seed counts from 2, e.g. looks: [5, 10, 15]": {"looks": [10, 5, 15]},
        "rule decide same_sign cannot read a planned look; use interval or paired_t": {
            "looks": [5, 15],
            "decide": "same_sign",
        },
    }
    for message, raw in bad.items():
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")) as err:
            parse_rule(raw, None, "f", 15)
        assert "\n" not in str(err.value)
