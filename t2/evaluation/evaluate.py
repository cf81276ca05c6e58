"""Evaluate a model on a test set: translate it with the engine the opener gives, score it
with sacreBLEU, write hyps.txt and scores.json, print a sample and both scores."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from t2.decoding.options import DecodeConfig
from t2.evaluation.scoring import TestSet, choose_testsets, score_corpus
from t2.formats.choose import format_named
from t2.opener import Opened, open_model
from t2.progress import Progress
from t2.rundir import eval_folder
from t2.rundir.layout import write_json, write_lines


@dataclass(frozen=True)
class EvalOptions:
    """What evaluate_model.py asks for; None keeps the run's own decode settings."""

    checkpoint: str
    src: str | None = None
    ref: str | None = None
    testsets: tuple[str, ...] = ()  # sacreBLEU names, each scored with the one model
    langpair: str | None = None
    decode: dict[str, Any] = field(default_factory=dict)  # decode.* keys that override the run's
    average_last: int = 0
    out: str | None = None
    show: int = 10
    device: str = "cpu"
    engine: str | None = None  # t2 or ct2: only checks what the folder is (t2.opener)
    precision: str | None = None  # t2.serve.PRECISIONS; None: as stored
    workers: int = 1  # CTranslate2: batches decoded at once
    trust_plugins: bool = False  # an exported folder's plugin code may run (t2.rundir.plugins)


def decode_settings(base: DecodeConfig, opts: EvalOptions) -> DecodeConfig:
    """The run's decode section with the options' changes, one hypothesis a sentence."""
    return base.updated(**{**opts.decode, "nbest": 1})


def evaluate(opts: EvalOptions) -> list[dict[str, Any]]:
    """Open the model once; translate each test set, score it with sacreBLEU, write its
    hyps.txt and scores.json (under --out, or --out/TAG when there are several sets)."""
    opened = open_model(
        opts.checkpoint,
        average_last=opts.average_last,
        device=opts.device,
        precision=opts.precision,
        workers=opts.workers,
        engine=opts.engine,
        trust_plugins=opts.trust_plugins,
    )
    sets = choose_testsets(opened.cfg, opts.src, opts.ref, opts.testsets, opts.langpair)
    reports = []
    for data in sets:
        if opts.out:
            out = Path(opts.out) / data.tag if len(sets) > 1 else Path(opts.out)
        else:
            out = eval_folder(opened.path, data.tag)
        reports.append(evaluate_one(opened, data, opts, out))
    return reports


def evaluate_one(opened: Opened, data: TestSet, opts: EvalOptions, out: Path) -> dict[str, Any]:
    """Translate one test set with the opened model, score it, write hyps.txt and
    scores.json in `out`."""
    decode = decode_settings(opened.cfg.decode, opts)
    start = time.perf_counter()
    to_decode = sum(1 for s in data.sources if s.strip())  # blank lines are not decoded
    with Progress(to_decode, "translate", "sentences") as progress:
        hyps = opened.engine.translate(data.sources, decode, progress)
    seconds = time.perf_counter() - start
    scores = score_corpus(hyps, data.references)
    out.mkdir(parents=True, exist_ok=True)
    write_lines(out / "hyps.txt", hyps)
    report = {
        **scores.to_dict(),
        "checkpoint": str(opened.path),
        "testset": data.origin,
        "n_sentences": len(hyps),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(hyps) / max(seconds, 1e-9), 2),
        "decode": asdict(decode),
        "average_last": opts.average_last,
        "device": str(opts.device),
        "engine": format_named(opened.kind).engine,
        "opened": opened.kind,
        "precision": opts.precision or "as stored",
        "workers": opts.workers,
    }
    write_json(out / "scores.json", report)
    print_report(report, data, hyps, opts.show, out)
    return report


def print_report(report: dict, data: TestSet, hyps: list[str], show: int, out: Path) -> None:
    """The first `show` sources, references and hypotheses as a table, then both scores."""
    console = Console()
    if show > 0:
        table = Table(title=f"first {min(show, len(hyps))} of {len(hyps)}: {data.origin}")
        for column in ("source", "reference", "hypothesis"):
            table.add_column(column, overflow="fold")
        for row in zip(data.sources[:show], data.references[0][:show], hyps[:show], strict=False):
            table.add_row(*row, end_section=False)
        console.print(table)
    console.print(report["bleu_detail"], markup=False)
    console.print(f"BLEU {report['bleu_signature']}", markup=False)
    console.print(f"chrF2 = {report['chrf']:.2f}", markup=False)
    console.print(f"chrF {report['chrf_signature']}", markup=False)
    speed = report["sentences_per_second"]
    console.print(f"{report['n_sentences']} sentences in {report['seconds']} s ({speed}/s)")
    console.print(f"wrote {out / 'hyps.txt'} and {out / 'scores.json'}", markup=False)
