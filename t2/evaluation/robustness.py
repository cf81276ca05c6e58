"""The robustness suite of report 003 (section 4.1): perturb the source, measure the damage.

Perturbations act on source tokens (BOS and EOS stay in place), seeded per sentence:
- shuffle_middle: a random order for the tokens of the middle 50% of the sentence;
- drop: 20% of the tokens replaced by padding (masked out, as in the report), other
  tokens keep their positions;
- repeat: 20% of the tokens duplicated next to themselves (the sentence grows).
For each, against the clean control: teacher-forced cross-entropy per target token (no
label smoothing), position-wise accuracy (the argmax equals the reference token) and the
BLEU of greedy translations.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from rich.table import Table
from transformers import PreTrainedTokenizerFast

from t2.config import Config
from t2.data.encode import encode_source
from t2.data.loader import collate
from t2.evaluation.forced import teacher_forced
from t2.evaluation.scoring import score_corpus
from t2.model.transformer import Transformer
from t2.progress import Progress
from t2.serve.engine import TorchEngine, length_batches
from t2.specials import BOS, EOS, PAD

Perturbation = Callable[[list[int], random.Random], list[int]]


def _count(n: int, rate: float) -> int:
    """How many of n tokens a rate touches: at least one, never all."""
    return 0 if n < 2 else min(n - 1, max(1, round(rate * n)))


def shuffle_middle(tokens: list[int], rng: random.Random, span: float = 0.5) -> list[int]:
    """Shuffle the tokens of the middle `span` of the sentence, centred on its midpoint."""
    width = round(span * len(tokens))
    start = (len(tokens) - width) // 2
    middle = tokens[start : start + width]
    rng.shuffle(middle)
    return tokens[:start] + middle + tokens[start + width :]


def drop(tokens: list[int], rng: random.Random, rate: float = 0.2) -> list[int]:
    """Replace `rate` of the tokens by padding (report 003: missing information)."""
    gone = set(rng.sample(range(len(tokens)), _count(len(tokens), rate)))
    return [PAD if i in gone else t for i, t in enumerate(tokens)]


def repeat(tokens: list[int], rng: random.Random, rate: float = 0.2) -> list[int]:
    """Duplicate `rate` of the tokens next to themselves."""
    twice = set(rng.sample(range(len(tokens)), _count(len(tokens), rate)))
    return [t for i, tok in enumerate(tokens) for t in ([tok, tok] if i in twice else [tok])]


PERTURBATIONS: dict[str, Perturbation] = {
    "control": lambda tokens, rng: list(tokens),
    "shuffle_middle": shuffle_middle,
    "drop": drop,
    "repeat": repeat,
}


def perturb_sources(src_ids: Sequence[list[int]], name: str, seed: int) -> list[list[int]]:
    """Apply a perturbation to the text tokens of each source, leaving BOS and EOS alone."""
    fn = PERTURBATIONS[name]
    out = []
    for i, ids in enumerate(src_ids):
        rng = random.Random(f"{seed}-{name}-{i}")
        head = 1 if ids and ids[0] == BOS else 0
        tail = 1 if ids and ids[-1] == EOS else 0
        body = fn(list(ids[head : len(ids) - tail]), rng)
        out.append(ids[:head] + body + ids[len(ids) - tail :])
    return out


@dataclass
class ConditionResult:
    """The figures of one checkpoint under one perturbation."""

    condition: str
    loss: float
    accuracy: float
    bleu: float
    position_accuracy: list[float]  # accuracy at target position 0, 1, 2, ...


def forced_on_ids(
    model: Transformer, src_ids: list[list[int]], tgt_ids: list[list[int]], batch_size: int
) -> tuple[float, float, list[float]]:
    """Mean token cross-entropy, token accuracy and accuracy per target position of token
    ids batched by length (t2.evaluation.forced.teacher_forced on collated batches)."""
    device = next(model.parameters()).device
    batches = (
        collate([{"src_ids": src_ids[i], "tgt_ids": tgt_ids[i]} for i in batch], PAD)
        for batch in length_batches([len(t) for t in tgt_ids], batch_size)
    )
    figures = teacher_forced(model, batches, PAD, device)
    return figures["loss"], figures["accuracy"], figures["position_accuracy"]


def run_suite(
    model: Transformer,
    tokenizer: PreTrainedTokenizerFast,
    cfg: Config,
    sources: Sequence[str],
    references: Sequence[str],
    seed: int = 1,
    batch_size: int = 64,
    desc: str = "robustness",
) -> list[ConditionResult]:
    """Control and the three perturbations of report 003 for one model; the sentences
    decoded show on a progress bar (plain lines in a log file) named `desc`."""
    model.eval()
    src_ids = encode_source(tokenizer, list(sources), cfg.data.src_bos)
    tgt_ids = [[BOS, *row[:-1], EOS] for row in encode_source(tokenizer, list(references), False)]
    decode = replace(cfg.decode, search="greedy", nbest=1, batch_size=batch_size)
    engine = TorchEngine(model, tokenizer, cfg.data.src_bos)
    results = []
    with Progress(len(PERTURBATIONS) * len(src_ids), desc, "sentences") as progress:
        for name in PERTURBATIONS:
            perturbed = perturb_sources(src_ids, name, seed)
            loss, accuracy, position = forced_on_ids(model, perturbed, tgt_ids, batch_size)
            hyps = engine.decode_ids(perturbed, decode, progress)
            texts = tokenizer.batch_decode([h[0].tokens for h in hyps], skip_special_tokens=True)
            bleu = score_corpus([t.strip() for t in texts], [list(references)]).bleu
            results.append(ConditionResult(name, loss, accuracy, bleu, position))
    return results


def side_by_side(results: dict[str, list[ConditionResult]]) -> Table:
    """Rows: conditions; per checkpoint: loss, accuracy and BLEU (change against control)."""
    table = Table(title="robustness (report 003): teacher-forced loss, accuracy; greedy BLEU")
    table.add_column("condition")
    for label in results:
        for metric in ("loss", "acc %", "BLEU"):
            table.add_column(f"{label}\n{metric}", justify="right")
    names = [r.condition for r in next(iter(results.values()))]
    for i, name in enumerate(names):
        row = [name]
        for rows in results.values():
            base, r = rows[0], rows[i]
            row += [
                _cell(r.loss, r.loss - base.loss, i, "{:.3f}"),
                _cell(100 * r.accuracy, 100 * (r.accuracy - base.accuracy), i, "{:.1f}"),
                _cell(r.bleu, r.bleu - base.bleu, i, "{:.2f}"),
            ]
        table.add_row(*row)
    return table


def _cell(value: float, delta: float, row: int, fmt: str) -> str:
    return fmt.format(value) if row == 0 else f"{fmt.format(value)} ({delta:+.2f})"


def to_json(results: dict[str, list[ConditionResult]]) -> dict[str, list[dict]]:
    return {label: [asdict(r) for r in rows] for label, rows in results.items()}
