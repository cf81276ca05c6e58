"""The robustness suite of report 003: each perturbation's definition, the figures, the command."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from toy_task import toy_pairs

from t2.config import Config
from t2.data.encode import encode_source
from t2.evaluation.robustness import (
    PERTURBATIONS,
    drop,
    forced_on_ids,
    perturb_sources,
    repeat,
    run_suite,
    shuffle_middle,
)

SCRIPT = ["-m", "t2", "robustness"]
TOKENS = list(range(10, 30))  # 20 distinct text tokens

pytestmark = pytest.mark.usefixtures("single_thread")


def test_shuffle_middle_only_moves_the_middle_half():
    out = shuffle_middle(list(TOKENS), random.Random(0))
    assert out[:5] == TOKENS[:5] and out[15:] == TOKENS[15:]
    assert sorted(out[5:15]) == TOKENS[5:15] and out[5:15] != TOKENS[5:15]


def test_drop_pads_a_fifth_in_place():
    out = drop(list(TOKENS), random.Random(0))
    assert len(out) == 20 and out.count(0) == 4
    assert all(o in (0, t) for o, t in zip(out, TOKENS, strict=True))
    assert drop([7], random.Random(0)) == [7]  # never the whole sentence


def test_repeat_doubles_a_fifth_next_to_themselves():
    out = repeat(list(TOKENS), random.Random(0))
    assert len(out) == 24
    assert sorted(set(out)) == TOKENS  # order kept, duplicates adjacent
    assert [t for i, t in enumerate(out) if i == 0 or out[i - 1] != t] == TOKENS
    assert sum(c == 2 for c in Counter(out).values()) == 4


def test_perturbations_keep_bos_and_eos_and_are_seeded():
    src = [[1, *TOKENS, 2], [*TOKENS[:6], 2]]
    for name in PERTURBATIONS:
        out = perturb_sources(src, name, seed=3)
        assert out == perturb_sources(src, name, seed=3)
        assert out[0][0] == 1 and out[0][-1] == 2 and out[1][-1] == 2 and out[1][0] != 1
    assert perturb_sources(src, "control", 3) == src
    assert perturb_sources(src, "drop", 3) != perturb_sources(src, "drop", 4)


def test_teacher_forced_figures_match_a_direct_computation(toy):
    _, model, tokenizer = toy
    (s1, t1), (s2, t2) = ("eins zwei drei", "one two three"), ("haus", "house")
    src = encode_source(tokenizer, [s1, s2], False)
    tgt = [[1, *row, 2] for row in tokenizer([t1, "dog " + t2], add_special_tokens=False).input_ids]
    assert len(tgt[0]) == 5 and len(tgt[1]) == 4
    loss, accuracy, position = forced_on_ids(model, src, tgt, batch_size=1)
    losses, hits = [], []
    for s, t in zip(src, tgt, strict=True):
        with torch.no_grad():
            logits = model(torch.tensor([s]), torch.tensor([t[:-1]]))[0]
        losses += F.cross_entropy(logits, torch.tensor(t[1:]), reduction="none").tolist()
        hits.append([int(h) for h in logits.argmax(-1).eq(torch.tensor(t[1:]))])
    assert loss == pytest.approx(sum(losses) / len(losses), rel=1e-5)
    assert accuracy == pytest.approx(sum(map(sum, hits)) / 7) and 0 < accuracy < 1
    by_position = [(a + b) / 2 for a, b in zip(hits[0], hits[1], strict=False)] + [hits[0][3]]
    assert position == pytest.approx(by_position)


def test_every_perturbation_hurts_the_toy_model(toy):
    _, model, tokenizer = toy
    sources, references = zip(*toy_pairs(60, seed=31), strict=True)
    results = run_suite(model, tokenizer, Config(), sources, references, seed=1)
    assert [r.condition for r in results] == ["control", "shuffle_middle", "drop", "repeat"]
    control = results[0]
    assert control.bleu > 80 and control.accuracy > 0.9
    for r in results[1:]:
        assert r.loss > control.loss and r.bleu < control.bleu and r.accuracy < control.accuracy


def test_command_compares_checkpoints_side_by_side(toy, tmp_path):
    run, _, _ = toy
    pairs = toy_pairs(12, seed=41)
    (tmp_path / "s").write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    (tmp_path / "r").write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        *SCRIPT,
        "--checkpoint",
        str(run),
        str(run),
        "--src",
        str(tmp_path / "s"),
        "--ref",
        str(tmp_path / "r"),
        "--out",
        str(tmp_path / "r.json"),
        "--device",
        "cpu",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "shuffle_middle" in result.stdout and "BLEU" in result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["n_sentences"] == 12 and len(report["results"]) == 2
    first, second = report["results"].values()
    assert first == second  # same checkpoint, same seed: same figures


def test_command_rejects_a_bad_batch_size_and_a_missing_output_folder_first(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    base = [sys.executable, *SCRIPT, "--checkpoint", "missing-run", "--src", "s", "--ref", "r"]
    for extra, message in (
        (["--batch-size", "0"], "--batch-size must be at least 1"),
        (["--out", str(tmp_path / "no" / "r.json")], "output folder of"),
    ):
        result = subprocess.run([*base, *extra], capture_output=True, text=True, env=env)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert message in result.stderr
