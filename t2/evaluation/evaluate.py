"""Translate sentences with a model in length-sorted batches, and evaluate a checkpoint."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from rich.table import Table
from torch.nn.utils.rnn import pad_sequence
from transformers import PreTrainedTokenizerFast

from t2.config import DecodeConfig
from t2.data import encode_source
from t2.data.tokenizer import PAD
from t2.decoding.search import Hypothesis, search
from t2.errors import DataError
from t2.evaluation.scoring import TestSet, choose_testset, score_corpus
from t2.model.transformer import Transformer
from t2.progress import Progress
from t2.rundir import eval_folder


def _check_lengths(
    model: Transformer, src_ids: Sequence[list[int]], lines: Sequence[int] | None
) -> None:
    """A positional scheme with a fixed table (learned): name the first line that does not
    fit. Schemes whose tables grow on demand have no limit."""
    limit = model.max_length
    if limit is None:
        return
    for i, row in enumerate(src_ids):
        if len(row) > limit:
            line = lines[i] if lines is not None else i + 1
            raise DataError(
                f"line {line} has {len(row)} tokens, more than model.max_positions={limit} "
                f"of {model.cfg.positional} positions; shorten or split that line"
            )


def pad_batch(rows: Sequence[list[int]], device: torch.device | str) -> torch.Tensor:
    """Right-padded (B, S) ids."""
    tensors = [torch.tensor(r, dtype=torch.long) for r in rows]
    return pad_sequence(tensors, batch_first=True, padding_value=PAD).to(device)


def length_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length (longest first), so little padding is decoded."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def decode_ids(
    model: Transformer,
    src_ids: Sequence[list[int]],
    cfg: DecodeConfig,
    device: torch.device | str | None = None,
    lines: Sequence[int] | None = None,
    progress: Progress | None = None,
) -> list[list[Hypothesis]]:
    """n-best hypotheses for each source (ids with EOS), batched by length, in input order;
    `lines` are the sources' line numbers for error messages (default 1, 2, ...); each
    batch's sentences are counted on `progress`, if given."""
    _check_lengths(model, src_ids, lines)
    device = device if device is not None else next(model.parameters()).device
    out: list[list[Hypothesis]] = [[] for _ in src_ids]
    for batch in length_batches([len(r) for r in src_ids], cfg.batch_size):
        hyps = search(model, pad_batch([src_ids[i] for i in batch], device), cfg)
        for i, h in zip(batch, hyps, strict=True):
            out[i] = h
        if progress is not None:
            progress.update(len(batch))
    return out


def translate_nbest(
    model: Transformer,
    tokenizer: PreTrainedTokenizerFast,
    sentences: Sequence[str],
    decode_cfg: DecodeConfig,
    device: torch.device | str | None = None,
    src_bos: bool = False,
    progress: Progress | None = None,
) -> list[list[tuple[str, float]]]:
    """(text, model score) n-best lists in input order; a blank line gets [("", 0.0)];
    sentences decoded are counted on `progress`, if given."""
    model = getattr(model, "module", model)  # unwrap DistributedDataParallel
    keep = [i for i, s in enumerate(sentences) if s.strip()]
    out: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in sentences]
    if not keep:
        return out
    src_ids = encode_source(tokenizer, [sentences[i] for i in keep], src_bos)
    was_training = model.training
    model.eval()
    try:
        hyps = decode_ids(model, src_ids, decode_cfg, device, [i + 1 for i in keep], progress)
    finally:
        model.train(was_training)
    flat = [h for nbest in hyps for h in nbest]
    texts = iter(tokenizer.batch_decode([h.tokens for h in flat], skip_special_tokens=True))
    for i, nbest in zip(keep, hyps, strict=True):
        out[i] = [(next(texts).strip(), h.score) for h in nbest]
    return out


def translate(
    model: Transformer,
    tokenizer: PreTrainedTokenizerFast,
    sentences: Sequence[str],
    decode_cfg: DecodeConfig,
    device: torch.device | str | None = None,
    src_bos: bool = False,
    progress: Progress | None = None,
) -> list[str]:
    """Detokenized best translation of each sentence, in input order; blank lines stay blank.
    Pass src_bos=cfg.data.src_bos for runs trained with BOS in front of the source."""
    cfg = replace(decode_cfg, nbest=1)
    nbest = translate_nbest(model, tokenizer, sentences, cfg, device, src_bos, progress)
    return [hyps[0][0] for hyps in nbest]


def translate_stream(
    model: Transformer,
    tokenizer: PreTrainedTokenizerFast,
    lines: Iterable[str],
    decode_cfg: DecodeConfig,
    device: torch.device | str | None = None,
    src_bos: bool = False,
) -> Iterator[list[list[tuple[str, float]]]]:
    """n-best lists for each batch of `decode_cfg.batch_size` lines, as soon as it is done."""
    it = iter(lines)
    while chunk := list(itertools.islice(it, decode_cfg.batch_size)):
        yield translate_nbest(model, tokenizer, chunk, decode_cfg, device, src_bos)


@dataclass(frozen=True)
class EvalOptions:
    """What evaluate_model.py asks for; None keeps the run's own decode settings."""

    checkpoint: str
    src: str | None = None
    ref: str | None = None
    testset: str | None = None
    langpair: str | None = None
    beam: int | None = None
    lenpen: float | None = None
    length_norm: str | None = None
    batch_size: int | None = None
    stopping: str | None = None
    average_last: int = 0
    out: str | None = None
    show: int = 10
    device: str = "cpu"
    engine: str = "t2"  # t2: the run's checkpoint; ct2: a CTranslate2 export (t2/serve)
    precision: str | None = None  # t2.serve.PRECISIONS; None: as stored
    workers: int = 1  # ct2: batches decoded at once


def decode_settings(base: DecodeConfig, opts: EvalOptions) -> DecodeConfig:
    changes = {"beam_size": opts.beam, "lenpen": opts.lenpen, "length_norm": opts.length_norm,
               "batch_size": opts.batch_size, "stopping": opts.stopping}  # fmt: skip
    return replace(base, nbest=1, **{k: v for k, v in changes.items() if v is not None})


def evaluate(opts: EvalOptions) -> dict[str, Any]:
    """Translate a test set, score it with sacreBLEU, write hyps.txt and scores.json."""
    from t2.serve.engine import open_engine  # t2.serve imports this module

    engine = open_engine(opts.checkpoint, opts.engine, opts.average_last, opts.device,
                         opts.precision, opts.workers)  # fmt: skip
    cfg, ckpt = engine.cfg, engine.ckpt
    data = choose_testset(cfg, opts.src, opts.ref, opts.testset, opts.langpair)
    decode = decode_settings(cfg.decode, opts)
    start = time.perf_counter()
    to_decode = sum(1 for s in data.sources if s.strip())  # blank lines are not decoded
    with Progress(to_decode, "translate", "sentences") as progress:
        hyps = engine.translate(data.sources, decode, progress)
    seconds = time.perf_counter() - start
    scores = score_corpus(hyps, data.references)
    out = Path(opts.out) if opts.out else eval_folder(ckpt, data.tag)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hyps.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    report = {
        **scores.to_dict(),
        "checkpoint": str(ckpt),
        "testset": data.origin,
        "n_sentences": len(hyps),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(hyps) / max(seconds, 1e-9), 2),
        "decode": asdict(decode),
        "average_last": opts.average_last,
        "device": str(opts.device),
        "engine": opts.engine,
        "precision": opts.precision or "as stored",
        "workers": opts.workers,
    }
    (out / "scores.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
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
