"""The Rule of the data pipeline: nothing changes what a run trains on.

tests/fixtures/data_rule.json was recorded from the pipeline as it stood before the
streaming rework (commit 70028fa): on a generated corpus of a few hundred pairs with the
awkward cases of real files (CRLF line ends, NFD umlauts, Unicode spaces, empty sides,
repeats, over-long and lopsided pairs), the tokenizer trained on all pairs, the cleaned
pairs, the token ids and the batches of two epochs in their order, as `build_run` hands
them to training. Every later pipeline must reproduce them exactly.
Re-record (only for a deliberate change of what runs train on, said in the commit):
T2_RECORD_RULE=1 python -m pytest tests/test_data_rule.py
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
from pathlib import Path

import numpy as np
import pytest

from t2.recipes import load_config

FIXTURE = Path(__file__).parent / "fixtures" / "data_rule.json"
GERMAN = "der die das Haus Baum Hund Katze läuft schnell über grüne Wiese Straße Mädchen schön"
ENGLISH = "the house tree dog cat runs fast over green meadow street girl beautiful a"
# the cases that cleaning must treat exactly as before, spliced into some pairs
ODD = [
    ("  Grüße\t aus  Köln ", "greetings  from Cologne"),  # runs of spaces, tabs, ends
    ("Mu\u0308ller fa\u0308hrt", "Müller drives"),  # NFD umlauts: NFC composes them
    ("ein\u00a0Satz\u2009mit\u3000Abständen", "a\u2028sentence\x1cwith\x85gaps"),
    ("", "an empty source"),  # dropped: empty side
    ("nur Leerzeichen", " \t "),  # dropped: empty after normalising
]
SETS = [
    "data.train=files:{corpus}/train",
    "data.valid=files:{corpus}/valid",
    "data.test=files:{corpus}/valid",
    "data.src_lang=de",
    "data.tgt_lang=en",
    "data.vocab_size=130",
    "data.min_frequency=2",
    "data.dedup=true",
    "data.max_tokens_per_sentence=40",
    "data.max_length_ratio=2.5",
    "data.max_tokens=400",
    "data.cache_dir={cache}",
    "train.seed=7",
    "train.global_batch=0",
    "train.accumulate=1",
    "model.d_model=16",
    "model.n_heads=2",
    "model.d_ff=32",
    "model.n_encoder_layers=1",
    "model.n_decoder_layers=1",
]


def sentence(rng: random.Random, words: list[str], n: int) -> str:
    return " ".join(rng.choice(words) for _ in range(n))


def write_corpus(folder: Path, pairs: int = 400, valid: int = 30) -> None:
    """train.{de,en} and valid.{de,en}: random sentences, the odd cases, repeats, long ones."""
    rng = random.Random(2024)
    de_words, en_words = GERMAN.split(), ENGLISH.split()
    rows = []
    for i in range(pairs):
        n = rng.randint(2, 12) if i % 50 else rng.randint(30, 45)  # some over 40 tokens
        m = n if i % 37 else 3 * n + 2  # some lopsided
        rows.append((sentence(rng, de_words, n), sentence(rng, en_words, m)))
    for i, pair in enumerate(ODD):
        rows[7 + 13 * i] = pair
    rows[100:110] = rows[90:100]  # repeats: dropped with data.dedup
    folder.mkdir(parents=True)
    ends = ["\n", "\r\n"]
    for lang, side in (("de", 0), ("en", 1)):
        text = "".join(r[side] + ends[i % 2] for i, r in enumerate(rows))
        (folder / f"train.{lang}").write_text(text, encoding="utf-8", newline="")
        held = [sentence(rng, (de_words, en_words)[side], 6) for _ in range(valid)]
        (folder / f"valid.{lang}").write_text("\n".join(held) + "\n", encoding="utf-8")


def digest(arrays: list[np.ndarray]) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.asarray(a, dtype=np.int64).tobytes() + b"|")
    return h.hexdigest()[:24]


def texts_digest(texts: list[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:24]


def epoch(sampler, number: int) -> list[list]:
    sampler.set_epoch(number)
    return [[list(b), b.lengths and list(b.lengths), b.seed] for b in sampler]


def record(tmp_path: Path, *extra: str) -> dict:
    """What a run of the recipe trains on: tokenizer, pairs, ids and batches."""
    from t2.data.pipeline import load_pairs
    from t2.train.setup import build_run

    write_corpus(tmp_path / "corpus")
    sets = [s.format(corpus=tmp_path / "corpus", cache=tmp_path / "cache") for s in SETS]
    cfg = load_config("quickstart", [*sets, *extra])
    run = build_run(cfg, "quickstart", tmp_path / "run", False, "disabled")
    model = json.loads(run.tokenizer.backend_tokenizer.to_str())["model"]
    train = run.loader.dataset.ds
    first = epoch(run.sampler, 0)
    tensors = []
    run.sampler.set_epoch(0)
    for batch in run.loader:
        tensors += [batch["src"].numpy(), batch["tgt_in"].numpy(), batch["tgt_out"].numpy()]
        tensors.append(batch["seed"].numpy().reshape(1))
    valid = run.valid_loader.dataset.ds
    pairs = {
        dedup: load_pairs(dataclasses.replace(cfg.data, dedup=dedup), "train", 7)
        for dedup in (True, False)
    }
    out = {
        "tokenizer": {
            "vocab_size": len(run.tokenizer),
            "merges": [" ".join(m) if isinstance(m, list) else m for m in model["merges"]],
            "vocab": digest([np.array(sorted(model["vocab"].values()))])
            + texts_digest(sorted(model["vocab"], key=model["vocab"].get)),
        },
        "valid_pairs": texts_digest(list(run.valid_pairs["src"]) + list(run.valid_pairs["tgt"])),
        "cleaned": {
            str(k): texts_digest(list(p["src"]) + list(p["tgt"])) for k, p in pairs.items()
        },
        "train_pairs": len(train),
        "train_ids": digest(list(train["src_ids"]) + list(train["tgt_ids"])),
        "valid_ids": digest(list(valid["src_ids"]) + list(valid["tgt_ids"])),
        "epoch0": first,
        "epoch1": digest([np.array(b[0]) for b in epoch(run.sampler, 1)]),
        "loader_epoch0": digest(tensors),
    }
    run.accelerator.end_training()
    return out


# the defaults (a tokenizer sample larger than the corpus: every pair; threads on every
# core), and every pair by data.tokenizer_sample=0 with one thread
@pytest.mark.parametrize("extra", [[], ["data.tokenizer_sample=0", "data.num_proc=1"]])
def test_a_run_trains_on_what_it_trained_on_before(tmp_path: Path, extra: list[str]) -> None:
    got = record(tmp_path, *extra)
    if os.environ.get("T2_RECORD_RULE"):
        FIXTURE.write_text(json.dumps(got, indent=None, separators=(",", ":")) + "\n")
        pytest.skip(f"recorded {FIXTURE}")
    expected = json.loads(FIXTURE.read_text())
    assert got["tokenizer"] == expected["tokenizer"]
    for key in ("valid_pairs", "cleaned", "train_pairs", "train_ids", "valid_ids", "epoch0"):
        assert got[key] == expected[key], key
    assert got["epoch1"] == expected["epoch1"]
    assert got["loader_epoch0"] == expected["loader_epoch0"]
