"""Typed configuration: every default lives here once, every choice is checked at start-up.

A config has four sections; builders receive only their own. Each section lives beside
what it configures: model (t2.model.config), data (t2.data.config), train
(t2.train.config), decode (t2.decoding.options); this module assembles them. Choices are
strings checked against the registries or a fixed list when the config is made, so a typo
fails before any work with the list of valid choices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import yaml

from t2.data.config import SAVED_BEFORE, DataConfig
from t2.decoding.options import DecodeConfig
from t2.errors import ConfigError
from t2.model.config import ModelConfig
from t2.section import AUTO, check_keys, load_yaml
from t2.train.config import TrainConfig

__all__ = ["AUTO", "SAVED_BEFORE", "Config", "DataConfig", "DecodeConfig", "ModelConfig",
           "TrainConfig", "check_keys", "load_yaml"]  # fmt: skip


@dataclass(frozen=True)
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("betas", "lr_find_range"):
            out["train"][key] = list(out["train"][key])
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Config:
        if not isinstance(raw, dict):
            raise ConfigError(f"a config must be a mapping of sections, got {type(raw).__name__}")
        check_keys(raw, SECTIONS, "config")
        sections = {}
        for name, section in SECTIONS.items():
            values = raw.get(name) or {}
            if not isinstance(values, dict):
                raise ConfigError(f"config section {name!r} must be a mapping of keys")
            valid = {f.name for f in dataclasses.fields(section)}
            check_keys(values, valid, f"key in section {name!r}")
            sections[name] = section(**values)
        return cls(**sections)

    @classmethod
    def from_yaml(cls, text: str, source: str = "config", saved: bool = False) -> Config:
        """A config from YAML text; `source` names the file in a one-line error. `saved`:
        a run's config.yaml, whose missing keys take SAVED_BEFORE's values, not defaults."""
        try:
            raw = load_yaml(text) or {}
        except yaml.YAMLError as err:
            reason = str(err).strip().splitlines()[0]
            raise ConfigError(f"{source} is not valid YAML ({reason}); fix or replace it") from None
        if saved and isinstance(raw, dict):
            for key, value in SAVED_BEFORE.items():
                section, name = key.split(".")
                if isinstance(raw.get(section), dict):
                    raw[section].setdefault(name, value)
        return cls.from_dict(raw)


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "data": DataConfig,
    "train": TrainConfig,
    "decode": DecodeConfig,
}
