"""The family-wise error of a sweep of k arms against one baseline, with no true difference.

Data-generating model (one figure, e.g. validation loss or test BLEU, per run): for seed
s = 1..n, the baseline's run is mu + b_s and arm j's is mu + b_s + e_js, where b_s is the
seed's shared part (the data order and initial draws arms trained with one seed share) and
e_js ~ N(0, sigma^2) independent. No arm differs from the baseline. Each arm is read by
the paired t interval over seeds of (arm - baseline) at level 1 - alpha (unadjusted) or
1 - alpha / k, Holm's first step (t2 reads a plan's arms with Holm's step-down,
t2.experiments.decisions.readings.decide_family; with no true difference, any arm is
called only if one is at that first step, so the family's error is the first step's); the
family errs when any arm's interval excludes 0. The arms' differences share the
baseline's runs, so they are correlated (rho = 1/2), as in a real sweep.

    python -m benchmarks.sim_family [--sets 20000]
"""

from __future__ import annotations

import argparse

import numpy as np
import scipy.stats

ARMS = (1, 2, 3, 5, 6)
SEEDS = (3, 5, 10)


def family_error(arms: int, seeds: int, alpha: float, adjust: bool, sets: int, seed: int) -> float:
    """The share of `sets` simulated sweeps in which any arm is called different."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(sets, 1, seeds))  # the baseline's own noise, shared by every arm
    arm = rng.normal(size=(sets, arms, seeds))
    diff = arm - base  # (sets, arms, seeds); the seed's shared part cancels in the pairing
    mean = diff.mean(axis=2)
    se = diff.std(axis=2, ddof=1) / np.sqrt(seeds)
    level = alpha / arms if adjust else alpha
    q = scipy.stats.t.ppf(1.0 - level / 2.0, seeds - 1)
    any_called = (np.abs(mean) > q * se).any(axis=1)
    return float(any_called.mean())


def table(sets: int, alpha: float = 0.05) -> list[tuple[int, int, float, float]]:
    """(arms, seeds, unadjusted error, Bonferroni error) for every cell."""
    return [
        (
            k,
            n,
            family_error(k, n, alpha, False, sets, 1000 * k + n),
            family_error(k, n, alpha, True, sets, 1000 * k + n),
        )
        for k in ARMS
        for n in SEEDS
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=20000, help="simulated sweeps per cell")
    args = parser.parse_args()
    print(f"family-wise error at alpha 0.05, {args.sets} sweeps a cell")
    print("| arms | seeds | each arm at alpha | Holm (t2) |")
    print("|---|---|---|---|")
    for k, n, raw, adjusted in table(args.sets):
        print(f"| {k} | {n} | {raw:.1%} | {adjusted:.1%} |")


if __name__ == "__main__":
    main()
