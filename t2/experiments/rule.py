"""A sweep's decision rule, written in its sweep file before the first run:

    rule:
      metric: test_bleu   # the figure the verdict is on (t2.experiments.metrics)
      detect: 1.0         # the smallest difference that matters: the power plan's target
      alpha: 0.05         # the level of the test (its interval: 1 - alpha)
      power: 0.8          # the chance the plan sizes the sweep to detect `detect` with
      decide: paired_t    # paired_t | welch_pooled | same_sign (DECIDE)

The rule's hash is recorded with the sweep's first run (t2.experiments.records); a report
whose sweep file states another rule renders no verdict under it unless asked, and then
says "decision rule changed after N runs". `paired_t` is the rule t2 writes for a sweep
file without one; the other two are the rules report 004 was read under before it (kept so
that a report can be read under the rule it was planned under).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from t2.config import check_keys
from t2.errors import ConfigError
from t2.experiments.metrics import BY_KEY, Metric
from t2.experiments.seeds import OverSeeds
from t2.experiments.significance import Pooled
from t2.experiments.stats import Difference, bracket

DECIDE = {
    "paired_t": "better or worse when the paired t interval over seeds (level 1 - alpha) of "
    "the per-seed difference to the baseline excludes 0 (Welch's, unpaired, when the arms "
    "share no seed)",
    "welch_pooled": "better or worse when Welch's interval over seeds (unpaired, level 1 - "
    "alpha) excludes 0 and the seeds' paired sacreBLEU tests, pooled, give p below alpha "
    "the same way (t2's rule from 2026-11-26)",
    "same_sign": "better or worse when the seeds' paired sacreBLEU tests, pooled, give p "
    "below alpha, every seed moves BLEU the same way, and Welch's interval over seeds "
    "(unpaired) excludes 0 (t2's rule on 2026-11-25)",
}
NEEDS_BLEU = ("welch_pooled", "same_sign")  # they read the per-seed sacreBLEU tests
UNDECIDED = "not distinguishable at this budget"
KEYS = ("metric", "detect", "alpha", "power", "decide")


@dataclass(frozen=True)
class Rule:
    """What a sweep decides by, fixed before its runs."""

    metric: str = "test_bleu"
    detect: float | None = None
    alpha: float = 0.05
    power: float = 0.8
    decide: str = "paired_t"

    def digest(self) -> str:
        """The first 12 hex digits of the SHA-256 of the rule's fields as sorted JSON."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> str:
        detect = "not stated" if self.detect is None else f"{self.detect:g}"
        return (
            f"`{self.decide}` on {BY_KEY[self.metric].title}, smallest difference that "
            f"matters {detect}, alpha {self.alpha:g}, power {self.power:g} (hash "
            f"{self.digest()}): {DECIDE[self.decide]}"
        )


def _number(raw: dict, key: str, low: float, high: float, where: str) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not low < value < high:
        raise ConfigError(f"{where}: rule {key} must be a number between {low} and {high}")
    return float(value)


def parse_rule(raw: Any, detect: Any, where: str) -> Rule:
    """The sweep file's `rule:` mapping (and its older top-level `detect:`) as a Rule."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: rule must be a mapping of {', '.join(KEYS)}")
    check_keys(raw, KEYS, f"rule key in {where}")
    if detect is not None and "detect" in raw:
        raise ConfigError(f"{where}: detect is given twice; keep rule: {{detect: ...}}")
    metric, decide = str(raw.get("metric", "test_bleu")), str(raw.get("decide", "paired_t"))
    if metric not in BY_KEY:
        raise ConfigError(f"{where}: invalid rule metric {metric!r}; valid: {', '.join(BY_KEY)}")
    if decide not in DECIDE:
        raise ConfigError(f"{where}: invalid rule decide {decide!r}; valid: {', '.join(DECIDE)}")
    if decide in NEEDS_BLEU and metric != "test_bleu":
        raise ConfigError(f"{where}: rule decide {decide} reads test BLEU; set metric: test_bleu")
    found = _number({"detect": detect, **raw}, "detect", 0.0, math.inf, where)
    alpha = _number(raw, "alpha", 0.0, 0.5, where)
    power = _number(raw, "power", 0.0, 1.0, where)
    return Rule(metric, found, alpha or 0.05, power or 0.8, decide)


def _word(diff: float, metric: Metric) -> str:
    return "better" if (diff < 0) == metric.lower_is_better else "worse"


def decide(
    rule: Rule, over: OverSeeds, welch: Difference, pooled: Pooled | None, signs: list[int]
) -> tuple[str, str]:
    """(better | worse | not distinguishable at this budget, why) of an arm against the
    baseline under `rule`: `over` and `welch` are the rule's metric over seeds at level
    1 - alpha, `pooled` and `signs` (+1 / -1 per seed's BLEU difference) the seeds'
    paired sacreBLEU tests, which welch_pooled and same_sign read."""
    metric = BY_KEY[rule.metric]
    if rule.decide == "paired_t":
        d, digits = over.t, metric.digits
        if not d.has_interval:
            return UNDECIDED, f"{over.n} seed{'s' * (over.n != 1)} to pair: no interval"
        p = "" if over.p is None else f", p = {over.p:.2g}"
        interval = bracket(d.low, d.high, digits)
        shown = f"{d.diff:+.{digits}f} {interval} ({over.method}, {over.n} seeds{p})"
        if d.contains_zero():
            return UNDECIDED, f"{metric.title} {shown} holds 0"
        return _word(d.diff, metric), f"{metric.title} {shown} excludes 0"
    if pooled is None or not welch.has_interval:
        return UNDECIDED, "needs two seeds per arm and their paired sacreBLEU tests"
    p = pooled.p_better if welch.diff > 0 else pooled.p_worse
    why = (
        f"Welch's interval {bracket(welch.low, welch.high, 2)}, pooled paired p = {p:.3g} that way"
    )
    if welch.contains_zero() or p >= rule.alpha:
        return UNDECIDED, why
    if rule.decide == "same_sign" and len(set(signs)) > 1:
        return UNDECIDED, f"{why}, but the seeds disagree in sign"
    return _word(welch.diff, metric), why
