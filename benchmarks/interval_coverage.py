"""`python -m benchmarks.interval_coverage [--quick]`: how often the headline interval of a
test figure covers the true difference, how often the equivalence reading errs at the
margin, and how often planned interim looks call a difference that is not there; by
simulation against the difference that was set, not against any method's own formula.

The data-generating model (two levels, seeds x sentences). Arm a in {0, 1}, seed i, test
sentence j: y_aij = mu_a + s_ai + c_j + g_aj + e_aij, where s is the seed's effect
(training's randomness), c the sentence's difficulty (shared by both arms: it cancels in
the difference), g the arm's own effect on the sentence (the arm gains more on some
sentences) and e the seed x sentence interaction with the sentence-level noise. A run's
figure is the mean over its sentences: a stand-in for corpus BLEU, which is not a mean
(t2 turns BLEU into sentence contributions by the jackknife; twoway.contributions). What
t2 reads is the per-seed, per-sentence difference

    d_ij = delta + u_i + v_j + w_ij,  u = s_1i - s_0i, v = g_1j - g_0j, w = e_1ij - e_0ij,

normal and independent, and every seed scores the same test set. A scenario sets the
standard deviations of the three parts of one seed's corpus difference: u's sd, v's sd / sqrt(m)
and w's sd / sqrt(m).

The true difference is delta, the expected difference over seeds and over test sets drawn
like this one: each simulated data set draws new seeds and a new test set. (A paired t over
seeds covers delta + mean(v), the difference on the test set drawn, exactly; it misses
delta when the test set's own part is large.)

Intervals compared, each at 95%:
- `bootstrap (old)`: t2's seeds x sentences bootstrap until issue 52, as the normal
  interval on its closed-form variance (rows / n + columns / m + interaction / nm, which
  the BCa bootstrap's variance matched in t2's own test of it): BCa itself is too slow to
  simulate here, and did worse (issue 52: 70.5% at 3 seeds where this gives 76-79%).
- `paired t`: Student's t over the per-seed corpus differences, n - 1 df.
- `t(n-1), + sentence bootstrap`: t(n - 1) * sqrt(s^2 / n + the variance of the mean over
  a bootstrap of the sentences with every seed kept), the issue's first candidate.
- `two-way, Satterthwaite`: sqrt(s^2 / n + the sentence-only part, s_v^2 / m, from the
  two-way mean squares) with Satterthwaite's degrees of freedom for that sum.
- `two-way, t(n-1)`: the same standard error times t(n - 1), t2's interval from issue 52
  until its review: up to 99.4% at 3 seeds once the sentence part is a tenth of the seeds'.
- `two-way (t2)`: each part with its own quantile, sqrt((t(n - 1) se_seeds)^2 + (z
  se_sentences)^2) (t2.experiments.statistics.twoway): what t2 reads.

A look reads each method's own interval at the look's nominal level (t2's repeated
confidence interval) on the first n_k seeds of a sweep.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import scipy.stats

from t2.experiments.statistics.sequential import planned_looks
from t2.experiments.statistics.twoway import mean_squares, parts_of

SENTENCES = 1014  # m of the coverage cells: Multi30k's test set, as in the seed reports
LOOK_SENTENCES = 80  # m of the looks' tables, drawn whole (nested looks share their seeds)
SCENARIOS = {  # the sds of one seed's corpus difference: seed, sentence-only, interaction
    "seeds alone": (1.0, 0.0, 0.05),
    "seeds dominate": (1.0, 0.1, 0.1),
    "seeds, sentences 0.15": (1.0, 0.15, 0.1),
    "seeds, sentences 0.2": (1.0, 0.2, 0.1),
    "seeds, sentences 0.3": (1.0, 0.3, 0.1),
    "as report 004": (0.9, 0.1, 0.5),  # its 15 seeds' test BLEU, v2 - base (twoway)
    "report 004, sentences 0.3": (0.9, 0.3, 0.5),
    "interaction dominates": (0.0, 0.1, 1.0),
    "interaction, sentences 0.2": (0.0, 0.2, 1.0),
    "interaction, sentences 0.3": (0.0, 0.3, 1.0),
    "all three equal": (0.5, 0.5, 0.5),
    "test set dominates": (0.3, 1.0, 0.3),
}
SEEDS = (3, 5, 10, 15)
PLANS = ((2, 4), (3, 6), (4, 8), (5, 10, 15))
LOOKED = (
    "bootstrap (old)",
    "paired t",
    "two-way, Satterthwaite",
    "two-way, t(n-1)",
    "two-way (t2)",
)
LEVEL, ALPHA = 0.95, 0.05
Squares = tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # n, m, mean, MSs
Method = Callable[[Squares, float], tuple[np.ndarray, ...]]  # -> diff, se, half width, df


def draw(
    rng: np.random.Generator, sets: int, n: int, parts: tuple[float, float, float], delta: float
) -> np.ndarray:
    """`sets` simulated tables of d_ij, (sets, n seeds, LOOK_SENTENCES), as the module doc
    says."""
    seed, sentence, interaction = parts
    root = np.sqrt(LOOK_SENTENCES)
    u = rng.standard_normal((sets, n, 1)) * seed
    v = rng.standard_normal((sets, 1, LOOK_SENTENCES)) * sentence * root
    w = rng.standard_normal((sets, n, LOOK_SENTENCES)) * interaction * root
    return delta + u + v + w


def draw_squares(
    rng: np.random.Generator, sets: int, n: int, parts: tuple[float, float, float], delta: float
) -> Squares:
    """The grand mean and mean squares of `sets` tables of n seeds x SENTENCES, drawn from
    their exact joint law instead of whole tables: in the balanced normal model they are
    independent, the mean normal and each mean square its expectation times a chi-square
    over its degrees of freedom (seeds m s_u^2 + s_w^2, sentences n s_v^2 + s_w^2,
    interaction s_w^2, per sentence)."""
    m = SENTENCES
    su2, sv2, sw2 = (p * p for p in parts)  # per seed's corpus difference
    sv2, sw2 = sv2 * m, sw2 * m  # per sentence
    grand = delta + rng.standard_normal(sets) * np.sqrt(su2 / n + sv2 / m + sw2 / (n * m))

    def square(expected: float, df: int) -> np.ndarray:
        return expected * rng.chisquare(df, sets) / df

    rows, cols = square(m * su2 + sw2, n - 1), square(n * sv2 + sw2, m - 1)
    return n, m, grand, rows, cols, square(sw2, (n - 1) * (m - 1))


def _t(df: np.ndarray | float, level: float) -> np.ndarray:
    return scipy.stats.t.ppf(0.5 + level / 2.0, df)


def bootstrap_old(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    """The old bootstrap's closed-form variance, normal quantile."""
    n, m, grand, ms_rows, ms_cols, ms_int = sq
    var = (
        ms_rows * (n - 1) / (m * n * n)
        + ms_cols * (m - 1) / (n * m * m)
        + ms_int * (n - 1) * (m - 1) / (n * n * m * m)
    )
    se = np.sqrt(var)
    return grand, se, scipy.stats.norm.isf((1.0 - level) / 2.0) * se, n - 1.0


def paired_t(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    n, m, grand, ms_rows, _, _ = sq
    se = np.sqrt(ms_rows / (n * m))  # s / sqrt(n) of the per-seed corpus differences
    return grand, se, _t(n - 1, level) * se, n - 1.0


def sentence_bootstrap(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    n, m, grand, ms_rows, ms_cols, _ = sq
    se = np.sqrt(ms_rows / (n * m) + ms_cols * (m - 1) / (n * m * m))
    return grand, se, _t(n - 1, level) * se, n - 1.0


def satterthwaite(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    """The two-way standard error on Satterthwaite's degrees of freedom: each mean square
    that makes it, (coefficient x MS)^2 over its own; the sentence part's two only where
    it is not cut to 0."""
    n, m, _, ms_rows, ms_cols, ms_int = sq
    parts = parts_of(*sq)
    spread = (ms_rows / (n * m)) ** 2 / (n - 1) + np.where(
        ms_cols > ms_int,
        (ms_cols / (n * m)) ** 2 / (m - 1) + (ms_int / (n * m)) ** 2 / ((n - 1) * (m - 1)),
        0.0,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(spread > 0, parts.standard_error**4 / spread, n - 1.0)
    return parts.diff, parts.standard_error, _t(df, level) * parts.standard_error, df


def two_way_t(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    parts = parts_of(*sq)
    return parts.diff, parts.standard_error, _t(parts.df, level) * parts.standard_error, parts.df


def two_way(sq: Squares, level: float) -> tuple[np.ndarray, ...]:
    parts = parts_of(*sq)
    return parts.diff, parts.standard_error, parts.half_width(level), parts.df


METHODS: dict[str, Method] = {
    "bootstrap (old)": bootstrap_old,
    "paired t": paired_t,
    "t(n-1), + sentence bootstrap": sentence_bootstrap,
    "two-way, Satterthwaite": satterthwaite,
    "two-way, t(n-1)": two_way_t,
    "two-way (t2)": two_way,
}


def coverage(method: Method, parts: tuple[float, float, float], n: int, sets: int, seed: int):
    """The share of `sets` data sets whose 95% interval holds the true difference (0)."""
    diff, _, half, _ = method(draw_squares(np.random.default_rng(seed), sets, n, parts, 0.0), LEVEL)
    return float((np.abs(diff) <= half).mean())


def margin_error(method: Method, parts: tuple[float, float, float], n: int, sets: int, seed: int):
    """With the true difference at `detect` (one seed's corpus sd), the share of data sets
    the interval rule calls "equivalent" or "better, by less than d" (verdict.py's table:
    the 1 - alpha interval above 0 and below d, or it holds 0 and its 1 - 2 alpha interval
    lies within +-d): at most alpha for an interval that covers."""
    detect = float(np.sqrt(sum(p * p for p in parts)))
    sq = draw_squares(np.random.default_rng(seed), sets, n, parts, detect)
    diff, _, half, _ = method(sq, 1.0 - ALPHA)
    _, _, narrow, _ = method(sq, 1.0 - 2.0 * ALPHA)
    low, high = diff - half, diff + half
    less = (low > 0) & (high < detect)
    equivalent = (low <= 0) & (high >= 0) & (diff - narrow > -detect) & (diff + narrow < detect)
    return float((less | equivalent).mean())


def crossing(method: Method, parts, plan: tuple[int, ...], sweeps: int, seed: int) -> float:
    """The share of `sweeps` with no true difference whose repeated interval excludes 0 at
    some planned look (its first n_k seeds; the method's interval at the look's nominal
    level), whole tables in chunks to bound memory."""
    rng, crossed = np.random.default_rng(seed), 0
    for start in range(0, sweeps, 5_000):
        d = draw(rng, min(5_000, sweeps - start), plan[-1], parts, 0.0)
        hit = np.zeros(d.shape[0], dtype=bool)
        for look in planned_looks(plan, ALPHA):
            part = d[:, : look.seeds]
            sq = (look.seeds, LOOK_SENTENCES, *mean_squares(part))
            diff, _, half, _ = method(sq, 1.0 - look.alpha)
            hit |= np.abs(diff) > half
        crossed += int(hit.sum())
    return crossed / sweeps


def tables(sets: int, sweeps: int) -> str:
    """The three Markdown tables: coverage, the margin's error, the looks' crossings."""
    out = [f"Coverage of the true difference by 95% intervals, {sets} data sets a cell:\n"]
    head = "| scenario | interval | " + " | ".join(f"{n} seeds" for n in SEEDS) + " |"
    out += [head, "|---|---|" + "---|" * len(SEEDS)]
    for name, parts in SCENARIOS.items():
        for label, method in METHODS.items():
            cells = [f"{coverage(method, parts, n, sets, n):.1%}" for n in SEEDS]
            out.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    out += ["", f"Equivalence or 'by less than d' at a true difference of d, {sets} sets:\n"]
    out += [head, "|---|---|" + "---|" * len(SEEDS)]
    for name, parts in SCENARIOS.items():
        for label in ("bootstrap (old)", "paired t", "two-way, t(n-1)", "two-way (t2)"):
            cells = [f"{margin_error(METHODS[label], parts, n, sets, n):.1%}" for n in SEEDS]
            out.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    out += ["", f"Looks: share of {sweeps} sweeps with no true difference that cross:\n"]
    plans = " | ".join(str(p) for p in PLANS)
    out += [f"| scenario | standard error | {plans} |", "|---|---|" + "---|" * len(PLANS)]
    for name, parts in SCENARIOS.items():
        for label in LOOKED:
            cells = [f"{crossing(METHODS[label], parts, p, sweeps, 7):.2%}" for p in PLANS]
            out.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=20_000, help="data sets per coverage cell")
    parser.add_argument("--sweeps", type=int, default=50_000, help="sweeps per plan of looks")
    parser.add_argument("--quick", action="store_true", help="2,000 sets and 5,000 sweeps")
    args = parser.parse_args(argv)
    sets, sweeps = (2_000, 5_000) if args.quick else (args.sets, args.sweeps)
    start = time.perf_counter()
    print(tables(sets, sweeps))
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
