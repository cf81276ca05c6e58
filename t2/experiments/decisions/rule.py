"""A sweep's decision rule, written in its sweep file before the first run:

    rule:
      metric: test_bleu   # the figure the verdict is on (t2.experiments.sweeps.metrics)
      detect: 1.0         # the smallest difference that matters
      alpha: 0.05         # the level of the test (its interval: 1 - alpha)
      power: 0.8          # the chance the plan sizes the sweep to detect `detect` with
      decide: interval    # interval | paired_t | welch_pooled | same_sign (DECIDE)
      looks: [5, 10, 15]  # optional: the seeds at each planned look (or a count: 3)

`interval`, the default, reads the figure's headline interval (t2.experiments.statistics.evidence)
against 0 and +-detect (t2.experiments.decisions.verdict). The other three are the rules report
004 was read under before it, kept so that a report can be rendered under the rule it was
planned under. The rule is part of the sweep's plan (t2.experiments.decisions.plan): recorded
before the first run, hashed, and disclosed when it changes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from t2.config import check_keys
from t2.errors import ConfigError
from t2.experiments.sweeps.metrics import BY_KEY

DECIDE = {
    "interval": "the headline interval of the difference (level 1 - alpha; at a planned "
    "look, that look's group-sequential level) read against 0 and +-detect: better or "
    "worse by at least detect, better or worse by less than detect, better or worse "
    "without showing which, equivalent within +-detect (two one-sided tests), or not "
    "distinguishable",
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
SEQUENTIAL = ("interval", "paired_t")  # the rules a planned look can read (an interval)
KEYS = ("metric", "detect", "alpha", "power", "decide", "looks")


@dataclass(frozen=True)
class Rule:
    """What a sweep decides by, fixed before its runs."""

    metric: str = "test_bleu"
    detect: float | None = None
    alpha: float = 0.05
    power: float = 0.8
    decide: str = "interval"
    looks: tuple[int, ...] = ()  # the seeds at each planned look; () a fixed design

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "looks": list(self.looks)}

    def describe(self) -> str:
        detect = "not stated" if self.detect is None else f"{self.detect:g}"
        looks = f", looks at {', '.join(map(str, self.looks))} seeds" if self.looks else ""
        return (
            f"`{self.decide}` on {BY_KEY[self.metric].title}, smallest difference that "
            f"matters {detect}, alpha {self.alpha:g}, power {self.power:g}{looks}: "
            f"{DECIDE[self.decide]}"
        )


def rule_from_dict(raw: dict[str, Any]) -> Rule:
    return Rule(**{**raw, "looks": tuple(raw.get("looks", ()))})


def _number(raw: dict, key: str, low: float, high: float, where: str) -> Any:
    value = raw.get(key)
    if value is None:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not low < value < high:
        raise ConfigError(f"{where}: rule {key} must be a number between {low} and {high}")
    return float(value)


def parse_looks(raw: Any, seeds: int, decide: str, where: str) -> tuple[int, ...]:
    """`looks: K` (K equally spaced looks) or `looks: [n_1, ..., n_K]` (the seeds at each,
    increasing, the last all `seeds`) as the seeds at each look; none: ()."""
    if raw is None:
        return ()
    if isinstance(raw, int) and not isinstance(raw, bool) and 1 <= raw <= seeds:
        raw = [round(k * seeds / raw) for k in range(1, raw + 1)]
    ok = isinstance(raw, list) and raw and all(type(n) is int for n in raw)
    if not ok or raw[0] < 2 or any(b <= a for a, b in zip(raw, raw[1:], strict=False)):
        raise ConfigError(
            f"{where}: rule looks must be a count of looks or increasing seed counts from 2, "
            f"e.g. looks: [5, 10, {seeds}]"
        )
    if raw[-1] != seeds:
        raise ConfigError(
            f"{where}: rule looks end at {raw[-1]} seeds but the sweep has {seeds}; the last "
            f"look is the whole sweep: end them at {seeds}"
        )
    if len(raw) > 1 and decide not in SEQUENTIAL:
        raise ConfigError(
            f"{where}: rule decide {decide} cannot read a planned look; use "
            f"{' or '.join(SEQUENTIAL)}, or drop looks"
        )
    return tuple(raw) if len(raw) > 1 else ()


def parse_rule(raw: Any, detect: Any, where: str, seeds: int) -> Rule:
    """The sweep file's `rule:` mapping (and its older top-level `detect:`) as a Rule;
    `seeds`: how many the sweep has (its looks end there)."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: rule must be a mapping of {', '.join(KEYS)}")
    check_keys(raw, KEYS, f"rule key in {where}")
    if detect is not None and "detect" in raw:
        raise ConfigError(f"{where}: detect is given twice; keep rule: {{detect: ...}}")
    metric, decide = str(raw.get("metric", "test_bleu")), str(raw.get("decide", "interval"))
    if metric not in BY_KEY:
        raise ConfigError(f"{where}: invalid rule metric {metric!r}; valid: {', '.join(BY_KEY)}")
    if decide not in DECIDE:
        raise ConfigError(f"{where}: invalid rule decide {decide!r}; valid: {', '.join(DECIDE)}")
    if decide in NEEDS_BLEU and metric != "test_bleu":
        raise ConfigError(f"{where}: rule decide {decide} reads test BLEU; set metric: test_bleu")
    found = _number({"detect": detect, **raw}, "detect", 0.0, math.inf, where)
    alpha = _number(raw, "alpha", 0.0, 0.5, where) or 0.05
    power = _number(raw, "power", 0.0, 1.0, where) or 0.8
    looks = parse_looks(raw.get("looks"), seeds, decide, where)
    return Rule(metric, found, alpha, power, decide, looks)
