"""An arm's verdict against the baseline under a decision rule (t2.experiments.decisions.rule).

The default rule, `interval`, reads the figure's interval (t2.experiments.statistics.evidence)
against
0 and the smallest difference that matters, d (`detect`), on the side where the arm is
better (higher BLEU, lower loss):

| the interval | verdict |
|---|---|
| beyond +d | better by at least d |
| above 0, within +d | better, by less than d |
| above 0, reaching past +d | better (whether by at least d is not shown) |
| holding 0; its 1 - 2 alpha interval within +-d | equivalent within +-d (two one-sided tests) |
| holding 0 otherwise | not distinguishable at this budget |

and the same below 0 for worse. Without `detect` it says better, worse or not
distinguishable. At a planned look the interval is that look's repeated confidence interval
(t2.experiments.statistics.sequential), which equivalence reads too (two one-sided tests at alpha/2
a
side across the looks: conservative). The older rules (`paired_t`, `welch_pooled`,
`same_sign`) decide as they did; `same_sign` says beside its verdict how likely it was to
say better at all: every seed moving the same way as a true difference d, with the
per-seed differences' spread s, has probability Phi(d / s) ** n.
"""

from __future__ import annotations

import scipy.stats

from t2.experiments.decisions.rule import Rule
from t2.experiments.statistics.evidence import Evidence, Span
from t2.experiments.statistics.sequential import Look
from t2.experiments.statistics.significance import Pooled
from t2.experiments.statistics.welch import Difference, bracket
from t2.experiments.sweeps.metrics import Metric

UNDECIDED = "not distinguishable at this budget"


def same_sign_power(difference: float, spread: float, seeds: int) -> float:
    """The chance that all `seeds` per-seed differences, normal with mean `difference`
    and standard deviation `spread`, fall on the side of `difference`: same_sign's
    power is at most this."""
    if spread == 0.0:
        return 1.0
    return float(scipy.stats.norm.cdf(abs(difference) / spread)) ** seeds


def _shown(span: Span, metric: Metric) -> str:
    digits = metric.digits
    return (
        f"{metric.title} {span.diff:+.{digits}f} {bracket(span.low, span.high, digits)} "
        f"({span.method}, {100 * span.level:.4g}% level)"
    )


def _within(span: Span, detect: float) -> bool:
    return -detect < span.low and span.high < detect


def interval_verdict(
    span: Span, metric: Metric, detect: float | None, equivalence: Span | None
) -> tuple[str, str]:
    """(verdict, why) of an interval of the difference against 0 and +-detect."""
    sign = -1.0 if metric.lower_is_better else 1.0  # the arm's gain, whichever way is better
    low, high = sorted((sign * span.low, sign * span.high))
    shown = _shown(span, metric)
    if low > 0 or high < 0:
        word = "better" if low > 0 else "worse"
        if detect is None:
            return word, f"{shown} excludes 0"
        near, far = (low, high) if low > 0 else (-high, -low)
        if near >= detect:
            return f"{word} by at least {detect:g}", f"{shown} lies beyond ±{detect:g}"
        if far < detect:
            return f"{word}, by less than {detect:g}", f"{shown} excludes 0 and ±{detect:g}"
        return word, (
            f"{shown} excludes 0 but not differences under {detect:g}: whether {word} by at "
            f"least {detect:g} is not shown"
        )
    if detect is not None and equivalence is not None and _within(equivalence, detect):
        within = _shown(equivalence, metric)
        return f"equivalent within ±{detect:g}", (
            f"{shown} holds 0, and {within} lies within ±{detect:g} (two one-sided tests)"
        )
    reach = "" if detect is None else f" and differences of ±{detect:g}"
    return UNDECIDED, f"{shown} holds 0{reach}"


def _interval_rule(rule: Rule, evidence: Evidence, look: Look | None) -> tuple[str, str]:
    metric = evidence.metric
    if look is not None:
        span = evidence.repeated(look)
        equivalence = span
    else:
        span = evidence.headline(1.0 - rule.alpha)
        equivalence = None
        if span is not None and span.contains_zero() and rule.detect is not None:
            equivalence = evidence.headline(1.0 - 2.0 * rule.alpha)
    if span is None:
        return UNDECIDED, evidence.refusal or (
            f"{evidence.n} seed{'s' * (evidence.n != 1)} to pair: no interval"
        )
    return interval_verdict(span, metric, rule.detect, equivalence)


def _paired_t_rule(rule: Rule, evidence: Evidence, look: Look | None) -> tuple[str, str]:
    level = 1.0 - (look.alpha if look is not None else rule.alpha)
    over = evidence.over(level)
    if not over.t.has_interval:
        return UNDECIDED, f"{over.n} seed{'s' * (over.n != 1)} to pair: no interval"
    p = "" if over.p is None else f", p = {over.p:.2g}"
    method = f"{over.method}, {over.n} seeds{p}"
    span = Span(over.t.diff, over.t.low, over.t.high, level, method)  # type: ignore[arg-type]
    return interval_verdict(span, evidence.metric, None, None)


def _pooled_rule(
    rule: Rule, evidence: Evidence, welch: Difference, pooled: Pooled | None, signs: list[int]
) -> tuple[str, str]:
    if pooled is None or not welch.has_interval:
        return UNDECIDED, "needs two seeds per arm and their paired sacreBLEU tests"
    p = pooled.p_better if welch.diff > 0 else pooled.p_worse
    interval = bracket(welch.low, welch.high, 2)  # type: ignore[arg-type]
    why = f"Welch's interval {interval}, pooled paired p = {p:.3g} that way"
    if rule.decide == "same_sign" and evidence.n > 1:
        spread = float(scipy.stats.tstd(evidence.diffs))
        d = rule.detect if rule.detect is not None else welch.diff
        power = same_sign_power(d, spread, evidence.n)
        why += (
            f"; every one of {evidence.n} seeds moving the same way as a true difference of "
            f"{d:+.2f}, with the per-seed differences' spread {spread:.2f}, has probability "
            f"{power:.2g}: this rule's power is at most that"
        )
    if welch.contains_zero() or p >= rule.alpha:
        return UNDECIDED, why
    if rule.decide == "same_sign" and len(set(signs)) > 1:
        return UNDECIDED, f"{why}; the seeds disagree in sign"
    word = "better" if (welch.diff < 0) == evidence.metric.lower_is_better else "worse"
    return word, why


def judge(
    rule: Rule,
    evidence: Evidence,
    look: Look | None,
    welch: Difference,
    pooled: Pooled | None,
    signs: list[int],
) -> tuple[str, str]:
    """(verdict, why) of an arm under `rule`: `evidence` on the rule's metric, `look` the
    planned look this is (None: a fixed design read with all its seeds), `welch` Welch's
    interval at level 1 - alpha, `pooled` and `signs` the seeds' paired sacreBLEU tests
    (read by welch_pooled and same_sign)."""
    if rule.decide == "interval":
        return _interval_rule(rule, evidence, look)
    if rule.decide == "paired_t":
        return _paired_t_rule(rule, evidence, look)
    if rule.decide in ("welch_pooled", "same_sign"):
        return _pooled_rule(rule, evidence, welch, pooled, signs)
    raise ValueError(f"no verdict for rule {rule.decide!r}")


def is_verdict(word: str) -> bool:
    """Whether a verdict decides (anything but not distinguishable): a look that gives
    every arm one may stop the sweep."""
    return word != UNDECIDED
