"""A sweep's plan: what it will train and how it will decide, fixed before its first run.

The plan is the sweep's name, its arms (recipe and overrides each) and baseline, its
seeds, its budget, each arm's test set (data.test), the decision rule (with its planned
looks) and the version of the decision code: a hash of the source of the modules that
turn runs into a verdict (DECISION_MODULES), so a verdict computed by changed code is not
passed off as the planned one. Its hash (the first 12 hex digits of the SHA-256 of the
plan as sorted JSON) is recorded with it (t2.experiments.decisions.planbook) and carried by every
run's meta.json (train.sweep_plan). `differences` says, field by field, how two plans
differ, in the words the report discloses them in.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from t2.experiments.decisions.rule import Rule, rule_from_dict
from t2.experiments.sweeps.sweepfile import Sweep
from t2.recipes import load_config

# the code whose change can change a verdict: every module of the decisions and statistics
# packages, the figures they read, and the report's parts that print a verdict
DECIDING_PACKAGES = ("decisions", "statistics")
DECIDING_MODULES = ("sweeps.metrics", "reports.tables", "reports.paired", "reports.disclosure")


def decision_modules() -> tuple[str, ...]:
    """The modules hashed into the plan's code version, as HOME.MODULE under t2.experiments."""
    here = Path(__file__).resolve().parent.parent
    found = [
        f"{home}.{path.stem}"
        for home in DECIDING_PACKAGES
        for path in sorted((here / home).glob("*.py"))
        if path.stem != "__init__"
    ]
    return (*found, *DECIDING_MODULES)


DECISION_MODULES = decision_modules()


def decision_code() -> str:
    """The decision code's version: a hash of its modules' source, each under its name."""
    digest = hashlib.sha256()
    for name in DECISION_MODULES:
        spec = importlib.util.find_spec(f"t2.experiments.{name}")
        assert spec is not None and spec.origin is not None
        text = Path(spec.origin).read_bytes().replace(b"\r\n", b"\n")
        digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Arm:
    recipe: str
    overrides: tuple[str, ...]  # the sweep's `set` and the arm's own, as --set writes them
    test: str  # its config's data.test


@dataclass(frozen=True)
class Plan:
    """What a sweep was planned to train and how it decides, as recorded."""

    sweep: str
    arms: dict[str, Arm]
    baseline: str
    seeds: tuple[int, ...]
    budget: tuple[str, ...]
    rule: Rule
    code: str  # the decision code's version (decision_code())

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "arms": {
                name: {**asdict(arm), "overrides": list(arm.overrides)}
                for name, arm in self.arms.items()
            },
            "baseline": self.baseline,
            "seeds": list(self.seeds),
            "budget": list(self.budget),
            "rule": self.rule.to_dict(),
            "decision_code": self.code,
        }

    def digest(self) -> str:
        """The first 12 hex digits of the SHA-256 of the plan as sorted JSON."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> str:
        arms = ", ".join(f"`{name}`" for name in self.arms)
        tests = sorted({arm.test for arm in self.arms.values()})
        budget = ", ".join(self.budget) or "each recipe's own"
        return (
            f"arms {arms} (baseline `{self.baseline}`), seeds {seed_list(self.seeds)}, "
            f"budget {budget}, test set "
            f"{', '.join(tests)}; rule {self.rule.describe()}; decision code {self.code}"
        )


def plan_from_dict(raw: dict[str, Any]) -> Plan:
    arms = {
        name: Arm(str(a["recipe"]), tuple(a["overrides"]), str(a["test"]))
        for name, a in raw["arms"].items()
    }
    return Plan(
        str(raw["sweep"]),
        arms,
        str(raw["baseline"]),
        tuple(int(s) for s in raw["seeds"]),
        tuple(raw["budget"]),
        rule_from_dict(raw["rule"]),
        str(raw["decision_code"]),
    )


def plan_of(sweep: Sweep) -> Plan:
    """The plan a sweep file states, with today's decision code."""
    arms = {}
    for arm in sweep.arms:
        cfg = load_config(arm.recipe, sweep.overrides(arm, sweep.seeds[0]))
        arms[arm.name] = Arm(arm.recipe, arm.overrides, str(cfg.data.test))
    return Plan(
        sweep.name,
        arms,
        sweep.baseline,
        sweep.seeds,
        sweep.budget,
        sweep.rule,
        decision_code(),
    )


def seed_list(seeds: tuple[int, ...] | list[int]) -> str:
    """[1, 2, 3, 4, 7] -> "1 to 4, 7"."""
    runs: list[list[int]] = []
    for seed in seeds:
        if runs and seed == runs[-1][-1] + 1:
            runs[-1].append(seed)
        else:
            runs.append([seed])
    return ", ".join(f"{r[0]} to {r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _seeds(old: Plan, new: Plan) -> list[str]:
    dropped = [s for s in old.seeds if s not in new.seeds]
    added = [s for s in new.seeds if s not in old.seeds]
    found = [f"seeds dropped: {seed_list(dropped)}"] if dropped else []
    found += [f"seeds added: {seed_list(added)}"] if added else []
    if not found and old.seeds != new.seeds:
        found.append("the seeds' order changed")
    return found


def _arms(old: Plan, new: Plan) -> list[str]:
    found = [f"arm dropped: {name}" for name in old.arms if name not in new.arms]
    found += [f"arm added: {name}" for name in new.arms if name not in old.arms]
    for name in [n for n in old.arms if n in new.arms]:
        a, b = old.arms[name], new.arms[name]
        if a.recipe != b.recipe or a.overrides != b.overrides:
            found.append(
                f"arm {name} changed: {a.recipe} {list(a.overrides)} -> {b.recipe} "
                f"{list(b.overrides)}"
            )
        if a.test != b.test:
            found.append(f"test set of arm {name}: {a.test} -> {b.test}")
    return found


def differences(old: Plan, new: Plan) -> list[str]:
    """How `new` differs from `old`, one line per change; empty when they are the same."""
    found = _seeds(old, new) + _arms(old, new)
    if old.baseline != new.baseline:
        found.append(f"baseline: {old.baseline} -> {new.baseline}")
    if old.budget != new.budget:
        found.append(f"budget: {', '.join(old.budget)} -> {', '.join(new.budget)}")
    for key, value in old.rule.to_dict().items():
        if new.rule.to_dict()[key] != value:
            found.append(f"rule {key}: {value} -> {new.rule.to_dict()[key]}")
    if old.code != new.code:
        found.append(f"decision code: {old.code} -> {new.code}")
    if old.sweep != new.sweep:
        found.append(f"sweep name: {old.sweep} -> {new.sweep}")
    return found
