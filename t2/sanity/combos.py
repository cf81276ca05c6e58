"""What the sanity suite trains: component combinations, tasks and their pass marks.

A combination is one value per axis of the model's component choices (model.positional,
model.norm, model.ffn, model.norm_position, model.residual) and of its attention's options
(model.n_kv_heads, model.qk_norm); a residual connection comes only with the placements its
facts define it for (DeepNorm: post). `--only` names combinations as specs: `base`, `v2`,
`positional=rope,norm=rmsnorm` (axes not named keep the base combination's value), or the
values alone, `rope,rmsnorm`, since no value belongs to two axes; an option's value shows
with its axis (`n_kv_heads=1`), and a spec may name it so.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from dataclasses import dataclass

from t2.config import ModelConfig
from t2.errors import ConfigError
from t2.recipes import load_raw
from t2.registry import FFN, NORM, POSITIONAL, RESIDUAL

AXES = (  # ModelConfig's names
    *("positional", "norm", "ffn", "norm_position", "residual"),
    *("n_kv_heads", "qk_norm"),
)
OPTIONS = ("n_kv_heads", "qk_norm")  # the axes that are attention options, not components
# axes added after the suite's first results: shown only where not the default, so that the
# folders of earlier combinations keep their names (and a finished run is found again)
LATER = ("residual", *OPTIONS)
RECIPE = "sanity"  # the tiny model and training settings: recipes/sanity.yaml
NAMED_RECIPES = {"base": "base", "v2": "v2_rope_rmsnorm"}  # named combinations
# report 002: exact match of at least 99% on the toy tasks, 90% on the two sanity checks
PASS_MARKS = {
    "copy": 0.99,
    "reverse": 0.99,
    "sort": 0.99,
    "sum": 0.99,
    "fake_dates": 0.90,
    "polynomial": 0.90,
}
TOY_TASKS = ("copy", "reverse", "sort", "sum")
ALL_TASKS = tuple(PASS_MARKS)
# the recipe each task trains: the toy tasks recipes/sanity.yaml, the others a wider model
TASK_RECIPES = {
    **dict.fromkeys(TOY_TASKS, RECIPE),
    "fake_dates": "sanity_text",
    "polynomial": "sanity_text",
}
# With no positional information (a scheme whose facts say order=False) the encoder sees
# its source as a bag of tokens: two sources that are permutations of one another give the
# same encoder output as a set, so cross-attention (a weighted sum over it) gives the
# decoder the same input for both, and a task whose output depends on the source's order
# cannot be learned (docs/sanity.md). Sorting alone does not depend on it.
ORDER_TASKS = ("copy", "reverse", "sum", "polynomial", "fake_dates")
ORDER_BLIND = "no positions: the encoder cannot see source order, which this task needs"


def choices() -> dict[str, list[str]]:
    """The registered values of each axis; key/value heads: one per query head (0), and
    each count that groups the sanity model's heads (1: multi-query)."""
    position = next(f for f in dataclasses.fields(ModelConfig) if f.name == "norm_position")
    heads = load_raw(RECIPE)["model"]["n_heads"]
    return {
        "positional": POSITIONAL.names(),
        "norm": NORM.names(),
        "ffn": FFN.names(),
        "norm_position": sorted(position.metadata["choices"]),
        "residual": RESIDUAL.names(),
        "n_kv_heads": ["0", *(str(n) for n in range(1, heads) if heads % n == 0)],
        "qk_norm": ["false", "true"],
    }


def _text(value: object) -> str:
    """A config value as an axis value: YAML's spelling (true, not True)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Combination:
    """One value per axis; `label` names it in tables, `folder` in the run directory."""

    positional: str
    norm: str
    ffn: str
    norm_position: str
    residual: str
    n_kv_heads: str = "0"
    qk_norm: str = "false"

    @classmethod
    def of_recipe(cls, recipe: str) -> Combination:
        return _of_recipe(recipe)

    def values(self) -> tuple[str, ...]:
        return tuple(getattr(self, axis) for axis in AXES)

    def shown(self) -> tuple[str, ...]:
        """The values as tables and folders show them: the components', then each later axis
        that differs from its default (an attention option with its axis: `n_kv_heads=1`)."""
        shown = [getattr(self, a) for a in AXES if a not in LATER]
        for a in LATER:
            if getattr(self, a) != _DEFAULTS[a]:
                shown.append(f"{a}={getattr(self, a)}" if a in OPTIONS else getattr(self, a))
        return tuple(shown)

    def overrides(self) -> list[str]:
        return [f"model.{axis}={getattr(self, axis)}" for axis in AXES]

    @property
    def folder(self) -> str:
        return "-".join(self.shown())

    @property
    def label(self) -> str:
        """`base`, `v2`, or the values that differ from base: `rope+pre`."""
        for name, recipe in NAMED_RECIPES.items():
            if self == Combination.of_recipe(recipe):
                return name
        base = Combination.of_recipe(NAMED_RECIPES["base"])
        differ = [a for a in AXES if getattr(self, a) != getattr(base, a)]
        return "+".join(
            f"{a}={getattr(self, a)}" if a in OPTIONS else getattr(self, a) for a in differ
        )


@functools.cache
def _of_recipe(recipe: str) -> Combination:
    model = {
        **{f.name: f.default for f in dataclasses.fields(ModelConfig)},
        **(load_raw(recipe).get("model") or {}),
    }
    return Combination(*(_text(model[axis]) for axis in AXES))


_DEFAULTS = {f.name: _text(f.default) for f in dataclasses.fields(ModelConfig)}


def base() -> Combination:
    return Combination.of_recipe(NAMED_RECIPES["base"])


def default_set() -> list[Combination]:
    """The base combination, each combination one swap away from it, and v2."""
    start, out = base(), [base()]
    for axis, values in choices().items():
        swaps = [v for v in values if v != getattr(start, axis)]
        out += [dataclasses.replace(start, **{axis: v}) for v in swaps]
    v2 = Combination.of_recipe(NAMED_RECIPES["v2"])
    return out + ([v2] if v2 not in out else [])


def undefined(combo: Combination) -> str:
    """Why the combination is not a model (a residual connection at a placement its formula
    is not defined for), or ""."""
    placements = RESIDUAL.facts(combo.residual).placements
    if combo.norm_position in placements:
        return ""
    return f"residual {combo.residual} is defined for {' or '.join(placements)} only"


def cross_product() -> list[Combination]:
    """Every positional x norm x feed-forward x placement x residual x key/value heads x
    QK-norm combination that is a model."""
    product = (Combination(*values) for values in itertools.product(*choices().values()))
    return [c for c in product if not undefined(c)]


def parse_spec(spec: str) -> Combination:
    """`base`, `v2`, `positional=rope,norm=rmsnorm` or `rope,rmsnorm` (see the module doc)."""
    spec = spec.strip()
    if spec in NAMED_RECIPES:
        return Combination.of_recipe(NAMED_RECIPES[spec])
    valid = choices()
    owner = {value: axis for axis, values in valid.items() for value in values}
    changes: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in spec.replace("+", ",").split(","))):
        axis, sep, value = part.rpartition("=") if "=" in part else ("", "", part)
        axis = axis.strip().removeprefix("model.") if sep else owner.get(value, "")
        if axis not in valid or value not in valid[axis]:
            listed = "; ".join(f"{a}: {', '.join(v)}" for a, v in valid.items())
            raise ConfigError(
                f"unknown combination part {part!r} in --only {spec!r}; valid: "
                f"{', '.join(NAMED_RECIPES)} or AXIS=VALUE with {listed}"
            )
        if axis in changes and changes[axis] != value:
            raise ConfigError(f"--only {spec!r} sets {axis} twice; give one value per axis")
        changes[axis] = value
    if not changes:
        raise ConfigError(f"--only {spec!r} names no combination; e.g. base, v2, rope,pre")
    combo = dataclasses.replace(base(), **changes)
    if why := undefined(combo):
        raise ConfigError(f"--only {spec!r} is no model: {why}; pick another combination")
    return combo


def parse_tasks(text: str) -> list[str]:
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    for task in tasks:
        if task not in PASS_MARKS:
            raise ConfigError(f"unknown sanity task {task!r}; valid tasks: {', '.join(PASS_MARKS)}")
    if not tasks:
        raise ConfigError(f"--tasks names no task; valid tasks: {', '.join(PASS_MARKS)}")
    return tasks


def expected_failure(combo: Combination, task: str) -> str:
    """Why this combination cannot pass this task, or "" when it must."""
    order = POSITIONAL.facts(combo.positional).order
    return ORDER_BLIND if task in ORDER_TASKS and not order else ""
