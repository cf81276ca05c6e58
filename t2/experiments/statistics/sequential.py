"""Interim looks that keep their error rate: group-sequential boundaries from Lan and
DeMets' alpha spending with the O'Brien-Fleming-type spending function (Lan & DeMets 1983).

A sweep file may plan its looks (`rule: {looks: [5, 10, 15]}`: the seeds every arm has
at each look, the last one all of them). At look k the difference over its standard error,
Z_k, on the first n_k seeds, crosses when |Z_k| >= c_k. Under no difference the Z_k are
jointly normal with corr(Z_i, Z_j) = sqrt(t_i / t_j) for i < j, where t_k = n_k / N is the
look's information fraction; the c_k are chosen in turn so that the chance of crossing at
look k and not before is the alpha the spending function releases between t_(k-1) and
t_k. The rectangle probabilities are scipy's multivariate normal CDF (Genz's algorithm, a
fixed seed so a boundary is the same every time).

The spending function is, per side, f(t) = 2 - 2 Phi(z_(1 - alpha/4) / sqrt(t)), the
two-sided design's alpha/2 spent on each side (gsDesign's sfLDOF and rpact's asOF at
one-sided alpha/2, which publish the boundaries at two-sided 0.05: 2.9626 and 1.9686 for
two looks, 3.7103, 2.5114 and 1.9930 for three). A look reads the interval of its
nominal level, 1 - 2(1 - Phi(c_k)): Jennison and Turnbull's repeated confidence
intervals, which cover the difference at every look at once with probability 1 - alpha.
A look that was not planned gets no verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.stats
from scipy.optimize import brentq

CDF_ERROR = 1e-5  # the absolute error scipy's multivariate normal CDF is asked for
CDF_SEED = 0


def spent(t: float, alpha: float) -> float:
    """The two-sided alpha spent by information fraction `t` (both sides together)."""
    z = scipy.stats.norm.isf(alpha / 4.0)
    return 2.0 * (2.0 - 2.0 * float(scipy.stats.norm.cdf(z / math.sqrt(t))))


def _inside(bounds: np.ndarray, cov: np.ndarray) -> float:
    """P(|Z_j| < bounds_j for every j) for centred normals of covariance `cov`."""
    if len(bounds) == 1:
        return 1.0 - 2.0 * float(scipy.stats.norm.sf(bounds[0]))
    mvn = scipy.stats.multivariate_normal(
        np.zeros(len(bounds)), cov, abseps=CDF_ERROR, releps=0.0, seed=CDF_SEED
    )
    return float(mvn.cdf(bounds, lower_limit=-bounds))


def information_covariance(fractions: tuple[float, ...]) -> np.ndarray:
    """corr(Z_i, Z_j) = sqrt(t_i / t_j), i <= j: the canonical joint distribution."""
    t = np.asarray(fractions, dtype=float)
    return np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))


@lru_cache(maxsize=64)
def boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """The critical values c_1..c_K of |Z| at the looks' information fractions."""
    if not fractions or any(b <= a for a, b in zip((0.0, *fractions), fractions, strict=False)):
        raise ValueError(f"information fractions must increase from above 0, got {fractions}")
    cov = information_covariance(fractions)
    found: list[float] = []
    stay, before = 1.0, 0.0  # P(no crossing so far), alpha spent so far
    for k, t in enumerate(fractions):
        step = spent(t, alpha) - before

        def excess(c: float, k: int = k, stay: float = stay, step: float = step) -> float:
            return stay - _inside(np.array([*found, c]), cov[: k + 1, : k + 1]) - step

        c = brentq(excess, 0.5, 12.0, xtol=1e-5)
        stay, before = _inside(np.array([*found, c]), cov[: k + 1, : k + 1]), before + step
        found.append(float(c))
    return tuple(found)


@dataclass(frozen=True)
class Look:
    """One planned look: its number, its seeds and the level its interval is read at."""

    index: int  # 1-based
    of: int  # the planned looks, K
    seeds: int  # n_k
    boundary: float  # c_k

    @property
    def alpha(self) -> float:
        """The look's nominal two-sided level: the chance |Z| >= c_k alone."""
        return 2.0 * float(scipy.stats.norm.sf(self.boundary))

    def text(self) -> str:
        return (
            f"look {self.index} of {self.of} ({self.seeds} seeds): O'Brien-Fleming-type "
            f"boundary |z| >= {self.boundary:.3f}, read at level {1.0 - self.alpha:.4%}"
        )


def repeated_half_width(se: Any, df: Any, look: Look) -> Any:
    """Half the width of a look's repeated confidence interval: Student's t quantile at
    its nominal level on the standard error's `df` degrees of freedom, times the standard
    error `se` (numbers, or arrays of them). The boundaries are for normal statistics; a
    t statistic on few degrees of freedom read against them crosses too often, so each
    look's level is carried over to the t distribution instead."""
    return scipy.stats.t.ppf(1.0 - look.alpha / 2.0, df) * se


def planned_looks(looks: tuple[int, ...], alpha: float) -> list[Look]:
    """Every look of a plan whose last look has all its seeds."""
    fractions = tuple(n / looks[-1] for n in looks)
    bounds = boundaries(fractions, alpha)
    return [
        Look(i + 1, len(looks), n, c) for i, (n, c) in enumerate(zip(looks, bounds, strict=True))
    ]


def look_at(seeds: int, looks: tuple[int, ...], alpha: float) -> Look | None:
    """The planned look with `seeds` complete seeds, if any; a fixed design (no looks
    planned) has one look, at level 1 - alpha, when all its seeds are in."""
    if not looks:
        return None
    return next((look for look in planned_looks(looks, alpha) if look.seeds == seeds), None)


def drift_for_power(looks: tuple[int, ...], alpha: float, power: float) -> float:
    """The drift theta (the mean of Z at t = 1) at which the looks cross some boundary with
    probability `power`: the design's power, each look's Z having mean theta sqrt(t_k)."""
    fractions = tuple(n / looks[-1] for n in looks)
    bounds, cov = np.array(boundaries(fractions, alpha)), information_covariance(fractions)
    shift = np.sqrt(np.asarray(fractions))

    def missing(theta: float) -> float:
        mvn = scipy.stats.multivariate_normal(
            theta * shift, cov, abseps=CDF_ERROR, releps=0.0, seed=CDF_SEED
        )
        return 1.0 - float(mvn.cdf(bounds, lower_limit=-bounds)) - power

    return float(brentq(missing, 0.0, 20.0, xtol=1e-4))


def inflation(looks: tuple[int, ...], alpha: float, power: float) -> float:
    """How many more seeds the looks need than a fixed design of the same power: the
    squared ratio of their drifts (1 with a single look)."""
    fixed = scipy.stats.norm.isf(alpha / 2.0) + scipy.stats.norm.ppf(power)
    return (drift_for_power(looks, alpha, power) / fixed) ** 2 if len(looks) > 1 else 1.0
