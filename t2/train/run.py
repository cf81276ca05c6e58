"""Training: `run_training` trains a recipe until its first stop rule holds (t2.train.budget),
evaluates its best checkpoint on the test split and writes RUN/results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from t2.config import Config
from t2.data.encode import encode_pairs
from t2.data.pipeline import load_pairs
from t2.data.references import pairs_named
from t2.model.summary import count_parameters
from t2.rundir import RunDir, load_weights, resolve
from t2.rundir.layout import read_meta, write_json, write_lines
from t2.rundir.store import full_disk_resumes
from t2.train.loop import eval_loader, train, write_results
from t2.train.preempt import ends_at_once
from t2.train.setup import Training
from t2.train.validate import final_evaluation


def run_training(
    cfg: Config, recipe: str, run_dir: Path, resume: bool | str | None, wandb: str
) -> dict[str, Any]:
    with full_disk_resumes(RunDir(run_dir)):  # a full disk at any write: one line
        return _train_and_score(cfg, recipe, run_dir, resume, wandb)


def _train_and_score(
    cfg: Config, recipe: str, run_dir: Path, resume: bool | str | None, wandb: str
) -> dict[str, Any]:
    run, outcome = train(cfg, recipe, run_dir, resume, wandb)
    acc = run.accelerator
    best = resolve(run.run_dir.path)
    main, wait = acc.is_main_process, run.waits.everyone
    with ends_at_once("the final evaluation", best, run.run_dir.path, main, wait):
        results = score_test_split(run, best, recipe, outcome) if main else {}
    acc.end_training()  # closes W&B and the process group
    return results


def score_test_split(
    run: Training, best: Path, recipe: str, outcome: dict[str, Any]
) -> dict[str, Any]:
    """The main process translates the test split with the best checkpoint and writes the
    translations, the SHA-256 of the pairs it scored in meta.json (`references`: test and
    test_source, t2.data.references; a report reads them again from data.test and checks
    them) and results.json, in that order, an older results.json removed first: a run cut
    off in between is unfinished, never finished with translations and hashes that differ."""
    acc = run.accelerator
    model = acc.unwrap_model(run.model)
    load_weights(model, best)
    pairs = load_pairs(run.cfg.data, "test", run.cfg.train.seed)
    encoded = encode_pairs(pairs, run.tokenizer, run.cfg.data, "test")
    loader = eval_loader(encoded, run)
    scores, hyps = final_evaluation(
        model,
        run.tokenizer,
        pairs,
        loader,
        run.cfg.decode,
        acc.device,
        run.cfg.data.src_bos,
        autocast=acc.autocast,
    )
    parameters = count_parameters(model)["total"]  # kept where the weights are not
    results = {
        "recipe": recipe,
        "checkpoint": str(best),
        "parameters": parameters,
        **outcome,
        **scores,
    }
    run.run_dir.results.unlink(missing_ok=True)
    write_lines(run.run_dir.test_hyps, hyps)
    meta = read_meta(run.run_dir.path)
    named = {**(meta.get("references") or {}), **pairs_named(pairs, "test")}
    write_json(run.run_dir.meta, {**meta, "references": named})
    run.run_dir.test_refs.unlink(missing_ok=True)  # an older run's copy: meta.json names them
    write_results(run.run_dir, results)
    return results
