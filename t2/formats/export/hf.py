"""The `hf` format: a model folder for the Hugging Face Hub (model.safetensors, config.json,
the tokenizer and a model card generated from the run's files). Its reading and writing
live in t2.hub.pretrained (save_pretrained / from_pretrained), its file names in
t2.hub.layout."""

from __future__ import annotations

import json
from pathlib import Path

from t2.errors import CheckpointError
from t2.formats.base import ModelFormat, Opened
from t2.hub.card import model_card
from t2.hub.layout import CONFIG_JSON, FILES, WEIGHTS
from t2.hub.pretrained import is_pretrained, load_folder
from t2.model.summary import count_parameters
from t2.registry import EXPORT
from t2.serve.engine import TorchEngine


@EXPORT.register("hf")
class HfFormat(ModelFormat):
    """A model folder for the Hugging Face Hub, read by t2's own engine."""

    name = "hf"
    holds = f"an hf folder {CONFIG_JSON} and {WEIGHTS}"
    options = ("name",)
    engine = "t2"
    files = FILES

    @staticmethod
    def detect(folder: Path) -> bool:
        return is_pretrained(folder)

    def load(
        self, folder: Path, device: str, precision: str | None, workers: int, average_last: int
    ) -> Opened:
        bundle = load_folder(folder, device)
        src_bos = bundle.config.data.src_bos
        engine = TorchEngine(bundle.t2_model(), bundle.tokenizer, src_bos, device, precision)
        source = json.loads((folder / CONFIG_JSON).read_text(encoding="utf-8")).get("source")
        return Opened(engine, bundle, self.name, dict(source or {}))

    def save(self, opened: Opened, out: Path, name: str | None = None) -> Path:
        """`name`: the repo id the card's example loads (default: `out`'s name; no local
        path goes into a card, which is pushed with the folder)."""
        if opened.kind != "run":
            raise CheckpointError(
                f"{opened.path} is already a saved model folder; push or copy it as it is"
            )
        parameters = count_parameters(opened.bundle.t2_model())
        card = model_card(opened.path, opened.cfg, parameters, name or out.name)
        source = {"checkpoint": opened.path.name}
        return opened.bundle.save_pretrained(out, card, source)
