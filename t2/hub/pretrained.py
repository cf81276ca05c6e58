"""The one bundle of a t2 model, its config and tokenizer (`Bundle`, what every reader
gives), and save_pretrained / from_pretrained: a bundle as one folder (layout:
t2/hub/__init__), locally or through the Hugging Face Hub's cache; the reader and writer
of the `hf` format (t2.formats.export.hf: `t2 export RUN --format hf`, alias `t2 save`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerFast

from t2 import __version__
from t2.atomic import atomic_folder
from t2.config import Config, DecodeConfig
from t2.data.tokenizer import load_tokenizer
from t2.errors import CheckpointError, ConfigError
from t2.hub.download import locate
from t2.hub.layout import CARD, CONFIG_JSON, HUB_FORMAT, REQUIRED, SECTIONS, TOP_KEYS, WEIGHTS
from t2.hub.public import published
from t2.model.transformer import Transformer
from t2.rundir.loading import check_vocabulary
from t2.rundir.plugins import carry_plugins, load_kept
from t2.rundir.store import load_weights, save_weights, unique_state
from t2.serve.engine import translate


def is_pretrained(path: str | Path) -> bool:
    """Whether `path` is a folder written by save_pretrained (not a run or checkpoint)."""
    path = Path(path)
    return (path / CONFIG_JSON).is_file() and (path / WEIGHTS).is_file()


def config_record(cfg: Config, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """What config.json holds: format, version, the four config sections, provenance; no
    local path (t2.hub.public: it is pushed with its folder)."""
    record = {"t2_format": HUB_FORMAT, "t2_version": __version__, **cfg.to_dict()}
    return published({**record, "source": source} if source else record)


def read_config_json(folder: Path) -> Config:
    """The config of a saved folder, its format and keys checked (one-line errors)."""
    path = folder / CONFIG_JSON
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CheckpointError(f"cannot read {path} ({reason}); save the model again") from None
    fmt = raw.get("t2_format") if isinstance(raw, dict) else None
    if not isinstance(fmt, int):
        raise CheckpointError(
            f"{path} names no t2_format; {folder} was not written by t2's save_pretrained"
        )
    if fmt > HUB_FORMAT or fmt < 1:
        raise CheckpointError(
            f"{folder} is t2 model-folder format {fmt} (t2 {raw.get('t2_version', '?')}); this "
            f"t2 {__version__} reads format 1 to {HUB_FORMAT}: use the t2 that wrote it"
        )
    unknown = sorted(set(raw) - set(TOP_KEYS))
    if unknown:
        raise CheckpointError(
            f"{path} has unknown keys {', '.join(unknown)}; valid keys: {', '.join(TOP_KEYS)}"
        )
    try:
        return Config.from_dict({k: raw[k] for k in SECTIONS if k in raw})
    except ConfigError as err:
        raise CheckpointError(f"{path}: {err}") from None


@dataclass
class Bundle:
    """A t2 model with the config and tokenizer it was trained with, and so its decode
    defaults: what every reader gives (t2.formats.run.load_run for a run directory or a
    checkpoint, load_folder / from_pretrained for a saved folder, and inside the opener's
    `Opened` for every format). `model` is None only where the weights are another
    engine's (a CTranslate2 export: its `Opened.engine` translates). It lives here, above
    the run directory and the engines, because it writes itself as a saved folder."""

    model: Transformer | None
    config: Config
    tokenizer: PreTrainedTokenizerFast
    path: Path | None = None  # the checkpoint or folder it was read from

    @property
    def cfg(self) -> Config:
        """The config (t2's usual name for it)."""
        return self.config

    @property
    def decode(self) -> DecodeConfig:
        """The decoding settings the run chose (decode section of the config)."""
        return self.config.decode

    @classmethod
    def from_pretrained(
        cls,
        name: str | Path,
        *,
        revision: str | None = None,
        cache_dir: str | Path | None = None,
        device: str | torch.device = "cpu",
        trust_plugins: bool = False,
    ) -> Bundle:
        """A local folder, else a hub repo id (owner/name) through the hub's cache.
        `trust_plugins`: import the plugin code the folder carries (read it first); without
        it such a folder is refused in one line, unless this process has that code already."""
        return load_folder(locate(name, revision, cache_dir), device, trust_plugins)

    def t2_model(self) -> Transformer:
        """The model, or a one-line error where the weights are another engine's."""
        if self.model is None:
            raise CheckpointError(
                f"{self.path} holds no t2 model (a CTranslate2 export); translate with "
                f"t2.opener.open_model(PATH).engine, or use the run it was exported from"
            )
        return self.model

    def save_pretrained(
        self, folder: str | Path, card: str | None = None, source: dict | None = None
    ) -> Path:
        """This bundle as a saved folder (the module's save_pretrained), with `card` and
        the plugins that the run or folder it was read from keeps."""
        model = self.t2_model()
        return save_pretrained(
            model, self.config, self.tokenizer, folder, card, source, plugins_of=self.path
        )

    def translate(self, sentences: Sequence[str], decode: DecodeConfig | None = None) -> list[str]:
        """Best translations in input order, with `decode` (default: the run's own settings;
        change them with self.decode.updated(beam_size=5)), as an engine's translate."""
        settings = self.decode if decode is None else decode
        model, src_bos = self.t2_model(), self.config.data.src_bos
        return translate(model, self.tokenizer, sentences, settings, src_bos)


def from_pretrained(name: str | Path, **kwargs: Any) -> Bundle:
    """Bundle.from_pretrained: model, config and tokenizer of a folder or repo id."""
    return Bundle.from_pretrained(name, **kwargs)


def load_folder(
    folder: str | Path, device: str | torch.device = "cpu", trust_plugins: bool = False
) -> Bundle:
    """Read a saved folder: its plugins (only with `trust_plugins`, t2.rundir.plugins),
    config, then the weights into the model it describes (every name and shape checked),
    then the tokenizer (its size checked against the model)."""
    folder = Path(folder)
    missing = [name for name in REQUIRED if not (folder / name).is_file()]
    if missing:
        raise CheckpointError(
            f"{folder} lacks {', '.join(missing)}; pass a folder written by t2 save, t2 push "
            f"or Bundle.save_pretrained"
        )
    load_kept(folder, trust_plugins)
    cfg = read_config_json(folder)
    model = Transformer(cfg.model)
    load_weights(model, folder)
    tokenizer = load_tokenizer(folder)
    fix = "save the model with the tokenizer of its run"
    check_vocabulary(tokenizer, cfg, f"the tokenizer in {folder}", "its model", fix)
    return Bundle(model.to(device).eval(), cfg, tokenizer, folder)


def save_pretrained(
    model: Transformer,
    cfg: Config,
    tokenizer: PreTrainedTokenizerFast,
    folder: str | Path,
    card: str | None = None,
    source: dict[str, Any] | None = None,
    plugins_of: Path | None = None,
) -> Path:
    """Write the folder atomically (assembled beside it, then renamed into place); an
    existing folder is replaced only if it is a saved model or empty. `plugins_of`: a
    run, checkpoint or folder whose plugins/ the folder carries (t2.rundir.plugins)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder} is a file; pass a folder to save the model in")
    if folder.is_dir() and any(folder.iterdir()) and not is_pretrained(folder):
        raise CheckpointError(f"{folder} exists and is not a saved t2 model; pass a new folder")
    fix = "pass the tokenizer the model was trained with"
    check_vocabulary(tokenizer, cfg, "the tokenizer given", "the model", fix)
    with atomic_folder(folder) as tmp:
        save_weights(unique_state(model), tmp)
        text = json.dumps(config_record(cfg, source), indent=2) + "\n"
        (tmp / CONFIG_JSON).write_text(text, encoding="utf-8")
        tokenizer.save_pretrained(tmp)
        if card is not None:
            (tmp / CARD).write_text(card, encoding="utf-8")
        if plugins_of is not None:
            carry_plugins(plugins_of, tmp)
    return folder
