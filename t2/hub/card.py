"""The model card (README.md) of a saved model, generated from its run's own files.

Every figure comes from a file of the run: config.yaml (architecture, recipe, data,
decoding), meta.json (recipe name, processes, the checkpoint's step), metrics.jsonl
(validation at that step, target tokens and time trained), results.json (test scores with
sacreBLEU signatures) and the eval-*/scores.json that `t2 evaluate` wrote beside the
checkpoint. What a run did not record is said to be missing, never estimated.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from t2 import __version__
from t2.config import Config
from t2.decoding.options import output_settings
from t2.hub.facts import RunFacts
from t2.hub.public import public
from t2.rundir.plugins import kept_components

ARCHITECTURE = (
    "d_model",
    "n_heads",
    "n_kv_heads",
    "d_ff",
    "n_encoder_layers",
    "n_decoder_layers",
    "positional",
    "norm",
    "norm_position",
    "residual",
    "ffn",
    "attention",
    "qk_norm",
    "tie_embeddings",
    "vocab_size",
    "dropout",
    "bias",
)
RECIPE = (
    "optimizer",
    "betas",
    "eps",
    "weight_decay",
    "schedule",
    "warmup_steps",
    "max_lr",
    "label_smoothing",
    "max_steps",
    "accumulate",
    "clip_norm",
    "mixed_precision",
    "seed",
)


def _table(rows: list[tuple[str, Any]]) -> str:
    lines = ["| key | value |", "| --- | --- |"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in rows]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    """Names as code, floats to 4 significant digits, lists joined (no `|`: it ends a cell)."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    if isinstance(value, str):
        return f"`{public(value)}`" if value else "(empty)"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def front_matter(cfg: Config, facts: RunFacts) -> str:
    scored = facts.results is not None or facts.evals
    lines = [
        "---",
        "library_name: t2",
        "pipeline_tag: translation",
        "language:",
        f"- {cfg.data.src_lang}",
        f"- {cfg.data.tgt_lang}",
        "tags:",
        "- translation",
        "- t2",
        "- encoder-decoder",
        f"- {cfg.model.positional}",
        f"- {cfg.model.norm}",
        f"- {cfg.model.ffn}",
    ]
    if scored:
        lines += ["metrics:", "- bleu", "- chrf"]
    return "\n".join([*lines, "---"])


def architecture_section(cfg: Config, parameters: dict[str, int]) -> str:
    m = cfg.model
    rows = [(k, getattr(m, k)) for k in ARCHITECTURE] + [
        ("d_head", m.d_head),
        ("d_hidden (FFN)", m.d_hidden),
    ]
    parts = ", ".join(f"{k} {v:,}" for k, v in parameters.items() if k != "total")
    return (
        f"## Architecture\n\nAn encoder–decoder Transformer (Vaswani et al. 2017) built "
        f"by t2 from its registered components; **{parameters['total']:,} parameters** "
        f"(tied matrices once: {parts}).\n\n{_table(rows)}"
    )


def training_section(cfg: Config, facts: RunFacts) -> str:
    recipe = facts.run_meta.get("recipe")
    rows = [("recipe", recipe or "not recorded")] + [(k, getattr(cfg.train, k)) for k in RECIPE]
    processes = facts.ckpt_meta.get("world_size", facts.run_meta.get("world_size"))
    rows += [
        ("data.max_tokens (per process and micro-batch)", cfg.data.max_tokens),
        ("processes", processes if processes is not None else "not recorded"),
    ]
    data = [(f"data.{k}", getattr(cfg.data, k)) for k in ("train", "valid", "test")]
    data += [
        (f"data.{k}", getattr(cfg.data, k))
        for k in (
            "max_tokens_per_sentence",
            "max_length_ratio",
            "dedup",
            "max_train_pairs",
            "src_bos",
        )
    ]
    done = []
    if facts.averaged:
        done.append(f"- Weights: the mean of checkpoints {', '.join(facts.averaged)}.")
    done.append(f"- Steps: {facts.step if facts.step is not None else 'not recorded'}.")
    tokens, seconds = facts.at_step("train_tokens"), facts.at_step("elapsed_s")
    counted = f"{tokens['train_tokens']:,}" if tokens else "not recorded in metrics.jsonl"
    done.append(f"- Target tokens trained on: {counted}.")
    if seconds:
        done.append(f"- Training time: {seconds['elapsed_s'] / 60:.1f} minutes.")
    if facts.results and facts.results.get("stopped_by"):
        done.append(f"- Stopped by: `{facts.results['stopped_by']}`.")
    tokenizer = (
        f"the tokenizer `{public(cfg.data.tokenizer)}` (data.tokenizer, trained before the run)"
        if cfg.data.tokenizer
        else "trained on the run's train split"
    )
    return (
        f"## Training\n\n{_table(rows)}\n\n### Data\n\nSource {cfg.data.src_lang}, target "
        f"{cfg.data.tgt_lang}; a joint byte-level BPE of {cfg.model.vocab_size} entries, "
        f"{tokenizer}. The run's data sources and cleaning:\n\n"
        f"{_table(data)}\n\n### This checkpoint\n\n" + "\n".join(done)
    )


def validation_section(facts: RunFacts) -> str:
    record = None if facts.averaged else facts.at_step("valid_loss")
    if record is None or record.get("step") != facts.step:
        return "## Validation\n\nNo validation record at this checkpoint's step in metrics.jsonl."
    rows = [(k.removeprefix("valid_"), v) for k, v in record.items() if k.startswith("valid_")]
    return (
        f"## Validation\n\nAt step {record['step']} (metrics.jsonl): teacher-forced loss, "
        f"perplexity and token accuracy on the validation split; BLEU, chrF and exact match "
        f"of greedy translations of its first `train.valid_bleu_sentences` sentences, "
        f"scored by the same sacreBLEU call as the test scores (metrics.jsonl does not "
        f"store their signatures).\n\n{_table(rows)}"
    )


def _scores(record: dict[str, Any]) -> str:
    """BLEU and chrF with their signatures (a list: a signature's `|` would split a cell)."""
    lines = [
        f"- BLEU **{record['bleu']:.2f}**, chrF **{record['chrf']:.2f}**",
        f"- BLEU signature: `{record['bleu_signature']}`",
        f"- chrF signature: `{record['chrf_signature']}`",
    ]
    if record.get("bleu_detail"):
        lines.append(f"- sacreBLEU: `{record['bleu_detail']}`")
    return "\n".join(lines)


def _settings(decode: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in output_settings(decode).items())


def _results(cfg: Config, r: dict[str, Any]) -> str:
    """The scores training wrote to results.json, decoded with the run's decode section."""
    # results.json's own record of its decode (every setting that shapes the output), else
    # the beam size that older ones kept, over the run's decode section
    decode = r.get("decode") or asdict(cfg.decode) | {"beam_size": r.get("beam_size")}
    forced = [
        (k.removeprefix("test_"), r[k])
        for k in ("test_loss", "test_ppl", "test_accuracy", "exact_match")
        if k in r
    ]
    text = (
        f"results.json, the run's test split (`data.test={public(cfg.data.test)}`, "
        f"{r.get('n_sentences', '?')} sentences), decoded with {_settings(decode)}:"
        f"\n\n{_scores(r)}"
    )
    if forced:
        text += f"\n\nTeacher-forced on the same split, and exact matches:\n\n{_table(forced)}"
    return text


def _evaluation(e: dict[str, Any]) -> str:
    """A `t2 evaluate` scores.json beside the checkpoint."""
    averaged = (
        f", the last {e['average_last']} checkpoints averaged" if e.get("average_last") else ""
    )
    return (
        f"`t2 evaluate` on {public(str(e.get('testset', '?')))} ({e.get('n_sentences', '?')} "
        f"sentences), "
        f"decoded with {_settings(e.get('decode', {}))}{averaged}:\n\n{_scores(e)}"
    )


def scores_section(cfg: Config, facts: RunFacts) -> str:
    parts = ["## Test scores"]
    if facts.results is not None:
        parts.append(_results(cfg, facts.results))
    parts += [_evaluation(e) for e in facts.evals]
    if len(parts) == 1:
        parts.append(
            "None: the run has no results.json for this checkpoint and no "
            "`t2 evaluate` output beside it."
        )
    return "\n\n".join(parts)


def usage_section(name: str, plugins: list[str]) -> str:
    """How to load the folder; `plugins`: the components its plugin code registers."""
    trust, flag, note = "", "", ""
    if plugins:  # its code runs only when trusted (t2.rundir.plugins)
        trust, flag = ", trust_plugins=True", " --trust-plugins"
        note = (
            f"The model's {', '.join(plugins)} is plugin code in `plugins/`, which t2 runs "
            f"only when asked: read it, then load with the option below.\n\n"
        )
    return (
        f"## Use\n\n{note}```python\nfrom t2.hub import from_pretrained\n\n"
        f'pretrained = from_pretrained("{name}"{trust})  # a folder, or a hub repo id\n'
        f'print(pretrained.translate(["..."]))  # the run\'s decode settings\n'
        f'print(pretrained.translate(["..."], pretrained.decode.updated(beam_size=5)))\n'
        f"```\n\n"
        f"From the command line, on a local copy (`hf download REPO_ID --local-dir DIR` for "
        f"a hub repo):\n\n```bash\nt2 translate --checkpoint DIR --input FILE{flag}\n"
        f"t2 evaluate --checkpoint DIR --src SRC --ref REF{flag}\n```"
    )


def model_card(ckpt: Path, cfg: Config, parameters: dict[str, int], name: str) -> str:
    """README.md for the folder made from checkpoint `ckpt` (its run's files), loadable as
    `name` (a repo id or a folder)."""
    facts = RunFacts.read(ckpt)
    title = (
        f"# {public(facts.run_meta.get('recipe') or 't2 model')}: {cfg.data.src_lang}→"
        f"{cfg.data.tgt_lang} translation\n\nWritten by t2 {__version__} from checkpoint "
        f"`{Path(ckpt).name}` of its run."
    )
    parts = [
        front_matter(cfg, facts),
        title,
        architecture_section(cfg, parameters),
        training_section(cfg, facts),
        validation_section(facts),
        scores_section(cfg, facts),
        usage_section(name, kept_components(ckpt)),
    ]
    return "\n\n".join(parts) + "\n"
