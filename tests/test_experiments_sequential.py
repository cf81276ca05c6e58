"""t2.experiments.statistics.sequential: the Lan-DeMets O'Brien-Fleming-type boundaries against the
published tables, and by simulation that planned looks keep the false-positive rate at
alpha (where looking at each with an unadjusted level does not) and that the inflated
design keeps its power."""

from __future__ import annotations

import numpy as np
import pytest

from t2.experiments.statistics.sequential import (
    boundaries,
    drift_for_power,
    inflation,
    look_at,
    planned_looks,
    repeated_half_width,
)

# Two-sided alpha 0.05, equally spaced looks, O'Brien-Fleming-type spending (Lan & DeMets
# 1983): R's gsDesign (sfLDOF) and rpact (typeOfDesign = "asOF") at one-sided 0.025;
# ldbounds' manual (ld98, Reboussin et al. 2000) prints the five-look row.
PUBLISHED = {
    2: (2.9626, 1.9686),
    3: (3.7103, 2.5114, 1.9930),
    4: (4.3326, 2.9631, 2.3590, 2.0141),
    5: (4.8769, 3.3569, 2.6803, 2.2898, 2.0310),
}


@pytest.mark.parametrize("looks", sorted(PUBLISHED))
def test_obrien_fleming_boundaries_match_the_published_tables(looks):
    found = boundaries(tuple(k / looks for k in range(1, looks + 1)), 0.05)
    assert found == pytest.approx(PUBLISHED[looks], abs=2e-4)


def test_a_look_is_planned_or_it_is_not():
    assert look_at(10, (5, 10, 15), 0.05).index == 2
    assert look_at(10, (5, 10, 15), 0.05).boundary == pytest.approx(2.5114, abs=2e-4)
    assert look_at(7, (5, 10, 15), 0.05) is None  # an unplanned look: no verdict
    assert look_at(15, (), 0.05) is None  # a fixed design has no looks
    last = planned_looks((5, 10, 15), 0.05)[-1]
    assert last.text().startswith("look 3 of 3 (15 seeds): O'Brien-Fleming-type boundary")
    assert 1 - last.alpha == pytest.approx(0.9537, abs=2e-4)  # wider than 95%: the looks' cost


def _crossed(diffs: np.ndarray, looks: tuple[int, ...], adjusted: bool) -> float:
    """The share of simulated sweeps (rows of per-seed differences) whose paired interval
    excludes 0 at some look: at each look's level, or at 95% every time."""
    crossed = np.zeros(len(diffs), dtype=bool)
    for look in planned_looks(looks, 0.05):
        d = diffs[:, : look.seeds]
        se = d.std(axis=1, ddof=1) / np.sqrt(look.seeds)
        if adjusted:
            half = repeated_half_width(se, look.seeds - 1, look)
        else:
            half = repeated_half_width(se, look.seeds - 1, planned_looks((look.seeds,), 0.05)[0])
        crossed |= np.abs(d.mean(axis=1)) > half
    return float(crossed.mean())


def test_planned_looks_keep_the_false_positive_rate_at_alpha():
    """No true difference, normal per-seed differences, 20,000 sweeps of 15 seeds read at
    5, 10 and 15 (and of 6 read at 3 and 6): the share that ever calls a difference stays
    at 0.05 (standard error 0.0015) with the looks' levels; at 95% at every look it does
    not."""
    rng = np.random.default_rng(1)
    for looks in ((5, 10, 15), (3, 6)):
        diffs = rng.standard_normal((20_000, looks[-1])) * 1.3 + 0.0
        assert _crossed(diffs, looks, adjusted=True) == pytest.approx(0.05, abs=0.005)
        assert _crossed(diffs, looks, adjusted=False) > 0.08


def test_the_drift_for_power_gives_that_power_and_a_small_inflation():
    """Z at the looks with mean theta sqrt(t_k): 20,000 simulated paths cross a boundary
    in 80% of cases at the drift found; a fixed design needs theta = 1.96 + 0.84."""
    looks, rng = (5, 10, 15), np.random.default_rng(2)
    theta = drift_for_power(looks, 0.05, 0.8)
    t = np.array(looks) / looks[-1]
    steps = rng.standard_normal((20_000, len(looks))) * np.sqrt(np.diff(t, prepend=0.0))
    z = (np.cumsum(steps, axis=1) + theta * t) / np.sqrt(t)  # the score process, scaled
    bounds = np.array([look.boundary for look in planned_looks(looks, 0.05)])
    assert (np.abs(z) >= bounds).any(axis=1).mean() == pytest.approx(0.8, abs=0.01)
    assert 1.0 < inflation(looks, 0.05, 0.8) < 1.05 and inflation((15,), 0.05, 0.8) == 1.0
