"""The run directory: the one place that knows its layout (docs/run-directory.md).

    RUN/
      meta.json          format version, t2 and torch versions, number of processes
      config.yaml        the resolved config (model.vocab_size set from the tokenizer)
      tokenizer/         loads with PreTrainedTokenizerFast.from_pretrained(RUN/tokenizer)
      metrics.jsonl      one JSON record per logged step and per validation
      test.hyps.txt      the best checkpoint's test translations, a line each (their
                         references: data.test, named in meta.json by their SHA-256)
      results.json       the best checkpoint's test scores, written when training ends
      plugins/           a copy of each plugin file the run was given, with its SHA-256
      checkpoints/
        step-0000400/    model.safetensors, config.yaml, training_state.pt, meta.json
                         (versions, step, SHA-256 of each file) and COMPLETE, written last
        best             the name of the best checkpoint's folder
        avg-last5-step-0000800/   an average of the last 5 (no training state)

Training, decoding, evaluation, the robustness suite and the commands go through this
package; nothing else builds a path inside a run directory.
"""

from t2.rundir.average import average_checkpoints, average_weights, last_checkpoints
from t2.rundir.layout import (
    FORMAT,
    RunDir,
    eval_folder,
    is_complete,
    is_run_or_checkpoint,
    new_meta,
    read_meta,
    resolve,
    step_of,
    write_json,
)
from t2.rundir.loading import check_vocabulary
from t2.rundir.metrics import read_records, rewrite_records
from t2.rundir.plugins import carry_plugins, keep_plugins, load_kept
from t2.rundir.store import (
    load_model,
    load_training_state,
    load_weights,
    read_config,
    save_checkpoint,
    tokenizer_folder,
    unique_state,
    verified,
)

__all__ = [
    "FORMAT",
    "RunDir",
    "average_checkpoints",
    "average_weights",
    "carry_plugins",
    "check_vocabulary",
    "eval_folder",
    "is_complete",
    "is_run_or_checkpoint",
    "keep_plugins",
    "last_checkpoints",
    "load_kept",
    "load_model",
    "load_training_state",
    "load_weights",
    "new_meta",
    "read_config",
    "read_meta",
    "read_records",
    "resolve",
    "rewrite_records",
    "save_checkpoint",
    "step_of",
    "tokenizer_folder",
    "unique_state",
    "verified",
    "write_json",
]
