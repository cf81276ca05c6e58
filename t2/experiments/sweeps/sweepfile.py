"""A sweep file: a base recipe, arms, seeds and a budget, as a few lines of YAML.

    name: variants           # W&B group and default output folder; default: the file's name
    base: multi30k           # the recipe every arm starts from
    seeds: [1, 2, 3]
    plugins: [dyt.py]        # plugin files (relative to this file) or modules; optional
    budget: {max_minutes: 10}   # max_steps / max_minutes / max_train_tokens -> train.*
    compare_at: time         # steps | tokens | time; default: the budget's (steps if several)
    baseline: base           # the arm the others are compared with; default: the first
    set: {train.eval_every: 50}  # overrides for every arm (optional)
    robustness: false        # true: report 003's suite on each run, in the report
    rule:                    # the decision rule, fixed before the first run (decisions.rule)
      metric: test_bleu      # the figure the verdict is on
      detect: 0.5            # the smallest difference that matters: t2 sweep --plan's target
      alpha: 0.05
      power: 0.8
      decide: interval       # the headline interval read against 0 and +-detect
      looks: [2, 3]          # optional: planned looks, at 2 seeds and at all 3
    arms:
      base: {}
      rope: {set: {model.positional: rope}}
      v2: {recipe: v2_rope_rmsnorm}

Every arm's config is built and checked when the file loads, so a typo fails in one line
before any training. Each arm x seed becomes one `train.py` command (`command`), with a
--plugin for each of the sweep's plugins (the file's and `t2 sweep --plugin`'s), so an
arm may set a component a plugin registers.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from t2.config import check_keys, load_yaml
from t2.errors import ConfigError
from t2.experiments.decisions.rule import Rule, parse_rule
from t2.plugins import is_file_spec, load_listed, load_plugins
from t2.recipes import load_config

KEYS = (
    "name",
    "base",
    "seeds",
    "budget",
    "compare_at",
    "baseline",
    "set",
    "robustness",
    "detect",
    "rule",
    "arms",
    "plugins",
)
BUDGET = {
    "max_steps": "train.max_steps",
    "max_minutes": "train.max_minutes",
    "max_train_tokens": "train.max_train_tokens",
}
AXIS = {"max_steps": "steps", "max_train_tokens": "tokens", "max_minutes": "time"}
COMPARE_AT = ("steps", "tokens", "time")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a folder name and a W&B name


@dataclass(frozen=True)
class Arm:
    name: str
    recipe: str
    own: tuple[str, ...]  # the arm's `set` as section.key=value
    common: tuple[str, ...] = ()  # the sweep's `set`, applied first

    @property
    def overrides(self) -> tuple[str, ...]:
        return self.common + self.own


@dataclass(frozen=True)
class Sweep:
    path: Path
    name: str
    seeds: tuple[int, ...]
    budget: tuple[str, ...]  # train.max_steps=1000, ...
    compare_at: str
    baseline: str
    arms: tuple[Arm, ...]
    robustness: bool
    rule: Rule = Rule()  # the decision rule the sweep file states
    plugins: tuple[str, ...] = ()  # absolute paths of plugin files, or module names
    trust_plugins: bool = False  # its YAML's plugins may run (--trust-plugins): its runs' too
    plan: str = ""  # the hash of its recorded plan (t2.experiments.decisions.plan), once recorded

    @property
    def detect(self) -> float | None:
        """The smallest difference that matters: the power plan's target."""
        return self.rule.detect

    def run_dir(self, out: Path, arm: Arm, seed: int) -> Path:
        return Path(out) / arm.name / f"seed-{seed}"

    def overrides(self, arm: Arm, seed: int) -> list[str]:
        """Every --set of one run: the arm's, the budget, the seed, W&B's grouping and
        the plan's hash (which the run records in meta.json)."""
        return [
            *arm.overrides,
            *self.budget,
            f"train.seed={seed}",
            f"train.wandb_group={self.name}",
            f"train.wandb_job_type={arm.name}",
            f"train.wandb_name={arm.name}-seed{seed}",
            *([f"train.sweep_plan={as_string(self.plan)}"] if self.plan else []),
        ]

    def command(self, arm: Arm, seed: int, out: Path, wandb: str) -> list[str]:
        """The arguments of `t2 train` (or train.py) for one run. --resume always: a new
        run starts from scratch, an interrupted one (killed, preempted) continues."""
        sets = [arg for kv in self.overrides(arm, seed) for arg in ("--set", kv)]
        plugins = [arg for plugin in self.plugins for arg in ("--plugin", plugin)]
        trust = ["--trust-plugins"] if self.trust_plugins else []
        return [
            "--recipe",
            arm.recipe,
            *plugins,
            *trust,
            *sets,
            "--out",
            str(self.run_dir(out, arm, seed)),
            "--resume",
            "--wandb",
            wandb,
        ]

    def shell_command(self, arm: Arm, seed: int, out: Path, wandb: str) -> str:
        return shlex.join(["python", "train.py", *self.command(arm, seed, out, wandb)])

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)


def yaml_value(value: Any) -> str:
    """A value as --set writes it (parsed back as YAML: 4, 0.001, true, [0.9, 0.98])."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True).splitlines()[0]


def as_string(text: str) -> str:
    """`text` as --set reads back a string: quoted where --set's YAML (t2.section.load_yaml,
    which reads 1e5 as a number too) would read a number."""
    return text if load_yaml(text) == text else f"'{text}'"


def _overrides(raw: Any, where: str) -> tuple[str, ...]:
    """{section.key: value} (or {section: {key: value}}) as section.key=value strings."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping of section.key: value")
    out = []
    for key, value in raw.items():
        if isinstance(value, dict) and "." not in str(key):
            out += [f"{key}.{k}={yaml_value(v)}" for k, v in value.items()]
        else:
            out.append(f"{key}={yaml_value(value)}")
    return tuple(out)


def _budget(raw: Any, where: str) -> tuple[tuple[str, ...], str]:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: budget must be a mapping of {', '.join(BUDGET)}")
    check_keys(raw, BUDGET, f"budget key in {where}")
    for key, value in raw.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"{where}: budget {key} must be a positive number, got {value!r}")
    axis = AXIS[next(iter(raw))] if len(raw) == 1 else "steps"
    return tuple(f"{BUDGET[k]}={yaml_value(v)}" for k, v in raw.items()), axis


def _seeds(raw: Any, where: str) -> tuple[int, ...]:
    ok = isinstance(raw, list) and raw and all(type(s) is int for s in raw)
    if not ok or len(set(raw)) != len(raw):
        raise ConfigError(f"{where}: seeds must be a list of distinct integers, e.g. [1, 2, 3]")
    return tuple(raw)


def _arms(raw: Any, base: str | None, common: tuple[str, ...], where: str) -> tuple[Arm, ...]:
    if not isinstance(raw, dict) or not raw:
        example = "arms: {base: {}, rope: {set: {model.positional: rope}}}"
        raise ConfigError(f"{where}: arms must be a mapping of arm names, e.g. {example}")
    arms = []
    for name, spec in raw.items():
        spec = spec or {}
        if not NAME.match(str(name)) or not isinstance(spec, dict):
            raise ConfigError(
                f"{where}: arm {name!r} must be a folder-safe name (letters, digits, . _ -) "
                f"mapping to {{recipe: NAME}} and/or {{set: {{section.key: value}}}}"
            )
        check_keys(spec, ("recipe", "set"), f"key of arm {name!r} in {where}")
        recipe = spec.get("recipe") or base
        if not recipe:
            raise ConfigError(f"{where}: arm {name!r} names no recipe; add base: RECIPE")
        arms.append(Arm(str(name), str(recipe), _overrides(spec.get("set"), where), common))
    return tuple(arms)


def parse_sweep(raw: Any, path: Path) -> Sweep:
    where = str(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"sweep file {where} must be a mapping with keys: {', '.join(KEYS)}")
    check_keys(raw, KEYS, f"key in sweep file {where}")
    name = str(raw.get("name") or path.stem)
    if not NAME.match(name):
        raise ConfigError(f"{where}: name {name!r} must be letters, digits, . _ or -")
    budget, axis = _budget(raw.get("budget"), where)
    common = _overrides(raw.get("set"), f"{where}: set")
    arms = _arms(raw.get("arms"), raw.get("base"), common, where)
    baseline = str(raw.get("baseline") or arms[0].name)
    if baseline not in {a.name for a in arms}:
        raise ConfigError(
            f"{where}: baseline {baseline!r} is not an arm; valid arms: "
            f"{', '.join(a.name for a in arms)}"
        )
    compare_at = raw.get("compare_at") or axis
    if compare_at not in COMPARE_AT:
        raise ConfigError(
            f"{where}: invalid compare_at {compare_at!r}; valid choices: {', '.join(COMPARE_AT)}"
        )
    if not isinstance(raw.get("robustness", False), bool):
        raise ConfigError(f"{where}: robustness must be true or false")
    seeds = _seeds(raw.get("seeds"), where)
    rule = parse_rule(raw.get("rule"), raw.get("detect"), where, len(seeds))
    robustness = raw.get("robustness", False)
    plugins = _plugins(raw.get("plugins") or [], path.parent)
    return Sweep(
        path, name, seeds, budget, compare_at, baseline, arms, robustness, rule, plugins=plugins
    )


def _plugins(specs: Any, folder: Path) -> tuple[str, ...]:
    """Plugin files as absolute paths (relative ones to `folder`), module names as given."""
    if not isinstance(specs, list) or not all(isinstance(s, str) for s in specs):
        raise ConfigError("a sweep's plugins must be a list of .py files or module names")
    absolute = (str((folder / s).absolute()) if is_file_spec(s) else s for s in specs)
    return tuple(dict.fromkeys(absolute))


def load_sweep(path: str | Path, plugins: Sequence[str] = (), trust_plugins: bool = False) -> Sweep:
    """Read and check a sweep file, building every arm's config (one line on a typo);
    `plugins` (--plugin, relative to the working folder) are added to the file's, which
    are imported only with `trust_plugins` or when given too (t2.plugins.load_listed)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"sweep file {path} not found; pass a YAML file (see sweeps/)")
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        reason = str(err).strip().splitlines()[0]
        raise ConfigError(f"sweep file {path} is not valid YAML ({reason}); fix it") from None
    sweep = parse_sweep(raw, path)
    extra = _plugins(list(plugins), Path.cwd())
    load_plugins(extra)  # before the arms' configs, which may name their components
    load_listed(sweep.plugins, f"sweep file {path}", trust_plugins)
    merged = tuple(dict.fromkeys((*sweep.plugins, *extra)))
    sweep = replace(sweep, plugins=merged, trust_plugins=trust_plugins)
    for arm in sweep.arms:
        try:
            load_config(arm.recipe, sweep.overrides(arm, sweep.seeds[0]), trust_plugins)
        except ConfigError as err:
            raise ConfigError(f"{path}: arm {arm.name!r}: {err}") from None
    return sweep
