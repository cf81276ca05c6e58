"""Differences over seeds, paired by seed (t2.experiments.statistics.seeds): Student's paired t
against
his own sleep data (the textbook answer), Welch's only when no seed is shared (and
labelled unpaired), and report 004's committed records giving the figures issue 40
quotes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from t2.experiments.statistics.seeds import correlation, over_seeds, paired_t
from t2.experiments.statistics.welch import welch

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "results" / "report004" / "records"
# Cushny & Peebles' extra hours of sleep under two drugs, ten patients (Student 1908; R's
# `sleep`): t.test(extra ~ group, paired = TRUE) gives t = 4.0621, df = 9, p = 0.002833,
# mean difference 1.58, 95% interval 0.7001142 to 2.4598858
DRUG_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
DRUG_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


def test_paired_t_matches_students_sleep_data():
    d, p = paired_t(DRUG_2, DRUG_1)
    assert d.diff == pytest.approx(1.58) and d.df == 9
    assert d.low == pytest.approx(0.7001142, abs=1e-6)
    assert d.high == pytest.approx(2.4598858, abs=1e-6)
    assert p == pytest.approx(0.002833, abs=1e-6)
    unpaired = welch(DRUG_2, DRUG_1)  # the same data as two independent samples: wider
    assert unpaired.low < 0 < unpaired.high  # R: -0.2054832 to 3.3654832
    assert unpaired.low == pytest.approx(-0.2054832, abs=1e-6)


def test_pairs_are_the_shared_seeds_and_welch_only_without_one():
    arm = {1: 31.0, 2: 32.0, 3: 30.5, 4: 31.5}
    base = {1: 30.0, 2: 31.2, 3: 29.9, 5: 40.0}  # seed 5: no pair, left out
    found = over_seeds(arm, base)
    assert found.paired and found.n == 3 and found.left_out == (4, 5)
    assert found.method == "paired t" and found.t.diff == pytest.approx((1.0 + 0.8 + 0.6) / 3)
    apart = over_seeds({1: 31.0, 2: 32.0}, {3: 30.0, 4: 31.0})
    assert not apart.paired and apart.method == "Welch, unpaired"
    assert apart.t == welch([31.0, 32.0], [30.0, 31.0])
    one = over_seeds({1: 31.0}, {1: 30.0})
    assert not one.t.has_interval and one.p is None
    even = over_seeds({1: 31.0, 2: 32.0}, {1: 30.0, 2: 31.0})  # the same change every seed
    assert (even.t.low, even.t.high) == (1.0, 1.0)


def _report004(arm: str, key: str) -> dict[int, float]:
    found = {}
    for seed in range(1, 16):
        results = json.loads((RECORDS / arm / f"seed-{seed}" / "results.json").read_text())
        found[seed] = results[key]
    return found


def test_report_004s_records_give_the_paired_figures():
    """Issue 40's figures from the committed records: test BLEU paired t +0.84 [+0.27,
    +1.41], p = 0.007, r = 0.44; test chrF paired [+0.12, +0.92]; Welch's [+0.12, +1.56] on
    the same BLEU."""
    v2, base = _report004("v2", "bleu"), _report004("base", "bleu")
    found = over_seeds(v2, base)
    assert (
        f"{found.t.diff:+.2f} [{found.t.low:+.2f}, {found.t.high:+.2f}]" == "+0.84 [+0.27, +1.41]"
    )
    assert round(found.p, 3) == 0.007 and correlation(v2, base) == pytest.approx(0.44, abs=0.005)
    unpaired = welch(list(v2.values()), list(base.values()))
    assert [round(unpaired.low, 2), round(unpaired.high, 2)] == [0.12, 1.56]
    chrf = over_seeds(_report004("v2", "chrf"), _report004("base", "chrf"))
    assert [round(chrf.t.low, 2), round(chrf.t.high, 2)] == [0.12, 0.92]
