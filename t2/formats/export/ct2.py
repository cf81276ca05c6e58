"""The `ct2` format: a CTranslate2 model folder (model.bin, config.json,
shared_vocabulary.json), the run's tokenizer beside it and EXPORT_META, all that translating
with it needs. The spec builder that maps t2's components onto CTranslate2's layers is
t2.serve.ct2, the engine t2.serve.ct2_engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from t2 import __version__
from t2.atomic import atomic_folder
from t2.data.tokenizer import load_tokenizer
from t2.errors import ConfigError, ExportError
from t2.formats.base import ModelFormat, Opened
from t2.hub.layout import PLUGIN_FILES, TOKENIZER_FILES
from t2.hub.pretrained import Bundle
from t2.hub.public import published
from t2.registry import EXPORT
from t2.rundir import carry_plugins, check_vocabulary, load_kept
from t2.serve.ct2 import (
    EXPORT_FORMAT,
    EXPORT_META,
    check_exportable,
    is_export,
    read_export,
    require_ctranslate2,
    save_spec,
    table_rows,
)
from t2.serve.ct2_engine import Ct2Engine, translator

# CTranslate2's own files (its vocabulary as JSON or, from older converters, text), then ours
CT2_FILES = ("model.bin", "config.json", "shared_vocabulary.json", "shared_vocabulary.txt")


def export_record(opened: Opened, quant: str) -> dict[str, Any]:
    """What EXPORT_META holds: the format, versions, provenance and the run's config, with
    no local path (t2.hub.public): the checkpoint by its name, as an hf folder's source."""
    import ctranslate2  # optional dependency: the serve extra

    cfg = opened.cfg
    return published(
        {
            "format": EXPORT_FORMAT,
            "engine": "ctranslate2",
            "t2": __version__,
            "ctranslate2": ctranslate2.__version__,
            "quantization": quant,
            "checkpoint": Path(opened.path).resolve().name,
            "recipe": opened.provenance.get("recipe"),
            "step": opened.provenance.get("step"),
            "src_bos": cfg.data.src_bos,
            "max_positions": table_rows(opened.model),
            "decode": cfg.to_dict()["decode"],
            "config": cfg.to_dict(),
        }
    )


@EXPORT.register("ct2")
class Ct2Format(ModelFormat):
    """A CTranslate2 model folder, read by CTranslate2's engine."""

    name = "ct2"
    holds = f"a ct2 export {EXPORT_META}"
    options = ("quantization",)
    engine = "ct2"
    parallel = True
    files = (*CT2_FILES, *TOKENIZER_FILES, EXPORT_META, PLUGIN_FILES)

    @staticmethod
    def detect(folder: Path) -> bool:
        return is_export(folder)

    def load(
        self, folder: Path, device: str, precision: str | None, workers: int, average_last: int
    ) -> Opened:
        require_ctranslate2()
        load_kept(folder, trust_plugins=False)  # its plugins: loaded by the opener if trusted
        meta, cfg = read_export(folder)
        tokenizer = load_tokenizer(folder)
        fix = "export the run again"
        check_vocabulary(tokenizer, cfg, f"the tokenizer in {folder}", "its model", fix)
        ct2 = translator(str(folder), device, precision, workers)
        engine = Ct2Engine(ct2, tokenizer, cfg.data.src_bos, meta["max_positions"], workers)
        provenance = {k: meta.get(k) for k in ("recipe", "step", "checkpoint", "quantization")}
        return Opened(engine, Bundle(None, cfg, tokenizer, folder), self.name, provenance)

    def save(self, opened: Opened, out: Path, quantization: str = "float32") -> Path:
        """The folder appears whole or not at all; an existing one is replaced only if it
        is an export."""
        require_ctranslate2()
        if opened.model is None:
            raise ConfigError(f"{opened.path} is a CTranslate2 export; export the run it came from")
        if out.is_dir() and any(out.iterdir()) and not is_export(out):
            raise ExportError(f"--out {out} exists and is not a t2 export; pass a new folder")
        check_exportable(opened.cfg.model)
        with atomic_folder(out) as tmp:
            save_spec(opened.model, opened.cfg, opened.tokenizer, str(tmp), quantization)
            opened.tokenizer.save_pretrained(str(tmp))
            record = json.dumps(export_record(opened, quantization), indent=2) + "\n"
            (tmp / EXPORT_META).write_text(record, encoding="utf-8")
            carry_plugins(opened.path, tmp)  # the code its config's plugin names need
        return out
