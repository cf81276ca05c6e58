"""A t2 model as a Hugging Face Hub model folder: the one place that knows its layout.

    DIR/
      config.json            the full t2 config (model, data, train, decode sections), the
                             folder's format (t2_format) and the t2 version that wrote it
      model.safetensors      the weights, each tied matrix once (no pickle anywhere)
      tokenizer.json         PreTrainedTokenizerFast.save_pretrained's files: the folder
      tokenizer_config.json  loads with PreTrainedTokenizerFast.from_pretrained(DIR) too
      README.md              the model card (t2 save / t2 push), generated from the run

`from_pretrained(DIR_OR_REPO_ID)` reads a folder, or a repo through the hub's cache
(huggingface_hub.snapshot_download; offline, the cache alone), as a `Bundle` (model,
config, tokenizer, decode defaults: what every reader gives, t2.formats.run.load_run for a
run too); `Bundle.save_pretrained` writes one atomically. The folder is the `hf` export
format: `t2 export RUN --format hf` (or `t2 save`) writes a run's checkpoint as such a
folder with its model card, `t2 push` uploads it (HfApi.create_repo and upload_folder), and
`t2 evaluate` / `t2 translate --checkpoint DIR_OR_REPO_ID` open it as they open a run
(t2.opener). Details: docs/hub.md.
"""

from t2.hub.card import model_card
from t2.hub.pretrained import (
    HUB_FORMAT,
    Bundle,
    from_pretrained,
    is_pretrained,
    save_pretrained,
)
from t2.hub.push import upload

__all__ = [
    "HUB_FORMAT",
    "Bundle",
    "from_pretrained",
    "is_pretrained",
    "model_card",
    "save_pretrained",
    "upload",
]
