"""A sweep's plan: what it will train and how it will decide, fixed before its first run.

The plan is the sweep's name, its arms (recipe and overrides each) and baseline, its
seeds, its budget, each arm's test set (data.test) and the SHA-256 of its test and
validation references (t2.data.references; a generated task's at each seed, since its
sets are drawn with the seed), the decision rule (with its planned looks), the versions of
scipy and sacreBLEU, and the version of the decision code: a hash of the source of the
modules that turn runs into a verdict (DECISION_MODULES). So a verdict computed by changed
code, other libraries or on a changed test set is not passed off as the planned one. The
plan's hash (the first 12 hex digits of the SHA-256 of the plan as sorted JSON) is
recorded with it (t2.experiments.decisions.planbook) and carried by every run's meta.json
(train.sweep_plan). `differences` says, field by field, how two plans
differ, in the words the report discloses them in.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from t2.data.references import SIDES, seeded, split_named
from t2.errors import DataError
from t2.experiments.decisions.rule import Rule, rule_from_dict
from t2.experiments.sweeps.sweepfile import Sweep
from t2.recipes import load_config

# the code whose change can change a verdict: every module of the decisions and statistics
# packages, the figures they read, the reader of a run's test outputs and the check of its
# references (sweeps.runs, t2.data.references: the SHA-256 check makes the references
# independent of the data pipeline's code), and the report's parts that print a verdict
DECIDING_PACKAGES = ("decisions", "statistics")
DECIDING_MODULES = (
    *("sweeps.metrics", "sweeps.runs", "reports.tables", "reports.paired", "reports.disclosure"),
    "t2.data.references",  # a name starting with t2.: outside t2.experiments
)


def decision_modules() -> tuple[str, ...]:
    """The modules hashed into the plan's code version, as HOME.MODULE under t2.experiments
    (or a whole name, t2.X, outside it)."""
    here = Path(__file__).resolve().parent.parent
    found = [
        f"{home}.{path.stem}"
        for home in DECIDING_PACKAGES
        for path in sorted((here / home).glob("*.py"))
        if path.stem != "__init__"
    ]
    return (*found, *DECIDING_MODULES)


DECISION_MODULES = decision_modules()
VERSIONED = ("scipy", "sacrebleu")  # the libraries whose numbers a verdict reads
SPLITS = ("test", "valid")  # the splits whose references (and source sentences) a plan names
KEYS = tuple(split + suffix for split in SPLITS for suffix in SIDES.values())


def decision_code() -> str:
    """The decision code's version: a hash of its modules' source, each under its name."""
    digest = hashlib.sha256()
    for name in DECISION_MODULES:
        spec = importlib.util.find_spec(
            name if name.startswith("t2.") else f"t2.experiments.{name}"
        )
        assert spec is not None and spec.origin is not None
        text = Path(spec.origin).read_bytes().replace(b"\r\n", b"\n")
        digest.update(name.encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:12]


def versions() -> dict[str, str]:
    """The installed versions of the libraries a verdict reads (VERSIONED)."""
    return {name: importlib.metadata.version(name) for name in VERSIONED}


# a split's references: their SHA-256, or for a generated task {seed: SHA-256}
References = dict[str, "str | dict[str, str]"]


@dataclass(frozen=True)
class Arm:
    recipe: str
    overrides: tuple[str, ...]  # the sweep's `set` and the arm's own, as --set writes them
    test: str  # its config's data.test
    references: References | None = None  # per KEYS; None in a plan recorded before them


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
    versions: dict[str, str] | None = None  # versions(); None in a plan before them

    def to_dict(self) -> dict[str, Any]:
        """As plan.json holds it; what a plan recorded before references and versions lacks
        is left out, so its hash is the one it was recorded with."""
        arms = {}
        for name, arm in self.arms.items():
            arms[name] = {**asdict(arm), "overrides": list(arm.overrides)}
            if arm.references is None:
                del arms[name]["references"]
        found = {
            "sweep": self.sweep,
            "arms": arms,
            "baseline": self.baseline,
            "seeds": list(self.seeds),
            "budget": list(self.budget),
            "rule": self.rule.to_dict(),
            "decision_code": self.code,
        }
        return found if self.versions is None else {**found, "versions": self.versions}

    def digest(self) -> str:
        """The first 12 hex digits of the SHA-256 of the plan as sorted JSON."""
        text = json.dumps(self.to_dict(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]

    def describe(self) -> str:
        arms = ", ".join(f"`{name}`" for name in self.arms)
        tests = sorted({_named(arm) for arm in self.arms.values()})
        budget = ", ".join(self.budget) or "each recipe's own"
        return (
            f"arms {arms} (baseline `{self.baseline}`), seeds {seed_list(self.seeds)}, "
            f"budget {budget}, test set "
            f"{', '.join(tests)}; rule {self.rule.describe()}; decision code {self.code}"
        )


def _named(arm: Arm) -> str:
    """An arm's test set and its references' SHA-256, as the plan's line names them."""
    digest = (arm.references or {}).get("test")
    if digest is None:
        return arm.test
    return f"{arm.test} ({'references per seed' if isinstance(digest, dict) else _short(digest)})"


def plan_from_dict(raw: dict[str, Any]) -> Plan:
    arms = {
        name: Arm(str(a["recipe"]), tuple(a["overrides"]), str(a["test"]), a.get("references"))
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
        raw.get("versions"),
    )


def _split_named(split: str, configs: dict[int, Any], first: int) -> References:
    """The SHA-256 of a split's references and source sentences; a generated task's at
    each seed (its sets are drawn with the seed)."""
    if not seeded(getattr(configs[first].data, split)):
        return split_named(configs[first].data, split, configs[first].train.seed)
    found = {str(s): split_named(c.data, split, s) for s, c in configs.items()}
    return {key: {seed: named[key] for seed, named in found.items()} for key in found[str(first)]}


def plan_of(sweep: Sweep) -> Plan:
    """The plan a sweep file states, with today's decision code and libraries, and each
    arm's test and validation references (read through the data cache)."""
    arms = {}
    for arm in sweep.arms:
        configs = {s: load_config(arm.recipe, sweep.overrides(arm, s)) for s in sweep.seeds}
        first = configs[sweep.seeds[0]]
        refs: References = {}
        for split in SPLITS:
            try:
                refs.update(_split_named(split, configs, sweep.seeds[0]))
            except DataError as err:
                raise DataError(
                    f"arm {arm.name}: its data.{split}={getattr(first.data, split)} cannot be "
                    f"read from {Path.cwd()} ({err}); the plan names its sentences: run from "
                    f"the folder the sweep was planned in, or restore the data"
                ) from None
        arms[arm.name] = Arm(arm.recipe, arm.overrides, str(first.data.test), refs)
    return Plan(
        sweep.name,
        arms,
        sweep.baseline,
        sweep.seeds,
        sweep.budget,
        sweep.rule,
        decision_code(),
        versions(),
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
        for key in KEYS:
            was, now = ((arm.references or {}).get(key) for arm in (a, b))
            if change := _references(was, now):
                what = key.replace("_source", " sources") if "_" in key else f"{key} references"
                found.append(f"{what} of arm {name}: {change}")
    return found


def _references(was: Any, now: Any) -> str:
    """How a split's references changed between two plans; empty when they did not (a
    generated task's are compared at the seeds both plans hold)."""
    if isinstance(was, dict) and isinstance(now, dict):
        moved = [int(s) for s in was if s in now and was[s] != now[s]]
        return f"other sentences at seeds {seed_list(sorted(moved))}" if moved else ""
    if was == now:
        return ""
    return f"{_short(was)} -> {_short(now)}"


def _short(digest: Any) -> str:
    if digest is None:
        return "not recorded"
    return "per seed" if isinstance(digest, dict) else f"SHA-256 {digest[:12]}"


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
    for name in VERSIONED:
        was, now = ((p.versions or {}).get(name, "not recorded") for p in (old, new))
        if was != now:
            found.append(f"{name}: {was} -> {now}")
    if old.sweep != new.sweep:
        found.append(f"sweep name: {old.sweep} -> {new.sweep}")
    return found
