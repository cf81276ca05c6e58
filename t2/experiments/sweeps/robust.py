"""Report 003's robustness suite (t2.evaluation.robustness) for every run of a sweep.

Each run's best checkpoint is scored on the first SENTENCES pairs of its own validation
split (the same pairs for every seed of a files: source); the figures are kept in
RUN/robustness.json, so a report made again (or by --report-only) reads them back, unless
the run was trained again since (its results.json is newer).
"""

from __future__ import annotations

import json
from typing import Any

from t2.data.pipeline import load_pairs
from t2.evaluation.robustness import run_suite
from t2.experiments.statistics.welch import mean, sd
from t2.experiments.sweeps.runs import Run
from t2.formats.run import load_run
from t2.rundir import RunDir, write_json

FILE = "robustness.json"
SENTENCES = 500  # as `t2 robustness --max-sentences`'s default
SEED = 1  # of the perturbations: every run sees the same perturbed sentences


def suite(run: Run, device: str) -> list[dict[str, Any]]:
    """The suite's rows (condition, loss, accuracy, bleu, ...) of one run, cached."""
    path, results = RunDir(run.path).file(FILE), RunDir(run.path).results
    if path.is_file() and path.stat().st_mtime_ns >= results.stat().st_mtime_ns:
        return json.loads(path.read_text(encoding="utf-8"))["results"]  # else: retrained since
    from dataclasses import asdict

    bundle = load_run(run.path, 0, device)
    model, cfg, tokenizer = bundle.t2_model(), bundle.config, bundle.tokenizer
    pairs = load_pairs(cfg.data, "valid", cfg.train.seed)
    pairs = pairs.select(range(min(SENTENCES, len(pairs))))
    rows = [asdict(r) for r in run_suite(model, tokenizer, cfg, pairs["src"], pairs["tgt"], SEED)]
    write_json(
        path,
        {
            "checkpoint": str(bundle.path),
            "split": "valid",
            "n_sentences": len(pairs),
            "seed": SEED,
            "results": rows,
        },
    )
    return rows


def _cell(values: list[float], scale: float) -> str:
    if not values:
        return "-"
    spread = sd(values)
    return f"{scale * mean(values):+.2f}" + ("" if spread is None else f" ± {scale * spread:.2f}")


def robustness_tables(runs: dict[str, list[Run]], device: str) -> str:
    """Per figure (loss, accuracy, BLEU): each arm's control, and each perturbation's change
    against the same run's control, mean ± sd over seeds."""
    rows = {arm: [suite(r, device) for r in rs] for arm, rs in runs.items()}
    names = list(dict.fromkeys(row["condition"] for s in rows.values() for r in s for row in r))
    if not names:
        return "No finished run to score.\n"
    out = []
    for key, title, scale in (
        ("loss", "loss (teacher-forced)", 1.0),
        ("accuracy", "token accuracy (%)", 100.0),
        ("bleu", "BLEU (greedy)", 1.0),
    ):
        head = ["arm", f"{names[0]}"] + [f"{n} (Δ)" for n in names[1:]]
        lines = [f"#### {title}\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for arm, suites in rows.items():
            by = [{row["condition"]: row[key] for row in s} for s in suites]
            control = [b[names[0]] * scale for b in by]
            cells = [f"{mean(control):.2f}" if control else "-"]
            cells += [_cell([b[n] - b[names[0]] for b in by], scale) for n in names[1:]]
            lines.append(f"| {arm} | " + " | ".join(cells) + " |")
        out.append("\n".join(lines) + "\n")
    return "\n".join(out)
